"""A decode GEMV body of `matmul` for M <= 8 on the CUDA cores (no tensor cores): a tuning CANDIDATE, chosen only
through `cfg=rules.GemvConfig(...)` (matmul_2d's config override, the tuning driver's path); the shipped launch
rules do not pick it yet.

Why. At M <= 4 the tensor-core rule runs tl.dot on 16x32x512 tiles: 15/16 of the MMA wasted at M = 1, and the
weight's loads shaped by what the MMA wants. Decode is a weight stream; what matters is 16-byte weight loads in
flight on every SM.

One program owns BLOCK_N output columns and every row of the call (ROWS = M is a constexpr up to 8: one named fp32
accumulator per row, none spent on absent rows). It walks its split's K range in BLOCK_K steps: one [BLOCK_N,
BLOCK_K] weight tile load (w [N, K]: contiguous along K, 8 bf16 = 16 bytes a thread; w [K, N], layout "kn": the
same tile through the other strides, contiguous along N), upcast to fp32 right after the load; per row the x slice
x[row, k0 : k0 + BLOCK_K] (fp32 right after the load, any row and element stride), the broadcast product summed
over K (in-thread FMAs, then lane shuffles), added to the row's accumulator.

Split-K. gemv_splits(N, K, SMs) numeric splits (never a function of M) cut K into chunks of whole BLOCK_K steps;
with more than one split each (column block, split) is a program writing fp32 partials [SPLITS, M, N], and
lib.splitk's reduction adds them in split order (+ bias) and rounds once: deterministic, no atomics.

Numerics. fp32 products and sums; the in-step sum runs on the FMA units in the order of the tile's register
layout, not the tensor core's, so a row's bits may differ from the tensor-core tiles' (kernel.py) in the last bit
(like int4's GEMV family). Within this family, for one config and (N, K), a row's bits are the same at every
M <= 8 (each row runs the same per-row code on the same weight tile layout): M = 1 rows equal the same rows at
M = 8. 64-bit offsets for x, w, y and the partials.

sm_90 compile facts (Triton 3.7.1's ptxas ahead of time on the CPU with ridgeline.profile.aot, the launches
matmul_2d makes for a 132-SM H200 at M x 4096 x 4096 bf16, w [N, K] and x contiguous; per-thread registers, spill
bytes, LDG count by width, FFMA and SHFL per kernel, LDS/STS, warps per SM by occupancy):
| M | BN x BK w | regs | spills | LDG.128 / other | FFMA | SHFL | LDS/STS | warps/SM |
|---|---|---|---|---|---|---|---|---|
| 1 | 32x512 w4 | 167 | 0 | 16 / 1 (64) | 112 | 81 | 20/22 | 12 |
| 1 | 32x256 w4 | 96 | 0 | 8 / 1 | 56 | 40 | 2/2 | 20 |
| 1 | 64x256 w8 | 104 | 0 | 8 / 1 | 56 | 40 | 9/3 | 16 |
| 1 | 32x128 w4 | 55 | 0 | 4 / 1 | 28 | 16 | 9/2 | 36 |
| 1 | 16x256 w2 | 94 | 0 | 8 / 1 | 56 | 40 | 3/3 | 20 |
| 4 | 32x256 w4 | 168 | 0 | 8 / 4 | 224 | 160 | 8/8 | 12 |
| 4 | 32x128 w4 | 110 | 0 | 4 / 4 | 112 | 64 | 36/8 | 16 |
| 4 | 32x512 w4 | 255 | 0 | 16 / 4 | 448 | 324 | 80/88 | 8 |
| 8 | 32x256 w4 | 242 | 0 | 8 / 8 | 448 | 320 | 16/16 | 8 |
| 8 | 64x256 w8 | 245 | 0 | 8 / 8 | 448 | 320 | 72/24 | 8 |
| 8 | 32x128 w4 | 128 | 0 | 4 / 8 | 224 | 128 | 72/16 | 16 |
| 8 | 32x512 w4 | 255 | 640 / 644 B | 16 / 8 | 896 | 648 | 160/176 | 8 |
- Weight loads are 128-bit (LDG.128: 8 bf16 a thread along K); the other LDGs are the per-row x slices (one a
  row). The split reduction kernel: 40 registers, LDG.128 only, 0 spills.
- The whole [BN, BK] tile is held in fp32 registers (BN x BK / threads values a thread), so registers grow with
  BN x BK / warps and with M (per-row products); every config with BN x BK / (32 warps) <= 128 is spill-free at
  M <= 8 except 32x512 w4 at M = 8 (640 B of spills: the tuning driver should drop it there, or use w8).
- The in-step sum is in-thread FFMAs then SHFL lane reductions; the LDS/STS are x's layout conversion into the
  reduction's slice layout and the output's before the store (as in int4's GEMV at 4 warps).
Still to time on the H200 (scripts/device/tune_matmul.py --only-gemv).
"""

from __future__ import annotations

import triton
import triton.language as tl

MAX_ROWS = 8  # the most rows one launch takes (one named accumulator per row below)


@triton.jit
def _row_step(acc, wt, x_ptr, row: tl.constexpr, stride_xm, stride_xk, rk, mask_k, ROWS: tl.constexpr):
    """acc + sum_k(wt[:, k] * x[row, rk[k]]) for a present row (row < ROWS), else acc unchanged."""
    if row < ROWS:
        xr = tl.load(x_ptr + row * stride_xm + rk * stride_xk, mask=mask_k, other=0.0).to(tl.float32)
        acc += tl.sum(wt * xr[None, :], axis=1)
    return acc


@triton.jit
def _row_out(total, row: tl.constexpr, y_ptr, stride_ym, p_ptr, p_base, N, offs_n, mask_n, bias,
             ROWS: tl.constexpr, TO_PARTIALS: tl.constexpr, HAS_BIAS: tl.constexpr):
    if row < ROWS:
        if TO_PARTIALS:
            tl.store(p_ptr + p_base + row * N + offs_n, total, mask=mask_n)
        else:
            if HAS_BIAS:
                total += bias
            tl.store(y_ptr + row * stride_ym + offs_n, total.to(y_ptr.dtype.element_ty), mask=mask_n)


@triton.jit
def gemv_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr, p_ptr,
    N, K, stride_xm, stride_xk, stride_bk, stride_bn, stride_ym, k_chunk, mn,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_PROGRAMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    # A 1-D grid (the cached launcher's): program = split * column blocks + column block.
    blocks = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    split = pid // blocks
    offs_n = ((pid - split * blocks) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask_n = offs_n < N
    offs_k = tl.arange(0, BLOCK_K).to(tl.int64)
    w_rows = w_ptr + offs_n[:, None] * stride_bn
    stride_xm64 = tl.cast(stride_xm, tl.int64)
    if SPLIT_PROGRAMS:
        k_begin = split.to(tl.int64) * k_chunk
        k_end = tl.minimum(k_begin + k_chunk, K)
    else:
        k_begin = tl.cast(0, tl.int64)
        k_end = tl.cast(K, tl.int64)
    zero = tl.zeros([BLOCK_N], dtype=tl.float32)
    a0, a1, a2, a3, a4, a5, a6, a7 = zero, zero, zero, zero, zero, zero, zero, zero
    for k0 in range(k_begin, k_end, BLOCK_K):
        rk = k0 + offs_k
        mask_k = rk < k_end
        wt = tl.load(w_rows + rk[None, :] * stride_bk, mask=mask_n[:, None] & mask_k[None, :],
                     other=0.0).to(tl.float32)
        a0 = _row_step(a0, wt, x_ptr, 0, stride_xm64, stride_xk, rk, mask_k, ROWS)
        a1 = _row_step(a1, wt, x_ptr, 1, stride_xm64, stride_xk, rk, mask_k, ROWS)
        a2 = _row_step(a2, wt, x_ptr, 2, stride_xm64, stride_xk, rk, mask_k, ROWS)
        a3 = _row_step(a3, wt, x_ptr, 3, stride_xm64, stride_xk, rk, mask_k, ROWS)
        a4 = _row_step(a4, wt, x_ptr, 4, stride_xm64, stride_xk, rk, mask_k, ROWS)
        a5 = _row_step(a5, wt, x_ptr, 5, stride_xm64, stride_xk, rk, mask_k, ROWS)
        a6 = _row_step(a6, wt, x_ptr, 6, stride_xm64, stride_xk, rk, mask_k, ROWS)
        a7 = _row_step(a7, wt, x_ptr, 7, stride_xm64, stride_xk, rk, mask_k, ROWS)

    # Split programs: fp32 partials [SPLITS, M, N] (contiguous) for lib.splitk's reduction; else y (+ bias) directly.
    TO_P: tl.constexpr = SPLIT_PROGRAMS
    p_base = split.to(tl.int64) * mn
    y_rows = tl.cast(stride_ym, tl.int64)
    bias = zero
    if HAS_BIAS and not SPLIT_PROGRAMS:
        bias = tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    _row_out(a0, 0, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
    _row_out(a1, 1, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
    _row_out(a2, 2, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
    _row_out(a3, 3, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
    _row_out(a4, 4, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
    _row_out(a5, 5, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
    _row_out(a6, 6, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
    _row_out(a7, 7, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, bias, ROWS, TO_P, HAS_BIAS)
