"""A third kernel body of `int4_matmul` for decode (layout "gemv"): a GEMV on the CUDA cores, no tensor cores. A
tuning CANDIDATE, chosen only through TileConfig(layout="gemv", ...); the shipped launch rules do not pick it.

Why. At M = 1..4 the tensor-core bodies run 16-row MMA tiles (15/16 of the MMA wasted at M = 1) and spend their
instructions moving nibbles into the MMA's register layout. Decode is a weight stream: what matters is issuing
16-byte weight loads and unpacking them with as few instructions as possible.

What one program does. It owns BLOCK_N output columns and every row of the call (M <= 16; ROWS = M is a
constexpr, so each row has its own fp32 accumulators and no work is spent on absent rows). It walks its split's
groups GROUPS_PER_STEP at a time; per group:
- one load of the packed [BLOCK_N, GROUP/2] byte tile (contiguous along K: 16 bytes a thread);
- dequantize without integer-to-float conversions: a nibble v OR-ed into the bits of 2^23 (0x4B000000) is the
  float 2^23 + v exactly, and one FADD of -(2^23 + 8) gives v - 8 in fp32 (exact); the low and high nibbles are
  interleaved back into K order in registers (tl.join + reshape: the two values of a byte stay in one thread);
- per row: x[k0 : k0 + GROUP] loaded once (fp32 right after the load), the broadcast product summed over K
  (tl.sum: in-thread FMAs, then a few lane shuffles), times the group's scale (one multiply per column per group
  and row, not per weight), added to the row's split partial.

Numerics. The same split contract as kernel.py: K's groups are cut into rules.splits_for(N, K) numeric splits
(never a function of M); each split adds its groups in order into a fresh fp32 partial; the partials are added in
split order (by the program, or by lib.splitk's reduction when splits have their own programs: no atomics,
deterministic). A step's groups past the split's end are masked off (loads and add), so GROUPS_PER_STEP does not
change the bits. This adds a THIRD kernel family beside the two of kernel.py (mma.sync tiles for M <= 32, wgmma
tiles for M >= 33): within a group it sums the GROUP products on the FMA units in the order of its register
layout instead of the tensor core's, so across families a row may differ in its last bit; within the GEMV family
a row's bits are the same at every M it serves (each row runs the same per-row code on the same weight layout:
M = 1 rows equal the same rows at M = 4 or 16). The weight tile's layout follows from [BLOCK_N, GROUP/2] bytes and
16-byte vectors (GROUP/32 lanes along K), so the in-group order is expected not to depend on BLOCK_N or warps
either; the tuning driver checks that bitwise (`same_bits_family`). 64-bit offsets for x, w, y and partials.

sm_90 compile facts (Triton 3.7.1's ptxas, ahead of time on the CPU with ridgeline.profile.aot, the launches a
132-SM H200 makes at M x 4096 x 4096, bf16 x, group 128; per-kernel SASS counts, loop bodies unrolled GPS times):
| M | BN w gps | regs | spills | LDG.128 / LDG.16 | LOP3 | PRMT | SHF | FFMA | FADD | LDS | I2F |
|---|---|---|---|---|---|---|---|---|---|---|---|
| 1 | 64 w8 g2 | 33 | 0 | 10 / 2 | 102 | 66 | 33 | 64 | 69 | 1 | 0 |
| 1 | 128 w8 g1 | 47 | 0 | 6 / 2 | 105 | 50 | 39 | 64 | 70 | 1 | 0 |
| 4 | 64 w8 g2 | 80 | 0 | 34 / 2 | 104 | 162 | 147 | 256 | 84 | 4 | 0 |
| 16 | 64 w8 g2 | 114 | 0 | 130 / 2 | 104 | 546 | 725 | 1024 | 144 | 16 | 0 |
| 16 | 128 w8 g1 | 180 | 0 | 66 / 2 | 105 | 290 | 557 | 1024 | 160 | 16 | 0 |
| 1 | 64 w4 g2 | 48 | 0 | 4 / 6 | 208 | 69 | 66 | 128 | 138 | 65 | 0 |
| 4 | 64 w4 g2 | 128 | 0 | 4 / 12 | 209 | 72 | 319 | 512 | 168 | 260 | 0 |
| 16 | 64 w4 g4 | 255 | 16 / 24 B | 8 / 72 | 415 | 184 | 2205 | 4096 | 544 | 2064 | 0 |
- Weights: 128-bit loads everywhere; no I2F (the exponent trick); per nibble about 1.6 LOP3 + 1 PRMT/SHF (byte
  extraction) + 1 FADD (the bias) + 1 FFMA a row. No tensor cores.
- x: at 8 or 16 warps Triton loads each row's group straight into the reduction's slice layout (LDG.128 per
  thread, L1 hits across the column threads), with the bf16 -> fp32 upcast as PRMT/SHF, one per x element a
  thread (at M = 16, BN 64 w8: as many as FFMAs; BN 128 halves that). At 4 warps the [GROUP] x vector is loaded one
  element per thread and moved into that layout through shared memory: ~32 scalar LDS and a barrier a row and
  group (the table's LDS column), so 4 warps is the weak choice; at M = 16 with 4 groups a step it spills.
- The remaining LDS/BAR at 8 warps are outside the loop (the output's layout conversion before the store).
Still to time on the H200 (scripts/device/tune_int4_matmul.py --only-gemv).
"""

from __future__ import annotations

import triton
import triton.language as tl

MAX_ROWS = 16  # the most rows one launch takes (one named accumulator pair per row below)


@triton.jit
def _row_group(acc, wq, sc, x_ptr, row: tl.constexpr, stride_xm, stride_xk, k0, offs_k, live, ROWS: tl.constexpr):
    """acc + sum_k(wq[:, k] * x[row, k0 + k]) * sc for a present row (row < ROWS), else acc unchanged."""
    if row < ROWS:
        xr = tl.load(x_ptr + row * stride_xm + (k0 + offs_k) * stride_xk, mask=live, other=0.0).to(tl.float32)
        blk = tl.sum(wq * xr[None, :], axis=1)
        acc = tl.where(live, acc + blk * sc, acc)
    return acc


@triton.jit
def _row_out(total, row: tl.constexpr, y_ptr, stride_ym, p_ptr, p_base, N, offs_n, mask_n, ROWS: tl.constexpr,
             TO_PARTIALS: tl.constexpr):
    if row < ROWS:
        if TO_PARTIALS:
            tl.store(p_ptr + p_base + row * N + offs_n, total, mask=mask_n)
        else:
            tl.store(y_ptr + row * stride_ym + offs_n, total.to(y_ptr.dtype.element_ty), mask=mask_n)


@triton.jit
def _int4_gemv_kernel(
    x_ptr, w_ptr, s_ptr, y_ptr, p_ptr,
    N, stride_xm, stride_xk, stride_wn, stride_sn, stride_sg, stride_ym,
    n_groups, groups_per_split, n_splits, mn,
    ROWS: tl.constexpr, GROUP: tl.constexpr, GROUPS_PER_STEP: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLIT_PROGRAMS: tl.constexpr,
):
    HALF: tl.constexpr = GROUP // 2
    offs_n = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask_n = offs_n < N
    offs_j = tl.arange(0, HALF)  # byte j of a group: k = 2j (low nibble), 2j + 1 (high nibble)
    offs_k = tl.arange(0, GROUP).to(tl.int64)
    w_tile = w_ptr + offs_n[:, None] * stride_wn + offs_j[None, :]
    s_rows = s_ptr + offs_n * stride_sn
    stride_xm64 = tl.cast(stride_xm, tl.int64)

    if SPLIT_PROGRAMS:
        s_begin = tl.program_id(1)
        s_end = s_begin + 1
    else:
        s_begin = 0
        s_end = n_splits
    zero = tl.zeros([BLOCK_N], dtype=tl.float32)
    t0, t1, t2, t3, t4, t5, t6, t7 = zero, zero, zero, zero, zero, zero, zero, zero
    t8, t9, t10, t11, t12, t13, t14, t15 = zero, zero, zero, zero, zero, zero, zero, zero
    for s in range(s_begin, s_end):
        g_begin = s * groups_per_split
        g_end = tl.minimum(g_begin + groups_per_split, n_groups)
        p0, p1, p2, p3, p4, p5, p6, p7 = zero, zero, zero, zero, zero, zero, zero, zero
        p8, p9, p10, p11, p12, p13, p14, p15 = zero, zero, zero, zero, zero, zero, zero, zero
        for g0 in range(g_begin, g_end, GROUPS_PER_STEP):
            for i in tl.static_range(GROUPS_PER_STEP):
                g = g0 + i
                live = g < g_end  # a step's groups past the split's end: no loads, no add
                kb = tl.cast(g, tl.int64) * HALF  # the group's first byte; k0 = 2 * kb keeps the divisibility
                k0 = kb * 2
                wb = tl.load(w_tile + kb, mask=mask_n[:, None] & live, other=0).to(tl.int32)
                # 0x4B000000 = the bits of 2^23: (v | them) is 2^23 + v as fp32; minus 2^23 + 8 = 8388616 is v - 8
                lo = ((wb & 15) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
                hi = ((wb >> 4) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
                wq = tl.reshape(tl.join(lo, hi), (BLOCK_N, GROUP))  # (j, t) -> k = 2j + t
                sc = tl.load(s_rows + g * stride_sg, mask=mask_n & live, other=0.0).to(tl.float32)
                p0 = _row_group(p0, wq, sc, x_ptr, 0, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p1 = _row_group(p1, wq, sc, x_ptr, 1, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p2 = _row_group(p2, wq, sc, x_ptr, 2, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p3 = _row_group(p3, wq, sc, x_ptr, 3, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p4 = _row_group(p4, wq, sc, x_ptr, 4, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p5 = _row_group(p5, wq, sc, x_ptr, 5, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p6 = _row_group(p6, wq, sc, x_ptr, 6, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p7 = _row_group(p7, wq, sc, x_ptr, 7, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p8 = _row_group(p8, wq, sc, x_ptr, 8, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p9 = _row_group(p9, wq, sc, x_ptr, 9, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p10 = _row_group(p10, wq, sc, x_ptr, 10, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p11 = _row_group(p11, wq, sc, x_ptr, 11, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p12 = _row_group(p12, wq, sc, x_ptr, 12, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p13 = _row_group(p13, wq, sc, x_ptr, 13, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p14 = _row_group(p14, wq, sc, x_ptr, 14, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
                p15 = _row_group(p15, wq, sc, x_ptr, 15, stride_xm64, stride_xk, k0, offs_k, live, ROWS)
        t0, t1, t2, t3, t4, t5, t6, t7 = t0 + p0, t1 + p1, t2 + p2, t3 + p3, t4 + p4, t5 + p5, t6 + p6, t7 + p7
        t8, t9, t10, t11 = t8 + p8, t9 + p9, t10 + p10, t11 + p11
        t12, t13, t14, t15 = t12 + p12, t13 + p13, t14 + p14, t15 + p15

    # Split programs: partials [SPLITS, M, N] (contiguous) for lib.splitk's reduction; else y directly.
    TO_P: tl.constexpr = SPLIT_PROGRAMS
    p_base = tl.program_id(1).to(tl.int64) * mn
    y_rows = tl.cast(stride_ym, tl.int64)
    _row_out(t0, 0, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t1, 1, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t2, 2, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t3, 3, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t4, 4, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t5, 5, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t6, 6, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t7, 7, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t8, 8, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t9, 9, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t10, 10, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t11, 11, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t12, 12, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t13, 13, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t14, 14, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
    _row_out(t15, 15, y_ptr, y_rows, p_ptr, p_base, N, offs_n, mask_n, ROWS, TO_P)
