"""PyTorch peers: the Hugging Face-style eager module, F.rms_norm, and torch.compile of the eager module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import Unavailable, register_impl
from ridgeline.lib.peers import compiled_factory


def hf_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm.forward as Hugging Face transformers writes it (two roundings: y, then y * weight)."""
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(input_dtype)


def hf_fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager decoder-layer pattern: residual = x + residual; out = norm(residual)."""
    residual_out = x + residual
    return hf_rms_norm(residual_out, weight, eps), residual_out


def _functional() -> Callable[..., Any]:
    if not hasattr(torch.nn.functional, "rms_norm"):
        raise Unavailable(f"torch {torch.__version__} has no torch.nn.functional.rms_norm (added in 2.4)")
    rms = torch.nn.functional.rms_norm
    return lambda x, weight, eps: rms(x, (x.shape[-1],), weight, eps)


def _functional_fused() -> Callable[..., Any]:
    rms = _functional()

    def fused(x, residual, weight, eps):
        residual_out = x + residual
        return rms(residual_out, weight, eps), residual_out

    return fused


register_impl("rmsnorm", "torch-eager", "peer", lambda: hf_rms_norm,
              description="Hugging Face LlamaRMSNorm in eager PyTorch")
register_impl("rmsnorm", "torch-F", "peer", _functional, description="torch.nn.functional.rms_norm")
register_impl("rmsnorm", "torch-compile", "peer", compiled_factory(hf_rms_norm),
              description="torch.compile(dynamic=False) of the Hugging Face module")
register_impl("fused_add_rmsnorm", "torch-eager", "peer", lambda: hf_fused_add_rms_norm,
              description="x + residual, then Hugging Face LlamaRMSNorm, eager")
register_impl("fused_add_rmsnorm", "torch-F", "peer", _functional_fused,
              description="x + residual, then torch.nn.functional.rms_norm")
register_impl("fused_add_rmsnorm", "torch-compile", "peer", compiled_factory(hf_fused_add_rms_norm),
              description="torch.compile(dynamic=False) of add + Hugging Face RMSNorm (fuses both)")


# --- RMSNorm + FP8 quantization (float32 math, one rounding to FP8: the contract's semantics) -----------------
_FP8_MAX = 448.0
_MIN_SCALE = 1.0 / (448.0 * 512.0)


def _norm_fp32(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.float()
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def eager_rms_norm_fp8(x: torch.Tensor, weight: torch.Tensor, eps: float, scale: torch.Tensor) -> torch.Tensor:
    return (_norm_fp32(x, weight, eps) / scale).clamp(-_FP8_MAX, _FP8_MAX).to(torch.float8_e4m3fn)


def eager_rms_norm_dynamic_quant(x: torch.Tensor, weight: torch.Tensor, eps: float
                                 ) -> tuple[torch.Tensor, torch.Tensor]:
    y = _norm_fp32(x, weight, eps)
    scales = (y.abs().amax(-1, keepdim=True) / _FP8_MAX).clamp(min=_MIN_SCALE)
    return (y / scales).clamp(-_FP8_MAX, _FP8_MAX).to(torch.float8_e4m3fn), scales


def eager_fused_add_rms_norm_dynamic_quant(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                           eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    residual_out = x + residual
    return (*eager_rms_norm_dynamic_quant(residual_out, weight, eps), residual_out)


for _op, _fn in (("rmsnorm_fp8", eager_rms_norm_fp8), ("rmsnorm_dynamic_quant", eager_rms_norm_dynamic_quant),
                 ("fused_add_rmsnorm_dynamic_quant", eager_fused_add_rms_norm_dynamic_quant)):
    register_impl(_op, "torch-eager", "peer", (lambda f=_fn: f), description="eager PyTorch, float32 math")
    register_impl(_op, "torch-compile", "peer", compiled_factory(_fn), description="torch.compile(dynamic=False) of it")


# --- backward contracts (spec_bwd.py): the gradients PyTorch computes for the forward peers above --------------
def hf_rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """What autograd runs for `hf_rms_norm` (given its saved rstd): the weight's gradient from the rounded
    normalized row, the row's gradient through the cast to float32 and the rsqrt, in float32."""
    r = rstd.unsqueeze(-1)
    xf = x.float()
    h = (xf * r).to(x.dtype)  # the rounded row HF multiplies by the weight
    dweight = (dy * h).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
    g = (dy * weight).float()
    dx = r * (g - xf * (r * r) * (g * xf).mean(-1, keepdim=True))
    return dx.to(x.dtype), dweight


def hf_fused_add_rms_norm_backward(dy: torch.Tensor, dresidual_out: torch.Tensor, residual_out: torch.Tensor,
                                   weight: torch.Tensor, rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`hf_fused_add_rms_norm`'s gradients: the norm's at residual_out plus residual_out's own (x and residual
    both receive it)."""
    dx, dweight = hf_rms_norm_backward(dy, residual_out, weight, rstd)
    return dx + dresidual_out, dweight


def _aten_backward() -> Callable[..., Any]:
    """torch.ops.aten._fused_rms_norm_backward: what F.rms_norm's autograd runs on CUDA (torch >= 2.9)."""
    op = getattr(torch.ops.aten, "_fused_rms_norm_backward", None)
    if op is None:
        raise Unavailable(f"torch {torch.__version__} has no aten._fused_rms_norm_backward")
    if not torch.cuda.is_available():
        raise Unavailable("aten._fused_rms_norm_backward has CUDA kernels only (no CUDA here)")

    def bwd(dy, x, weight, rstd):
        n = x.shape[-1]
        return tuple(op(dy, x, [n], rstd.reshape(*x.shape[:-1], 1), weight, [True, True]))

    return bwd


def _aten_fused_backward() -> Callable[..., Any]:
    bwd = _aten_backward()

    def fused(dy, dresidual_out, residual_out, weight, rstd):
        dx, dweight = bwd(dy, residual_out, weight, rstd)
        return dx + dresidual_out, dweight

    return fused


register_impl("rmsnorm_bwd", "torch-eager", "peer", lambda: hf_rms_norm_backward,
              description="eager PyTorch: the gradients autograd computes for Hugging Face LlamaRMSNorm")
register_impl("rmsnorm_bwd", "torch-F", "peer", _aten_backward,
              description="aten._fused_rms_norm_backward (F.rms_norm's backward on CUDA)")
register_impl("rmsnorm_bwd", "torch-compile", "peer", compiled_factory(hf_rms_norm_backward),
              description="torch.compile(dynamic=False) of the eager backward")
register_impl("fused_add_rmsnorm_bwd", "torch-eager", "peer", lambda: hf_fused_add_rms_norm_backward,
              description="eager PyTorch: LlamaRMSNorm's gradients plus d residual_out")
register_impl("fused_add_rmsnorm_bwd", "torch-F", "peer", _aten_fused_backward,
              description="aten._fused_rms_norm_backward, then + d residual_out")
register_impl("fused_add_rmsnorm_bwd", "torch-compile", "peer", compiled_factory(hf_fused_add_rms_norm_backward),
              description="torch.compile(dynamic=False) of the eager backward (fuses the add)")
