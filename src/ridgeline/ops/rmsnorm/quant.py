"""FP8 outputs of the RMSNorm kernel (ops/rmsnorm/kernel.py, QUANT): dtypes, scale rules and argument checks.

What serving engines run before an FP8 GEMM:
- static per-tensor scale: ``out = sat(y / scale)`` in the FP8 dtype (``rms_norm(..., out_dtype=fp8, scale=s)``);
- dynamic per-token scales: ``scale[m] = max|y[m, :]| / fp8_max``, ``out = y / scale`` (``rms_norm_dynamic_quant``),
  optionally after the residual add (then residual_out is returned too).

y is the RMSNorm in float32 (weight included), rounded once, to FP8. The FP8 ops run the plain op's kernel and
row pieces with one more epilogue; `config_for(..., quant=)` sets their own knobs (where the weight is loaded,
register caps), and one-byte outputs give the compiler a wider register layout (16 values a thread), so their
row sums are ordered otherwise than `rms_norm`'s. Like it, they are batch invariant.
"""

from __future__ import annotations

import torch

from ridgeline.lib.launch import require_same_device

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
    """A static scale as a one-element float32 tensor on x's device: from a positive finite float, or a
    one-element floating-point tensor on x's device (its value is not read: no device sync)."""
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        if not 0.0 < scale < float("inf"):
            raise ValueError(f"scale: expected a positive finite scale, got {scale}")
        return torch.full((1,), float(scale), dtype=torch.float32, device=x.device)
    if not isinstance(scale, torch.Tensor):
        raise TypeError(f"scale: expected a positive float or a one-element float tensor, got {type(scale).__name__}")
    if not scale.is_floating_point() or scale.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise TypeError(f"scale: expected a float32, float16 or bfloat16 tensor, got {scale.dtype}")
    if scale.numel() != 1:
        raise ValueError(f"scale: expected one per-tensor scale (1 element), got shape {tuple(scale.shape)}")
    require_same_device("scale", scale, "x", x)
    return scale.reshape(1).to(torch.float32)
