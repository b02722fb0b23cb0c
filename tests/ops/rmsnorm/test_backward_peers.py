"""The backward contracts' peers: liger and quack say "not installed" here, and with plain-torch stand-ins of their
backward helpers (defined below, with the real signatures) they are called as their autograd Functions call them
and agree with the contract's float64 reference; torch-F (aten, CUDA only) says why it is unavailable here."""

from __future__ import annotations

import sys

import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from stand_ins import install, module

OPS = ("rmsnorm_bwd", "fused_add_rmsnorm_bwd")
CALLS: list[tuple] = []


def _grads(dY, X, W, RSTD):
    r = RSTD.float().unsqueeze(-1)
    xf = X.float()
    g = dY.float() * W.float()
    dx = r * (g - xf * r * r * (g * xf).mean(-1, keepdim=True))
    return dx, (dY.float() * xf * r).sum(0).to(W.dtype)


def liger_rms_norm_backward(dY, X, W, RSTD, offset, casting_mode, BLOCK_SIZE, num_warps, in_place, row_mode,
                            needs_dw=None):
    CALLS.append(("rms_norm_backward", offset, casting_mode, BLOCK_SIZE, num_warps, in_place, row_mode))
    shape = dY.shape
    dY = dY.view(-1, shape[-1])  # (as Liger: rows of the 2-D X its forward saved)
    dx, dw = _grads(dY, X, W + offset, RSTD)
    dX = dY if in_place else torch.empty_like(dY)
    dX.copy_(dx)
    return dX.view(*shape), dw


def liger_fused_backward(dY, dS_out, S, W, RSTD, offset, casting_mode, BLOCK_SIZE, num_warps, num_stages,
                         in_place, needs_dw=None):
    CALLS.append(("fused_add_rms_norm_backward", offset, casting_mode, BLOCK_SIZE, num_warps, num_stages, in_place))
    shape = dY.shape
    dY, dS_out, S = (t.view(-1, shape[-1]) for t in (dY, dS_out, S))
    dx, dw = _grads(dY, S, W + offset, RSTD)
    dX = (dx + dS_out.float()).to(S.dtype).view(*shape)
    return dX, dX, dw


def quack_rmsnorm_bwd(x, weight, dout, rstd, dresidual_out=None, has_bias=False, has_residual=False):
    CALLS.append(("rmsnorm_bwd", x.dim(), has_residual))
    dx, dw = _grads(dout, x, weight, rstd)
    if dresidual_out is not None:
        dx = dx + dresidual_out.float()
    dx = dx.to(x.dtype)
    return dx, dw, None, (dx if has_residual else None)


def _liger():
    return {
        "liger_kernel": module("liger_kernel", package=True),
        "liger_kernel.ops": module("liger_kernel.ops", package=True),
        "liger_kernel.ops.rms_norm": module("liger_kernel.ops.rms_norm", rms_norm_backward=liger_rms_norm_backward,
                                            _str_to_casting_mode={"llama": 0, "gemma": 1, "none": -1}),
        "liger_kernel.ops.fused_add_rms_norm": module("liger_kernel.ops.fused_add_rms_norm",
                                                      fused_add_rms_norm_backward=liger_fused_backward),
        "liger_kernel.ops.utils": module("liger_kernel.ops.utils", calculate_settings=lambda n: (1 << (n - 1)
                                                                                              .bit_length(), 4)),
    }


def _quack():
    return {"quack": module("quack", package=True), "quack.rmsnorm": module("quack.rmsnorm",
                                                                            rmsnorm_bwd=quack_rmsnorm_bwd)}


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    registry.get_spec("rmsnorm_bwd")
    monkeypatch.setattr(registry, "_RESOLVED", {})
    CALLS.clear()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("name", "pip", "top"), [("liger", "liger-kernel", "liger_kernel"),
                                                  ("quack", "quack-kernels", "quack")])
def test_not_installed(op, name, pip, top, monkeypatch):
    for mod in list(sys.modules):
        if mod.partition(".")[0] == top:
            monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, top, None)
    impl = registry.resolve(op, name)
    assert not impl.available and impl.reason == f"{pip} not installed"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA here: aten's kernels exist")
def test_aten_peer_says_cuda_only():
    for op in OPS:
        impl = registry.resolve(op, "torch-F")
        assert not impl.available and ("CUDA" in impl.reason or "has no aten" in impl.reason), impl.reason


@pytest.mark.parametrize("case", [Case((7, 769), torch.bfloat16), Case((2, 5, 64), torch.float32, "strided")],
                         ids=Case.label)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ["liger", "quack"])
def test_stand_ins_match_reference(name, op, case, monkeypatch):
    install(monkeypatch, _liger() if name == "liger" else _quack())
    spec = registry.get_spec(op)
    impl = registry.resolve(op, name)
    assert impl.available, impl.reason
    inputs = spec.make_inputs(case, "cpu", seed=1)
    refs = spec.reference({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    outs = spec.call(impl.fn, inputs)
    for out_name, out, ref in zip(spec.outputs, outs, refs):
        tol = spec.tolerance_for(case, out_name, out.dtype)
        assert out.shape == ref.shape, out_name
        assert ((out.double() - ref).abs() <= tol.atol + tol.rtol * ref.abs()).all(), out_name
    if name == "liger":
        # casting_mode 'llama' (its integer), offset 0, Liger's own block and warps; in place as its Functions do.
        block = 1024 if case.shape[-1] == 769 else 64
        expect = ("rms_norm_backward", 0.0, 0, block, 4, True, None) if op == "rmsnorm_bwd" else \
            ("fused_add_rms_norm_backward", 0.0, 0, block, 4, 2, False)
        assert CALLS == [expect]
        assert impl.mutates == (("dy",) if op == "rmsnorm_bwd" else ())
    else:
        assert CALLS == [("rmsnorm_bwd", 2, op == "fused_add_rmsnorm_bwd")]


def test_liger_without_casting_table_is_unavailable(monkeypatch):
    mods = _liger()
    del mods["liger_kernel.ops.rms_norm"]._str_to_casting_mode
    install(monkeypatch, mods)
    impl = registry.resolve("rmsnorm_bwd", "liger")
    assert not impl.available and "casting mode table" in impl.reason
