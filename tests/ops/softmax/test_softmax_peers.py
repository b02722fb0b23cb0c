"""The softmax peers on a CPU-only machine: torch's run here; Liger and QuACK answer "not installed", and with a
plain-torch stand-in of their documented API (names, signatures, conventions) they are called the way their
users call them and match the contracts' references; a stand-in with the wrong API is reported, not raised."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.harness.correctness import check_case

OPS = ("softmax", "softmax_bwd")
CASES = [Case((7, 769), torch.float32), Case((5, 300), torch.bfloat16), Case((2, 3, 100), torch.float16)]


@pytest.fixture(autouse=True)
def fresh_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    registry.get_spec("softmax")  # import every adapter first, so each test only resets the cache
    monkeypatch.setattr(registry, "_RESOLVED", {})


def _module(name: str, package: bool = False, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    if package:
        mod.__path__ = []
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def _install(monkeypatch: pytest.MonkeyPatch, modules: dict[str, types.ModuleType]) -> None:
    tops = {n.partition(".")[0] for n in modules}
    for name in list(sys.modules):
        if name.partition(".")[0] in tops:
            monkeypatch.delitem(sys.modules, name)
    for name, mod in modules.items():
        monkeypatch.setitem(sys.modules, name, mod)


def _block(monkeypatch: pytest.MonkeyPatch, top: str) -> None:
    for name in list(sys.modules):
        if name.partition(".")[0] == top:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)


def _torch_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch._softmax_backward_data(dy, y, -1, y.dtype)


class _FakeLigerSoftmax(torch.autograd.Function):
    calls = 0

    @staticmethod
    def forward(ctx, x):
        _FakeLigerSoftmax.calls += 1
        y = torch.softmax(x.contiguous(), -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return _torch_bwd(dy, y)


def fake_liger(with_backward: bool = True) -> dict[str, types.ModuleType]:
    seen = []

    def calculate_settings(n):
        block = 1 << max(0, (n - 1).bit_length())
        if block > 65536:
            raise RuntimeError(f"Cannot launch Triton kernel since n = {n} exceeds the recommended Triton blocksize")
        return block, 4

    def _softmax_backward(dy, y, BLOCK_SIZE, num_warps, multi_block_launch):
        seen.append((BLOCK_SIZE, num_warps, multi_block_launch))
        return _torch_bwd(dy.contiguous(), y.contiguous())

    attrs = {"LigerSoftmaxFunction": _FakeLigerSoftmax}
    if with_backward:
        attrs["_softmax_backward"] = _softmax_backward
    return {"liger_kernel": _module("liger_kernel", True), "liger_kernel.ops": _module("liger_kernel.ops", True),
            "liger_kernel.ops.softmax": _module("liger_kernel.ops.softmax", seen=seen, **attrs),
            "liger_kernel.ops.utils": _module("liger_kernel.ops.utils", calculate_settings=calculate_settings)}


def fake_quack(old: bool = False) -> dict[str, types.ModuleType]:
    def softmax_fwd(x):
        assert x.dim() == 2, "Input must be 2D"
        return torch.softmax(x, -1)

    def softmax_bwd(dy, y):
        assert dy.dim() == 2 and y.dim() == 2
        return _torch_bwd(dy, y)

    attrs = {"softmax_fwd": softmax_fwd} if old else {"softmax_fwd": softmax_fwd, "softmax_bwd": softmax_bwd}
    return {"quack": _module("quack", True, softmax=lambda x: torch.softmax(x, -1)),
            "quack.softmax": _module("quack.softmax", **attrs)}


FAKES = {"liger": ("liger_kernel", "liger-kernel", fake_liger), "quack": ("quack", "quack-kernels", fake_quack)}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("peer", sorted(FAKES))
def test_not_installed_is_an_answer(monkeypatch, op, peer):
    top, pip, _ = FAKES[peer]
    _block(monkeypatch, top)
    impl = registry.resolve(op, peer)
    assert not impl.available and impl.reason == f"{pip} not installed"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label())
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("peer", sorted(FAKES))
def test_stand_in_matches_the_reference(monkeypatch, op, peer, case):
    _install(monkeypatch, FAKES[peer][2]())
    impl = registry.resolve(op, peer)
    assert impl.available, impl.reason
    r = check_case(registry.get_spec(op), impl, case, "cpu")
    assert r.passed, r.reasons


def test_liger_backward_gets_the_forwards_launch_settings(monkeypatch):
    modules = fake_liger()
    _install(monkeypatch, modules)
    fn = registry.resolve("softmax_bwd", "liger").fn
    y = torch.softmax(torch.randn(3, 5000), -1)
    fn(y, torch.randn(3, 5000))
    assert modules["liger_kernel.ops.softmax"].seen == [(8192, 4, False)]


def test_liger_refuses_rows_over_65536_columns_as_liger_does(monkeypatch):
    _install(monkeypatch, fake_liger())
    fn = registry.resolve("softmax_bwd", "liger").fn
    with pytest.raises(RuntimeError, match="exceeds the recommended Triton blocksize"):
        fn(torch.rand(1, 70000), torch.rand(1, 70000))


def test_wrong_api_is_reported(monkeypatch):
    _install(monkeypatch, fake_liger(with_backward=False))
    impl = registry.resolve("softmax_bwd", "liger")
    assert not impl.available and "has no _softmax_backward" in impl.reason
    assert registry.resolve("softmax", "liger").available
    _install(monkeypatch, fake_quack(old=True))
    impl = registry.resolve("softmax_bwd", "quack")
    assert not impl.available and "has no softmax_bwd" in impl.reason


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("peer", ["torch-eager", "torch-compile"])
def test_torch_peers_pass_the_cpu_checks(op, peer):
    impl = registry.resolve(op, peer)
    assert impl.available
    cases = [Case((3, 70001), torch.float32, "strided")]
    if peer == "torch-eager":  # (each case is a compile of its own for torch-compile: ~10 s on this CPU)
        cases.append(Case((7, 769), torch.bfloat16))
    for case in cases:
        r = check_case(registry.get_spec(op), impl, case, "cpu")
        assert r.passed, r.reasons


def test_flashinfer_is_left_out_on_purpose():
    """flashinfer.sampling.softmax returns float32 probabilities after casting the logits (another op): it is
    not registered (peers/__init__.py says why)."""
    for op in OPS:
        names = {i.name for i in registry.implementations(op)}
        assert names == {"ridgeline", "torch-eager", "torch-compile", "liger", "quack"}
