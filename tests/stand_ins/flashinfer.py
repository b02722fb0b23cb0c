"""Stand-in for flashinfer.norm: rmsnorm returns (or fills `out`); fused_add_rmsnorm works in place."""

from __future__ import annotations

import types

import torch

from stand_ins import module
from stand_ins._math import rms_fp32


def rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    if out is None:
        out = torch.empty_like(input)
    out.copy_(rms_fp32(input, weight, eps, input.dtype))
    return out


def fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: bool | None = None,
) -> None:
    residual.add_(input)  # residual <- input + residual
    input.copy_(rms_fp32(residual, weight, eps, input.dtype))  # input <- normed sum


def _rmsnorm_without_eps(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return rms_fp32(input, weight, 1e-6, input.dtype)


def build(*, fused: bool = True, rmsnorm_without_eps: bool = False) -> dict[str, types.ModuleType]:
    norm = module("flashinfer.norm", rmsnorm=_rmsnorm_without_eps if rmsnorm_without_eps else rmsnorm)
    if fused:
        norm.fused_add_rmsnorm = fused_add_rmsnorm
    return {"flashinfer": module("flashinfer", package=True, norm=norm), "flashinfer.norm": norm}
