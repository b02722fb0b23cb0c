"""Stand-in for vllm._custom_ops: rms_norm writes `out`; fused_add_rms_norm works in place."""

from __future__ import annotations

import types

import torch

from stand_ins import module
from stand_ins._math import rms_llama


def rms_norm(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, epsilon: float) -> None:
    if not out.is_contiguous():  # vLLM TORCH_CHECKs this
        raise RuntimeError("Expected out.is_contiguous() to be true")
    out.copy_(rms_llama(input, weight, epsilon))


def fused_add_rms_norm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float
) -> None:
    residual.add_(input)  # residual <- input + residual, rounded to its dtype
    input.copy_(rms_llama(residual, weight, epsilon))  # input <- normed sum


def _rms_norm_returning(input: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    """An out-of-place signature the adapter does not expect."""
    return rms_llama(input, weight, epsilon)


def build(*, fused: bool = True, old_rms_signature: bool = False) -> dict[str, types.ModuleType]:
    ops = module("vllm._custom_ops", rms_norm=_rms_norm_returning if old_rms_signature else rms_norm)
    if fused:
        ops.fused_add_rms_norm = fused_add_rms_norm
    return {"vllm": module("vllm", package=True), "vllm._custom_ops": ops}
