"""RMSNorm fused with FP8 quantization: what serving engines run before an FP8 GEMM.

- static per-tensor scale: ``out = sat(y / scale)`` in the FP8 dtype (``rms_norm(..., out_dtype=fp8, scale=s)``);
- dynamic per-token scales: ``scale[m] = max|y[m, :]| / fp8_max``, ``out = y / scale`` (``rms_norm_dynamic_quant``),
  optionally after the residual add (then residual_out is returned too).

y is the RMSNorm in float32 (weight included) and is rounded once, to FP8. One row per program, the whole row
in registers (hidden size up to MAX_HIDDEN), so a row's result never depends on the batch.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from ridgeline.kernels._launch import (
    interpreter_enabled,
    require_same_device,
    require_tensor,
    stride_alignment,
)
from ridgeline.kernels._rounding import to_storage

FP8_DTYPES = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}  # largest finite value
MAX_HIDDEN = 32768
# Per-token scales never go below this (an all-zero row would otherwise divide by zero); vLLM uses the same idea.
MIN_SCALE_FACTOR = 1.0 / 512.0


@triton.jit
def _rms_norm_fp8_kernel(
    X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Q, q_stride_q, S,
    N, eps, weight_offset, qmax, min_scale,
    X_ALIGN: tl.constexpr, R_ALIGN: tl.constexpr, RO_ALIGN: tl.constexpr, Q_ALIGN: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr, DYNAMIC: tl.constexpr,
    BLOCK_N: tl.constexpr, EMULATE_ROUNDING: tl.constexpr,
):
    row = tl.cast(tl.program_id(0), tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * x_stride_q * X_ALIGN + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(R + row * r_stride_q * R_ALIGN + cols, mask=mask, other=0.0).to(tl.float32)
        xr = to_storage(x + r, RO.dtype.element_ty, EMULATE_ROUNDING)
        tl.store(RO + row * ro_stride_q * RO_ALIGN + cols, xr, mask=mask)
        x = xr.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    y = x * rstd
    if HAS_WEIGHT:
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        y = y * (w + weight_offset)
    if DYNAMIC:
        scale = tl.maximum(tl.max(tl.abs(y), axis=0) / qmax, min_scale)
        tl.store(S + row, scale)
    else:
        scale = tl.load(S)
    q = tl.clamp(y / scale, -qmax, qmax)
    tl.store(Q + row * q_stride_q * Q_ALIGN + cols, to_storage(q, Q.dtype.element_ty, EMULATE_ROUNDING), mask=mask)


def check_quant_dtype(name: str, dtype: object) -> float:
    """The largest finite value of a supported FP8 dtype; TypeError naming the argument otherwise."""
    if dtype not in FP8_DTYPES:
        names = ", ".join(str(d).replace("torch.", "") for d in FP8_DTYPES)
        raise TypeError(f"{name}: expected one of {names}, got {dtype}")
    return FP8_DTYPES[dtype]


def launch_fp8(
    x: torch.Tensor, x_stride: int, residual: torch.Tensor | None, r_stride: int,
    residual_out: torch.Tensor | None, weight: torch.Tensor | None, q: torch.Tensor, scale: torch.Tensor,
    m: int, n: int, eps: float, weight_offset: float, dynamic: bool,
) -> None:
    """Launch the FP8 kernel on validated tensors (rows of x / residual may be strided; q is contiguous)."""
    if m == 0:
        return
    if n > MAX_HIDDEN:
        raise ValueError(f"x: the FP8 path keeps a row in registers: hidden size up to {MAX_HIDDEN}, got {n}")
    qmax = FP8_DTYPES[q.dtype]
    block = triton.next_power_of_2(n)
    warps = max(1, min(16, block // 512))
    has_res = residual is not None
    r, rs = (residual, r_stride) if has_res else (x, x_stride)
    ro, ros = (residual_out, n) if has_res else (x, x_stride)
    # No row more aligned than N (as in kernels/rmsnorm.py: the row's sum would be laid out, so ordered, otherwise).
    qa = stride_alignment(n)
    xa, ra, roa = (min(qa, stride_alignment(s)) for s in (x_stride, rs, ros))
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():  # Triton uses the current device
        _rms_norm_fp8_kernel[(m,)](
            x, x_stride // xa, r, rs // ra, ro, ros // roa, weight if weight is not None else x, q, n // qa, scale,
            n, eps, weight_offset, qmax, MIN_SCALE_FACTOR / qmax,
            X_ALIGN=xa, R_ALIGN=ra, RO_ALIGN=roa, Q_ALIGN=qa, HAS_RESIDUAL=has_res, HAS_WEIGHT=weight is not None,
            DYNAMIC=dynamic, BLOCK_N=block, EMULATE_ROUNDING=interpreter_enabled(), num_warps=warps,
        )


def validate_static_scale(scale: object, x: torch.Tensor) -> torch.Tensor:
    """A static scale: a positive float or a one-element float32 tensor on x's device."""
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        if not scale > 0:
            raise ValueError(f"scale: expected a positive scale, got {scale}")
        return torch.full((1,), float(scale), dtype=torch.float32, device=x.device)
    scale = require_tensor("scale", scale)
    if scale.numel() != 1:
        raise ValueError(f"scale: expected one per-tensor scale (1 element), got shape {tuple(scale.shape)}")
    require_same_device("scale", scale, "x", x)
    return scale.reshape(1).to(torch.float32)

