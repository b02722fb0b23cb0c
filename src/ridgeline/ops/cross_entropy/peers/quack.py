"""QuACK peer (pip `quack-kernels`, module `quack`): the CuTe-DSL cross-entropy of Dao-AILab/quack.

    quack.cross_entropy.cross_entropy(x, target, lse_partial=None, ignore_index=-100, reduction="mean",
                                      inplace_backward=False) -> loss (float32)

An autograd function: the forward writes the per-row loss and lse, the backward re-reads the logits to write the
gradient (a second read). No label smoothing and no z-loss: those variants raise NotImplementedError here (reported
by `check` as unsupported, never replaced by something else). Nothing from QuACK is imported until asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "quack-kernels"
_PKG = OptionalPackage(PIP)
MODULE = "quack.cross_entropy"
IGNORE_INDEX = -100


def _function() -> Any:
    return _PKG.function(_PKG.import_module(MODULE), "cross_entropy", 2, ("ignore_index", "reduction"))


def _supported(label_smoothing: float, z_loss: float) -> None:
    if label_smoothing or z_loss:
        raise NotImplementedError("quack.cross_entropy has no label_smoothing or z_loss")


def _fwd() -> Callable[..., Any]:
    fn = _function()

    def fwd(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0, reduction: str = "mean",
            z_loss: float = 0.0) -> torch.Tensor:
        _supported(label_smoothing, z_loss)
        return fn(logits, target, ignore_index=IGNORE_INDEX, reduction=reduction)

    return fwd


def _fwd_bwd() -> Callable[..., Any]:
    fn = _function()

    def fwd_bwd(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0, reduction: str = "mean",
                z_loss: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        _supported(label_smoothing, z_loss)
        x = logits.detach().requires_grad_()
        with torch.enable_grad():
            loss = fn(x, target, ignore_index=IGNORE_INDEX, reduction=reduction)
            (dx,) = torch.autograd.grad(loss, x, grad_outputs=torch.ones_like(loss))
        return loss.detach(), dx

    return fwd_bwd


register_impl("cross_entropy", "quack", "peer", _fwd,
              description="QuACK CuTe-DSL cross-entropy (quack.cross_entropy.cross_entropy), forward")
register_impl("cross_entropy_fwd_bwd", "quack", "peer", _fwd_bwd,
              description="QuACK CuTe-DSL cross-entropy + torch.autograd.grad (its backward re-reads the logits)")
