"""Triton kernel of `int4_matmul`: y[M, N] = x[M, K] @ dequant(w_packed, scales)^T, fp32 accumulation.

One quantization group is one K step of the MMA (GROUPS_PER_STEP of them unrolled in a loop trip): the packed tile
[BLOCK_N, GROUP/2] is read once, unpacked in registers (unpack.py: a word of 8 weights in 11 instructions, bf16, or
9, fp16, straight into MMA register pairs thanks to pack.py's word order; the integers -8..7 are exact), multiplied
on the tensor cores by tl.dot against the x tile with a fresh fp32 accumulator, and the group's scale is applied to
that block (BLOCK_M * BLOCK_N multiplies instead of BLOCK_N * GROUP on the weight).

Orientation (SWAP_AB). Decode tiles (M <= 32) compute y^T = W x^T: the weight tile is the MMA's A operand, whose
registers the unpack writes directly, and x^T the B operand, so x's few rows fill an 8- or 16-wide N tile (mma.sync
m16n8k16) instead of a 16-row M tile that wastes 15/16 of each MMA at M = 1. With x as the A operand ptxas spends
~4 register moves an MMA gathering x's fragments (s21 SASS, scripts/int4_unpack_sass.py: 251 instructions a 64 x 128
step as s20 shipped, 159 swapped with the word order at M <= 8). From 33 rows the x tile is the wgmma's A operand
and the weight its B operand (SWAP_AB off, 64-row tiles).

Split-K and batch invariance. The K groups are cut into SPLITS numeric splits (a function of N and K only, never
of M; rules.py): each split sums its groups in order into its own fp32 partial, and the partials are added in split
order. A launch either gives each split its own programs (SPLIT_PROGRAMS: partials go to an fp32 workspace and
`lib.splitk` adds them in order; decode, where N alone gives too few programs) or lets one program walk
every split itself (large M). Both add the same numbers in the same order, so a row's bits do not depend on the
launch, only on (N, K) and on the tensor-core instruction that sums a group. That last part is not uniform: the
swapped tiles (M <= 32) run tl.dot as mma.sync (HMMA), tiles of 64 rows as wgmma (HGMMA), and on the H200 the two
disagree in the last bit of a group's fp32 sum now and then (s15/s16: one row in a few thousand, 1 bf16 ulp, at
K >= 4096; s20: 2 ulps once). So rows are bitwise batch invariant among batches of M <= 32 and among batches of
M >= 33, not across that boundary (tests/ops/int4_matmul/test_int4_gpu.py pins both halves and measures the
crossing).
The split programs' partials are added either by a second launch (`lib.splitk`) or, FUSED_REDUCE, by the last of
a tile's split programs to finish: each bumps the tile's counter after its partial is stored, and the one that sees
SPLITS - 1 adds all partials in split order and resets the counter (self-resetting: the counters are zeroed once,
launch.py). The counter only picks which program adds; the sum and its order are fixed, so it is deterministic and
the bits are the second launch's.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.ops.int4_matmul.unpack import unpack_words


@triton.jit
def _weight_tile(wb, DTYPE: tl.constexpr, BLOCK_N: tl.constexpr, GROUP: tl.constexpr, EMULATE: tl.constexpr):
    """Packed bytes [BLOCK_N, GROUP/2] -> the group's weights q [BLOCK_N, GROUP] in k order (pack.py's word order:
    byte 2c + d of a word holds k = 4d + c in its low nibble and k = 4d + 2 + c in its high one)."""
    if EMULATE:  # fp32 x, or the CPU interpreter (no inline assembly; its tl.dot on bf16 is wrong)
        lo = tl.reshape((wb & 15).to(tl.int8) - 8, (BLOCK_N, GROUP // 8, 2, 2))  # [n, word, c, d]
        hi = tl.reshape((wb >> 4).to(tl.int8) - 8, (BLOCK_N, GROUP // 8, 2, 2))
        w = tl.permute(tl.join(lo, hi), (0, 1, 3, 4, 2))  # [n, word, d, t, c]: k = 4d + 2t + c
        return tl.reshape(w, (BLOCK_N, GROUP)).to(tl.float32)
    else:
        a, b = unpack_words(wb, DTYPE)  # a: k 8i + 0..3, b: k 8i + 4..7, as register pairs (unpack.py)
        a = tl.reshape(a, (BLOCK_N, GROUP // 8, 4))
        b = tl.reshape(b, (BLOCK_N, GROUP // 8, 4))
        return tl.reshape(tl.permute(tl.join(a, b), (0, 1, 3, 2)), (BLOCK_N, GROUP))


@triton.jit
def _group_dot(w, xt, SWAP_AB: tl.constexpr, EMULATE: tl.constexpr, IEEE: tl.constexpr, INTERPRETED: tl.constexpr):
    """One group's product in fp32: [BLOCK_N, rows] = W x^T (SWAP_AB) or [rows, BLOCK_N] = x W^T."""
    a = xt.to(tl.float32) if EMULATE else xt
    if SWAP_AB:
        lhs, rhs = w, tl.trans(a)
    else:
        lhs, rhs = a, tl.trans(w)
    if INTERPRETED:  # numpy's matmul sums in an order that depends on the tile: not batch invariant
        return tl.sum(lhs[:, :, None] * rhs[None, :, :], axis=1)
    elif IEEE:
        return tl.dot(lhs, rhs, input_precision="ieee")
    else:
        return tl.dot(lhs, rhs)


@triton.jit
def _int4_mm_kernel(
    x_ptr, w_ptr, s_ptr, y_ptr, p_ptr, cnt_ptr,
    M, N, stride_xm, stride_xk, stride_wn, stride_sn, stride_sg, stride_ym,
    n_groups, groups_per_split, m_tiles, mn,
    GROUP: tl.constexpr, GROUPS_PER_STEP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS: tl.constexpr, SPLIT_PROGRAMS: tl.constexpr, FUSED_REDUCE: tl.constexpr, SWAP_AB: tl.constexpr,
    HALVES: tl.constexpr,
    EMULATE: tl.constexpr,
    IEEE: tl.constexpr, INTERPRETED: tl.constexpr,
):
    pid = tl.program_id(0)
    # M tiles of one N block are neighbours in launch order: they share the weight tile through L2.
    pid_m = pid % m_tiles
    pid_n = pid // m_tiles
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    offs_k = tl.arange(0, GROUP)
    offs_b = tl.arange(0, GROUP // 2)
    x_rows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm + offs_k[None, :].to(tl.int64) * stride_xk
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn + offs_b[None, :]
    s_rows = s_ptr + offs_n.to(tl.int64) * stride_sn
    dtype = x_ptr.dtype.element_ty

    if SPLIT_PROGRAMS:
        s_begin = tl.program_id(1)
        s_end = s_begin + 1
    else:
        s_begin = 0
        s_end = SPLITS
    # HALVES: x's rows as two MMA N tiles of BLOCK_M / 2 (rows 0.. and BLOCK_M / 2..), two dots on the one unpacked
    # weight, each with its own accumulator; the halves are put side by side once, after the K loop.
    HM: tl.constexpr = BLOCK_M // 2 if HALVES else BLOCK_M
    total = tl.zeros((BLOCK_N, HM) if SWAP_AB else (BLOCK_M, BLOCK_N), dtype=tl.float32)
    if HALVES:
        total_b = tl.zeros((BLOCK_N, HM), dtype=tl.float32)
        offs_h = pid_m * BLOCK_M + tl.arange(0, HM)
        xa_rows = x_ptr + offs_h.to(tl.int64)[:, None] * stride_xm + offs_k[None, :].to(tl.int64) * stride_xk
        xb_rows = x_ptr + (offs_h + HM).to(tl.int64)[:, None] * stride_xm + offs_k[None, :].to(tl.int64) * stride_xk
        mask_a = offs_h < M
        mask_b = offs_h + HM < M
    for s in range(s_begin, s_end):
        g_begin = s * groups_per_split
        g_end = tl.minimum(g_begin + groups_per_split, n_groups)
        part = tl.zeros((BLOCK_N, HM) if SWAP_AB else (BLOCK_M, BLOCK_N), dtype=tl.float32)
        if HALVES:
            part_b = tl.zeros((BLOCK_N, HM), dtype=tl.float32)
        for g0 in range(g_begin, g_end, GROUPS_PER_STEP):
            for j in tl.static_range(GROUPS_PER_STEP):  # unrolled: one loop trip's overhead for several groups
                g = g0 + j
                live = g < g_end  # (the split's last trip may hold fewer groups: masked loads give zeros)
                k_off = tl.cast(g * GROUP, tl.int64) * stride_xk
                if HALVES:
                    xa = tl.load(xa_rows + k_off, mask=mask_a[:, None] & live, other=0.0)
                    xb = tl.load(xb_rows + k_off, mask=mask_b[:, None] & live, other=0.0)
                else:
                    xt = tl.load(x_rows + k_off, mask=mask_m[:, None] & live, other=0.0)
                wb = tl.load(w_rows + g * (GROUP // 2), mask=mask_n[:, None] & live, other=0)
                w = _weight_tile(wb, dtype, BLOCK_N, GROUP, EMULATE)
                if HALVES:
                    blk = _group_dot(w, xa, True, EMULATE, IEEE, INTERPRETED)
                    blk_b = _group_dot(w, xb, True, EMULATE, IEEE, INTERPRETED)
                else:
                    blk = _group_dot(w, xt, SWAP_AB, EMULATE, IEEE, INTERPRETED)
                sc = tl.load(s_rows + g * stride_sg, mask=mask_n & live, other=0.0).to(tl.float32)
                part += blk * (sc[:, None] if SWAP_AB else sc[None, :])
                if HALVES:
                    part_b += blk_b * sc[:, None]
        total += part
        if HALVES:
            total_b += part_b
    if HALVES:  # [BLOCK_N, 2, HM] -> [BLOCK_N, BLOCK_M]: column h * HM + i is half h's row i
        total = tl.reshape(tl.permute(tl.join(total, total_b), (0, 2, 1)), (BLOCK_N, BLOCK_M))

    if SWAP_AB:
        out_offs = offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
        y_offs = offs_m.to(tl.int64)[None, :] * stride_ym + offs_n[:, None]
        out_mask = mask_m[None, :] & mask_n[:, None]
    else:
        out_offs = offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        y_offs = offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
        out_mask = mask_m[:, None] & mask_n[None, :]
    if SPLIT_PROGRAMS and SPLITS > 1:
        # Partials [SPLITS, M, N] (contiguous), added in split order by the reduce kernel or, FUSED_REDUCE, by the
        # tile's last program to finish.
        tl.store(p_ptr + tl.program_id(1).to(tl.int64) * mn + out_offs, total, mask=out_mask)
        if FUSED_REDUCE:
            # Every thread's partial is issued before the counter moves; the counter's acq_rel orders them GPU-wide.
            tl.debug_barrier()
            done = tl.atomic_add(cnt_ptr + pid, 1, sem="acq_rel", scope="gpu")
            if done == SPLITS - 1:  # the last split of this tile: the others' partials are visible
                acc = tl.zeros((BLOCK_N, BLOCK_M) if SWAP_AB else (BLOCK_M, BLOCK_N), dtype=tl.float32)
                p = p_ptr + out_offs
                for _ in tl.static_range(SPLITS):  # lib.splitk's order: 0 + p0 + p1 + ... (the same bits)
                    acc += tl.load(p, mask=out_mask, other=0.0, cache_modifier=".cg")
                    p += mn  # (a pointer step: no 32-bit product to wrap past 2^31 partial elements)
                tl.store(y_ptr + y_offs, acc.to(y_ptr.dtype.element_ty), mask=out_mask)
                tl.atomic_xchg(cnt_ptr + pid, 0, sem="relaxed", scope="gpu")  # ready for the next launch
    else:
        tl.store(y_ptr + y_offs, total.to(y_ptr.dtype.element_ty), mask=out_mask)
