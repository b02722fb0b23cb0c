"""Contracts of the RMSNorm backward passes: what the standard autograd formulation saves, and the gradients.

rmsnorm_bwd:            fn(dy, x, weight, rstd) -> (dx, dweight)
fused_add_rmsnorm_bwd:  fn(dy, dresidual_out, residual_out, weight, rstd) -> (dx, dweight)

Inputs: the forward's saved x (for the fused op residual_out = x + residual, the row the norm saw), the weight, and
rstd = 1 / sqrt(mean(x^2) + eps) in float32, one value per row (shape x.shape[:-1]), as Liger, QuACK and
aten._fused_rms_norm save it; dy is the incoming gradient of out, dresidual_out that of residual_out. With
g = dy * weight:

    dx = rstd * (g - x * rstd^2 * mean(g * x))  (+ dresidual_out, fused: it is also the residual's gradient)
    dweight = sum over rows of dy * x * rstd     (in the weight's dtype)

dweight couples every row, so the harness must not check a subset of rows against the full call: these contracts
declare no batch inputs (`batch_inputs` is (); `rows` is 1 for any non-empty case). dx's batch invariance and the
determinism of both outputs are tested in tests/ops/rmsnorm/test_backward*.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance
from ridgeline.ops.rmsnorm.spec import (
    CPU,
    EPS,
    _generator,
    _numel,
    _rows_input,
    _weight,
    _weight_bytes,
    auto_regime_by_elements,
)

# The sweep (bf16 on the H200): Llama/Qwen/Mistral widths at prefill token counts, unaligned 4100, 16K.
SWEEP: list[Shape] = [
    (1024, 4096), (4096, 4096), (16384, 4096), (65536, 4096), (4096, 8192), (16384, 8192), (4096, 5120),
    (4096, 7168), (4096, 4100), (2048, 16384),
]
DECODE: list[Shape] = [(m, n) for n in (4096, 8192) for m in (1, 16, 128, 512)]
EDGE: list[Shape] = [(1, 1), (7, 7), (83, 64), (7, 769), (7, 4100), (3, 5125), (2, 16384), (2, 20000),
                     (2, 5, 769), (0, 4096)]
VARIANTS = ("", "strided", "w-fp32", "nan")
# FLOPs per element: g = dy * w (1), sum of g * x (2), dx = (g - x * c) * rstd (3), dweight += dy * (x * rstd) (3);
# the fused op adds d residual_out (1).
FLOPS_PER_ELEMENT = 9
# Per activation dtype, for both outputs (dweight's atol grows with the rows, `tolerance_for`). Wider than the
# forward's: eager PyTorch rounds the normalized row, dx and dy * weight to 16 bits before the subtraction or sum
# that may cancel (measured on the CPU: HF's gradients reach 0.04-0.06 off float64 at bf16, dx and dweight, where
# ours stays within 0.01).
BWD_TOLERANCES = {
    torch.float32: Tolerance(atol=1e-4, rtol=1e-4),
    torch.float16: Tolerance(atol=8e-3, rtol=4e-3),
    torch.bfloat16: Tolerance(atol=6e-2, rtol=1.6e-2),
}


def rstd_of_rows(x: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """rstd as the forward saves it: float32, one value per row, shape x.shape[:-1]."""
    xf = x.float()
    return torch.rsqrt(xf.pow(2).mean(-1) + eps)


def _bwd_ref(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
             dres: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    xd, dyd, r = x.double(), dy.double(), rstd.double().unsqueeze(-1)
    g = dyd * weight.double()
    dx = r * (g - xd * r * r * (g * xd).mean(-1, keepdim=True))
    if dres is not None:
        dx = dx + dres.double()
    dweight = (dyd * xd * r).reshape(-1, x.shape[-1]).sum(0)
    return dx, dweight


class _BwdFamily:
    """What both backward contracts share: shape sets, variants, tolerances, rows."""

    def auto_regime(self, case: Case) -> str:
        return auto_regime_by_elements(case.shape)

    def rows(self, shape: Shape) -> int:
        # dweight sums over all rows: no row subset of the outputs belongs to a row subset of the inputs.
        return min(1, shape[0]) if shape else 1

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return inputs["weight"].dtype if name == "dweight" else inputs["dy"].dtype

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return BWD_TOLERANCES[dtype]

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        tol = BWD_TOLERANCES[case.dtype]  # the activations' dtype sets the error, for an fp32 weight too
        if output != "dweight":
            return tol
        # A sum of M terms of either sign: its error grows like sqrt(M) terms' while the sum itself may be ~0.
        rows = _numel(case.shape[:-1])
        return Tolerance(atol=tol.atol * math.sqrt(max(1, rows)), rtol=tol.rtol)

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case(s, dtype, "strided") for s in [(7, 769), (83, 64), (7, 4100), (2, 20000), (2, 5, 769)]]
        if dtype != torch.float32:
            cases += [Case((7, 769), dtype, "w-fp32"), Case((2, 20000), dtype, "w-fp32")]
        cases += [Case((7, 769), dtype, "nan"), Case((2, 20000), dtype, "nan")]
        if torch.device(device).type == "cuda":
            # (The harness compares whole outputs here: CUDA cases stay below 2^26 elements of float64 each.)
            cases += [Case((16384, 4096), dtype), Case((4096, 4100), dtype, "strided"), Case((1, 65536), dtype)]
        return cases

    def _common(self, case: Case, device, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        gen = _generator(device, seed)
        x = _rows_input(case.shape, case.dtype, case.variant, device, gen)
        weight = _weight(case.shape[-1], case.dtype, case.variant, device, gen)
        dy = _rows_input(case.shape, case.dtype, case.variant.replace("nan", ""), device, gen)
        return x, weight, dy


FIELDS: dict[str, Any] = {
    "dims": ("M", "N"), "ranks": (2, 3), "dtypes": (torch.bfloat16, torch.float16, torch.float32),
    "shape_sets": {"sweep": SWEEP, "decode": DECODE, "edge": EDGE, "cpu": CPU}, "variants": VARIANTS,
    "batch_inputs": (),
}


class RMSNormBwdSpec(_BwdFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="rmsnorm_bwd",
            summary="RMSNorm backward: dx and dweight from dy, the saved x, weight and float32 rstd",
            signature="fn(dy, x, weight, rstd) -> (dx, dweight)",
            outputs=("dx", "dweight"),
            **FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        x, weight, dy = self._common(case, device, seed)
        return {"dy": dy, "x": x, "weight": weight, "rstd": rstd_of_rows(x)}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return _bwd_ref(inputs["dy"], inputs["x"], inputs["weight"], inputs["rstd"], None)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(fn(inputs["dy"], inputs["x"], inputs["weight"], inputs["rstd"]))

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        n, elems, rows = shape[-1], _numel(shape), _numel(shape[:-1])
        # Read dy and x, write dx; read the weight and rstd; write dweight.
        return Cost(bytes=3 * elems * dtype.itemsize + 2 * _weight_bytes(n, dtype, variant) + 4 * rows,
                    flops=FLOPS_PER_ELEMENT * elems)


class FusedAddRMSNormBwdSpec(_BwdFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="fused_add_rmsnorm_bwd",
            summary="fused add + RMSNorm backward: dx (= d residual) and dweight from dy, d residual_out, the "
                    "saved residual_out, weight and float32 rstd",
            signature="fn(dy, dresidual_out, residual_out, weight, rstd) -> (dx, dweight)",
            outputs=("dx", "dweight"),
            **FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        x, weight, dy = self._common(case, device, seed)
        dres = _rows_input(case.shape, case.dtype, case.variant.replace("nan", ""), device, _generator(device,
                                                                                                        seed + 1))
        return {"dy": dy, "dresidual_out": dres, "residual_out": x, "weight": weight, "rstd": rstd_of_rows(x)}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return _bwd_ref(inputs["dy"], inputs["residual_out"], inputs["weight"], inputs["rstd"],
                        inputs["dresidual_out"])

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(fn(inputs["dy"], inputs["dresidual_out"], inputs["residual_out"], inputs["weight"],
                        inputs["rstd"]))

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        n, elems, rows = shape[-1], _numel(shape), _numel(shape[:-1])
        # Read dy, d residual_out and residual_out, write dx; read the weight and rstd; write dweight.
        return Cost(bytes=4 * elems * dtype.itemsize + 2 * _weight_bytes(n, dtype, variant) + 4 * rows,
                    flops=(FLOPS_PER_ELEMENT + 1) * elems)


register_spec(RMSNormBwdSpec())
register_spec(FusedAddRMSNormBwdSpec())


def _ours() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.backward import rms_norm_backward

    return lambda dy, x, weight, rstd: rms_norm_backward(dy, x, weight, rstd)


def _ours_fused() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.backward import fused_add_rms_norm_backward

    return lambda dy, dres, res_out, weight, rstd: fused_add_rms_norm_backward(dy, dres, res_out, weight, rstd)


register_impl("rmsnorm_bwd", "ridgeline", "ours", _ours, description="ridgeline Triton backward (reads rstd)")
register_impl("fused_add_rmsnorm_bwd", "ridgeline", "ours", _ours_fused,
              description="ridgeline Triton backward (reads rstd, adds d residual_out)")
