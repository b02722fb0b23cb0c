"""The cross-entropy peers on a CPU-only machine: PyTorch's agree with the float64 reference through the harness;
Liger and QuACK (not installed here) answer "not installed", and with a plain-torch stand-in of their module each
adapter calls it the way its users do."""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F

import ridgeline
from conftest import DEVICE
from ridgeline.core import registry
from ridgeline.core.spec import Case

OPS = ("cross_entropy", "cross_entropy_fwd_bwd")


@pytest.fixture(autouse=True)
def fresh_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    registry.get_spec("cross_entropy")
    monkeypatch.setattr(registry, "_RESOLVED", {})


def _block(monkeypatch, top: str) -> None:
    for name in list(sys.modules):
        if name.partition(".")[0] == top:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("peer,pip,top", [("liger", "liger-kernel", "liger_kernel"),
                                          ("quack", "quack-kernels", "quack")])
def test_not_installed_is_an_answer(monkeypatch, op, peer, pip, top):
    _block(monkeypatch, top)
    impl = registry.resolve(op, peer)
    assert not impl.available and impl.reason == f"{pip} not installed"


@pytest.mark.parametrize("op", OPS)
def test_torch_peers_pass_the_harness(op):
    cases = [Case((6, 300), torch.bfloat16), Case((6, 300), torch.float32, "ls+z+ignore"),
             Case((5, 200), torch.float16, "none+ignore"), Case((4, 100), torch.float32, "sum+strided")]
    results = ridgeline.check(op, impls=["torch-eager"], cases=cases, device=DEVICE)
    assert [r.reasons for r in results if not r.passed] == []


class _FakeLigerCE(torch.autograd.Function):
    """Liger's documented behaviour in plain torch: bf16-dtype per-row loss; with grad, the gradient written into
    the input's buffer in forward and handed back in backward."""

    @staticmethod
    def forward(ctx, _input, target, weight, ignore_index=-100, lse_square_scale=0.0, label_smoothing=0.0,
                reduction="mean", softcap=None, return_z_loss=False):
        x = _input.detach().float().requires_grad_()
        with torch.enable_grad():
            loss = F.cross_entropy(x, target, ignore_index=ignore_index, reduction=reduction,
                                   label_smoothing=label_smoothing)
            (g,) = torch.autograd.grad(loss.sum(), x)
        if _input.requires_grad:
            _input.data.copy_(g)  # in place, as Liger
            ctx.save_for_backward(_input.detach())
        return loss.to(_input.dtype), None, None, None

    @staticmethod
    def backward(ctx, grad_output, *_):
        (g,) = ctx.saved_tensors
        return (g if grad_output.ndim == 0 else g * grad_output.unsqueeze(1)), *([None] * 8)


def test_liger_adapter_with_a_stand_in(monkeypatch):
    mod = types.ModuleType("liger_kernel.ops.cross_entropy")
    mod.LigerCrossEntropyFunction = _FakeLigerCE
    pkg, ops = types.ModuleType("liger_kernel"), types.ModuleType("liger_kernel.ops")
    for name, m in (("liger_kernel", pkg), ("liger_kernel.ops", ops), ("liger_kernel.ops.cross_entropy", mod)):
        monkeypatch.setitem(sys.modules, name, m)
    fwd = registry.resolve("cross_entropy", "liger")
    fb = registry.resolve("cross_entropy_fwd_bwd", "liger")
    assert fwd.available and fb.available and fb.mutates == ("logits",)
    cases = [Case((6, 300), torch.bfloat16), Case((6, 300), torch.float32, "ignore+sum")]
    for op in OPS:
        results = ridgeline.check(op, impls=["liger"], cases=cases, device=DEVICE)
        assert [r.reasons for r in results if not r.passed] == []


def test_liger_with_another_signature_is_unavailable(monkeypatch):
    class Other(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x

    mod = types.ModuleType("liger_kernel.ops.cross_entropy")
    mod.LigerCrossEntropyFunction = Other
    for name, m in (("liger_kernel", types.ModuleType("liger_kernel")),
                    ("liger_kernel.ops", types.ModuleType("liger_kernel.ops")),
                    ("liger_kernel.ops.cross_entropy", mod)):
        monkeypatch.setitem(sys.modules, name, m)
    impl = registry.resolve("cross_entropy", "liger")
    assert not impl.available and "does not start with" in impl.reason


def test_quack_adapter_with_a_stand_in(monkeypatch):
    def cross_entropy(x, target, lse_partial=None, ignore_index=-100, reduction="mean", inplace_backward=False):
        return F.cross_entropy(x.float(), target, ignore_index=ignore_index, reduction=reduction)

    mod = types.ModuleType("quack.cross_entropy")
    mod.cross_entropy = cross_entropy
    monkeypatch.setitem(sys.modules, "quack", types.ModuleType("quack"))
    monkeypatch.setitem(sys.modules, "quack.cross_entropy", mod)
    for op in OPS:
        results = ridgeline.check(op, impls=["quack"], cases=[Case((6, 300), torch.bfloat16, "ignore")],
                                  device=DEVICE)
        assert [r.reasons for r in results if not r.passed] == []
        smooth = ridgeline.check(op, impls=["quack"], cases=[Case((6, 300), torch.bfloat16, "ls")], device=DEVICE)
        assert not smooth[0].passed and "NotImplementedError" in smooth[0].reasons[0]
