"""Liger-Kernel peer (pip `liger-kernel`): `LigerCrossEntropyFunction` of liger_kernel.ops.cross_entropy.

Called as LigerCrossEntropyLoss calls it: apply(logits, target, weight=None, ignore_index, lse_square_scale=z_loss,
label_smoothing, reduction, softcap=None, return_z_loss=False) -> (loss, None, ...). Facts that shape the adapter:
- When the logits require grad, its forward writes the gradient into the logits' own buffer (in place) and its
  backward hands that buffer back (scaled by grad_output unless grad_output equals 1): the training step is
  registered with mutates=("logits",), so the harness gives it a private copy to overwrite and counts no copy in
  its time. The forward-only contract calls it on logits that do not require grad: nothing is written then.
- Its per-row loss is stored in the logits' dtype (bf16 rows for bf16 logits) and summed by torch: the adapter
  casts the result to float32, the contract's dtype (the cast of a scalar, or of N floats for "none").
- It validates targets with host syncs (`.item()`) on every call.
Nothing from Liger is imported until an implementation is asked for.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "liger-kernel"
_PKG = OptionalPackage(PIP)
# The submodule, not `liger_kernel.ops`: the package may swap in another backend's classes (LIGER_KERNEL_IMPL).
MODULE = "liger_kernel.ops.cross_entropy"
IGNORE_INDEX = -100


def _function() -> Any:
    cls = getattr(_PKG.import_module(MODULE), "LigerCrossEntropyFunction", None)
    if cls is None or not callable(getattr(cls, "apply", None)):
        raise Unavailable(f"{PIP} {_PKG.version()}: {MODULE} has no LigerCrossEntropyFunction")
    try:
        params = list(inspect.signature(cls.forward).parameters)
    except (TypeError, ValueError):  # nothing to inspect: the call itself will tell
        return cls
    wanted = ("_input", "target", "weight", "ignore_index", "lse_square_scale", "label_smoothing", "reduction")
    if params[1:8] != list(wanted):
        raise Unavailable(f"{PIP} {_PKG.version()}: LigerCrossEntropyFunction.forward{inspect.signature(cls.forward)} "
                          f"does not start with (ctx, {', '.join(wanted)})")
    return cls


def _loss(fn: Any, logits: torch.Tensor, target: torch.Tensor, label_smoothing: float, reduction: str,
          z_loss: float) -> torch.Tensor:
    out = fn.apply(logits, target, None, IGNORE_INDEX, z_loss, label_smoothing, reduction)
    return out[0] if isinstance(out, tuple) else out


def _fwd() -> Callable[..., Any]:
    fn = _function()

    def fwd(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0, reduction: str = "mean",
            z_loss: float = 0.0) -> torch.Tensor:
        return _loss(fn, logits, target, label_smoothing, reduction, z_loss).float()

    return fwd


def _fwd_bwd() -> Callable[..., Any]:
    fn = _function()

    def fwd_bwd(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0, reduction: str = "mean",
                z_loss: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        x = logits.detach().requires_grad_()  # (its forward then writes the gradient into this buffer)
        with torch.enable_grad():
            loss = _loss(fn, x, target, label_smoothing, reduction, z_loss)
            (dx,) = torch.autograd.grad(loss, x, grad_outputs=torch.ones_like(loss))
        return loss.detach().float(), dx

    return fwd_bwd


register_impl("cross_entropy", "liger", "peer", _fwd, mutates=("logits",),
              description="Liger-Kernel LigerCrossEntropyFunction on logits that do not require grad (forward "
                          "only; it still overwrites the logits with the gradient)")
register_impl("cross_entropy_fwd_bwd", "liger", "peer", _fwd_bwd, mutates=("logits",),
              description="Liger-Kernel LigerCrossEntropyFunction + torch.autograd.grad: the gradient written into "
                          "the logits in place")
