"""FlashInfer peers (pip `flashinfer-python`): the CUDA RMSNorm kernels in flashinfer.norm.

    rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None) -> out
    fused_add_rmsnorm(input, residual, weight, eps=1e-6, enable_pdl=None) -> None
                                                     residual <- input + residual, input <- normed

The fused one works in place, so it is registered with mutates=("x", "residual") and returns those two
tensors as (out, residual_out). Nothing from FlashInfer is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "flashinfer-python"
_PKG = OptionalPackage(PIP)
_import = _PKG.import_module
_function = _PKG.function
NORM_MODULE = "flashinfer.norm"


def _rms() -> Callable[..., Any]:
    rmsnorm = _function(_import(NORM_MODULE), "rmsnorm", 2, ("eps",))

    def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return rmsnorm(x, weight, eps=eps)

    return rms


def _fused() -> Callable[..., Any]:
    fused_add_rmsnorm = _function(_import(NORM_MODULE), "fused_add_rmsnorm", 3, ("eps",))

    def fused(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        fused_add_rmsnorm(x, residual, weight, eps=eps)
        return x, residual

    return fused


register_impl("rmsnorm", "flashinfer", "peer", _rms,
              description="FlashInfer CUDA RMSNorm (flashinfer.norm.rmsnorm, out allocated by FlashInfer)")
register_impl("fused_add_rmsnorm", "flashinfer", "peer", _fused, mutates=("x", "residual"),
              description="FlashInfer CUDA fused add + RMSNorm (flashinfer.norm.fused_add_rmsnorm), "
                          "in place: residual <- x + residual, x <- out")
