"""Liger-Kernel peers (pip `liger-kernel`): its Triton LayerNorm, liger_kernel.ops.layer_norm.

    LigerLayerNormFunction.apply(X, W, B, eps) -> Y                 (what LigerLayerNorm.forward calls)
    layer_norm_backward(dY, X, W, B, Mean, RSTD) -> (DX, DW, DB)     (what its Function's backward calls)

The backward takes what Liger's forward saved: X viewed as [M, N], Mean and RSTD float32 [M] (the contract's mean and
rstd). It reads B only for DB's dtype; the contract has no bias, so the weight (the contract's dbias dtype) stands in.
Nothing from Liger is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "liger-kernel"
_PKG = OptionalPackage(PIP)
# The submodule, not `liger_kernel.ops`: the package may swap in another backend's classes, the submodule holds the
# Triton kernels we mean to measure.
LN_MODULE = "liger_kernel.ops.layer_norm"


def _fwd() -> Callable[..., Any]:
    cls = getattr(_PKG.import_module(LN_MODULE), "LigerLayerNormFunction", None)
    if cls is None or not callable(getattr(cls, "apply", None)):
        raise Unavailable(f"{PIP} {_PKG.version()}: {LN_MODULE} has no LigerLayerNormFunction")

    def fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        return cls.apply(x, weight, bias, eps)

    return fwd


def _bwd() -> Callable[..., Any]:
    backward = _PKG.function(_PKG.import_module(LN_MODULE), "layer_norm_backward", 6)

    def bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dx, dw, db = backward(dy, x.reshape(-1, x.shape[-1]), weight, weight, mean, rstd)
        return dx.view(x.shape), dw, db

    return bwd


register_impl("layernorm", "liger", "peer", _fwd,
              description="Liger-Kernel Triton LayerNorm (LigerLayerNormFunction)")
register_impl("layernorm_bwd", "liger", "peer", _bwd,
              description="Liger-Kernel Triton LayerNorm backward (liger_kernel.ops.layer_norm.layer_norm_backward)")
