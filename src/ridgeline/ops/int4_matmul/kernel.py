"""Triton kernels of `int4_matmul`: y[M, N] = x[M, K] @ dequant(w_packed, scales)^T, fp32 accumulation.

One K block is one quantization group (BLOCK_K = group_size): the packed tile [BLOCK_N, GROUP/2] is read once,
unpacked in registers (mask / shift, minus 8: the integers -8..7 are exact in bf16/fp16; unpack.py does four bytes
an instruction on the GPU), multiplied on the tensor cores by tl.dot against the x tile with a fresh fp32
accumulator, and the group's scale is applied to that [BLOCK_M, BLOCK_N] block (BLOCK_M * BLOCK_N multiplies
instead of BLOCK_N * GROUP on the weight).

Split-K and batch invariance. The K groups are cut into SPLITS numeric splits (a function of N and K only, never
of M; rules.py): each split sums its groups in order into its own fp32 partial, and the partials are added in split
order. A launch either gives each split its own programs (SPLIT_PROGRAMS: partials go to an fp32 workspace and
`lib.splitk` adds them in order; decode, where N alone gives too few programs) or lets one program walk
every split itself (large M). Both add the same numbers in the same order, so a row's bits do not depend on the
launch, only on (N, K) and on the tensor-core instruction that sums a group. That last part is not uniform: tiles
of 16 and 32 rows run tl.dot as mma.sync (HMMA), tiles of 64 rows and more as wgmma (HGMMA), and on the H200 the
two disagree in the last bit of a group's fp32 sum now and then (s15/s16: one row in a few thousand, 1 bf16 ulp, at
K >= 4096; s20, the 64x128 wgmma tile: 2 ulps once). So rows are bitwise batch invariant among batches of M <= 32
and among batches of M >= 33, not across that boundary (tests/ops/int4_matmul/test_int4_gpu.py pins both halves
and measures the crossing).
No atomics: deterministic.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.ops.int4_matmul.unpack import unpack_nibbles


@triton.jit
def _int4_mm_kernel(
    x_ptr, w_ptr, s_ptr, y_ptr, p_ptr,
    M, N, stride_xm, stride_xk, stride_wn, stride_sn, stride_sg, stride_ym,
    n_groups, groups_per_split, m_tiles, mn,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS: tl.constexpr,
    SPLIT_PROGRAMS: tl.constexpr, DOT_FP32: tl.constexpr, IEEE: tl.constexpr, INTERPRETED: tl.constexpr,
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

    if SPLIT_PROGRAMS:
        s_begin = tl.program_id(1)
        s_end = s_begin + 1
    else:
        s_begin = 0
        s_end = SPLITS
    total = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for s in range(s_begin, s_end):
        g_begin = s * groups_per_split
        g_end = tl.minimum(g_begin + groups_per_split, n_groups)
        part = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for g in range(g_begin, g_end):
            xt = tl.load(x_rows + tl.cast(g * GROUP, tl.int64) * stride_xk, mask=mask_m[:, None], other=0.0)
            wb = tl.load(w_rows + g * (GROUP // 2), mask=mask_n[:, None], other=0)
            if DOT_FP32:  # fp32 x, or the CPU interpreter (whose tl.dot on bf16 is wrong)
                lo = (wb & 15).to(tl.int8) - 8
                hi = (wb >> 4).to(tl.int8) - 8
                a = xt.to(tl.float32)
                # (j, t) -> k = 2j + t: the low nibble is the even k.
                b = tl.trans(tl.reshape(tl.join(lo, hi), (BLOCK_N, GROUP)).to(tl.float32))
            else:
                lo, hi = unpack_nibbles(wb, x_ptr.dtype.element_ty)  # (4 bytes an instruction: unpack.py)
                a = xt
                b = tl.trans(tl.reshape(tl.join(lo, hi), (BLOCK_N, GROUP)))
            if INTERPRETED:  # numpy's matmul sums in an order that depends on the tile's M: not batch invariant
                blk = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
            elif IEEE:
                blk = tl.dot(a, b, input_precision="ieee")
            else:
                blk = tl.dot(a, b)
            sc = tl.load(s_rows + g * stride_sg, mask=mask_n, other=0.0).to(tl.float32)
            part += blk * sc[None, :]
        total += part

    if SPLIT_PROGRAMS and SPLITS > 1:
        # Partials [SPLITS, M, N] (contiguous); the reduce kernel adds them in split order.
        p = p_ptr + tl.program_id(1).to(tl.int64) * mn + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        tl.store(p, total, mask=mask_m[:, None] & mask_n[None, :])
    else:
        y = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
        tl.store(y, total.to(y_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])
