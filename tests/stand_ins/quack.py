"""Stand-in for quack.rmsnorm.rmsnorm: out, or (out, residual_out) given a residual and prenorm=True."""

from __future__ import annotations

import types

import torch

from stand_ins import module
from stand_ins._math import rms_fp32


def rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    residual_dtype: torch.dtype | None = None,
    eps: float = 1e-6,
    prenorm: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    assert weight is not None and bias is None, "stand-in: weight only"
    out_dtype = x.dtype if out_dtype is None else out_dtype
    if residual is None:
        return rms_fp32(x, weight, eps, out_dtype)
    total = x.float() + residual.float()  # added in fp32, stored rounded to the residual's dtype
    out = rms_fp32(total, weight, eps, out_dtype)
    residual_out = total.to(residual_dtype or residual.dtype)
    return (out, residual_out) if prenorm else out


def _rmsnorm_without_residual(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """An older entry point: no residual, no prenorm."""
    return rms_fp32(x, weight, eps, x.dtype)


def build(*, residual: bool = True) -> dict[str, types.ModuleType]:
    fn = rmsnorm if residual else _rmsnorm_without_residual
    # The real package re-exports the function under the submodule's name (quack.rmsnorm is a function).
    return {
        "quack": module("quack", package=True, rmsnorm=fn),
        "quack.rmsnorm": module("quack.rmsnorm", rmsnorm=fn),
    }
