"""Contracts of RMSNorm and fused residual-add + RMSNorm.

rmsnorm:            out = x / sqrt(mean(x^2) + eps) * weight            fn(x, weight, eps) -> out
fused_add_rmsnorm:  residual_out = round(x + residual); out = rmsnorm(residual_out)
                                                     fn(x, residual, weight, eps) -> (out, residual_out)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.models import hidden_sizes
from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

EPS = 1e-6
# Rows of the "strided" variant sit in a buffer this many columns wider: an odd pad makes the row stride
# unaligned, the hardest case for vector loads.
STRIDE_PAD = 13

# Shapes measured in ../shared/FACTS.md on the H200, plus unaligned and wide hidden sizes.
SWEEP: list[Shape] = [
    (1, 4096), (16, 4096), (128, 4096), (1024, 4096), (4096, 4096), (16384, 4096), (65536, 4096),
    (1024, 8192), (4096, 8192), (16384, 8192), (4096, 5120), (4096, 7168), (4096, 16384), (2048, 65536),
    (4096, 4100), (4096, 5125),
]
DECODE: list[Shape] = [(m, n) for n in (4096, 8192) for m in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
EDGE: list[Shape] = [
    (1, 1), (7, 7), (83, 64), (7, 769), (7, 4100), (7, 5125), (1, 16384), (3, 20000), (1, 65536),
    (2, 100000), (2, 5, 769), (0, 4096),
]
# Real models' hidden sizes (ridgeline.core.models: Llama-3.1-8B/70B, Qwen2.5-7B, Mistral-7B, Gemma-3-27B,
# DeepSeek-V3) at decode batches and prefill token counts.
MODELS: list[Shape] = [(m, n) for n in hidden_sizes() for m in (1, 32, 256, 4096, 16384)]
# Small enough that the CPU interpreter benches the whole set in about a minute.
CPU: list[Shape] = [(1, 4096), (16, 4096), (64, 4096), (64, 4100), (16, 8192)]
# More than 2^31 elements: 64-bit offsets or bust (CUDA only).
HUGE: Shape = (2**31 // 4096 + 1, 4096)

VARIANTS = ("", "strided", "w-fp32", "nan", "inf")

TOLERANCES = {
    torch.float32: Tolerance(atol=1e-5, rtol=1e-5),
    # Two roundings (one ulp) must pass: HF-style peers round y before multiplying by the weight.
    torch.float16: Tolerance(atol=1e-3, rtol=2e-3),
    torch.bfloat16: Tolerance(atol=1e-2, rtol=1.6e-2),
}


def _rand(shape: Shape, dtype: torch.dtype, device: torch.device | str, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _generator(device: torch.device | str, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


def _rows_input(shape: Shape, dtype: torch.dtype, variant: str, device, gen) -> torch.Tensor:
    if "strided" in variant:
        wide = (*shape[:-1], shape[-1] + STRIDE_PAD)
        x = _rand(wide, dtype, device, gen)[..., : shape[-1]]
    else:
        x = _rand(shape, dtype, device, gen)
    lead0, lead_last = (0,) * (x.dim() - 1), (-1,) * (x.dim() - 1)
    if "nan" in variant and x.numel():
        x[(*lead0, shape[-1] // 2)] = float("nan")
    if "inf" in variant and x.numel():
        x[(*lead0, 0)] = float("inf")
        x[(*lead_last, -1)] = float("-inf")
    return x


def _weight(n: int, dtype: torch.dtype, variant: str, device, gen) -> torch.Tensor:
    wdtype = torch.float32 if "w-fp32" in variant else dtype
    # Around 1 with spread, like trained norm weights; never all ones (that would hide a skipped multiply).
    return (1.0 + 0.5 * torch.randn((n,), generator=gen, device=device, dtype=torch.float32)).to(wdtype)


def _rms_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def rounded_sum(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """residual_out as the contract defines it: the float32 sum rounded (to nearest even) to x's dtype, which is
    what every engine stores (and torch's own 16-bit add computes). Checked exactly, not within a tolerance."""
    return (x.float() + residual.float()).to(x.dtype)


EXACT = Tolerance(atol=0.0, rtol=0.0)


def _weight_bytes(n: int, dtype: torch.dtype, variant: str) -> int:
    return n * (4 if "w-fp32" in variant else dtype.itemsize)


# "auto" regime: hot graph replay below this many elements (launch-bound shapes), cold eager above.
AUTO_GRAPH_BELOW_ELEMENTS = 4 * 1024 * 1024


def auto_regime_by_elements(shape: Shape) -> str:
    return "graph-hot" if _numel(shape) < AUTO_GRAPH_BELOW_ELEMENTS else "cold-eager"


class _RMSNormFamily:
    """What both ops share: tolerances, edge cases, and one kernel with one launch heuristic."""

    def auto_regime(self, case: Case) -> str:
        return auto_regime_by_elements(case.shape)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return EXACT if output == "residual_out" else TOLERANCES[dtype]

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        return _edge_cases(self, dtype, device)

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.rmsnorm.launch import config_for, grid_for

        rows = _numel(case.shape[:-1])
        cfg = config_for(case.shape[-1], case.dtype, rows, fused=self.name == "fused_add_rmsnorm",
                         weight_dtype=torch.float32 if case.variant == "w-fp32" else None)
        return {"config": cfg.describe(), "num_warps": cfg.num_warps, "block_n": cfg.block_n,
                "grid": grid_for(rows, cfg, torch.device(device)) if rows else 0}


# What the plain and the fused op's contracts share: rows of N (a leading batch dim folds into M), dtypes, shape sets.
FAMILY_FIELDS: dict[str, Any] = {
    "dims": ("M", "N"), "ranks": (2, 3), "dtypes": (torch.bfloat16, torch.float16, torch.float32),
    "shape_sets": {"sweep": SWEEP, "decode": DECODE, "models": MODELS, "edge": EDGE, "cpu": CPU},
    "variants": VARIANTS,
}


class RMSNormSpec(_RMSNormFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="rmsnorm",
            summary="RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * weight",
            signature="fn(x, weight, eps) -> out",
            outputs=("out",),
            batch_inputs=("x",),
            **FAMILY_FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _rows_input(case.shape, case.dtype, case.variant, device, gen)
        return {"x": x, "weight": _weight(case.shape[-1], case.dtype, case.variant, device, gen), "eps": EPS}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (_rms_ref(inputs["x"], inputs["weight"], inputs["eps"]),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"], inputs["weight"], inputs["eps"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        n, elems = shape[-1], _numel(shape)
        # Read x once, write y once, read the weight once; square, accumulate, scale, weight: 4 FLOPs/element.
        return Cost(bytes=2 * elems * dtype.itemsize + _weight_bytes(n, dtype, variant), flops=4 * elems)


class FusedAddRMSNormSpec(_RMSNormFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="fused_add_rmsnorm",
            summary="residual_out = x + residual; out = RMSNorm(residual_out) (one pass)",
            signature="fn(x, residual, weight, eps) -> (out, residual_out)",
            outputs=("out", "residual_out"),
            batch_inputs=("x", "residual"),
            **FAMILY_FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _rows_input(case.shape, case.dtype, case.variant, device, gen)
        residual = _rows_input(case.shape, case.dtype, case.variant.replace("nan", "").replace("inf", ""),
                               device, gen)
        weight = _weight(case.shape[-1], case.dtype, case.variant, device, gen)
        return {"x": x, "residual": residual, "weight": weight, "eps": EPS}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        residual_out = rounded_sum(inputs["x"], inputs["residual"])
        return _rms_ref(residual_out, inputs["weight"], inputs["eps"]), residual_out.double()

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        out = fn(inputs["x"], inputs["residual"], inputs["weight"], inputs["eps"])
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("fused_add_rmsnorm implementation must return (out, residual_out)")
        return tuple(out)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        n, elems = shape[-1], _numel(shape)
        # Read x and residual, write out and residual_out; add + the 4 FLOPs of the norm per element.
        return Cost(bytes=4 * elems * dtype.itemsize + _weight_bytes(n, dtype, variant), flops=5 * elems)



def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _edge_cases(spec: OpSpec, dtype: torch.dtype, device) -> list[Case]:
    cases = [Case(s, dtype) for s in spec.shape_sets["edge"]]
    cases += [Case(s, dtype, "strided") for s in [(7, 769), (83, 64), (7, 4100), (3, 20000), (2, 5, 769)]]
    if dtype != torch.float32:
        cases += [Case((7, 769), dtype, "w-fp32"), Case((3, 20000), dtype, "w-fp32")]
    cases += [Case((7, 769), dtype, "nan"), Case((7, 4100), dtype, "inf"), Case((3, 20000), dtype, "nan")]
    if torch.device(device).type == "cuda":
        cases += [Case((65536, 4096), dtype), Case((4096, 4100), dtype, "strided")]
        if dtype.itemsize == 2:  # 64-bit offsets do not depend on the dtype; 16-bit keeps the case to 4.3 GB
            cases.append(Case(HUGE, dtype))
    return cases


register_spec(RMSNormSpec())
register_spec(FusedAddRMSNormSpec())


def _ours_rms() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.launch import rms_norm

    return lambda x, weight, eps: rms_norm(x, weight, eps)


def _ours_fused() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.launch import fused_add_rms_norm

    return lambda x, residual, weight, eps: fused_add_rms_norm(x, residual, weight, eps)


def _ours_fused_inplace() -> Callable[..., Any]:
    from ridgeline.ops.rmsnorm.launch import fused_add_rms_norm

    return lambda x, residual, weight, eps: fused_add_rms_norm(x, residual, weight, eps, inplace=True)


register_impl("rmsnorm", "ridgeline", "ours", _ours_rms, description="ridgeline Triton kernel")
register_impl("fused_add_rmsnorm", "ridgeline", "ours", _ours_fused, description="ridgeline Triton kernel")
register_impl(
    "fused_add_rmsnorm", "ridgeline-inplace", "ours", _ours_fused_inplace, mutates=("x", "residual"),
    description="ridgeline Triton kernel, writing into x and residual (vLLM convention)",
)
