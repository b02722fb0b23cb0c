"""Our kernels as PyTorch custom ops, so `torch.compile(fullgraph=True)` traces through them without a break.

`ridgeline.rms_norm` / `fused_add_rms_norm` call these ops while torch.compile is tracing and the Triton wrapper
directly otherwise (eager calls keep the short host path). The ops are opaque to the compiler: it schedules the
launch and knows output shapes from the fake implementations below.
"""

from __future__ import annotations

import torch

from ridgeline.kernels import rmsnorm as _k

_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float) -> torch.Tensor:
    return _k.rms_norm(x, weight, eps, weight_offset=weight_offset)


@rms_norm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.custom_op(f"{_LIB}::fused_add_rms_norm", mutates_args=())
def fused_add_rms_norm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
) -> tuple[torch.Tensor, torch.Tensor]:
    return _k.fused_add_rms_norm(x, residual, weight, eps, weight_offset=weight_offset)


@fused_add_rms_norm_op.register_fake
def _(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
      ) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            torch.empty(x.shape, dtype=x.dtype, device=x.device))


@torch.library.custom_op(f"{_LIB}::fused_add_rms_norm_", mutates_args=("x", "residual"))
def fused_add_rms_norm_inplace_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
) -> None:
    _k.fused_add_rms_norm(x, residual, weight, eps, weight_offset=weight_offset, inplace=True)


@fused_add_rms_norm_inplace_op.register_fake
def _(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
      ) -> None:
    return None
