"""Autograd of the RMSNorm custom ops (launch.py): `ridgeline::rms_norm` and `ridgeline::fused_add_rms_norm`.

The forward saves x (for the fused op residual_out) and the weight, not rstd: our forward kernels do not write it,
and the backward kernel recomputes it from the row it reads anyway (kernel_bwd.py; the tuning driver measures
reading a saved rstd against recomputing it). The backward is itself a custom op, `ridgeline::rms_norm_bwd`, so
torch.compile (AOTAutograd) traces the backward graph through it as it traces the forward through ours.
The in-place fused op (`ridgeline::fused_add_rms_norm_`) has no autograd: `fused_add_rms_norm(..., inplace=True)`
refuses tensors that require grad (`refuse_inplace_grad`).
"""

from __future__ import annotations

from typing import Any

import torch

_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::rms_norm_bwd", mutates_args=())
def rms_norm_bwd_op(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, rstd: torch.Tensor | None, eps: float,
    weight_offset: float, dresidual_out: torch.Tensor | None, need_dweight: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    from ridgeline.ops.rmsnorm.backward import rms_norm_backward

    dx, dweight = rms_norm_backward(dy, x, weight, rstd, eps, weight_offset=weight_offset,
                                    dresidual_out=dresidual_out, need_dweight=need_dweight)
    # A custom op returns tensors only: an empty dweight stands for None.
    return dx, dweight if dweight is not None else x.new_empty(0)


@rms_norm_bwd_op.register_fake
def _(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, rstd: torch.Tensor | None, eps: float,
      weight_offset: float, dresidual_out: torch.Tensor | None, need_dweight: bool
      ) -> tuple[torch.Tensor, torch.Tensor]:
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if weight is not None and need_dweight:
        return dx, torch.empty(weight.shape, dtype=weight.dtype, device=x.device)
    return dx, torch.empty(0, dtype=x.dtype, device=x.device)


def _rms_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    x, weight, eps, weight_offset = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps, ctx.weight_offset = eps, weight_offset


def _rms_backward(ctx: Any, dy: torch.Tensor) -> tuple:
    x, weight = ctx.saved_tensors
    need_dw = weight is not None and ctx.needs_input_grad[1]
    if not ctx.needs_input_grad[0] and not need_dw:
        return None, None, None, None
    dx, dweight = rms_norm_bwd_op(dy, x, weight, None, ctx.eps, ctx.weight_offset, None, need_dw)
    return (dx if ctx.needs_input_grad[0] else None), (dweight if need_dw else None), None, None


def _fused_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    x, residual, weight, eps, weight_offset = inputs
    ctx.save_for_backward(output[1], weight)  # residual_out: the row the norm saw
    ctx.eps, ctx.weight_offset = eps, weight_offset


def _fused_backward(ctx: Any, dout: torch.Tensor, dresidual_out: torch.Tensor | None) -> tuple:
    residual_out, weight = ctx.saved_tensors
    need_dw = weight is not None and ctx.needs_input_grad[2]
    need_dx = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
    if not need_dx and not need_dw:
        return None, None, None, None, None
    dx, dweight = rms_norm_bwd_op(dout, residual_out, weight, None, ctx.eps, ctx.weight_offset, dresidual_out,
                                  need_dw)
    # x and residual enter only as their sum: both get dx (as Liger and QuACK return it; no copy).
    return (dx if ctx.needs_input_grad[0] else None, dx if ctx.needs_input_grad[1] else None,
            dweight if need_dw else None, None, None)


def wants_grad(*tensors: torch.Tensor | None) -> bool:
    """Autograd will record this call: grad mode is on and an input requires grad."""
    return torch.is_grad_enabled() and any(t is not None and getattr(t, "requires_grad", False) for t in tensors)


def refuse_inplace_grad(x: Any, residual: Any, weight: Any) -> None:
    if wants_grad(x, residual, weight):
        raise ValueError("inplace: fused_add_rms_norm(..., inplace=True) overwrites its inputs and has no backward; "
                         "with tensors that require grad call it with inplace=False")


def register(rms_norm_op: Any, fused_add_rms_norm_op: Any) -> None:
    """Wire the backward into the forward custom ops (launch.py calls this once, after defining them)."""
    rms_norm_op.register_autograd(_rms_backward, setup_context=_rms_setup)
    fused_add_rms_norm_op.register_autograd(_fused_backward, setup_context=_fused_setup)
