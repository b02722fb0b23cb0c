"""The LayerNorm peer adapters on a CPU-only machine: "not installed" without their library; with a plain-torch
stand-in of the library's documented API, each is called the way its users call it and matches the contract."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from stand_ins import install, module

PEERS = {  # name: (pip, top-level import, adapter module, contracts it serves)
    "liger": ("liger-kernel", "liger_kernel", "ridgeline.ops.layernorm.peers.liger", ("layernorm", "layernorm_bwd")),
    "apex": ("apex", "apex", "ridgeline.ops.layernorm.peers.apex", ("layernorm", "layernorm_bwd")),
    "flashinfer": ("flashinfer-python", "flashinfer", "ridgeline.ops.layernorm.peers.flashinfer", ("layernorm",)),
}
PAIRS = [(p, op) for p, v in PEERS.items() for op in v[3]]


def _stats(x, eps):
    xf = x.float().reshape(-1, x.shape[-1])
    mean = xf.mean(-1)
    return mean, torch.rsqrt((xf - mean[:, None]).pow(2).mean(-1) + eps)


def _bwd(dy, x, w, mean, rstd):
    n = x.shape[-1]
    xf, dyf = x.float().reshape(-1, n), dy.float().reshape(-1, n)
    xhat = (xf - mean.reshape(-1, 1)) * rstd.reshape(-1, 1)
    wdy = dyf * w.float()
    dx = (wdy - xhat * (xhat * wdy).mean(-1, keepdim=True) - wdy.mean(-1, keepdim=True)) * rstd.reshape(-1, 1)
    return dx.to(x.dtype).reshape(dy.shape), (dyf * xhat).sum(0), dyf.sum(0)


def _fwd(x, w, b, eps):
    return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), eps).to(x.dtype)


CALLS: list[tuple] = []


def _liger():
    class LigerLayerNormFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, W, B, eps):
            return _fwd(X, W, B, eps)

    def layer_norm_backward(dY, X, W, B, Mean, RSTD, needs_dw=None, needs_db=None):
        assert X.dim() == 2, "Liger's forward saves X as [M, N]"
        dx, dw, db = _bwd(dY, X, W, Mean, RSTD)
        return dx, dw.to(W.dtype), db.to(B.dtype)

    return {"liger_kernel": module("liger_kernel", package=True),
            "liger_kernel.ops": module("liger_kernel.ops", package=True),
            "liger_kernel.ops.layer_norm": module("liger_kernel.ops.layer_norm",
                                                  LigerLayerNormFunction=LigerLayerNormFunction,
                                                  layer_norm_backward=layer_norm_backward)}


def _apex():
    class FusedLayerNormAffineFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, bias, normalized_shape, eps, memory_efficient=False):
            return _fwd(input, weight, bias, eps)

    def fused_layer_norm_affine(input, weight, bias, normalized_shape, eps=1e-6, memory_efficient=False):
        assert list(normalized_shape) == [input.shape[-1]]
        return FusedLayerNormAffineFunction.apply(input, weight, bias, normalized_shape, eps)

    def backward_affine(dout, mean, invvar, input, normalized_shape, gamma, beta, eps, memory_efficient):
        CALLS.append(("backward_affine", memory_efficient))
        dx, dw, db = _bwd(dout, input, gamma, mean, invvar)
        return dx, dw.to(gamma.dtype), db.to(beta.dtype)

    return {"apex": module("apex", package=True), "apex.normalization": module("apex.normalization", package=True),
            "apex.normalization.fused_layer_norm": module(
                "apex.normalization.fused_layer_norm", fused_layer_norm_affine=fused_layer_norm_affine,
                FusedLayerNormAffineFunction=FusedLayerNormAffineFunction),
            "fused_layer_norm_cuda": module("fused_layer_norm_cuda", backward_affine=backward_affine)}


def _flashinfer():
    def layernorm(input, gemma, beta, eps=1e-6):
        return _fwd(input, gemma, beta, eps)

    return {"flashinfer": module("flashinfer", package=True),
            "flashinfer.norm": module("flashinfer.norm", layernorm=layernorm)}


FAKES = {"liger": _liger, "apex": _apex, "flashinfer": _flashinfer}


@pytest.fixture(autouse=True)
def fresh_resolutions(monkeypatch):
    registry.get_spec("layernorm")  # import every adapter first, so each test only resets the cache
    monkeypatch.setattr(registry, "_RESOLVED", {})


def _block(monkeypatch, top):
    for name in list(sys.modules):
        if name.partition(".")[0] == top:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)


@pytest.mark.parametrize(("peer", "op"), PAIRS)
def test_not_installed(peer, op, monkeypatch):
    pip, top, adapter, _ = PEERS[peer]
    _block(monkeypatch, top)
    importlib.reload(importlib.import_module(adapter))  # importing the adapter must not import the library
    impl = registry.resolve(op, peer)
    assert not impl.available and impl.fn is None and impl.source == "peer"
    assert impl.reason == f"{pip} not installed"


@pytest.mark.parametrize(("peer", "op"), PAIRS)
def test_stand_in_matches_reference(peer, op, monkeypatch):
    install(monkeypatch, FAKES[peer]())
    spec = registry.get_spec(op)
    impl = registry.resolve(op, peer)
    assert impl.available, impl.reason
    for case in (Case((7, 300), torch.float32), Case((2, 3, 64), torch.bfloat16, "w-fp32"),
                 Case((5, 129), torch.float16, "strided")):
        inputs = spec.make_inputs(case, "cpu", seed=3)
        before = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        refs = spec.reference(before)
        outs = spec.call(impl.fn, inputs)
        for name, out, ref in zip(spec.outputs, outs, refs):
            assert out.shape == ref.shape, name
            assert out.dtype == spec.output_dtype(name, inputs), name
            tol = spec.tolerance_for(case, name, out.dtype)
            err = (out.double() - ref).abs()
            assert (err <= 2 * tol.atol + tol.rtol * ref.abs()).all(), f"{peer} {name}: {float(err.max())}"
        assert all(torch.equal(inputs[k], v) for k, v in before.items() if isinstance(v, torch.Tensor))


def test_apex_passes_memory_efficient_where_its_function_takes_it(monkeypatch):
    install(monkeypatch, _apex())
    CALLS.clear()
    spec = registry.get_spec("layernorm_bwd")
    spec.call(registry.resolve("layernorm_bwd", "apex").fn, spec.make_inputs(Case((3, 64), torch.float32), "cpu", 0))
    assert CALLS == [("backward_affine", False)]


def test_apex_without_its_cuda_extension_is_unavailable(monkeypatch):
    modules = _apex()
    del modules["fused_layer_norm_cuda"]
    install(monkeypatch, modules)
    monkeypatch.setitem(sys.modules, "fused_layer_norm_cuda", None)
    impl = registry.resolve("layernorm_bwd", "apex")
    assert not impl.available and "has no compiled fused_layer_norm_cuda" in impl.reason
    assert registry.resolve("layernorm", "apex").available


def test_liger_without_layer_norm_names_what_is_missing(monkeypatch):
    modules = _liger()
    modules["liger_kernel.ops.layer_norm"] = module("liger_kernel.ops.layer_norm")
    install(monkeypatch, modules)
    assert "has no LigerLayerNormFunction" in registry.resolve("layernorm", "liger").reason
    assert "has no layer_norm_backward" in registry.resolve("layernorm_bwd", "liger").reason


@pytest.mark.parametrize("op", ["layernorm", "layernorm_bwd"])
def test_torch_peers_match_reference(op):
    spec = registry.get_spec(op)
    impl = registry.resolve(op, "torch-eager")
    case = Case((6, 200), torch.float32)
    inputs = spec.make_inputs(case, "cpu", 1)
    for name, out, ref in zip(spec.outputs, spec.call(impl.fn, inputs), spec.reference(inputs)):
        tol = spec.tolerance_for(case, name, out.dtype)
        torch.testing.assert_close(out.double(), ref, atol=tol.atol, rtol=tol.rtol)
