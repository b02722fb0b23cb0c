"""FP8 outputs of the RMSNorm kernel (kernels/rmsnorm.py, QUANT): dtypes, scale rules and argument checks.

What serving engines run before an FP8 GEMM:
- static per-tensor scale: ``out = sat(y / scale)`` in the FP8 dtype (``rms_norm(..., out_dtype=fp8, scale=s)``);
- dynamic per-token scales: ``scale[m] = max|y[m, :]| / fp8_max``, ``out = y / scale`` (``rms_norm_dynamic_quant``),
  optionally after the residual add (then residual_out is returned too).

y is the RMSNorm in float32 (weight included), rounded once, to FP8. The FP8 ops run the same kernel, row layout
and launch configuration as the plain op (one more epilogue), so they are batch invariant the same way.
"""

from __future__ import annotations

import torch

from ridgeline.kernels._launch import require_same_device, require_tensor

FP8_DTYPES = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}  # largest finite value
# Per-token scales never go below fp8_max^-1 times this (an all-zero row would otherwise divide by zero); vLLM
# uses the same idea.
MIN_SCALE_FACTOR = 1.0 / 512.0

QUANT_NONE, QUANT_STATIC, QUANT_DYNAMIC = 0, 1, 2


def check_quant_dtype(name: str, dtype: object) -> float:
    """The largest finite value of a supported FP8 dtype; TypeError naming the argument otherwise."""
    if dtype not in FP8_DTYPES:
        names = ", ".join(str(d).replace("torch.", "") for d in FP8_DTYPES)
        raise TypeError(f"{name}: expected one of {names}, got {dtype}")
    return FP8_DTYPES[dtype]


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
