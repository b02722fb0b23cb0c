"""Our kernels as PyTorch custom ops, so `torch.compile(fullgraph=True)` traces through them without a break.

`ridgeline.rms_norm` / `fused_add_rms_norm` call these ops while torch.compile is tracing and the Triton wrapper
directly otherwise (eager calls keep the short host path). The ops are opaque to the compiler: it schedules the
launch and knows output shapes from the fake implementations below.
"""

from __future__ import annotations

import torch

from ridgeline.ops.rmsnorm import launch as _l

_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float) -> torch.Tensor:
    return _l.rms_norm(x, weight, eps, weight_offset=weight_offset)


@rms_norm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.custom_op(f"{_LIB}::fused_add_rms_norm", mutates_args=())
def fused_add_rms_norm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
) -> tuple[torch.Tensor, torch.Tensor]:
    return _l.fused_add_rms_norm(x, residual, weight, eps, weight_offset=weight_offset)


@fused_add_rms_norm_op.register_fake
def _(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
      ) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            torch.empty(x.shape, dtype=x.dtype, device=x.device))


@torch.library.custom_op(f"{_LIB}::fused_add_rms_norm_", mutates_args=("x", "residual"))
def fused_add_rms_norm_inplace_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
) -> None:
    _l.fused_add_rms_norm(x, residual, weight, eps, weight_offset=weight_offset, inplace=True)


@fused_add_rms_norm_inplace_op.register_fake
def _(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
      ) -> None:
    return None


@torch.library.custom_op(f"{_LIB}::rms_norm_fp8", mutates_args=())
def rms_norm_fp8_op(x: torch.Tensor, weight: torch.Tensor | None, eps: float, scale: torch.Tensor,
                    weight_offset: float, out_dtype: torch.dtype) -> torch.Tensor:
    return _l.rms_norm(x, weight, eps, weight_offset=weight_offset, out_dtype=out_dtype, scale=scale)


@rms_norm_fp8_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, scale: torch.Tensor, weight_offset: float,
      out_dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(x.shape, dtype=out_dtype, device=x.device)


@torch.library.custom_op(f"{_LIB}::rms_norm_dynamic_quant", mutates_args=())
def rms_norm_dynamic_quant_op(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None, weight_offset: float,
    quant_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out, scales, residual_out = _l.rms_norm_dynamic_quant(x, weight, eps, residual=residual,
                                                          weight_offset=weight_offset, quant_dtype=quant_dtype)
    # A custom op returns tensors only: without a residual, an empty residual_out stands for None.
    return out, scales, residual_out if residual_out is not None else x.new_empty(0)


@rms_norm_dynamic_quant_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None, weight_offset: float,
      quant_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    res = torch.empty(x.shape if residual is not None else (0,), dtype=x.dtype, device=x.device)
    return (torch.empty(x.shape, dtype=quant_dtype, device=x.device),
            torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device), res)
