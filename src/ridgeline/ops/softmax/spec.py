"""Contracts of softmax over the last dim and of its backward.

softmax:      y = exp(x - max(x)) / sum(exp(x - max(x)))           fn(x) -> out
softmax_bwd:  dx = y * (dy - sum(dy * y))                            fn(y, dy) -> dx

The backward's inputs are what the standard autograd formulation saves: torch's softmax saves its output y (not
x), and the backward reads y and the incoming gradient dy (torch._softmax_backward_data(dy, y, -1, dtype)). So
every implementation of softmax_bwd (ours, the peers' backward entry points) is timed on the same work: read y
and dy, write dx. Both take rows of 1 to 262144 columns (a leading batch dim folds into the rows), fp32, fp16
or bf16, output in the input's dtype, float32 math.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

# Rows of the "strided" variant sit in a buffer this many columns wider: an odd pad makes the row stride
# unaligned, the hardest case for vector loads.
STRIDE_PAD = 13
# Logits with spread (a trained LM head's are a few units wide): never all equal, never zeros.
LOGIT_SCALE = 2.0

# ~10 shapes, bf16 by default, so the device steps fit: mid, large, vocabulary rows (Llama-3 128256, Qwen 151936),
# 262144 columns and an unaligned width.
SWEEP: list[Shape] = [
    (4096, 1024), (4096, 4096), (16384, 4096), (8192, 8192), (1024, 32768), (512, 65536), (256, 128256),
    (128, 151936), (64, 262144), (4096, 4100),
]
DECODE: list[Shape] = [(m, n) for n in (32000, 128256) for m in (1, 16, 64, 256)]
EDGE: list[Shape] = [
    (1, 1), (7, 7), (33, 100), (5, 769), (3, 4100), (2, 5120), (2, 20000), (1, 40000), (1, 70001), (2, 3, 64),
    (0, 4096),
]
CPU: list[Shape] = [(1, 4096), (16, 4096), (64, 1000), (4, 32000), (2, 70000)]
# More than 2^31 elements: 64-bit offsets or bust (CUDA only). Two layouts: one pass and split rows.
HUGE: Shape = (2**31 // 4096 + 1, 4096)
HUGE_WIDE: Shape = (2**31 // 131072 + 1, 131072)

VARIANTS = ("", "strided", "nan", "inf")

TOLERANCES = {
    torch.float32: Tolerance(atol=1e-6, rtol=1e-5),
    # One rounding of the float32 result, plus float32 exp/sum error: a half ulp of the dtype must pass.
    torch.float16: Tolerance(atol=1e-5, rtol=2e-3),
    torch.bfloat16: Tolerance(atol=1e-5, rtol=1.6e-2),
}


def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _generator(device: torch.device | str, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


def _rand(shape: Shape, dtype: torch.dtype, variant: str, device, gen: torch.Generator,
          scale: float = 1.0) -> torch.Tensor:
    if "strided" in variant:
        wide = (*shape[:-1], shape[-1] + STRIDE_PAD)
        return (scale * torch.randn(wide, generator=gen, device=device)).to(dtype)[..., : shape[-1]]
    return (scale * torch.randn(shape, generator=gen, device=device)).to(dtype)


def _specials(x: torch.Tensor, variant: str) -> torch.Tensor:
    """nan: one NaN in the first row; inf: +inf in the first row (that row is NaN, as torch gives), -inf entries
    in the last row (they give 0, the rest of the row stays finite)."""
    if not x.numel():
        return x
    lead0, lead_last = (0,) * (x.dim() - 1), (-1,) * (x.dim() - 1)
    n = x.shape[-1]
    if "nan" in variant:
        x[(*lead0, n // 2)] = float("nan")
    if "inf" in variant:
        x[(*lead0, 0)] = float("inf")
        x[(*lead_last, n - 1)] = float("-inf")
        x[(*lead_last, n // 3)] = float("-inf")
    return x


def _edge_cases(spec: OpSpec, dtype: torch.dtype, device) -> list[Case]:
    cases = [Case(s, dtype) for s in spec.shape_sets["edge"]]
    cases += [Case(s, dtype, "strided") for s in [(5, 769), (33, 100), (3, 4100), (1, 70001), (2, 3, 64)]]
    cases += [Case((5, 769), dtype, "nan"), Case((3, 4100), dtype, "inf"), Case((2, 70001), dtype, "inf")]
    if torch.device(device).type == "cuda":
        cases += [Case((16384, 4096), dtype), Case((256, 128256), dtype, "strided"), Case((4096, 4100), dtype)]
    return cases


class _SoftmaxFamily:
    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return TOLERANCES[dtype]

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        return _edge_cases(self, dtype, device)

    def auto_regime(self, case: Case) -> str:
        return "graph-hot" if _numel(case.shape) < 4 * 1024 * 1024 else "cold-eager"

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.softmax.rules import Case as RuleCase
        from ridgeline.ops.softmax.rules import config_for, grid_for, rule_for

        bwd = self.name == "softmax_bwd"
        n, rows = case.shape[-1], _numel(case.shape[:-1])
        cfg = config_for(n, case.dtype.itemsize, bwd)
        return {"config": cfg.describe(), "rule": rule_for(RuleCase(n, case.dtype.itemsize, bwd)).name,
                "num_warps": cfg.num_warps, "grid": grid_for(rows, n, case.dtype.itemsize, cfg,
                                                             torch.device(device), bwd) if rows and n else 0}


FIELDS: dict[str, Any] = {
    "dims": ("M", "N"), "ranks": (2, 3), "dtypes": (torch.bfloat16, torch.float16, torch.float32),
    "shape_sets": {"sweep": SWEEP, "decode": DECODE, "edge": EDGE, "cpu": CPU}, "variants": VARIANTS,
}


class SoftmaxSpec(_SoftmaxFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="softmax",
            summary="softmax over the last dim: exp(x - max) / sum(exp(x - max)), float32 math",
            signature="fn(x) -> out",
            outputs=("out",),
            batch_inputs=("x",),
            **FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _rand(case.shape, case.dtype, case.variant, device, gen, LOGIT_SCALE)
        return {"x": _specials(x, case.variant)}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (torch.softmax(inputs["x"].double(), dim=-1),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems = _numel(shape)
        # Read x once, write y once; per element: max, subtract, exp, sum, scale (5 FLOPs on the CUDA cores).
        return Cost(bytes=2 * elems * dtype.itemsize, flops=5 * elems)


class SoftmaxBwdSpec(_SoftmaxFamily, OpSpec):
    """dx = y * (dy - sum(dy * y)) from the saved output y and the incoming gradient dy (see the module doc)."""

    def __init__(self) -> None:
        super().__init__(
            name="softmax_bwd",
            summary="softmax backward from the saved output: dx = y * (dy - sum(dy * y))",
            signature="fn(y, dy) -> dx",
            outputs=("dx",),
            batch_inputs=("y", "dy"),
            **FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _rand(case.shape, torch.float32, case.variant, device, gen, LOGIT_SCALE)
        # y as a forward would have stored it: softmax in float32, rounded once to the dtype (a strided view
        # stays a strided view of a wider buffer).
        y = torch.empty_strided(x.shape, x.stride(), dtype=case.dtype, device=x.device)
        y.copy_(torch.softmax(x, dim=-1))
        dy = _specials(_rand(case.shape, case.dtype, case.variant, device, gen), case.variant)
        return {"y": y, "dy": dy}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        y, dy = inputs["y"].double(), inputs["dy"].double()
        return (y * (dy - (dy * y).sum(-1, keepdim=True)),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["y"], inputs["dy"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems = _numel(shape)
        # Read y and dy once, write dx once; per element: multiply-add of the dot, subtract, multiply.
        return Cost(bytes=3 * elems * dtype.itemsize, flops=4 * elems)


register_spec(SoftmaxSpec())
register_spec(SoftmaxBwdSpec())


def _ours_fwd() -> Callable[..., Any]:
    from ridgeline.ops.softmax.launch import softmax

    return lambda x: softmax(x)


def _ours_bwd() -> Callable[..., Any]:
    from ridgeline.ops.softmax.launch import softmax_backward

    return lambda y, dy: softmax_backward(y, dy)


register_impl("softmax", "ridgeline", "ours", _ours_fwd, description="ridgeline Triton kernel")
register_impl("softmax_bwd", "ridgeline", "ours", _ours_bwd, description="ridgeline Triton kernel")
