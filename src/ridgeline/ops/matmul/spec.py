"""The contract of the bf16/fp16 GEMM: y = x @ w^T (+ bias), fp32 accumulation, rounded once to the output dtype.

A case's shape is (M, N, K), or (B, M, N, K) with x of shape (B, M, K) (leading dims of x fold into M).
Layouts (variants; combine with "+"):
  ""        x [M, K], w [N, K] (nn.Linear's weight), y = x @ w^T          fn(x, w, bias) -> y
  "kn"      x [M, K], b [K, N] (the plain x @ b layout)                   fn(x, w, bias, layout="kn") -> y
  "bias"    a bias [N] is added (in fp32, before the one rounding)
  "strided" x's rows sit in a wider buffer (row stride K + STRIDE_PAD): read in place
  "wt"      the weight is a transposed view (nt: w = buffer[K, N].T; kn: b = buffer[N, K].T), as autograd and
            weight-tied heads pass it
Reference: float64 x @ w^T + bias. Cost: bytes = (M K + N K) s_in + M N s_out (+ N s_in for the bias), the fewest
that must move (each operand read once, y written once); FLOPs = 2 M N K held against the probed tensor-core rate
of the input dtype (unit "bf16" / "fp16"). Peer figures measured on the H200 (FACTS.md, 2026-12-01): cuBLAS
F.linear 683-747 TFLOP/s at M >= 1024 of the Llama-3 layers; at M = 1 1762 GB/s of weight on 4096x4096.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance, dtype_name

STRIDE_PAD = 24  # (a multiple of 8 elements keeps x's rows 16-byte aligned, so "strided" still takes TMA)

# (N, K) of real layers: Llama-3-8B and Llama-3-70B (issue 24).
LAYERS: dict[str, tuple[int, int]] = {
    "8b-qkv": (6144, 4096), "8b-o": (4096, 4096), "8b-gate_up": (28672, 4096), "8b-down": (4096, 14336),
    "70b-qkv": (10240, 8192), "70b-o": (8192, 8192), "70b-gate_up": (57344, 8192), "70b-down": (8192, 28672),
}
ISSUE_M = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# The H200 sweep (device budget: 24 cells): decode, small and large prefill on four layers, the largest M on two,
# and two squares.
_SWEEP_LAYERS = ("8b-o", "8b-gate_up", "8b-down", "70b-qkv")
SWEEP: list[Shape] = (
    [(m, *LAYERS[name]) for name in _SWEEP_LAYERS for m in (1, 16, 128, 1024, 4096)]
    + [(16384, *LAYERS["8b-o"]), (16384, *LAYERS["70b-qkv"]), (4096, 4096, 4096), (8192, 8192, 8192)]
)
FULL: list[Shape] = [(m, *nk) for nk in LAYERS.values() for m in ISSUE_M] + [(s, s, s) for s in (4096, 8192, 16384)]
DECODE: list[Shape] = [(m, *LAYERS[name]) for name in ("8b-o", "8b-gate_up", "70b-down") for m in (1, 4, 16, 32, 64)]
EDGE: list[Shape] = [(1, 1, 1), (7, 9, 13), (0, 16, 32), (5, 8, 0), (33, 17, 70), (65, 40, 24), (3, 2, 16, 24),
                     (1, 40, 200)]
CPU: list[Shape] = [(16, 64, 64), (1, 96, 128), (100, 48, 80), (64, 64, 64)]

# bf16 / fp16 output: the one rounding of y (half an ulp of the output, relative) plus the accumulation, which
# grows with K: fp32 products and sums (cuBLAS may reduce split-K partials in the input precision, so a peer's
# error reaches a few output ulps of a partial sum): atol = eps_out * (1 + sqrt(K) / 32) on y of unit scale.
EPS = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10, torch.float32: 2.0**-20}


def numel(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def mnk(shape: Shape) -> tuple[int, int, int]:
    """(M, N, K) of a case shape: M folds the leading dims of x."""
    return numel(shape[:-2]), shape[-2], shape[-1]


def parts(variant: str) -> set[str]:
    return set(variant.split("+")) if variant else set()


def layout_of(variant: str) -> str:
    return "kn" if "kn" in parts(variant) else "nt"


def matmul_tolerance(k: int, out_dtype: torch.dtype) -> Tolerance:
    eps = EPS[out_dtype]
    return Tolerance(atol=eps * (1 + math.sqrt(max(k, 1)) / 32), rtol=eps)


def reference_matmul(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, layout: str) -> torch.Tensor:
    xd, wd = x.double(), w.double()
    y = xd @ (wd.T if layout == "nt" else wd)
    return y + bias.double() if bias is not None else y


def make_matmul_inputs(case: Case, device: torch.device | str, seed: int) -> Inputs:
    """x ~ N(0, 1), w ~ N(0, 1/K) (y of unit scale at every K), bias ~ N(0, 1/4): never zeros."""
    gen = torch.Generator(device=torch.device(device)).manual_seed(seed)
    lead, (n, k) = case.shape[:-2], case.shape[-2:]
    p, dtype = parts(case.variant), case.dtype

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * scale).to(dtype)

    if "strided" in p:
        x = randn(*lead, k + STRIDE_PAD)[..., :k]
    else:
        x = randn(*lead, k)
    scale = 1.0 / math.sqrt(max(k, 1))
    layout = layout_of(case.variant)
    if layout == "nt":
        w = randn(k, n, scale=scale).T if "wt" in p else randn(n, k, scale=scale)
    else:
        w = randn(n, k, scale=scale).T if "wt" in p else randn(k, n, scale=scale)
    bias = randn(n, scale=0.5) if "bias" in p else None
    return {"x": x, "w": w, "bias": bias, "layout": layout}


class MatmulSpec(OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="matmul",
            summary="y = x @ w^T (+ bias), bf16/fp16 in, fp32 accumulation (variant kn: y = x @ b)",
            signature="fn(x, w, bias) -> y",
            outputs=("y",),
            batch_inputs=("x",),
            dtypes=(torch.bfloat16, torch.float16),
            shape_sets={"sweep": SWEEP, "full": FULL, "decode": DECODE, "edge": EDGE, "cpu": CPU},
            variants=("", "kn", "bias", "strided", "wt"),
            dims=("M", "N", "K"),
            ranks=(3, 4),
        )

    def make_inputs(self, case: Case, device: torch.device | str, seed: int) -> Inputs:
        return make_matmul_inputs(case, device, seed)

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (reference_matmul(inputs["x"], inputs["w"], inputs["bias"], inputs["layout"]),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        if inputs["layout"] == "nt":
            return (fn(inputs["x"], inputs["w"], inputs["bias"]),)
        return (fn(inputs["x"], inputs["w"], inputs["bias"], layout=inputs["layout"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        m, n, k = mnk(shape)
        s = dtype.itemsize
        bias = n * s if "bias" in parts(variant) else 0
        return Cost(bytes=(m * k + n * k + m * n) * s + bias, flops=2 * m * n * k, unit=dtype_name(dtype))

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return matmul_tolerance(4096, dtype)

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        return matmul_tolerance(case.shape[-1], dtype)

    def edge_cases(self, dtype: torch.dtype, device: torch.device | str) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case(s, dtype, v) for v in ("kn", "bias", "strided", "wt", "kn+wt", "kn+bias+strided")
                  for s in ((7, 9, 13), (33, 17, 70), (2, 3, 24, 40))]
        cases += [Case((5, 8, 0), dtype, "bias"), Case((0, 16, 32), dtype, "kn+bias")]
        if torch.device(device).type == "cuda":  # the tile paths at real sizes, aligned and not
            cases += [Case((4096, 4096, 4096), dtype, "bias"), Case((1, 4096, 4096), dtype, "kn"),
                      Case((1000, 1000, 1000), dtype, "strided"), Case((64, 28672, 4096), dtype, "wt"),
                      Case((2049, 4097, 1031), dtype, "kn+bias"), Case((300, 2, 4096, 4104), dtype, "wt+bias")]
        return cases

    def launch_info(self, case: Case, device: torch.device) -> dict[str, Any] | None:
        from ridgeline.ops.matmul.rules import describe_choice

        m, n, k = mnk(case.shape)
        return describe_choice(m, n, k, case.dtype, device)


register_spec(MatmulSpec())


def _ours() -> Callable[..., Any]:
    from ridgeline.ops.matmul.launch import matmul

    return matmul


register_impl("matmul", "ridgeline", "ours", _ours,
              description="ridgeline Triton GEMM: persistent TMA-fed tiles (large M), skinny tiles (M <= 64)")
