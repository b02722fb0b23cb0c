"""PyTorch peers: the loss as Hugging Face's causal-LM loss writes it (upcast the logits to float32, then
F.cross_entropy; a PaLM z-loss as training codebases add it), eager and torch.compile'd.

The training step (`cross_entropy_fwd_bwd`) is the loss followed by `torch.autograd.grad` on logits that require
grad (no copy: a detached view of the caller's tensor). Compiled, the loss function is one torch.compile'd function
whose backward graph AOTAutograd compiles with it (the way torch.compile trains: forward and backward kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ridgeline.core.registry import register_impl
from ridgeline.lib.peers import compiled

IGNORE_INDEX = -100


def hf_cross_entropy(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0,
                     reduction: str = "mean", z_loss: float = 0.0) -> torch.Tensor:
    """transformers' ForCausalLMLoss core: logits.float(), then F.cross_entropy; z_loss * lse^2 per valid row."""
    x = logits.float()
    loss = F.cross_entropy(x, target, ignore_index=IGNORE_INDEX, reduction=reduction,
                           label_smoothing=label_smoothing)
    if z_loss:
        valid = target != IGNORE_INDEX
        z_rows = torch.where(valid, torch.logsumexp(x, dim=-1).pow(2), 0.0) * z_loss
        if reduction == "none":
            loss = loss + z_rows
        elif reduction == "sum":
            loss = loss + z_rows.sum()
        else:
            loss = loss + z_rows.sum() / valid.sum()
    return loss


def fwd_bwd_of(loss_fn: Callable[..., torch.Tensor]) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """(loss, d loss / d logits) by autograd: grad_output 1 (for "none", a 1 per row: the gradient of the sum)."""

    def fwd_bwd(logits: torch.Tensor, target: torch.Tensor, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x = logits.detach().requires_grad_()
        with torch.enable_grad():
            loss = loss_fn(x, target, **kw)
            (dx,) = torch.autograd.grad(loss, x, grad_outputs=torch.ones_like(loss))
        return loss.detach(), dx

    return fwd_bwd


register_impl("cross_entropy", "torch-eager", "peer", lambda: hf_cross_entropy,
              description="F.cross_entropy(logits.float(), target) as Hugging Face's causal-LM loss, eager")
register_impl("cross_entropy", "torch-compile", "peer", lambda: compiled(hf_cross_entropy),
              description="torch.compile(dynamic=False) of the Hugging Face loss")
register_impl("cross_entropy_fwd_bwd", "torch-eager", "peer", lambda: fwd_bwd_of(hf_cross_entropy),
              description="the Hugging Face loss, then torch.autograd.grad (eager)")
register_impl("cross_entropy_fwd_bwd", "torch-compile", "peer", lambda: fwd_bwd_of(compiled(hf_cross_entropy)),
              description="torch.compile(dynamic=False) of the Hugging Face loss (forward and AOTAutograd backward), "
                          "then torch.autograd.grad")
