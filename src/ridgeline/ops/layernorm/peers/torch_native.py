"""PyTorch peers: F.layer_norm eager and torch.compile of it; the backward as torch's own entry point
(aten.native_layer_norm_backward on the saved mean/rstd) eager and compiled (inductor decomposes it into the formula it
emits in a compiled training graph's backward)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ridgeline.core.registry import register_impl

# Every benchmarked shape is its own static graph; the default recompile limit (8) would silently fall back to eager
# after a few shapes and make torch.compile look slow.
COMPILE_RECOMPILE_LIMIT = 512


def eager_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """torch.nn.LayerNorm's forward (normalized_shape = the last dim)."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def eager_layer_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                              rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What autograd runs for F.layer_norm: native_layer_norm_backward with the (mean, rstd) native_layer_norm saved
    (shaped [..., 1], as it saves them). It allocates dbias like the bias, whose values it never reads; the contract has
    no bias, so the weight (same shape, the contract's dbias dtype) stands in for it."""
    lead = (*x.shape[:-1], 1)
    if not x.is_cuda and x.dtype != torch.float32:  # on the CPU, native_layer_norm saves them in x's 16-bit dtype
        mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(
        dy, x, [x.shape[-1]], mean.view(lead), rstd.view(lead), weight, weight, [True, True, True])
    return dx, dw, db


def _compiled(fn: Callable[..., Any]) -> Callable[[], Callable[..., Any]]:
    def factory() -> Callable[..., Any]:
        dynamo_config = torch._dynamo.config
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo_config, knob):
                setattr(dynamo_config, knob, max(getattr(dynamo_config, knob), COMPILE_RECOMPILE_LIMIT))
        return torch.compile(fn, dynamic=False)

    return factory


register_impl("layernorm", "torch-eager", "peer", lambda: eager_layer_norm,
              description="torch.nn.functional.layer_norm, eager")
register_impl("layernorm", "torch-compile", "peer", _compiled(eager_layer_norm),
              description="torch.compile(dynamic=False) of F.layer_norm")
register_impl("layernorm_bwd", "torch-eager", "peer", lambda: eager_layer_norm_backward,
              description="torch.ops.aten.native_layer_norm_backward on the saved mean/rstd (autograd's kernel)")
register_impl("layernorm_bwd", "torch-compile", "peer", _compiled(eager_layer_norm_backward),
              description="torch.compile(dynamic=False) of native_layer_norm_backward (inductor's decomposition)")
