"""The RMSNorm arithmetic the stand-ins share, with each library's rounding points."""

from __future__ import annotations

import torch


def rstd(x: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)


def rms_fp32(x: torch.Tensor, weight: torch.Tensor, eps: float, dtype: torch.dtype) -> torch.Tensor:
    """Everything in fp32, one rounding at the end (FlashInfer, QuACK)."""
    return (x.float() * rstd(x, eps) * weight.float()).to(dtype)


def rms_llama(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Round the normalized row to x's dtype, then multiply by the weight (HF Llama, Liger 'llama', vLLM)."""
    return ((x.float() * rstd(x, eps)).to(x.dtype) * weight).to(x.dtype)
