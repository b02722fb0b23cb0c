"""The gated-activation peer adapters on a CPU-only machine: "not installed" answers naming the pip package, and,
with plain-torch stand-ins of each library's API (act_and_mul_fakes), each adapter called the way the library's
users call it, agreeing with the contract's reference and leaving its inputs alone."""

from __future__ import annotations

import importlib
import sys

import act_and_mul_fakes as fakes
import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from stand_ins import install

# (registered name, pip name, top-level import, adapter module, ops it registers)
PEERS = [
    ("liger", "liger-kernel", "liger_kernel", "liger", ("silu_and_mul", "gelu_and_mul", "silu_and_mul_bwd",
                                                          "gelu_and_mul_bwd")),
    ("vllm", "vllm", "vllm", "vllm", ("silu_and_mul", "gelu_and_mul")),
    ("flashinfer", "flashinfer-python", "flashinfer", "fused_libs", ("silu_and_mul", "gelu_and_mul")),
    ("sglang", "sgl-kernel", "sgl_kernel", "fused_libs", ("silu_and_mul", "gelu_and_mul")),
]
PAIRS = [(p, op) for p in PEERS for op in p[4]]
OPS = ("silu_and_mul", "gelu_and_mul", "silu_and_mul_bwd", "gelu_and_mul_bwd")


@pytest.fixture(autouse=True)
def fresh_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    registry.get_spec("silu_and_mul")
    monkeypatch.setattr(registry, "_RESOLVED", {})
    monkeypatch.setattr(fakes, "CALLS", [])


def _block(monkeypatch: pytest.MonkeyPatch, top: str) -> None:
    for name in list(sys.modules):
        if name.partition(".")[0] == top:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)


def _install(monkeypatch: pytest.MonkeyPatch, name: str, **variant) -> None:
    if name == "vllm":
        install(monkeypatch, fakes.vllm())
        adapter = importlib.import_module("ridgeline.ops.act_and_mul.peers.vllm")
        ops = fakes.vllm_ops()
        monkeypatch.setattr(adapter, "_ops", lambda *names: [ops[n] for n in names])
    else:
        install(monkeypatch, getattr(fakes, name)(**variant))


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p[0])
def test_importing_adapter_does_not_import_library(peer, monkeypatch):
    _block(monkeypatch, peer[2])
    importlib.reload(importlib.import_module(f"ridgeline.ops.act_and_mul.peers.{peer[3]}"))
    assert sys.modules[peer[2]] is None


@pytest.mark.parametrize(("peer", "op"), PAIRS, ids=lambda v: v if isinstance(v, str) else v[0])
def test_unavailable_without_library(peer, op, monkeypatch):
    _block(monkeypatch, peer[2])
    impl = registry.resolve(op, peer[0])
    assert not impl.available and impl.fn is None and impl.source == "peer"
    assert impl.reason == f"{peer[1]} not installed"


def test_every_op_has_eager_compile_and_ours():
    for op in OPS:
        names = {i.name for i in registry.implementations(op)}
        assert {"ridgeline", "torch-eager", "torch-compile", "liger"} <= names, op


CASES = [Case((5, 1538), torch.bfloat16), Case((3, 64), torch.float32, "tanh"), Case((2, 3, 128), torch.float16),
         Case((4, 512), torch.bfloat16, "strided+tanh"), Case((1, 256), torch.float32)]


@pytest.mark.parametrize("case", CASES, ids=Case.label)
@pytest.mark.parametrize(("peer", "op"), PAIRS, ids=lambda v: v if isinstance(v, str) else v[0])
def test_stand_in_matches_reference_and_keeps_inputs(peer, op, case, monkeypatch):
    if "tanh" in case.variant and not op.startswith("gelu"):
        pytest.skip("silu has no tanh variant")
    _install(monkeypatch, peer[0])
    spec, impl = registry.get_spec(op), registry.resolve(op, peer[0])
    assert impl.available, impl.reason
    inputs = spec.make_inputs(case, "cpu", seed=3)
    before = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    if peer[0] == "liger" and op.startswith("gelu") and "tanh" not in case.variant:
        with pytest.raises(NotImplementedError, match="only the tanh GELU"):
            spec.call(impl.fn, inputs)
        return
    (out,) = spec.call(impl.fn, inputs)
    (ref,) = spec.reference(before)
    tol = spec.tolerance(case.dtype, spec.outputs[0])
    assert out.shape == ref.shape and out.dtype == case.dtype
    torch.testing.assert_close(out.double(), ref, atol=tol.atol, rtol=tol.rtol)
    for k, v in before.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(inputs[k], v), f"{peer[0]} wrote into {k}"
    assert fakes.CALLS, "the library was not called"


def test_liger_uses_the_fused_gate_up_entry_points(monkeypatch):
    _install(monkeypatch, "liger")
    for op in ("silu_and_mul", "silu_and_mul_bwd"):
        spec = registry.get_spec(op)
        spec.call(registry.resolve(op, "liger").fn, spec.make_inputs(Case((3, 64), torch.float32), "cpu", 0))
    assert fakes.CALLS == ["liger.fused_silu", "liger.fused_silu_bwd"]


def test_older_liger_falls_back_to_the_pair_functions_on_copies(monkeypatch):
    _install(monkeypatch, "liger", fused=False)
    for op in ("silu_and_mul", "silu_and_mul_bwd"):
        spec = registry.get_spec(op)
        inputs = spec.make_inputs(Case((1, 64), torch.float32), "cpu", 0)  # one row: the halves are contiguous views
        x = inputs["x"].clone()
        spec.call(registry.resolve(op, "liger").fn, inputs)
        assert torch.equal(inputs["x"], x), "Liger's in-place backward must get copies"
    assert fakes.CALLS == ["liger.silu_pair", "liger.silu_pair_bwd"]


def test_gelu_peers_pick_the_function_by_approximate(monkeypatch):
    for name, tag in (("flashinfer", "flashinfer"), ("sglang", "sglang"), ("vllm", "vllm")):
        _install(monkeypatch, name)
        spec = registry.get_spec("gelu_and_mul")
        fn = registry.resolve("gelu_and_mul", name).fn
        for variant in ("", "tanh"):
            spec.call(fn, spec.make_inputs(Case((2, 32), torch.float32, variant), "cpu", 0))
        assert fakes.CALLS[-2:] == [f"{tag}.gelu_and_mul", f"{tag}.gelu_tanh_and_mul"]


def test_missing_function_is_unavailable_with_reason(monkeypatch):
    mods = fakes.flashinfer()
    del mods["flashinfer.activation"].silu_and_mul
    install(monkeypatch, mods)
    impl = registry.resolve("silu_and_mul", "flashinfer")
    assert not impl.available
    assert impl.reason.startswith("flashinfer-python") and "has no silu_and_mul" in impl.reason


@pytest.mark.skipif(hasattr(torch.ops._C, "silu_and_mul"), reason="a real vLLM extension is loaded")
def test_vllm_without_compiled_ops_is_unavailable(monkeypatch):
    install(monkeypatch, fakes.vllm())
    impl = registry.resolve("silu_and_mul", "vllm")
    assert not impl.available
    assert "compiled ops are not loaded (torch.ops._C.silu_and_mul missing)" in impl.reason
