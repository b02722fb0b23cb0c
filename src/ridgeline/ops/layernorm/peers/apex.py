"""NVIDIA Apex peers (pip `apex`, built with its CUDA extensions): apex.normalization's fused LayerNorm.

    apex.normalization.fused_layer_norm.fused_layer_norm_affine(input, weight, bias, normalized_shape, eps) -> out
    fused_layer_norm_cuda.backward_affine(grad_output, mean, invvar, input, normalized_shape, weight, bias, eps
                                          [, memory_efficient]) -> (grad_input, grad_weight, grad_bias)

The backward is what FusedLayerNormAffineFunction.backward calls, on what its forward saved: mean and invvar (= rstd)
float32 of M values, the contract's mean and rstd. It allocates grad_bias like the bias and never reads the bias's
values; the contract has no bias, so the weight stands in for it. Nothing from Apex is imported until asked for.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "apex"
_PKG = OptionalPackage(PIP)
LN_MODULE = "apex.normalization.fused_layer_norm"
CUDA_MODULE = "fused_layer_norm_cuda"  # Apex's compiled extension (absent from a Python-only build)


def _fwd() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(LN_MODULE), "fused_layer_norm_affine", 5)

    def fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        return fn(x, weight, bias, (x.shape[-1],), eps)

    return fwd


def _bwd() -> Callable[..., Any]:
    module = _PKG.import_module(LN_MODULE)
    try:
        ext = __import__(CUDA_MODULE)
    except ImportError as e:
        raise Unavailable(f"{PIP} {_PKG.version()} has no compiled {CUDA_MODULE} ({type(e).__name__}): built "
                          "without --cuda_ext") from None
    backward = getattr(ext, "backward_affine", None)
    if backward is None:
        raise Unavailable(f"{PIP} {_PKG.version()}: {CUDA_MODULE} has no backward_affine")
    fn_cls = getattr(module, "FusedLayerNormAffineFunction", None)
    try:  # releases whose Function takes memory_efficient pass it to backward_affine too
        efficient = "memory_efficient" in inspect.signature(fn_cls.forward).parameters
    except (TypeError, ValueError, AttributeError):
        efficient = False
    extra = (False,) if efficient else ()

    def bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dx, dw, db = backward(dy.contiguous(), mean, rstd, x.contiguous(), [x.shape[-1]], weight, weight, 0.0,
                              *extra)
        return dx, dw, db

    return bwd


register_impl("layernorm", "apex", "peer", _fwd,
              description="Apex fused LayerNorm (apex.normalization.fused_layer_norm.fused_layer_norm_affine)")
register_impl("layernorm_bwd", "apex", "peer", _bwd,
              description="Apex fused LayerNorm backward (fused_layer_norm_cuda.backward_affine)")
