"""A second kernel body of `int4_matmul` for decode bandwidth (layout "split-nibbles"): a tuning CANDIDATE, chosen
only through TileConfig(layout="split-nibbles"); the shipped launch rules do not pick it (it is unmeasured).

Why another body. The shipped one (kernel.py) unpacks each group with tl.join + tl.reshape + tl.trans, which on
Hopper moves the weight tile between register layouts (through shared memory) every group, and it has one small
tl.dot of BLOCK_N x 64 bytes per K step. Here:
- No interleave. A packed byte holds k = 2j (low nibble) and k = 2j + 1 (high nibble) (pack.py), so a group's
  product is dot(lo, x_even) + dot(hi, x_odd): x's even and odd columns come from stride-2 loads (x is tiny and
  L2-resident at decode) and the weight tile is used in the layout it was loaded in.
- Dequantize without integer-to-float conversions (I2F runs at 16 per clock per SM on sm_90, below what 4.3 TB/s of
  nibbles needs): a nibble v OR-ed into the bits of 1024.0 (fp16) or 128.0 (bf16) is 1024 + v (128 + v) exactly,
  and one subtraction of 1032 (136) gives v - 8, already in x's dtype; on the GPU in unpack.py's packed form (four
  bytes an instruction). fp32 x, and bf16 x in the CPU interpreter (whose bf16 math is wrong), take the plain
  integer path; the interpreter runs the fp16 trick one nibble at a time.
- GROUPS_PER_STEP groups per K step (BLOCK_K = GROUP * GROUPS_PER_STEP), each group its own loads and dots, so one
  loop iteration has GROUPS_PER_STEP * BLOCK_N * GROUP / 2 weight bytes for the pipeliner to keep in flight.
- SWAP_AB (decode): compute y^T = W x^T, so the weight tile is the MMA's M operand (BLOCK_N = 64/128 rows fill a
  Hopper wgmma M tile; BLOCK_M = 16 tokens is its N) instead of a BLOCK_M = 16 tile that only the older mma fits.

Numerics (the same contract as kernel.py): the K groups are cut into the numeric splits of rules.splits_for (a
function of N and K, never of M); each split adds its groups IN ORDER into a fresh fp32 partial, each group's
product scaled by its scale before it joins: part = part + (dot(lo_g, xe_g) + dot(hi_g, xo_g)) * s_g; the partials
are added in split order (by the program or by lib.splitk's reduction). A step's groups past the split's end
are masked off (loads and the add), so the sum order depends only on (N, K, group size, config), never on M
(batch invariance), and the result does not depend on GROUPS_PER_STEP either. No atomics: deterministic.
64-bit offsets for x, w, y and the partials.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.ops.int4_matmul.unpack import unpack_nibbles


@triton.jit
def _dequant(nib, MODE: tl.constexpr):
    """int16 nibbles 0..15 -> v - 8 in fp16 (MODE 1) or fp32 (MODE 0), both exact (MODE 3, the GPU's bf16 / fp16:
    unpack.py, four bytes an instruction, the same bit trick)."""
    if MODE == 1:
        w = (nib | 0x6400).to(tl.float16, bitcast=True) - 1032.0
    else:
        w = (nib - 8).to(tl.float32)
    return w


@triton.jit
def _pair_dot(wa, xa, wb, xb, DOT_MODE: tl.constexpr):
    """wa @ xa + wb @ xb in fp32 ([R, KK] x [KK, C] twice; the second product accumulates onto the first).
    DOT_MODE 0: tensor cores; 1: fp32 IEEE; 2: the interpreter's explicit sums in fp32 (numpy's matmul sums in an
    order that depends on the tile's shape: not batch invariant)."""
    if DOT_MODE == 2:
        out = tl.sum(wa.to(tl.float32)[:, :, None] * xa.to(tl.float32)[None, :, :], axis=1)
        out += tl.sum(wb.to(tl.float32)[:, :, None] * xb.to(tl.float32)[None, :, :], axis=1)
    elif DOT_MODE == 1:
        out = tl.dot(wb, xb, tl.dot(wa, xa, input_precision="ieee"), input_precision="ieee")
    else:
        out = tl.dot(wb, xb, tl.dot(wa, xa))
    return out


@triton.jit
def _int4_mm_split_kernel(
    x_ptr, w_ptr, s_ptr, y_ptr, p_ptr,
    M, N, stride_xm, stride_xk, stride_wn, stride_sn, stride_sg, stride_ym,
    n_groups, groups_per_split, m_tiles, mn,
    GROUP: tl.constexpr, GROUPS_PER_STEP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS: tl.constexpr, SPLIT_PROGRAMS: tl.constexpr, SWAP_AB: tl.constexpr, DEQ_MODE: tl.constexpr,
    DOT_MODE: tl.constexpr,
):
    HALF: tl.constexpr = GROUP // 2
    pid = tl.program_id(0)
    pid_m = pid % m_tiles  # M tiles of one N block are neighbours: they share the weight tile through L2
    pid_n = pid // m_tiles
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask_m = offs_m < M
    mask_n = offs_n < N
    offs_j = tl.arange(0, HALF).to(tl.int64)  # byte j of a group: k = 2j (low nibble), 2j + 1 (high nibble)
    s_rows = s_ptr + offs_n * stride_sn
    if SWAP_AB:  # weight [BLOCK_N, HALF] (rows of W), x^T [HALF, BLOCK_M]; accumulators [BLOCK_N, BLOCK_M]
        w_tile = w_ptr + offs_n[:, None] * stride_wn + offs_j[None, :]
        w_mask = mask_n[:, None]
        x_even = x_ptr + offs_m[None, :] * stride_xm + (2 * offs_j)[:, None] * stride_xk
        x_mask = mask_m[None, :]
        acc_shape: tl.constexpr = (BLOCK_N, BLOCK_M)
    else:  # x [BLOCK_M, HALF], weight loaded directly as [HALF, BLOCK_N] (no transpose op); acc [BLOCK_M, BLOCK_N]
        w_tile = w_ptr + offs_n[None, :] * stride_wn + offs_j[:, None]
        w_mask = mask_n[None, :]
        x_even = x_ptr + offs_m[:, None] * stride_xm + (2 * offs_j)[None, :] * stride_xk
        x_mask = mask_m[:, None]
        acc_shape: tl.constexpr = (BLOCK_M, BLOCK_N)

    if SPLIT_PROGRAMS:
        s_begin = tl.program_id(1)
        s_end = s_begin + 1
    else:
        s_begin = 0
        s_end = SPLITS
    total = tl.zeros(acc_shape, dtype=tl.float32)
    for s in range(s_begin, s_end):
        g_begin = s * groups_per_split
        g_end = tl.minimum(g_begin + groups_per_split, n_groups)
        part = tl.zeros(acc_shape, dtype=tl.float32)
        for g0 in range(g_begin, g_end, GROUPS_PER_STEP):
            for i in tl.static_range(GROUPS_PER_STEP):
                g = g0 + i
                live = g < g_end  # a step's groups past the split's end: no loads, no add
                kb = tl.cast(g, tl.int64) * HALF  # the group's first byte (k0 = 2 * kb: a plain product keeps the
                k0 = kb * 2  # divisibility the compiler needs for 16-byte copies; kb = k0 // 2 loses it)
                wb = tl.load(w_tile + kb, mask=w_mask & live, other=0)
                xe = tl.load(x_even + k0 * stride_xk, mask=x_mask & live, other=0.0)
                xo = tl.load(x_even + (k0 + 1) * stride_xk, mask=x_mask & live, other=0.0)
                if DEQ_MODE == 3:  # four bytes an instruction (unpack.py; GPU only)
                    lo, hi = unpack_nibbles(wb, xe.dtype)
                else:
                    lo = _dequant(wb.to(tl.int16) & 15, DEQ_MODE)
                    hi = _dequant(wb.to(tl.int16) >> 4, DEQ_MODE)
                if DEQ_MODE == 0:  # fp32 x, or bf16 x in the interpreter (upcast right after the load)
                    xe = xe.to(tl.float32)
                    xo = xo.to(tl.float32)
                if SWAP_AB:
                    blk = _pair_dot(lo, xe, hi, xo, DOT_MODE)
                    sc = tl.load(s_rows + g * stride_sg, mask=mask_n & live, other=0.0).to(tl.float32)
                    part = tl.where(live, part + blk * sc[:, None], part)
                else:
                    blk = _pair_dot(xe, lo, xo, hi, DOT_MODE)
                    sc = tl.load(s_rows + g * stride_sg, mask=mask_n & live, other=0.0).to(tl.float32)
                    part = tl.where(live, part + blk * sc[None, :], part)
        total += part

    if SWAP_AB:
        out_mask = mask_n[:, None] & mask_m[None, :]
        p_off = offs_m[None, :] * N + offs_n[:, None]
        y_off = offs_m[None, :] * stride_ym + offs_n[:, None]
    else:
        out_mask = mask_m[:, None] & mask_n[None, :]
        p_off = offs_m[:, None] * N + offs_n[None, :]
        y_off = offs_m[:, None] * stride_ym + offs_n[None, :]
    if SPLIT_PROGRAMS and SPLITS > 1:
        # Partials [SPLITS, M, N] (contiguous); lib.splitk's reduction adds them in split order.
        tl.store(p_ptr + tl.program_id(1).to(tl.int64) * mn + p_off, total, mask=out_mask)
    else:
        tl.store(y_ptr + y_off, total.to(y_ptr.dtype.element_ty), mask=out_mask)
