"""The rotary peers: PyTorch's forms agree with the contracts; the optional libraries (Liger, vLLM, FlashInfer,
sgl-kernel) resolve to "not installed" here, and with plain-torch stand-ins of their APIs (rotary_fakes.py) each
adapter calls them the way their users do and passes the harness (in-place ones through mutates)."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest
import rotary_fakes as fakes
import torch

from conftest import DEVICE
from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.harness.correctness import check_case
from stand_ins import install

# (impl name, pip name, top module, adapter module, stand-in builder, ops it serves)
PEERS = [
    ("liger", "liger-kernel", "liger_kernel", "liger", fakes.build_liger, ("rotary_train", "rotary_train_bwd")),
    ("vllm", "vllm", "vllm", "vllm", fakes.build_vllm, ("rotary_embedding",)),
    ("flashinfer", "flashinfer-python", "flashinfer", "flashinfer", fakes.build_flashinfer, ("rotary_embedding",)),
    ("sglang", "sgl-kernel", "sgl_kernel", "sglang", fakes.build_sglang, ("rotary_embedding",)),
]
IDS = [p[0] for p in PEERS]
SERVING_CASES = [Case((3, 4, 2, 64), torch.bfloat16, "cache-fp32"), Case((4, 6, 3, 96, 24), torch.float32,
                                                                          "gptj+fused-qkv")]
TRAIN_CASES = [Case((2, 5, 4, 2, 64), torch.bfloat16), Case((2, 3, 6, 3, 96), torch.float32, "contiguous+cos-4d")]


@pytest.fixture(autouse=True)
def fresh_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    registry.get_spec("rotary_embedding")  # import every adapter first, so each test only resets the cache
    monkeypatch.setattr(registry, "_RESOLVED", {})


def _block(monkeypatch: pytest.MonkeyPatch, top: str) -> None:
    for name in list(sys.modules):
        if name.partition(".")[0] == top:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)


def _install(monkeypatch, build, adapter: str, **kw) -> None:
    install(monkeypatch, build(**kw))
    if adapter == "vllm":  # the stand-in is pure Python: there is no compiled torch.ops._C to find
        monkeypatch.setattr(importlib.import_module("ridgeline.ops.rotary.peers.vllm"), "_compiled_op_missing",
                            lambda: False)


@pytest.mark.parametrize("peer", PEERS, ids=IDS)
def test_unavailable_without_library(peer, monkeypatch):
    name, pip, top, _, _, ops = peer
    _block(monkeypatch, top)
    for op in ops:
        impl = registry.resolve(op, name)
        assert not impl.available and impl.reason == f"{pip} not installed" and impl.source == "peer"


@pytest.mark.parametrize("peer", PEERS, ids=IDS)
def test_this_machine_resolves_without_raising(peer):
    name, pip, top, _, _, ops = peer
    for op in ops:
        impl = registry.resolve(op, name)
        if importlib.util.find_spec(top) is None:
            assert impl.reason == f"{pip} not installed"
        else:
            assert impl.available or pip in impl.reason


@pytest.mark.parametrize("peer", PEERS, ids=IDS)
def test_adapter_calls_the_library_its_users_way(peer, monkeypatch):
    name, _, _, adapter, build, ops = peer
    _install(monkeypatch, build, adapter)
    fakes.CALLS.clear()
    for op in ops:
        impl = registry.resolve(op, name)
        assert impl.available, impl.reason
        assert impl.mutates, "these libraries write their inputs in place"
        for case in SERVING_CASES if op == "rotary_embedding" else TRAIN_CASES:
            r = check_case(registry.get_spec(op), impl, case, DEVICE)
            assert r.passed, (case.label(), r.reasons)
    assert fakes.CALLS, "the library was never called"


@pytest.mark.parametrize("peer", PEERS, ids=IDS)
def test_a_release_without_the_function_is_named(peer, monkeypatch):
    name, pip, _, adapter, build, ops = peer
    _install(monkeypatch, build, adapter, broken=True)
    impl = registry.resolve(ops[0], name)
    assert not impl.available and pip in impl.reason


def test_fp32_cache_libraries_refuse_a_16_bit_cache(monkeypatch):
    _install(monkeypatch, fakes.build_flashinfer, "flashinfer")
    r = check_case(registry.get_spec("rotary_embedding"), registry.resolve("rotary_embedding", "flashinfer"),
                   Case((3, 4, 2, 64), torch.bfloat16), DEVICE)
    assert not r.passed and "cos_sin_cache should be float32" in r.reasons[0]


@pytest.mark.parametrize("op, cases", [
    ("rotary_embedding", [Case((3, 4, 2, 64), torch.bfloat16), Case((4, 6, 3, 96, 24), torch.float16, "gptj"),
                          Case((3, 4, 2, 64), torch.float32, "fused-qkv+heads-3d")]),
    ("rotary_train", [Case((2, 5, 4, 2, 64), torch.bfloat16), Case((2, 3, 6, 3, 96), torch.float16, "cos-shared")]),
    ("rotary_train_bwd", [Case((2, 5, 4, 2, 64), torch.bfloat16), Case((1, 3, 4, 1, 32), torch.float32, "cos-4d")]),
])
def test_torch_eager_peers_pass_the_contracts(op, cases):
    impl = registry.resolve(op, "torch-eager")
    for case in cases:
        r = check_case(registry.get_spec(op), impl, case, DEVICE)
        assert r.passed, (case.label(), r.reasons)


def test_torch_eager_serving_peer_returns_new_tensors_and_keeps_inputs():
    from ridgeline.ops.rotary.peers.torch_native import native_rotary_embedding
    from ridgeline.ops.rotary.spec import cos_sin_cache

    pos = torch.tensor([1, 5], device=DEVICE)
    q, k = torch.randn(2, 128, device=DEVICE), torch.randn(2, 64, device=DEVICE)
    q0 = q.clone()
    qo, ko = native_rotary_embedding(pos, q, k, 64, cos_sin_cache(8, 32, torch.float32, DEVICE), True)
    assert torch.equal(q, q0) and qo.data_ptr() != q.data_ptr() and qo.shape == q.shape and ko.shape == k.shape
    assert torch.equal(qo.view(2, 2, 64)[..., 32:], q.view(2, 2, 64)[..., 32:])
