"""PyTorch peers: the Hugging Face-style eager module, F.rms_norm, and torch.compile of the eager module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.registry import Unavailable, register_impl

# Every benchmarked shape is its own static graph; the default recompile limit (8) would silently fall back
# to eager after a few shapes and make torch.compile look slow.
COMPILE_RECOMPILE_LIMIT = 512


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


def _compiled(fn: Callable[..., Any]) -> Callable[[], Callable[..., Any]]:
    def factory() -> Callable[..., Any]:
        dynamo_config = torch._dynamo.config
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo_config, knob):
                setattr(dynamo_config, knob, max(getattr(dynamo_config, knob), COMPILE_RECOMPILE_LIMIT))
        return torch.compile(fn, dynamic=False)

    return factory


register_impl("rmsnorm", "torch-eager", "peer", lambda: hf_rms_norm,
              description="Hugging Face LlamaRMSNorm in eager PyTorch")
register_impl("rmsnorm", "torch-F", "peer", _functional, description="torch.nn.functional.rms_norm")
register_impl("rmsnorm", "torch-compile", "peer", _compiled(hf_rms_norm),
              description="torch.compile(dynamic=False) of the Hugging Face module")
register_impl("fused_add_rmsnorm", "torch-eager", "peer", lambda: hf_fused_add_rms_norm,
              description="x + residual, then Hugging Face LlamaRMSNorm, eager")
register_impl("fused_add_rmsnorm", "torch-F", "peer", _functional_fused,
              description="x + residual, then torch.nn.functional.rms_norm")
register_impl("fused_add_rmsnorm", "torch-compile", "peer", _compiled(hf_fused_add_rms_norm),
              description="torch.compile(dynamic=False) of add + Hugging Face RMSNorm (fuses both)")
