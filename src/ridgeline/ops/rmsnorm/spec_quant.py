"""Contracts of RMSNorm fused with FP8 quantization (float8_e4m3fn outputs).

rmsnorm_fp8:                      out = sat(y / scale)                       fn(x, weight, eps, scale) -> out
rmsnorm_dynamic_quant:            s[m] = max|y[m]| / 448; out = y / s       fn(x, weight, eps) -> (out, scales)
fused_add_rmsnorm_dynamic_quant:  the same on residual_out = round(x + residual)
                                         fn(x, residual, weight, eps) -> (out, scales, residual_out)
y = RMSNorm(x) * weight in float64 in the reference. FP8 outputs are compared in the quantized domain with one
half-ulp of e4m3 (2^-4 relative) plus its subnormal spacing; NaN/inf inputs are not part of these contracts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance
from ridgeline.ops.rmsnorm.spec import (
    CPU,
    DECODE,
    EDGE,
    EPS,
    EXACT,
    SWEEP,
    _generator,
    _numel,
    _rms_ref,
    _rows_input,
    _weight,
    _weight_bytes,
    auto_regime_by_elements,
    rounded_sum,
)

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
MIN_SCALE = 1.0 / (448.0 * 512.0)
# A static scale that saturates the largest few |y| (|y| > 3.5 with unit-variance inputs): saturation is tested too.
STATIC_SCALE = 3.5 / FP8_MAX
FP8_TOL = Tolerance(atol=2.0**-9, rtol=0.07)  # half an e4m3 ulp (2^-4) with margin; subnormal spacing 2^-9
SCALE_TOL = Tolerance(atol=1e-12, rtol=1e-5)  # scales from float32 vs float64 maxima
QUANT_EDGE = EDGE  # wide rows included: over 16384 columns the kernel takes two passes


# What the three FP8 contracts share: rows of N, 16-bit inputs, shape sets, variants.
QUANT_FIELDS: dict[str, Any] = {
    "dims": ("M", "N"), "ranks": (2, 3), "dtypes": (torch.bfloat16, torch.float16),
    "shape_sets": {"sweep": SWEEP, "decode": DECODE, "edge": QUANT_EDGE, "cpu": CPU},
    "variants": ("", "strided", "w-fp32"),
}


def _quant_cases(spec: OpSpec, dtype: torch.dtype, device) -> list[Case]:
    cases = [Case(s, dtype) for s in QUANT_EDGE]
    cases += [Case(s, dtype, "strided") for s in [(7, 769), (7, 4100), (2, 5, 769)]]
    if dtype != torch.float32:
        cases.append(Case((7, 769), dtype, "w-fp32"))
    if torch.device(device).type == "cuda":
        cases += [Case((4096, 4096), dtype), Case((1024, 5125), dtype, "strided")]
    return cases


class _QuantFamily:
    def auto_regime(self, case: Case) -> str:
        return auto_regime_by_elements(case.shape)

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        return _quant_cases(self, dtype, device)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return {"out": FP8_TOL, "scales": SCALE_TOL, "residual_out": EXACT}[output]

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return {"out": FP8, "scales": torch.float32}.get(name, inputs["x"].dtype)


def _dynamic(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scales = (y.abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=MIN_SCALE)
    return (y / scales).clamp(-FP8_MAX, FP8_MAX), scales


class RMSNormFP8Spec(_QuantFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            **QUANT_FIELDS,
            name="rmsnorm_fp8", summary="RMSNorm, then static per-tensor FP8 (e4m3) quantization: sat(y / scale)",
            signature="fn(x, weight, eps, scale) -> out (float8_e4m3fn)", outputs=("out",), batch_inputs=("x",),
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _rows_input(case.shape, case.dtype, case.variant, device, gen)
        return {"x": x, "weight": _weight(case.shape[-1], case.dtype, case.variant, device, gen), "eps": EPS,
                "scale": torch.tensor([STATIC_SCALE], dtype=torch.float32, device=device)}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        y = _rms_ref(inputs["x"], inputs["weight"], inputs["eps"])
        return ((y / inputs["scale"].double()).clamp(-FP8_MAX, FP8_MAX),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"], inputs["weight"], inputs["eps"], inputs["scale"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems = _numel(shape)
        return Cost(bytes=elems * (dtype.itemsize + 1) + _weight_bytes(shape[-1], dtype, variant) + 4,
                    flops=6 * elems)


class RMSNormDynamicQuantSpec(_QuantFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            **QUANT_FIELDS,
            name="rmsnorm_dynamic_quant",
            summary="RMSNorm, then dynamic per-token FP8 (e4m3): s = max|y| / 448 per row, out = y / s",
            signature="fn(x, weight, eps) -> (out float8_e4m3fn, scales [M, 1] float32)", outputs=("out", "scales"),
            batch_inputs=("x",),
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _rows_input(case.shape, case.dtype, case.variant, device, gen)
        return {"x": x, "weight": _weight(case.shape[-1], case.dtype, case.variant, device, gen), "eps": EPS}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return _dynamic(_rms_ref(inputs["x"], inputs["weight"], inputs["eps"]))

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        out = fn(inputs["x"], inputs["weight"], inputs["eps"])
        return tuple(out)[:2]

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems, rows = _numel(shape), _numel(shape[:-1])
        return Cost(bytes=elems * (dtype.itemsize + 1) + 4 * rows + _weight_bytes(shape[-1], dtype, variant),
                    flops=7 * elems)


class FusedAddRMSNormDynamicQuantSpec(_QuantFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            **QUANT_FIELDS,
            name="fused_add_rmsnorm_dynamic_quant",
            summary="residual_out = x + residual; RMSNorm; dynamic per-token FP8 (e4m3) quantization",
            signature="fn(x, residual, weight, eps) -> (out float8_e4m3fn, scales [M, 1], residual_out)",
            outputs=("out", "scales", "residual_out"), batch_inputs=("x", "residual"),
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _rows_input(case.shape, case.dtype, case.variant, device, gen)
        residual = _rows_input(case.shape, case.dtype, case.variant, device, gen)
        return {"x": x, "residual": residual, "weight": _weight(case.shape[-1], case.dtype, case.variant, device, gen),
                "eps": EPS}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        residual_out = rounded_sum(inputs["x"], inputs["residual"])
        out, scales = _dynamic(_rms_ref(residual_out, inputs["weight"], inputs["eps"]))
        return out, scales, residual_out.double()

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(fn(inputs["x"], inputs["residual"], inputs["weight"], inputs["eps"]))

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems, rows = _numel(shape), _numel(shape[:-1])
        return Cost(bytes=elems * (3 * dtype.itemsize + 1) + 4 * rows + _weight_bytes(shape[-1], dtype, variant),
                    flops=8 * elems)


register_spec(RMSNormFP8Spec())
register_spec(RMSNormDynamicQuantSpec())
register_spec(FusedAddRMSNormDynamicQuantSpec())


def _ours_static() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.launch import rms_norm

    return lambda x, weight, eps, scale: rms_norm(x, weight, eps, out_dtype=FP8, scale=scale)


def _ours_dynamic() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.launch import rms_norm_dynamic_quant

    return lambda x, weight, eps: rms_norm_dynamic_quant(x, weight, eps)[:2]


def _ours_fused_dynamic() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.launch import rms_norm_dynamic_quant

    return lambda x, residual, weight, eps: rms_norm_dynamic_quant(x, weight, eps, residual=residual)


register_impl("rmsnorm_fp8", "ridgeline", "ours", _ours_static, description="ridgeline Triton kernel")
register_impl("rmsnorm_dynamic_quant", "ridgeline", "ours", _ours_dynamic, description="ridgeline Triton kernel")
register_impl("fused_add_rmsnorm_dynamic_quant", "ridgeline", "ours", _ours_fused_dynamic,
              description="ridgeline Triton kernel")
