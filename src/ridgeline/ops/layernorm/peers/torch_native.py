"""PyTorch peers: F.layer_norm eager and torch.compile of it; the backward as torch's own entry point
(aten.native_layer_norm_backward on the saved mean/rstd) eager and compiled (inductor decomposes it into the formula it
emits in a compiled training graph's backward)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ridgeline.core.registry import register_impl
from ridgeline.lib.peers import compiled_factory


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


register_impl("layernorm", "torch-eager", "peer", lambda: eager_layer_norm,
              description="torch.nn.functional.layer_norm, eager")
register_impl("layernorm", "torch-compile", "peer", compiled_factory(eager_layer_norm),
              description="torch.compile(dynamic=False) of F.layer_norm")
register_impl("layernorm_bwd", "torch-eager", "peer", lambda: eager_layer_norm_backward,
              description="torch.ops.aten.native_layer_norm_backward on the saved mean/rstd (autograd's kernel)")
register_impl("layernorm_bwd", "torch-compile", "peer", compiled_factory(eager_layer_norm_backward),
              description="torch.compile(dynamic=False) of native_layer_norm_backward (inductor's decomposition)")
