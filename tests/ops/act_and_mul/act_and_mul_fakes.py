"""Plain-torch stand-ins of the peer libraries' gated-activation APIs (names, signatures, out conventions), so the
adapters can be driven on the CPU. `install` (tests/stand_ins) puts them in sys.modules for one test."""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from stand_ins import module

CALLS: list[str] = []


def _halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1] // 2
    return x[..., :d].float(), x[..., d:].float()


def _silu_fwd(x: torch.Tensor) -> torch.Tensor:
    g, u = _halves(x)
    return (F.silu(g) * u).to(x.dtype)


def _gelu_fwd(x: torch.Tensor, approximate: str) -> torch.Tensor:
    g, u = _halves(x)
    return (F.gelu(g, approximate=approximate) * u).to(x.dtype)


def _grads(dy: torch.Tensor, g: torch.Tensor, u: torch.Tensor, act) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.enable_grad():
        g64, u64 = g.double().requires_grad_(), u.double().requires_grad_()
        dg, du = torch.autograd.grad(act(g64) * u64, (g64, u64), dy.double())
    return dg.to(g.dtype), du.to(u.dtype)


def liger(fused: bool = True) -> dict[str, types.ModuleType]:
    class LigerFusedGateUpSiLUMulFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y, in_place=False):
            CALLS.append("liger.fused_silu")
            return _silu_fwd(y)

    class LigerSiLUMulFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, gate_multiplier=1.0, down_multiplier=1.0):
            CALLS.append("liger.silu_pair")
            return (F.silu(a.float()) * b.float()).to(a.dtype)

    def swiglu_fused_gate_up_backward(y, dc, in_place=False):
        CALLS.append("liger.fused_silu_bwd")
        d = y.shape[-1] // 2
        return torch.cat(_grads(dc, y[..., :d], y[..., d:], F.silu), dim=-1)

    def swiglu_backward(a, b, dc, gate_multiplier=1.0):
        CALLS.append("liger.silu_pair_bwd")
        da, db = _grads(dc, a, b, F.silu)
        a.copy_(da)  # Liger writes the gradients into its inputs
        b.copy_(db)
        return a, b

    class LigerGELUMulFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            CALLS.append("liger.gelu")
            return (F.gelu(a.float(), approximate="tanh") * b.float()).to(a.dtype)

    def geglu_backward(a, b, dc):
        CALLS.append("liger.gelu_bwd")
        da, db = _grads(dc, a, b, lambda g: F.gelu(g, approximate="tanh"))
        a.copy_(da)
        b.copy_(db)
        return a, b

    swiglu = dict(LigerSiLUMulFunction=LigerSiLUMulFunction, swiglu_backward=swiglu_backward)
    if fused:
        swiglu.update(LigerFusedGateUpSiLUMulFunction=LigerFusedGateUpSiLUMulFunction,
                      swiglu_fused_gate_up_backward=swiglu_fused_gate_up_backward)
    return {
        "liger_kernel": module("liger_kernel", package=True),
        "liger_kernel.ops": module("liger_kernel.ops", package=True),
        "liger_kernel.ops.swiglu": module("liger_kernel.ops.swiglu", **swiglu),
        "liger_kernel.ops.geglu": module("liger_kernel.ops.geglu", LigerGELUMulFunction=LigerGELUMulFunction,
                                         geglu_backward=geglu_backward),
    }


def _activation_module(name: str, tag: str) -> types.ModuleType:
    def silu_and_mul(input, out=None):
        CALLS.append(f"{tag}.silu_and_mul")
        return _silu_fwd(input)

    def gelu_and_mul(input, out=None):
        CALLS.append(f"{tag}.gelu_and_mul")
        return _gelu_fwd(input, "none")

    def gelu_tanh_and_mul(input, out=None):
        CALLS.append(f"{tag}.gelu_tanh_and_mul")
        return _gelu_fwd(input, "tanh")

    return module(name, silu_and_mul=silu_and_mul, gelu_and_mul=gelu_and_mul, gelu_tanh_and_mul=gelu_tanh_and_mul)


def flashinfer() -> dict[str, types.ModuleType]:
    return {"flashinfer": module("flashinfer", package=True),
            "flashinfer.activation": _activation_module("flashinfer.activation", "flashinfer")}


def sglang() -> dict[str, types.ModuleType]:
    return {"sgl_kernel": _activation_module("sgl_kernel", "sglang")}


def vllm_ops() -> dict[str, object]:
    """What torch.ops._C would hold: out-first ops writing into out."""
    def op(name, fn):
        def call(out, x):
            CALLS.append(f"vllm.{name}")
            out.copy_(fn(x))
        return call
    return {"silu_and_mul": op("silu_and_mul", _silu_fwd),
            "gelu_and_mul": op("gelu_and_mul", lambda x: _gelu_fwd(x, "none")),
            "gelu_tanh_and_mul": op("gelu_tanh_and_mul", lambda x: _gelu_fwd(x, "tanh"))}


def vllm() -> dict[str, types.ModuleType]:
    return {"vllm": module("vllm", package=True), "vllm._custom_ops": module("vllm._custom_ops")}
