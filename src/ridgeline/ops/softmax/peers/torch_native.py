"""PyTorch peers: torch.softmax and its backward as autograd runs it, eager and under torch.compile."""

from __future__ import annotations

import torch

from ridgeline.core.registry import register_impl
from ridgeline.lib.peers import compiled_factory


def eager_softmax(x: torch.Tensor) -> torch.Tensor:
    """What a PyTorch model writes: torch.softmax over the last dim (float32 math inside, output in x's dtype)."""
    return torch.softmax(x, dim=-1)


def eager_softmax_bwd(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """What autograd runs for torch.softmax: the saved output y and the incoming gradient dy."""
    return torch._softmax_backward_data(dy, y, -1, y.dtype)


register_impl("softmax", "torch-eager", "peer", lambda: eager_softmax, description="torch.softmax(x, dim=-1)")
register_impl("softmax", "torch-compile", "peer", compiled_factory(eager_softmax),
              description="torch.compile(dynamic=False) of torch.softmax(x, dim=-1)")
register_impl("softmax_bwd", "torch-eager", "peer", lambda: eager_softmax_bwd,
              description="torch._softmax_backward_data(dy, y, -1, dtype), autograd's softmax backward")
register_impl("softmax_bwd", "torch-compile", "peer", compiled_factory(eager_softmax_bwd),
              description="torch.compile(dynamic=False) of torch._softmax_backward_data (inductor decomposes it)")
