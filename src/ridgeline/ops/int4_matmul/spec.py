"""Contracts of int4 weight-only GEMM and its weight packing.

int4_matmul: y[M, N] = x[M, K] @ w_deq^T, w_deq = q * scales per group of 128 along K (pack.py has the format)
             fn(x, w_packed, scales, group_size) -> y
pack_int4:   (w_packed, scales) = quantize(w[N, K]) by pack.py's rule, checked exactly
             fn(w, group_size) -> (w_packed uint8 [N, K/2], scales [N, K/group])

The GEMM's reference is computed in float64 from the DEQUANTIZED weight, so quantization error is not counted; the
shape is (M, N, K). Its inputs: x ~ N(0, 1) and a weight ~ N(0, 1) quantized by pack_int4 (so |w_deq| ~ 1 and
|y| ~ sqrt(K)). Peers that run in bf16 round w_deq to bf16 (a 4-bit integer times an 8-bit scale needs up to 12
bits): the K-dependent atol covers that rounding, which adds an error ~ 2^-9 * sqrt(K / 3) per output.
Issue 24's figures for the peers (cited from ../shared/FACTS.md, H200 2026-12-01): torch's int4 kernel is 1.7-2.0x
faster than bf16 cuBLAS at M = 1, 0.5-0.8x at M = 16 and 0.1x at M = 128; cuBLAS M = 1 reads 1762 GB/s of weight
on 4096x4096 and 3665 GB/s on 8192x28672.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance
from ridgeline.ops.int4_matmul.pack import GroupSizeError, pack_int4, quantize_groups, unpack_int4

GROUP = 128
# Llama-3-8B / 70B layers as (N, K): qkv, o, gate_up, down.
LLAMA_8B = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]
LLAMA_70B = [(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)]
# 24 cells: decode batches on every layer kind of both models, small prefill on a few.
SWEEP: list[Shape] = (
    [(m, n, k) for m in (1, 16) for (n, k) in LLAMA_8B + LLAMA_70B]
    + [(m, 4096, 4096) for m in (4, 64, 128, 256)]
    + [(m, 8192, 28672) for m in (4, 64)]
    + [(m, 28672, 4096) for m in (64, 256)]
)
DECODE: list[Shape] = [(m, n, k) for m in (1, 2, 4, 8, 16, 32, 64) for (n, k) in ((4096, 4096), (8192, 28672))]
PREFILL: list[Shape] = [(m, n, k) for m in (128, 256, 512, 1024) for (n, k) in ((4096, 4096), (28672, 4096))]
MODELS: list[Shape] = [(m, n, k) for m in (1, 2, 4, 8, 16, 32, 64, 128, 256) for (n, k) in LLAMA_8B + LLAMA_70B]
# Odd M and N (not tile multiples), K of 1 group, M = 0; small enough for the interpreter.
EDGE: list[Shape] = [(1, 16, 128), (3, 40, 256), (17, 72, 384), (5, 1, 128), (0, 64, 256), (2, 33, 512)]
CPU: list[Shape] = [(1, 64, 512), (4, 128, 256), (16, 64, 384), (33, 96, 256)]
VARIANTS = ("", "strided", "transposed", "scales-fp32")
STRIDE_PAD = 24

RTOL = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 1e-5}
# Per sqrt(K): bf16/fp16 cover peers' rounding of w_deq to 16 bits (7 standard deviations); fp32 the accumulation.
ATOL_PER_SQRT_K = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10, torch.float32: 1e-5}


def _gen(device, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


def _x(m: int, k: int, dtype: torch.dtype, variant: str, device, gen) -> torch.Tensor:
    if "transposed" in variant:  # column-major x: a transposed [K, M] buffer
        return torch.randn((k, m), generator=gen, device=device).to(dtype).t()
    if "strided" in variant:  # rows of a wider buffer
        return torch.randn((m, k + STRIDE_PAD), generator=gen, device=device).to(dtype)[:, :k]
    return torch.randn((m, k), generator=gen, device=device).to(dtype)


class Int4MatmulSpec(OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="int4_matmul",
            summary="int4 weight-only GEMM: y = x @ (q * scale)^T, symmetric int4, groups of 128 along K",
            signature="fn(x, w_packed, scales, group_size) -> y",
            outputs=("y",),
            batch_inputs=("x",),
            dtypes=(torch.bfloat16, torch.float16, torch.float32),
            shape_sets={"sweep": SWEEP, "decode": DECODE, "prefill": PREFILL, "models": MODELS, "edge": EDGE,
                        "cpu": CPU},
            variants=VARIANTS,
            dims=("M", "N", "K"),
            # A packed int4 weight is loaded once and reused: peers that repack it (torch's tinygemm layout) or
            # dequantize it (the cuBLAS baseline) do so once per weight, as in serving; x is still refilled.
            static_inputs=("w_packed", "scales"),
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        m, n, k = case.shape
        gen = _gen(device, seed)
        x = _x(m, k, case.dtype, case.variant, device, gen)
        wdtype = torch.bfloat16 if case.dtype == torch.float32 else case.dtype
        w = torch.randn((n, k), generator=gen, device=device).to(wdtype)
        w_packed, scales = pack_int4(w, GROUP)
        if "scales-fp32" in case.variant:
            scales = scales.float()
        return {"x": x, "w_packed": w_packed, "scales": scales, "group_size": GROUP}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        w = unpack_int4(inputs["w_packed"], inputs["scales"], inputs["group_size"])
        return (inputs["x"].double() @ w.t(),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"], inputs["w_packed"], inputs["scales"], inputs["group_size"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        m, n, k = shape
        scale_bytes = 4 if "scales-fp32" in variant else 2
        # Read x, the packed weight (K*N/2) and the scales once; write y once. 2 FLOPs per multiply-add.
        nbytes = m * k * dtype.itemsize + n * k // 2 + n * (k // GROUP) * scale_bytes + m * n * dtype.itemsize
        unit = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32")
        return Cost(bytes=nbytes, flops=2 * m * n * k, unit=unit)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return Tolerance(atol=ATOL_PER_SQRT_K[dtype], rtol=RTOL[dtype])

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        k = case.shape[-1]
        return Tolerance(atol=ATOL_PER_SQRT_K[case.dtype] * math.sqrt(max(k, 1)), rtol=RTOL[case.dtype])

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case((5, 48, 256), dtype, v) for v in ("strided", "transposed", "scales-fp32")]
        if torch.device(device).type == "cuda":
            cases += [Case((1, 4096, 4096), dtype), Case((16, 28672, 4096), dtype), Case((77, 4100, 8192), dtype),
                      Case((300, 6144, 4096), dtype, "strided"), Case((1024, 4096, 4096), dtype)]
        return cases

    def rows(self, shape: Shape) -> int:
        return shape[0]

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.int4_matmul.launch import launch_plan

        m, n, k = case.shape
        plan = launch_plan(max(m, 1), n, k, GROUP, torch.device(device))
        return {k_: v for k_, v in plan.items() if k_ != "cfg"}


class PackInt4Spec(OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="pack_int4",
            summary="int4 weight packing: per-group scale = amax/7, q = round(w/scale) clamped to -8..7, "
                    "two nibbles per byte along K in MMA-pair word order",
            signature="fn(w, group_size) -> (w_packed, scales)",
            outputs=("w_packed", "scales"),
            batch_inputs=("w",),
            dtypes=(torch.bfloat16, torch.float16, torch.float32),
            shape_sets={"sweep": [(n, k) for n, k in LLAMA_8B], "edge": [(1, 128), (7, 256), (0, 128), (33, 384)],
                        "cpu": [(64, 512), (96, 256)]},
            dims=("N", "K"),
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        n, k = case.shape
        w = torch.randn((n, k), generator=_gen(device, seed), device=device).to(case.dtype)
        if n and k >= 2 * GROUP:
            w[0, GROUP: 2 * GROUP] = 0  # an all-zero group: scale 0, q 0
        return {"w": w, "group_size": GROUP}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        w, g = inputs["w"], inputs["group_size"]
        n, k = w.shape
        # float64 quantization: the scale is amax / 7 rounded to float32 and then to w's dtype (the contract).
        wd = w.double().reshape(n, k // g, g)
        scales = (wd.abs().amax(-1) / 7).to(torch.float32).to(w.dtype).double()
        s = scales[..., None]
        q = torch.where(s == 0, torch.zeros_like(wd), torch.round(wd / torch.where(s == 0, 1.0, s))).clamp(-8, 7)
        u = (q.reshape(n, k // 8, 8) + 8).to(torch.int64)
        # The word order, written out: bytes 0..3 of word i = k 8i + (0, 2), (4, 6), (1, 3), (5, 7) (low, high).
        packed = torch.stack([u[..., lo] | (u[..., hi] << 4) for lo, hi in ((0, 2), (4, 6), (1, 3), (5, 7))], -1)
        return packed.reshape(n, k // 2).double(), scales

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(fn(inputs["w"], inputs["group_size"]))

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return torch.uint8 if name == "w_packed" else inputs["w"].dtype

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        n, k = shape
        # Read w, write the packed bytes and the scales; abs, max, divide, round, pack: ~5 FLOPs per element.
        return Cost(bytes=n * k * dtype.itemsize + n * k // 2 + n * (k // GROUP) * dtype.itemsize, flops=5 * n * k)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return Tolerance(atol=0.0, rtol=0.0)


register_spec(Int4MatmulSpec())
register_spec(PackInt4Spec())


def _ours() -> Callable[..., Any]:
    from ridgeline.ops.int4_matmul.launch import int4_matmul

    return lambda x, w_packed, scales, group_size: int4_matmul(x, w_packed, scales, group_size)


def _ours_pack() -> Callable[..., Any]:
    return lambda w, group_size: pack_int4(w, group_size)


register_impl("int4_matmul", "ridgeline", "ours", _ours, description="ridgeline Triton int4 weight-only GEMM")
register_impl("pack_int4", "ridgeline", "ours", _ours_pack, description="ridgeline int4 packing (torch ops)")

__all__ = ["Int4MatmulSpec", "PackInt4Spec", "GroupSizeError", "quantize_groups"]
