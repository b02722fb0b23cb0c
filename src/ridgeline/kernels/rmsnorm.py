"""RMSNorm and fused residual-add + RMSNorm in Triton.

One kernel serves both ops (HAS_RESIDUAL is a constexpr), so the fused op runs the very same per-row arithmetic
as the plain one on residual_out: the two agree bitwise by construction. What decides the arithmetic (row
layout, warps, one pass or two) depends on the hidden size and dtypes only, never on the number of rows, and
each row is reduced by one program in a fixed order: outputs are batch invariant and deterministic.

The order of a row's sum also follows the register layout Triton derives from the widest memory access it can
prove, so alignments are capped at N's (`row_alignments`) and a weight off a 16-byte boundary is copied: the
layout is then the same for any strides and pointer offsets (checked ahead of time for sm_90 by
`scripts/compile_configs.py --check-layouts`, run by the tests). One corner remains: with no weight and every
row tensor starting off a 16-byte boundary, the sum may be laid out (so rounded) otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ridgeline.kernels._fastlaunch import CachedLauncher
from ridgeline.kernels._launch import (
    FLOAT_DTYPES,
    interpreter_enabled,
    multiprocessor_count,
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
    rows_view,
    stride_alignment,
)
from ridgeline.kernels._rounding import to_storage
from ridgeline.kernels.rmsnorm_quant import (
    FP8_DTYPES,
    MIN_SCALE_FACTOR,
    QUANT_DYNAMIC,
    QUANT_STATIC,
    check_quant_dtype,
    validate_static_scale,
)
from ridgeline.kernels.rmsnorm_split import (
    WORKSPACE,
    _rms_norm_split_kernel,
    chunk_for,
    resident_programs,
    split_grid,
)

# Widest row held whole in one program's registers (64 KB: 32768 16-bit columns over 16 warps, 114-126
# registers, no spills for sm_90); wider rows are split across programs in chunks of CHUNK_BLOCK columns (or,
# where that cannot run, loop over them twice).
MAX_SINGLE_PASS_BYTES = 65536
# One pass over more columns than this: the FP8 epilogues keep two passes (their max needs more registers;
# not measured in one pass), as does a weight wider than x loaded with it (it would not fit 128 registers).
WIDE_ONE_PASS = 16384
# Rows of pieces wider than WIDE_ONE_PASS load the weight after the reduction beyond one row per SM. Loaded with
# x, it takes a program's registers past 64 for one op or the other (sm_90: fused 16388 72, 18000 80; plain
# 20000 79; fused 20000 90), which leaves one program of 16 warps per SM instead of two: 134.0 vs 94.4 us at
# 4096x20000 (fused 218.3 vs 166.9). Where it fits (16896: 64 for both) the weight first was 2-4% faster at 2048
# rows (43.3 vs 44.9 us, fused 70.0 vs 71.0): the smaller loss (h200-explore-s5-w32k*.json).
CHUNK_BLOCK = 8192
# Programs sharing one row at most: all of a row's programs must be resident at once (H200: 264 of 16 warps).
MAX_SPLIT = 64
# Narrowest row split across programs. At 32768 columns the two-pass kernel was faster from 128 rows up on the
# H200 (9.9 vs 11.2 us at 128 rows, 152.7 vs 158.9 at 4096); at 65536 the split row won at 1, 64 and 2048 rows
# (6.9 vs 16.1, 11.2 vs 14.9, 155.7 vs 178.6 us), fused too (h200-explore-split-final*.json).
MIN_SPLIT_COLUMNS = 32769


@triton.jit
def _load(ptrs, c, N, MASKED: tl.constexpr, POLICY: tl.constexpr):
    """A load that is masked only where the piece can run past the row (the last piece); POLICY is an L2
    eviction policy ("" for none)."""
    if MASKED:
        return tl.load(ptrs, mask=c < N, other=0.0, eviction_policy=POLICY)
    return tl.load(ptrs, eviction_policy=POLICY)


@triton.jit
def _store(ptrs, value, c, N, MASKED: tl.constexpr, POLICY: tl.constexpr):
    if MASKED:
        tl.store(ptrs, value, mask=c < N, eviction_policy=POLICY)
    else:
        tl.store(ptrs, value, eviction_policy=POLICY)


@triton.jit
def _load_weight(W, off, N, P: tl.constexpr, MASKED: tl.constexpr, STREAM: tl.constexpr):
    """The weight's columns [off, off + P); STREAM: kept in L2 (evict_last), as every row reads it."""
    c = off + tl.arange(0, P)
    policy: tl.constexpr = "evict_last" if STREAM else ""
    return _load(W + c, c, N, MASKED, policy)


@triton.jit
def _load_piece(
    x_row, r_row, ro_row, W, off, N,
    P: tl.constexpr, MASKED: tl.constexpr, HAS_RESIDUAL: tl.constexpr, LOAD_W: tl.constexpr,
    STREAM: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """Columns [off, off + P) of a row (after the residual add, whose result is stored here) and, with LOAD_W,
    the weight there (issued before the reduction: its latency overlaps x's, but it holds registers longer).
    Only the row's last piece is masked: the others lie wholly inside it. STREAM: the row's lines are read and
    written once, so they are the first to leave L2 (evict_first)."""
    c = off + tl.arange(0, P)
    policy: tl.constexpr = "evict_first" if STREAM else ""
    x = _load(x_row + c, c, N, MASKED, policy)
    if HAS_RESIDUAL:
        r = _load(r_row + c, c, N, MASKED, policy)
        # Upcast before any math: fp32 on the GPU, and bf16 arithmetic is wrong in the CPU interpreter.
        x = to_storage(x.to(tl.float32) + r.to(tl.float32), ro_row.dtype.element_ty, EMULATE_RNE)
        _store(ro_row + c, x, c, N, MASKED, policy)
    w = x
    if LOAD_W:
        w = _load_weight(W, off, N, P, MASKED, STREAM)
    return x, w


@triton.jit
def _sum_sq(x):
    xf = x.to(tl.float32)
    return tl.sum(xf * xf, axis=0)


@triton.jit
def _add_and_max(s1, m1, s2, m2):
    return s1 + s2, tl.maximum(m1, m2)


@triton.jit
def _sum_sq_abs_max(x, w, weight_offset, HAS_WEIGHT: tl.constexpr, INTERPRETED: tl.constexpr):
    """(sum of x^2, max |x * (w + weight_offset)|) in one reduction: one round of shuffles and barriers. On the
    GPU the sum goes through the same tree as `tl.sum` on the same layout; the CPU interpreter folds a custom
    combine in another order than its `tl.sum`, so there the two are reduced apart (the same bits as the GPU's
    separate reductions, which is what the tests compare against)."""
    xf = x.to(tl.float32)
    xw = xf
    if HAS_WEIGHT:
        xw = xf * (w.to(tl.float32) + weight_offset)
    if INTERPRETED:
        return tl.sum(xf * xf, axis=0), tl.max(tl.abs(xw), axis=0)
    return tl.reduce((xf * xf, tl.abs(xw)), 0, _add_and_max)


@triton.jit
def _y_piece(
    W, x, w, rstd, weight_offset, off, N,
    P: tl.constexpr, MASKED: tl.constexpr, HAS_WEIGHT: tl.constexpr, WEIGHT_LOADED: tl.constexpr,
    RSTD_LAST: tl.constexpr, STREAM: tl.constexpr,
):
    """y = x * rstd * (w + weight_offset) in float32 for columns [off, off + P) (masked columns: 0).

    RSTD_LAST (dynamic FP8): y = (x * (w + weight_offset)) * rstd. With rstd > 0 applied last, the row's max |y|
    is exactly rstd times max |x * (w + weight_offset)| (float rounding is monotonic), so a scale taken from
    either max has the same bits: `joint_max` and the two-pass kernel's scale then equal this path's."""
    if RSTD_LAST and HAS_WEIGHT:
        if not WEIGHT_LOADED:
            w = _load_weight(W, off, N, P, MASKED, STREAM)
        y = (x.to(tl.float32) * (w.to(tl.float32) + weight_offset)) * rstd
    else:
        y = x.to(tl.float32) * rstd
        if HAS_WEIGHT:
            if not WEIGHT_LOADED:
                w = _load_weight(W, off, N, P, MASKED, STREAM)
            y = y * (w.to(tl.float32) + weight_offset)
    return y


@triton.jit
def _store_piece(
    y_row, W, x, w, rstd, weight_offset, scale, qmax, off, N,
    P: tl.constexpr, MASKED: tl.constexpr, HAS_WEIGHT: tl.constexpr, WEIGHT_LOADED: tl.constexpr,
    QUANT: tl.constexpr, STREAM: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """y of a piece rounded once to the output dtype; with QUANT, to FP8 as sat(y / scale)."""
    c = off + tl.arange(0, P)
    y = _y_piece(W, x, w, rstd, weight_offset, off, N, P, MASKED, HAS_WEIGHT, WEIGHT_LOADED, QUANT == 2, STREAM)
    if QUANT != 0:
        y = tl.clamp(y / scale, -qmax, qmax)
    policy: tl.constexpr = "evict_first" if STREAM else ""
    _store(y_row + c, to_storage(y, y_row.dtype.element_ty, EMULATE_RNE), c, N, MASKED, policy)


@triton.jit
def _abs_max(y):
    return tl.max(tl.abs(y), axis=0)


@triton.jit
def _norm_row(
    row, X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q, N, eps, weight_offset, S, qmax, min_scale,
    X_ALIGN: tl.constexpr, R_ALIGN: tl.constexpr, RO_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr, BLOCK_N: tl.constexpr, PIECE_B: tl.constexpr,
    PIECE_C: tl.constexpr, SINGLE_PASS: tl.constexpr, WEIGHT_FIRST: tl.constexpr, REVERSE_PASS2: tl.constexpr,
    L2_HINTS: tl.constexpr, QUANT: tl.constexpr, JOINT_MAX: tl.constexpr, UNROLL: tl.constexpr,
    STREAM_HINTS: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """One row, start to end: the same arithmetic whichever program, grid or loop handles it.

    QUANT: 0 stores y in Y's dtype; 1 stores sat(y / S[0]) (static FP8 scale); 2 computes the row's scale
    max|y| / qmax (at least min_scale), stores it to S[row] and the row as sat(y / scale) (dynamic FP8).
    JOINT_MAX (dynamic, one pass, weight first): the row's max |x * w| is reduced together with its sum of squares
    and scale = rstd * that max / qmax, as the two-pass path computes it: one block reduction instead of two."""
    cols = tl.arange(0, BLOCK_N)
    # int64 first, then times the stride: a row stride of 2^31 elements or more must not wrap in int32.
    row64 = tl.cast(row, tl.int64)
    x_row = X + row64 * x_stride_q * X_ALIGN
    y_row = Y + row64 * y_stride_q * Y_ALIGN
    r_row = x_row
    ro_row = y_row
    if HAS_RESIDUAL:
        r_row = R + row64 * r_stride_q * R_ALIGN
        ro_row = RO + row64 * ro_stride_q * RO_ALIGN
    scale = 1.0
    if QUANT == 1:
        scale = tl.load(S)
    if SINGLE_PASS:
        # The row in registers as up to three power-of-two pieces (5120 = 4096 + 1024: no idle lanes), all
        # loads (weight included) issued before the reduction so their latencies overlap.
        B_OFF: tl.constexpr = BLOCK_N
        C_OFF: tl.constexpr = BLOCK_N + PIECE_B
        W_EARLY: tl.constexpr = HAS_WEIGHT and WEIGHT_FIRST
        xa, wa = _load_piece(x_row, r_row, ro_row, W, 0, N, BLOCK_N, PIECE_B == 0,
                             HAS_RESIDUAL, W_EARLY, STREAM_HINTS, EMULATE_RNE)
        if PIECE_B > 0:
            xb, wb = _load_piece(x_row, r_row, ro_row, W, B_OFF, N, PIECE_B, PIECE_C == 0,
                                 HAS_RESIDUAL, W_EARLY, STREAM_HINTS, EMULATE_RNE)
        if PIECE_C > 0:
            xc, wc = _load_piece(x_row, r_row, ro_row, W, C_OFF, N, PIECE_C, True,
                                 HAS_RESIDUAL, W_EARLY, STREAM_HINTS, EMULATE_RNE)
        JOINT: tl.constexpr = JOINT_MAX and QUANT == 2
        tl.static_assert(not JOINT or W_EARLY or not HAS_WEIGHT, "JOINT_MAX needs the weight loaded first")
        if JOINT:
            sum_sq, amax_xw = _sum_sq_abs_max(xa, wa, weight_offset, HAS_WEIGHT, EMULATE_RNE)
            if PIECE_B > 0:
                s_b, m_b = _sum_sq_abs_max(xb, wb, weight_offset, HAS_WEIGHT, EMULATE_RNE)
                sum_sq += s_b
                amax_xw = tl.maximum(amax_xw, m_b)
            if PIECE_C > 0:
                s_c, m_c = _sum_sq_abs_max(xc, wc, weight_offset, HAS_WEIGHT, EMULATE_RNE)
                sum_sq += s_c
                amax_xw = tl.maximum(amax_xw, m_c)
        else:
            sum_sq = _sum_sq(xa)
            if PIECE_B > 0:
                sum_sq += _sum_sq(xb)
            if PIECE_C > 0:
                sum_sq += _sum_sq(xc)
        rstd = tl.rsqrt(sum_sq / N + eps)
        # With weight first the weight is in registers already; the dynamic scale also needs it before any
        # store, so it loads it here, once, after the reduction; otherwise each piece loads it when storing.
        W_LATE: tl.constexpr = HAS_WEIGHT and not WEIGHT_FIRST and QUANT == 2
        W_HELD: tl.constexpr = W_EARLY or W_LATE
        if W_LATE:
            wa = _load_weight(W, 0, N, BLOCK_N, PIECE_B == 0, STREAM_HINTS)
            if PIECE_B > 0:
                wb = _load_weight(W, B_OFF, N, PIECE_B, PIECE_C == 0, STREAM_HINTS)
            if PIECE_C > 0:
                wc = _load_weight(W, C_OFF, N, PIECE_C, True, STREAM_HINTS)
        if JOINT:
            scale = tl.maximum(amax_xw * rstd / qmax, min_scale)
            tl.store(S + row64, scale)
        elif QUANT == 2:  # the scale needs the row's max |y| before any store (masked lanes hold 0)
            amax = _abs_max(_y_piece(W, xa, wa, rstd, weight_offset, 0, N, BLOCK_N, PIECE_B == 0, HAS_WEIGHT,
                                     W_HELD, True, STREAM_HINTS))
            if PIECE_B > 0:
                amax = tl.maximum(amax, _abs_max(_y_piece(W, xb, wb, rstd, weight_offset, B_OFF, N, PIECE_B,
                                                          PIECE_C == 0, HAS_WEIGHT, W_HELD, True,
                                                          STREAM_HINTS)))
            if PIECE_C > 0:
                amax = tl.maximum(amax, _abs_max(_y_piece(W, xc, wc, rstd, weight_offset, C_OFF, N, PIECE_C, True,
                                                          HAS_WEIGHT, W_HELD, True, STREAM_HINTS)))
            scale = tl.maximum(amax / qmax, min_scale)
            tl.store(S + row64, scale)
        # (The compiler reuses y computed for the max: the same expression of the same values.)
        _store_piece(y_row, W, xa, wa, rstd, weight_offset, scale, qmax, 0, N, BLOCK_N, PIECE_B == 0, HAS_WEIGHT,
                     W_HELD, QUANT, STREAM_HINTS, EMULATE_RNE)
        if PIECE_B > 0:
            _store_piece(y_row, W, xb, wb, rstd, weight_offset, scale, qmax, B_OFF, N, PIECE_B, PIECE_C == 0,
                         HAS_WEIGHT, W_HELD, QUANT, STREAM_HINTS, EMULATE_RNE)
        if PIECE_C > 0:
            _store_piece(y_row, W, xc, wc, rstd, weight_offset, scale, qmax, C_OFF, N, PIECE_C, True, HAS_WEIGHT,
                         W_HELD, QUANT, STREAM_HINTS, EMULATE_RNE)
    else:
        # Rows too wide for registers: sum of squares over chunks, then a second pass re-reads the row.
        # L2_HINTS keeps the first pass's lines in L2 (evict_last) and lets the second pass drop them.
        first_policy: tl.constexpr = "evict_last" if L2_HINTS else ""
        second_policy: tl.constexpr = "evict_first" if L2_HINTS else ""
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        # Dynamic FP8: max |x * (w + offset)| in the first pass too. y = x * rstd * (w + offset) with rstd > 0,
        # so rstd times this max is the row's max |y| up to float32 rounding (a max is exact in any order).
        amax_xw = tl.zeros([BLOCK_N], dtype=tl.float32)
        # UNROLL > 1: that many chunks' loads in flight at once (the loop's bound is only known at run time).
        for start in tl.range(0, N, BLOCK_N, loop_unroll_factor=UNROLL):
            c = start + cols
            mask = c < N
            x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy=first_policy).to(tl.float32)
            if HAS_RESIDUAL:
                r = tl.load(r_row + c, mask=mask, other=0.0).to(tl.float32)
                xr = to_storage(x + r, RO.dtype.element_ty, EMULATE_RNE)
                tl.store(ro_row + c, xr, mask=mask, eviction_policy=first_policy)
                x = xr.to(tl.float32)
            acc += x * x
            if QUANT == 2:
                xw = x
                if HAS_WEIGHT:
                    xw = x * (tl.load(W + c, mask=mask, other=0.0).to(tl.float32) + weight_offset)
                amax_xw = tl.maximum(amax_xw, tl.abs(xw))
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        if QUANT == 2:
            scale = tl.maximum(tl.max(amax_xw, axis=0) * rstd / qmax, min_scale)
            tl.store(S + row64, scale)
        # Second pass re-reads the row (from L2 unless too many rows are in flight) and writes y. Last chunk
        # first (REVERSE_PASS2): the most recently read lines are the likeliest to be in L2 still.
        src_row = ro_row if HAS_RESIDUAL else x_row
        n_chunks = tl.cdiv(N, BLOCK_N)
        for i in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
            if REVERSE_PASS2:
                c = (n_chunks - 1 - i) * BLOCK_N + cols
            else:
                c = i * BLOCK_N + cols
            mask = c < N
            x = tl.load(src_row + c, mask=mask, other=0.0, eviction_policy=second_policy).to(tl.float32)
            y = x * rstd
            if HAS_WEIGHT:
                w = tl.load(W + c, mask=mask, other=0.0).to(tl.float32)
                if QUANT == 2:  # rstd last, as the first pass's max assumes (`_y_piece`, RSTD_LAST)
                    y = (x * (w + weight_offset)) * rstd
                else:
                    y = y * (w + weight_offset)
            if QUANT != 0:
                y = tl.clamp(y / scale, -qmax, qmax)
            tl.store(y_row + c, to_storage(y, Y.dtype.element_ty, EMULATE_RNE), mask=mask)


@triton.jit
def _rms_norm_kernel(
    X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q,
    M, n_q, eps, weight_offset, S, qmax, min_scale,
    X_ALIGN: tl.constexpr, R_ALIGN: tl.constexpr, RO_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr,
    N_ALIGN: tl.constexpr, HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr,
    BLOCK_N: tl.constexpr, PIECE_B: tl.constexpr, PIECE_C: tl.constexpr, SINGLE_PASS: tl.constexpr,
    WEIGHT_FIRST: tl.constexpr, REVERSE_PASS2: tl.constexpr, L2_HINTS: tl.constexpr, ONE_ROW: tl.constexpr,
    QUANT: tl.constexpr, JOINT_MAX: tl.constexpr, UNROLL: tl.constexpr, STREAM_HINTS: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):
    # N = n_q * N_ALIGN: the compiler then knows the mask `cols < N` is constant over N_ALIGN lanes and can use
    # vector accesses for hidden sizes that are not multiples of 16 (4100 = 4 * 1025: 8-byte accesses).
    N = n_q * N_ALIGN
    pid = tl.program_id(0)
    if ONE_ROW:  # one program per row, no loop
        _norm_row(pid, X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q, N, eps, weight_offset,
                  S, qmax, min_scale, X_ALIGN, R_ALIGN, RO_ALIGN, Y_ALIGN, HAS_RESIDUAL, HAS_WEIGHT, BLOCK_N,
                  PIECE_B, PIECE_C, SINGLE_PASS, WEIGHT_FIRST, REVERSE_PASS2, L2_HINTS, QUANT, JOINT_MAX, UNROLL,
                  STREAM_HINTS, EMULATE_RNE)
    else:  # persistent grid: a grid-stride loop over rows
        for row in range(pid, M, tl.num_programs(0)):
            _norm_row(row, X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q, N, eps,
                      weight_offset, S, qmax, min_scale, X_ALIGN, R_ALIGN, RO_ALIGN, Y_ALIGN, HAS_RESIDUAL,
                      HAS_WEIGHT, BLOCK_N, PIECE_B, PIECE_C, SINGLE_PASS, WEIGHT_FIRST, REVERSE_PASS2, L2_HINTS,
                      QUANT, JOINT_MAX, UNROLL, STREAM_HINTS, EMULATE_RNE)


@dataclass(frozen=True)
class LaunchConfig:
    """How a row of hidden size N is processed; a function of N and dtypes only (batch invariance)."""

    block_n: int
    single_pass: bool
    num_warps: int
    # Programs per SM of the persistent grid-stride loop; 0 launches one program per row. Either way a row's
    # arithmetic is the same, so this may depend on M without breaking batch invariance.
    programs_per_sm: int = 0
    # One pass: further power-of-two pieces of the row after the first block_n columns (0 = none); with
    # pieces, block_n <= N and only the last piece is masked.
    piece_b: int = 0
    piece_c: int = 0
    # Two passes: the second pass walks the chunks last to first; L2 eviction hints on the two passes.
    reverse_pass2: bool = False
    l2_hints: bool = False
    # With one program per row: no grid-stride loop around the row (a persistent grid always loops).
    loop_free: bool = False
    # One pass: load the weight with x, before the reduction (latency-bound small batches gain a memory round
    # trip; large ones lose occupancy to the registers it holds). Neither changes the arithmetic.
    weight_first: bool = False
    # Register cap per thread for ptxas (0 = its choice): trades a few spills for more programs per SM.
    max_registers: int = 0
    # Rows per SM (lo, hi] where `config_for` launches the lean variant instead (no weight first, registers
    # capped at lean_max_registers): where the weight's registers would cost a second wave of programs.
    lean_zone: tuple[int, int] = (0, 0)
    lean_max_registers: int = 0
    # Dynamic FP8, one pass: reduce max |x * w| with the sum of squares (one block reduction instead of two; needs
    # the weight first). The scale is then rstd * max |x * w|, which equals max |y| bitwise because y is
    # (x * w) * rstd for this op (`_y_piece`), so it changes no bit and may follow the row count. Ignored by the
    # other ops.
    joint_max: bool = False
    # Wide rows: this many programs share a row, each holding block_n columns (a chunk) in registers, and they
    # exchange partial sums (kernels/rmsnorm_split.py). programs_per_sm then caps the programs per SM (0: as
    # many as fit). The CPU interpreter cannot run it: `config_for` takes `two_pass_config` there.
    split: int = 0
    # Two passes: unroll each pass's loop over chunks this many times (0/1: not), so that many chunks' loads are
    # in flight together; changes no bit (the same additions in the same order).
    unroll: int = 0
    # One pass: L2 eviction hints for rows that are read and written once (x, residual, y, residual_out:
    # evict_first) and for the weight every row reads (evict_last). Changes no bit.
    stream_hints: bool = False
    # Rows per SM (lo, hi] where `config_for` sets stream_hints.
    stream_zone: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        if self.piece_c and not self.piece_b:
            raise ValueError("LaunchConfig: piece_c needs piece_b")
        if (self.piece_b or self.piece_c) and not self.single_pass:
            raise ValueError("LaunchConfig: row pieces are a one-pass layout")
        if self.split and self.single_pass:
            raise ValueError("LaunchConfig: a split row is not a one-pass layout")


    def width(self) -> int:
        """Columns one pass covers: rows up to this wide fit (one pass, split rows), or the chunk width (two
        passes)."""
        return self.block_n * max(1, self.split) + self.piece_b + self.piece_c

    def describe(self) -> str:
        grid = f"{self.programs_per_sm}/SM" if self.programs_per_sm else "row/program"
        if self.loop_free:
            grid += " no-loop"
        if self.weight_first:
            grid += " w-first"
        if self.max_registers:
            grid += f" regs<={self.max_registers}"
        if self.joint_max:
            grid += " joint-max"
        if self.stream_hints:
            grid += " stream"
        if self.split:
            grid = f"{self.programs_per_sm}/SM" if self.programs_per_sm else "resident"
            return f"split {self.split}x{self.block_n} warps={self.num_warps} grid={grid}" + (
                " w-first" if self.weight_first else "")
        if self.single_pass:
            pieces = "+".join(str(p) for p in (self.block_n, self.piece_b, self.piece_c) if p)
            return f"1-pass BLOCK_N={pieces} warps={self.num_warps} grid={grid}"
        extra = "".join((" reverse" if self.reverse_pass2 else "", " l2hints" if self.l2_hints else "",
                         f" unroll={self.unroll}" if self.unroll > 1 else ""))
        return f"2-pass BLOCK_N={self.block_n} warps={self.num_warps} grid={grid}{extra}"


def row_pieces(n: int, max_pieces: int = 3, min_piece: int = 1) -> tuple[int, ...]:
    """Split a row of n columns into power-of-two pieces, largest first: 5120 -> (4096, 1024), 7168 -> (4096,
    2048, 1024); the last piece is rounded up (masked) when n has more set bits than max_pieces allows, and to
    at least min_piece (pieces no smaller than a program's threads: 4100 -> (4096, 128) with 4 warps)."""
    pieces: list[int] = []
    rest = n
    while rest > 0:
        p = 1 << (rest.bit_length() - 1)
        if len(pieces) == max_pieces - 1 or p < min_piece:
            pieces.append(max(triton.next_power_of_2(rest), min_piece if pieces else 1))
            break
        pieces.append(p)
        rest -= p
    return tuple(pieces)


def candidate_configs(n: int) -> list[LaunchConfig]:
    """The configs worth timing for hidden size n (scripts/explore_rmsnorm.py sweeps them): warps around the
    current choice, the row as one masked power-of-two block or as exact power-of-two pieces, and for wide or
    unaligned rows two-pass variants (chunk width, warps, persistent grid, second pass reversed, L2 hints)."""
    out = []
    block = triton.next_power_of_2(n)
    # (up to 32768 16-bit columns in one pass, no spills for sm_90: 16 warps 114-126 registers, 32 warps 61-64)
    if block * 2 <= MAX_SINGLE_PASS_BYTES:
        for warps in (1, 2, 4, 8, 16, 32):
            layouts = [(block, 0, 0)]
            pieces = row_pieces(n, min_piece=32 * warps)
            if len(pieces) > 1 and pieces[0] != block:
                layouts.append((*pieces, 0, 0)[:3])
            for first, b, c in layouts:
                per_thread = first // (32 * warps)
                if 2 <= per_thread <= 64:
                    for loop_free in (False, True):
                        for w_first in (False, True):
                            out.append(LaunchConfig(first, True, warps, 0, b, c, loop_free=loop_free,
                                                    weight_first=w_first))
    out += split_candidates(n)
    unaligned = (n * 2) % 16 != 0
    orders = ((False, False), (True, False), (True, True), (False, True))
    if block > 16384:  # wide rows: two passes only
        for chunk, warps in ((8192, 16), (4096, 8)):
            for per_sm in (0, 2):
                for rev, hints in orders:
                    out.append(LaunchConfig(chunk, False, warps, per_sm, reverse_pass2=rev, l2_hints=hints))
    elif unaligned and n >= 2048:
        for chunk in (1024, 2048):
            for rev, hints in orders[:2]:
                out.append(LaunchConfig(chunk, False, 8, 0, reverse_pass2=rev, l2_hints=hints))
    elif n >= 16384:
        for rev, hints in orders:
            out.append(LaunchConfig(8192, False, 16, 0, reverse_pass2=rev, l2_hints=hints))
    return out


def split_candidates(n: int) -> list[LaunchConfig]:
    """Rows of 16K columns and more split across programs: chunk widths and warps, the weight loaded with x or
    after the wait (as many programs per SM as fit: one per SM was 1.3-3x slower at 2048x65536 on the H200)."""
    out = []
    if n < 16384:
        return out
    for chunk, warps in ((4096, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16)):
        split = triton.cdiv(n, chunk)
        if 2 <= split <= MAX_SPLIT:
            for weight_first in (False, True):
                out.append(LaunchConfig(chunk, False, warps, split=split, weight_first=weight_first))
    return out


@functools.lru_cache(maxsize=1024)
def launch_config(n: int, dtype: torch.dtype, fused: bool = False) -> LaunchConfig:
    """The launch configuration for rows of n columns (docs/perf/rmsnorm.md has the sweeps behind each rule).

    What decides the arithmetic (row layout, warps, one pass or two) depends on n and the dtype only, and is the
    same for the plain and the fused op: outputs are batch invariant and `fused.out == rms_norm(residual_out)`
    bitwise. The other knobs change no bit and may follow the op (and, in `config_for`, the row count).
    - Rows up to 64 KB (32768 16-bit columns) stay in registers (one pass), loaded with the weight before the
      reduction, one program per row without a loop. Rows whose power-of-two block would leave over a quarter
      of the lanes idle are split into power-of-two pieces (5120 = 4096 + 1024, 20000 = 16384 + 2048 + 2048).
    - Warps: about 16 columns a thread for rows that are a multiple of 16 bytes (16-byte vectors), 32 for the
      others (narrower vectors need more of them in flight), between 1 and 16 warps.
    - Wider rows: split across programs of 8192 columns and 8 warps that exchange partial sums
      (kernels/rmsnorm_split.py), every byte read once. Where a split row cannot run (and fp32 rows of 16K-32K
      columns): two passes over 8K-column chunks, 16 warps, with L2 eviction hints so the second pass finds the
      row in L2; the plain op runs 2 programs per SM, the fused one walks the second pass backwards.
    """
    block = triton.next_power_of_2(n)
    if block * dtype.itemsize > MAX_SINGLE_PASS_BYTES:
        split = triton.cdiv(n, CHUNK_BLOCK)
        if MIN_SPLIT_COLUMNS <= n and split <= MAX_SPLIT:
            return LaunchConfig(chunk_for(n, split), False, 8, split=split)
        return two_pass_config(fused)
    per_thread = 16 if (n * dtype.itemsize) % 16 == 0 else 32
    warps = min(16, max(1, 1 << ((n // (32 * per_thread)).bit_length() - 1))) if n >= 64 * per_thread else 1
    # Pieces no smaller than the program's threads: a piece spread over more threads than it has columns
    # replicates them, and the fused op gave wrong, nondeterministic bits that way on the H200 (4100 = 4096 + 4).
    pieces = row_pieces(n, min_piece=32 * warps)
    if len(pieces) > 1 and (block - n) * 4 > block:
        first, b, c = (*pieces, 0, 0)[:3]
    else:
        first, b, c = block, 0, 0
    cfg = LaunchConfig(first, True, warps, 0, b, c, loop_free=True, weight_first=True)
    if b and cfg.width() > WIDE_ONE_PASS:
        cfg = dataclasses.replace(cfg, lean_zone=(1, 1 << 40))
    if not fused and dtype.itemsize == 2 and STREAM_COLUMNS[0] <= n <= STREAM_COLUMNS[1]:
        cfg = dataclasses.replace(cfg, stream_zone=STREAM_ZONE)
    tuned = _TUNED.get((n, dtype.itemsize))
    return dataclasses.replace(cfg, **tuned) if tuned else cfg


def two_pass_config(fused: bool) -> LaunchConfig:
    """Rows too wide for one program, where a split row cannot run (CPU interpreter, FP8 epilogues, rows split
    more than MAX_SPLIT ways): two passes over 8K-column chunks, the second re-reading the row from L2."""
    if fused:
        return LaunchConfig(CHUNK_BLOCK, False, 16, reverse_pass2=True, l2_hints=True)
    return LaunchConfig(CHUNK_BLOCK, False, 16, programs_per_sm=2, l2_hints=True)


# The plain op's rows of 4096-5120 16-bit columns take L2 stream hints (`stream_hints`) from 8 to 32 rows per SM.
# Measured (bf16, graph-cold, H200): 3-5% faster at 4096 rows (31 per SM) of 4096, 4100 and 5120 columns
# (4096x4096 17.69 vs 18.41 us, 4096x5120 21.86 vs 22.59, 4096x4100 18.75 vs 19.71; h200-explore-s6-aligned-
# stream.json, h200-explore-s6-stream-odd.json), 0.4-1% at 16384-65536 rows; but after an L2 flush (cold-eager)
# they cost 5-6% there (16384x4096 74.4 vs 71.0 us, 65536x4096 278.8 vs 263.2; h200-bench-rmsnorm-sweep-s6.json
# against session 2's sweep), so not beyond 32 rows per SM. Within the zone also 1-6% faster at 12-23 rows per SM
# (1536x4096 8.15 vs 8.27 us, 2048x5120 12.26 vs 12.95, 3072x4100 14.87 vs 15.87) and 4-5% in fp16 (4096x4096
# 17.63 vs 18.57; h200-explore-s6-stream-{mid,fp16}.json); below 8 the lean zone decides at these widths. Not
# wider (4096x8192 lost 3%: 35.73 vs 34.59; 5125 even), not narrower (not measured), not the fused op (within
# +-1% at 4096 columns, 3-4% slower at 8192 and 16384).
STREAM_COLUMNS = (4096, 5120)
STREAM_ZONE = (8, 32)
# The plain dynamic FP8 op reduces a row's max with its sum (joint_max, weight first) up to 16 rows per SM: faster
# at every measured row count up to 2048 (1024x4096 5.96 vs 6.93 us, 2048x8192 17.10 vs 19.04), even at 4096
# (18.04 vs 18.03), slower from 16384 (64.3 vs 58.9; h200-explore-s6-joint.json, h200-explore-quant-joint.json).
# Rows of pieces take it beyond one row per SM (1024x4100 6.53 vs 7.11 us, 2048x5125 16.81 vs 17.63; at 128 rows
# 4100 and 5125 lost 7-9%, 5120 gained 2%: h200-explore-s6-joint-odd.json). The fused dynamic op gains nothing
# from it (within +-2% up to 2048 rows, h200-explore-s6-joint-fused.json). Measured on bf16 rows of 4096, 4100,
# 5120, 5125 and 8192 columns; other widths and fp16 take it by likeness (the same one-pass kernel: one block
# reduction instead of two). A weight wider than x does not: held through the reduction its registers double,
# which cost occupancy (and, capped, spills) in the "fp32 weight" measurements.
JOINT_MAX_ROWS_PER_SM = 16

# Measured on the H200 (triton 3.6, sm_90; scripts/explore_rmsnorm.py --shapes cliff --focus, records
# docs/results/h200-explore-*-cliff.json). Weight-first holds more registers: at 4096 columns 38 instead of 32
# (6 programs of 8 warps per SM instead of 8), so 793-1056 rows take two waves instead of one; at 5120, 48
# (5 per SM) against 32 for the lean variant capped at 32 registers (8 per SM). At 8192 a 32-register cap keeps
# weight-first at 4 programs per SM without spilling (39 registers: 3).
_TUNED: dict[tuple[int, int], dict] = {
    (4096, 2): {"lean_zone": (6, 8)},
    (5120, 2): {"lean_zone": (5, 8), "lean_max_registers": 32},
    (8192, 2): {"max_registers": 32},
}


def config_for(n: int, dtype: torch.dtype, m: int, fused: bool = False,
               weight_dtype: torch.dtype | None = None, quant: int = 0) -> LaunchConfig:
    """The configuration a call on m rows of n columns launches: `launch_config`, with the knobs that change no
    bit set for m, the weight's dtype and the FP8 epilogue (quant, see `kernel_constexprs`)."""
    cfg = launch_config(n, dtype, fused)
    if cfg.split:
        # (A row's programs must all be resident: at least 2 of 8 warps fit per SM, so up to 2 per SM always do;
        # a small GPU, e.g. a MIG slice, takes two passes for rows split wider than that.)
        if quant or _INTERPRETED or cfg.split > 2 * _sm_count_hint():
            return _quant(two_pass_config(fused), False, False) if quant else two_pass_config(fused)
        # While each program has one row (about 4 programs of 8 warps fit per SM, 2 of the fused op's with the
        # weight first), the weight is best loaded with x (its latency hidden): 6.9 instead of 8.4 us at 1x65536;
        # beyond, after the wait (fewer registers, more programs): fused 64x65536 15.6 instead of 17.4 us.
        per_sm = 2 if fused else 4
        return _split_weight_first(cfg) if m * cfg.split <= per_sm * _sm_count_hint() else cfg
    sms = _sm_count_hint()
    if quant:
        if cfg.single_pass and cfg.width() > WIDE_ONE_PASS:
            return _quant(two_pass_config(fused), False, False)
        joint = (quant == QUANT_DYNAMIC and not fused and (sms < m or not cfg.piece_b)
                 and m <= JOINT_MAX_ROWS_PER_SM * sms
                 and (weight_dtype is None or weight_dtype.itemsize <= dtype.itemsize))
        return _quant(cfg, m <= sms, joint)
    if weight_dtype is not None and weight_dtype.itemsize > dtype.itemsize and cfg.single_pass:
        # A weight wider than x (fp32 weight, bf16 x) held through the reduction doubles its registers: under
        # the 32-register cap of 8192 columns that spilled, 1.8x slower on the H200
        # (h200-bench-rmsnorm-wfp32.json). Uncapped; loaded with x up to two rows per SM (decode: 1.56 instead
        # of 1.67 us at 1x4096, 1.96 instead of 2.18 at 1x8192, graph-hot, h200-explore-wfp32-decode.json),
        # after the reduction beyond.
        return _wide_weight(cfg, m <= 2 * _sm_count_hint() and cfg.width() <= WIDE_ONE_PASS)
    lo, hi = cfg.lean_zone
    if hi and lo * sms < m <= hi * sms:
        return _lean(cfg)
    lo, hi = cfg.stream_zone
    if hi and lo * sms < m <= hi * sms:
        return _stream(cfg)
    return cfg


@functools.lru_cache(maxsize=256)
def _split_weight_first(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, weight_first=True)


@functools.lru_cache(maxsize=256)
def _wide_weight(cfg: LaunchConfig, first: bool) -> LaunchConfig:
    return dataclasses.replace(cfg, weight_first=first, max_registers=0, lean_zone=(0, 0), lean_max_registers=0,
                               stream_zone=(0, 0))


@functools.lru_cache(maxsize=256)
def _quant(cfg: LaunchConfig, one_wave: bool, joint: bool) -> LaunchConfig:
    """FP8 outputs (measured on the H200: h200-explore-quant-*.json, h200-ab-fp8.json). One pass: no register cap
    and no lean zone (both tuned for 16-bit outputs); the weight loaded with x while the rows fit on the GPU at
    once (one row per SM or fewer: 0.3-0.4 us saved per call) or where joint_max needs it (the plain dynamic op up
    to 16 rows per SM), after the reduction beyond (weight first cost 5-10% at large M: 214 vs 203 us at
    65536x4096, static). Two passes: at most 64 registers (the first pass also
    holds the weight and a running max: 92 registers, one program per SM; capped, the fused op at 2048x65536
    took 302 instead of 372 us). The row's max reduced with its sum (joint_max) won in one wave (plain 1x4096
    1.94 instead of 2.20 us, 128x4096 2.73 instead of 2.89, h200-explore-quant-joint.json) and lost from 16384
    rows (64.3 vs 58.9 us): `config_for` asks for it (joint) where it won (JOINT_MAX_ROWS_PER_SM)."""
    if not cfg.single_pass:
        return dataclasses.replace(cfg, max_registers=64)
    # (joint_max gives the bits of the separate max: by construction, and tested on the CPU and the H200. It needs
    # the weight first; a config asking for it keeps it.)
    joint = joint or cfg.joint_max
    return dataclasses.replace(cfg, weight_first=one_wave or joint, joint_max=joint, max_registers=0,
                               lean_zone=(0, 0), lean_max_registers=0, stream_zone=(0, 0))


@functools.lru_cache(maxsize=256)
def _stream(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, stream_hints=True)


@functools.lru_cache(maxsize=256)
def _lean(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, weight_first=False, max_registers=cfg.lean_max_registers)


@functools.lru_cache(maxsize=1)
def _sm_count_hint() -> int:
    """SMs of the current GPU (132 on an H200) for the row-count rules; 132 where there is none."""
    if torch.cuda.is_available():
        return multiprocessor_count(torch.device("cuda", torch.cuda.current_device()))
    return 132


# Read once: Triton decided at import (when the kernel was decorated) whether it interprets.
_INTERPRETED = interpreter_enabled()


# Split-row programs per SM before this process has launched that config on the device (or for a capture on the
# meta device): 8 warps at up to 64 registers fit 4 (the shipped configs compile to 46-64 registers, 59-121 with
# the weight first). After a launch, the driver's count for the compiled kernel (`_SPLIT_SEEN`).
SPLIT_PROGRAMS_PER_SM_GUESS = 4
_SPLIT_SEEN: dict[tuple, int] = {}


def _split_key(device: torch.device, cfg: LaunchConfig) -> tuple:
    # ("cuda" without an index, as reports pass it, is the current device: 0 in a one-GPU process.)
    return (device.index or 0, cfg.block_n, cfg.split, cfg.num_warps, cfg.weight_first)


def _grid(m: int, cfg: LaunchConfig, device: torch.device) -> int:
    if cfg.split:  # groups of cfg.split programs, as many as are resident at once (capped by the config)
        per_sm = _SPLIT_SEEN.get(_split_key(device, cfg), SPLIT_PROGRAMS_PER_SM_GUESS)
        if cfg.programs_per_sm:
            per_sm = min(per_sm, cfg.programs_per_sm)
        if cfg.split > per_sm * multiprocessor_count(device):
            raise ValueError(f"cfg: {cfg.describe()}: {cfg.split} programs per row cannot be resident at once "
                             f"({per_sm * multiprocessor_count(device)} fit)")
        return split_grid(m, cfg.split, per_sm, multiprocessor_count(device))[1]
    per_sm = cfg.programs_per_sm
    if per_sm == 0 and not _INTERPRETED:
        return max(1, m)
    # Persistent grid-stride: at most as many programs as fit on the GPU at once (64 warps per SM on Hopper).
    # (The CPU interpreter always takes this path: few program instances keep CPU tests fast.)
    resident = multiprocessor_count(device) * (per_sm or max(1, 64 // cfg.num_warps))
    return max(1, min(m, resident))


def _validate_weight(weight: torch.Tensor | None, x: torch.Tensor, weight_offset: float) -> torch.Tensor | None:
    """The weight to launch with: contiguous, and 16-byte aligned (a weight view starting elsewhere is copied:
    its narrower loads would change the register layout, hence the order of the row's sum, so its bits)."""
    _check_float("weight_offset", weight_offset)
    if weight is None:
        if weight_offset != 0.0:
            raise ValueError("weight_offset: only meaningful with a weight (got weight=None)")
        return None
    if not isinstance(weight, torch.Tensor) or weight.dtype not in FLOAT_DTYPES:
        require_tensor("weight", weight)
        require_dtype("weight", weight)
    # (On CUDA the device index is a cheaper test than comparing torch.device objects; -1 covers CPU and meta.)
    if weight.get_device() != x.get_device() or (not x.is_cuda and weight.device != x.device):
        require_same_device("weight", weight, "x", x)
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight: expected shape ({x.shape[-1]},) to match x's last dim, got {tuple(weight.shape)}")
    if not weight.is_contiguous() or (weight.data_ptr() & 15 and weight.is_cuda):
        weight = weight.clone(memory_format=torch.contiguous_format)  # fresh allocations are 16-byte aligned
    return weight


def _validate_x(name: str, x: object) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
        require_tensor(name, x)
        require_dtype(name, x)
    if x.dim() == 0:
        raise ValueError(f"{name}: expected at least 1 dim (..., hidden), got a scalar")
    if x.shape[-1] == 0:
        raise ValueError(f"{name}: hidden size (last dim) is 0")
    if not x.is_cuda:
        require_runnable_device(name, x)
    return x


def _row_stride(t: torch.Tensor) -> int | None:
    """Stride between rows when the leading dims merge into one row dim and the last dim is contiguous."""
    if t.is_contiguous():
        return t.shape[-1]
    shape, strides = t.shape, t.stride()
    if shape[-1] > 1 and strides[-1] != 1:
        return None
    dims = [(shape[i], strides[i]) for i in range(t.dim() - 1) if shape[i] != 1]
    if not dims:
        return shape[-1]
    row = expect = dims[-1][1]
    for size, stride in reversed(dims):
        if stride != expect:
            return None
        expect = stride * size
    return row


def _input_rows(name: str, x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """An input and its row stride; copied only when the layout cannot be read in place (as documented)."""
    stride = _row_stride(x)
    if stride is None:
        x = x.contiguous()
        stride = x.shape[-1]
    return x, stride


def _output_rows(name: str, t: torch.Tensor) -> int:
    """Row stride of a tensor the kernel writes: it must be addressable in place, rows must not overlap."""
    stride = _row_stride(t)
    if stride is None:
        rows_view(name, t)  # raises the detailed error (last dim not contiguous, or unmergeable leading dims)
        raise ValueError(f"{name}: rows of shape {tuple(t.shape)}, strides {tuple(t.stride())} are not addressable")
    if stride < t.shape[-1] and t.numel() > t.shape[-1]:
        raise ValueError(f"{name}: rows overlap (row stride {stride} < hidden size {t.shape[-1]}); cannot write")
    return stride


def row_alignments(n: int, strides: tuple[int, int, int, int]) -> tuple[int, int, int, int, int]:
    """(x, residual, residual_out, y, N) alignments in elements for the ALIGN constexprs.

    No row is taken as more aligned than N allows: Triton picks the register layout (and with it the order of
    the row's sum) from the widest access it can prove, so a stride more aligned than N (x[:, :4100] of a
    4104-wide buffer) would sum in another order than contiguous rows and break batch invariance across
    layouts and `fused.out == rms_norm(residual_out)` bitwise (scripts/compile_configs.py --check-layouts)."""
    na = stride_alignment(n)
    xa, ra, roa, ya = (min(na, stride_alignment(s)) for s in strides)
    return xa, ra, roa, ya, na


def _last_piece(cfg: LaunchConfig) -> int:
    return cfg.piece_c or cfg.piece_b or cfg.block_n


def kernel_constexprs(
    cfg: LaunchConfig, aligns: tuple[int, int, int, int, int], has_residual: bool, has_weight: bool, one_row: bool,
    quant: int = 0,
) -> dict[str, object]:
    """The kernel's compile-time arguments, in signature order: (x, residual, residual_out, y, N) alignments,
    the op's flags (quant: 0 none, 1 static FP8 scale, 2 dynamic per-row FP8 scales) and the launch config."""
    xa, ra, roa, ya, na = aligns
    return {"X_ALIGN": xa, "R_ALIGN": ra, "RO_ALIGN": roa, "Y_ALIGN": ya, "N_ALIGN": na,
            "HAS_RESIDUAL": has_residual, "HAS_WEIGHT": has_weight, "BLOCK_N": cfg.block_n,
            "PIECE_B": cfg.piece_b, "PIECE_C": cfg.piece_c, "SINGLE_PASS": cfg.single_pass,
            "WEIGHT_FIRST": cfg.weight_first, "REVERSE_PASS2": cfg.reverse_pass2, "L2_HINTS": cfg.l2_hints,
            "ONE_ROW": one_row, "QUANT": quant, "JOINT_MAX": cfg.joint_max and cfg.weight_first,
            "UNROLL": max(1, cfg.unroll), "STREAM_HINTS": cfg.stream_hints and cfg.single_pass,
            "EMULATE_RNE": _INTERPRETED}


_LAUNCHER = CachedLauncher(_rms_norm_kernel)


def _launch(
    x: torch.Tensor, x_stride: int,
    r: torch.Tensor | None, r_stride: int,
    ro: torch.Tensor | None, ro_stride: int,
    weight: torch.Tensor | None,
    y: torch.Tensor, y_stride: int,
    m: int, n: int,
    eps: float,
    weight_offset: float,
    cfg: LaunchConfig | None = None,
    quant: int = 0,
    scale: torch.Tensor | None = None,
) -> None:
    """quant 1: y is FP8, sat(y / scale[0]); quant 2: y is FP8 and scale (m floats) receives each row's scale."""
    if m == 0:
        return
    if x.is_cuda and x.get_device() != torch.cuda.current_device():
        # Triton launches on the current device: make it x's (tensors on cuda:1 while cuda:0 is current).
        with torch.cuda.device(x.device):
            return _launch(x, x_stride, r, r_stride, ro, ro_stride, weight, y, y_stride, m, n, eps, weight_offset,
                           cfg, quant, scale)
    if cfg is None:
        cfg = config_for(n, x.dtype, m, r is not None, weight.dtype if weight is not None else None, quant)
    elif cfg.single_pass and (cfg.width() < n or cfg.width() - _last_piece(cfg) > n):
        # Every piece but the last is unmasked: they must lie wholly inside the row.
        raise ValueError(f"cfg: {cfg.describe()} does not fit a row of {n} columns")
    elif cfg.split and (cfg.width() < n or cfg.block_n * (cfg.split - 1) >= n):
        raise ValueError(f"cfg: {cfg.describe()} does not fit a row of {n} columns (each program needs columns)")
    has_res = r is not None
    if not has_res:
        r, r_stride, ro, ro_stride = x, x_stride, y, y_stride
    w = weight if weight is not None else x
    if cfg.split:
        if quant:
            raise ValueError(f"cfg: {cfg.describe()}: a split row has no FP8 epilogue")
        _launch_split(x, x_stride, r, r_stride, ro, ro_stride, w, y, y_stride, m, n, eps, weight_offset, cfg,
                      has_res, weight is not None)
        return
    if quant:
        qmax = FP8_DTYPES[y.dtype]
        s, min_scale = scale, MIN_SCALE_FACTOR / qmax
    else:
        s, qmax, min_scale = x, 1.0, 1.0
    fast_key = None
    if x.is_cuda and _LAUNCHER.enabled():
        # Everything the compiled kernel, the grid and the alignments depend on, cheap to build: raw sizes and
        # strides, dtypes, and which pointers are 16-byte aligned (what Triton specializes on).
        ptrs = (x.data_ptr() & 15, r.data_ptr() & 15, ro.data_ptr() & 15, w.data_ptr() & 15, y.data_ptr() & 15,
                s.data_ptr() & 15 if quant else 0)
        # id(cfg): configs come from caches; the entry keeps its config alive, so the id cannot be reused.
        fast_key = (x.get_device(), id(cfg), m, n, x_stride, r_stride, ro_stride, y_stride, x.dtype, w.dtype, y.dtype,
                    has_res, weight is not None, ptrs, quant)
        hit = _LAUNCHER.cached(fast_key)
        if hit is not None:
            kernel, (grid, xa, ra, roa, ya, na, cvals, _) = hit
            _LAUNCHER.run(kernel, grid, (x, x_stride // xa, r, r_stride // ra, ro, ro_stride // roa, w, y,
                                         y_stride // ya, m, n // na, eps, weight_offset, s, qmax, min_scale),
                          cvals, fast_key[0])
            return
    xa, ra, roa, ya, na = row_alignments(n, (x_stride, r_stride, ro_stride, y_stride))
    grid = _grid(m, cfg, x.device)
    constexprs = kernel_constexprs(cfg, (xa, ra, roa, ya, na), has_res, weight is not None,
                                   cfg.loop_free and grid == m, quant)
    _LAUNCHER.launch(
        grid,
        (x, x_stride // xa, r, r_stride // ra, ro, ro_stride // roa, w, y, y_stride // ya, m, n // na, eps,
         weight_offset, s, qmax, min_scale),
        constexprs,
        cfg.num_warps,
        fast_key,
        (grid, xa, ra, roa, ya, na, tuple(constexprs.values()), cfg),
        {"maxnreg": cfg.max_registers} if cfg.max_registers else None,
    )


def split_constexprs(cfg: LaunchConfig, aligns: tuple[int, int, int, int, int], has_residual: bool,
                     has_weight: bool) -> dict[str, object]:
    """The split kernel's compile-time arguments (kernels/rmsnorm_split.py), in signature order."""
    xa, ra, roa, ya, na = aligns
    return {"X_ALIGN": xa, "R_ALIGN": ra, "RO_ALIGN": roa, "Y_ALIGN": ya, "N_ALIGN": na,
            "HAS_RESIDUAL": has_residual, "HAS_WEIGHT": has_weight, "CHUNK": cfg.block_n, "SPLIT": cfg.split,
            "SPLIT_P2": triton.next_power_of_2(cfg.split), "WEIGHT_FIRST": cfg.weight_first,
            "EMULATE_RNE": _INTERPRETED}


_SPLIT_LAUNCHER = CachedLauncher(_rms_norm_split_kernel)
# (device, compile key) -> programs of the split kernel that fit on one SM, from its compiled registers.
_SPLIT_RESIDENT: dict[tuple, int] = {}


def _launch_split(
    x: torch.Tensor, x_stride: int, r: torch.Tensor, r_stride: int, ro: torch.Tensor, ro_stride: int,
    w: torch.Tensor, y: torch.Tensor, y_stride: int, m: int, n: int, eps: float, weight_offset: float,
    cfg: LaunchConfig, has_res: bool, has_weight: bool,
) -> None:
    """A row split across cfg.split programs (kernels/rmsnorm_split.py): a persistent, cooperative grid of as many
    groups of them as are resident at once (all of a group's programs must run together)."""
    xa, ra, roa, ya, na = aligns = row_alignments(n, (x_stride, r_stride, ro_stride, y_stride))
    constexprs = split_constexprs(cfg, aligns, has_res, has_weight)

    def args_for(part: torch.Tensor, sync: torch.Tensor, groups: int) -> tuple:
        return (x, x_stride // xa, r, r_stride // ra, ro, ro_stride // roa, w, y, y_stride // ya, m, n // na, eps,
                weight_offset, part, sync, groups)

    if _INTERPRETED:  # programs run one after another: only split=1 can make progress (tests use it)
        if cfg.split > 1:
            raise ValueError(f"cfg: {cfg.describe()}: rows split across programs need a GPU (the interpreter runs "
                             "programs one after another, so they would wait on each other forever)")
        groups = min(m, 4)
        part, sync = WORKSPACE.get(x.device, groups, cfg.split)
        _SPLIT_LAUNCHER.launch(groups, args_for(part, sync, groups), constexprs, cfg.num_warps)
        return
    options = {"launch_cooperative_grid": True}
    # Everything Triton specializes the compile on (so the occupancy is that of the kernel this call launches):
    # constexprs, dtypes, 16-byte alignment of pointers, integers equal to 1, divisible by 16 or 64-bit.
    ints = (x_stride // xa, r_stride // ra, ro_stride // roa, y_stride // ya, m, n // na)
    key = (x.get_device(), *constexprs.values(), cfg.num_warps, x.dtype, w.dtype, y.dtype,
           x.data_ptr() & 15, r.data_ptr() & 15, ro.data_ptr() & 15, w.data_ptr() & 15, y.data_ptr() & 15,
           *((i == 1, i % 16 == 0, i < 2**31) for i in ints))
    resident = _SPLIT_RESIDENT.get(key)
    if resident is None and not (x.is_cuda and hasattr(_rms_norm_split_kernel, "warmup")):
        resident = SPLIT_PROGRAMS_PER_SM_GUESS  # a capture of the launch (scripts, `ridgeline profile`), no GPU
    elif resident is None:
        part, sync = WORKSPACE.get(x.device, 1, cfg.split)
        compiled = _rms_norm_split_kernel.warmup(*args_for(part, sync, 1), grid=(1,), **constexprs,
                                                 num_warps=cfg.num_warps, **options)
        resident = resident_programs(x.device, compiled, cfg.num_warps)
        _SPLIT_RESIDENT[key] = resident
    _SPLIT_SEEN[_split_key(x.device, cfg)] = resident
    grid = _grid(m, cfg, x.device)
    groups = grid // cfg.split
    part, sync = WORKSPACE.get(x.device, groups, cfg.split)
    _SPLIT_LAUNCHER.launch(grid, args_for(part, sync, groups), constexprs, cfg.num_warps, options=options)


def _new_rows(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A contiguous tensor of x's shape. empty_like costs a fraction of torch.empty(shape, dtype=, device=) in
    host time (scripts/host_breakdown.py: 4.0 vs 8.9 us on the H200's host), and for a contiguous x it is one."""
    if x.is_contiguous():
        return torch.empty_like(x, dtype=dtype)
    return torch.empty(x.shape, dtype=dtype or x.dtype, device=x.device)


def _check_float(name: str, v: object) -> float:
    if type(v) is float and v - v == 0.0:  # the common case, cheaply: a finite float (inf - inf and NaN are NaN)
        return v
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise TypeError(f"{name}: expected a float, got {type(v).__name__}")
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"{name}: expected a finite float, got {v}")
    return float(v)


def _check_eps(eps: float) -> float:
    eps = _check_float("eps", eps)
    if not eps >= 0.0:
        raise ValueError(f"eps: expected a non-negative float, got {eps}")
    return eps


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    weight_offset: float = 0.0,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    scale: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """RMSNorm over the last dim: ``y = x / sqrt(mean(x**2) + eps) * (weight_offset + weight)``.

    Computed in float32 and rounded once to x's dtype. ``x`` may be float32, float16 or bfloat16 with any number
    of leading dims; ``weight`` (shape ``(hidden,)``) may be any of those dtypes, independently of x. Rows may be
    strided (``x[..., :H]`` of a wider buffer): they are read in place. An input whose last dim is not
    contiguous, or whose leading dims cannot be merged into one row stride, is copied first. ``weight=None``
    means no scale. ``out`` (same shape and dtype as x, rows may be strided) receives the result.
    The result of a row does not depend on how many rows are in the call, and repeated calls agree bitwise.

    ``out_dtype=torch.float8_e4m3fn`` (or ``float8_e5m2``) with a static per-tensor ``scale`` (float or
    1-element tensor) returns ``sat(y / scale)`` in that FP8 dtype, y computed in float32 and rounded once
    (any hidden size; under torch.compile an opaque custom op). ``out`` may then be a given FP8 tensor.
    """
    if out_dtype is not None and out_dtype != getattr(x, "dtype", None) or scale is not None:
        if torch.compiler.is_compiling():  # torch.compile: an opaque custom op, no graph break
            _check_fp8_request(out_dtype, scale)
            scale_t = validate_static_scale(scale, x)
            if out is not None:
                _validate_fp8_out(out, x, out_dtype)
            y = _ops.rms_norm_fp8_op(x, weight, float(eps), scale_t, float(weight_offset), out_dtype)
            return y if out is None else out.copy_(y)
        return _rms_norm_fp8_static(x, weight, eps, weight_offset, out, out_dtype, scale)
    if torch.compiler.is_compiling():  # torch.compile: an opaque custom op, no graph break
        if out is not None:
            _validate_out("out", out, x)
        y = _ops.rms_norm_op(x, weight, float(eps), float(weight_offset))
        return y if out is None else out.copy_(y)
    x = _validate_x("x", x)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    if out is None:
        out = _new_rows(x)
    else:
        _validate_out("out", out, x)
    n = x.shape[-1]
    x, x_stride = _input_rows("x", x)
    _launch(x, x_stride, None, 0, None, 0, weight, out, _output_rows("out", out), x.numel() // n, n, eps,
            weight_offset)
    return out


def _check_fp8_request(out_dtype: object, scale: object) -> None:
    if out_dtype is None:
        raise ValueError("out_dtype: a static scale needs an FP8 out_dtype (e.g. torch.float8_e4m3fn)")
    check_quant_dtype("out_dtype", out_dtype)
    if scale is None:
        raise ValueError("scale: out_dtype FP8 needs a static per-tensor scale (or use rms_norm_dynamic_quant)")


def _validate_fp8_out(out: object, x: torch.Tensor, out_dtype: torch.dtype) -> None:
    out = require_tensor("out", out)
    if out.shape != x.shape:
        raise ValueError(f"out: expected shape {tuple(x.shape)} (same as x), got {tuple(out.shape)}")
    if out.dtype != out_dtype:
        raise TypeError(f"out: expected dtype {out_dtype} (out_dtype), got {out.dtype}")
    require_same_device("out", out, "x", x)


def _rms_norm_fp8_static(x, weight, eps, weight_offset, out, out_dtype, scale) -> torch.Tensor:
    x = _validate_x("x", x)
    _check_fp8_request(out_dtype, scale)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    scale_t = validate_static_scale(scale, x)
    if out is None:
        out = _new_rows(x, out_dtype)
    else:
        _validate_fp8_out(out, x, out_dtype)
    n = x.shape[-1]
    x_in, x_stride = _input_rows("x", x)
    out_stride = _output_rows("out", out)
    if out.data_ptr() & 15 or stride_alignment(out_stride) < stride_alignment(n):
        # One-byte outputs widen the register layout when their rows start on 16 bytes (16 values a thread);
        # rows of a given `out` that do not would sum in another order (other bits): write aligned, then copy.
        out.copy_(_rms_norm_fp8_static(x, weight, eps, weight_offset, None, out_dtype, scale_t))
        return out
    _launch(x_in, x_stride, None, 0, None, 0, weight, out, out_stride, x.numel() // n, n, eps, weight_offset,
            quant=QUANT_STATIC, scale=scale_t)
    return out


def rms_norm_dynamic_quant(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    residual: torch.Tensor | None = None,
    weight_offset: float = 0.0,
    quant_dtype: torch.dtype = torch.float8_e4m3fn,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """RMSNorm with dynamic per-token FP8 quantization: ``(out_fp8, scales[..., 1] float32, residual_out)``.

    ``scales[m] = max(|y[m]|) / fp8_max`` (never below fp8_max^-1 / 512), ``out = y / scales``: dequantize with
    ``out.float() * scales``. With ``residual``, y is the norm of ``residual_out = x + residual`` (rounded to x's
    dtype, returned as the third output); otherwise the third output is None. Any hidden size (rows wider than
    16384 take two passes; their scale is rstd * max|x * weight|, equal to max|y| up to float32 rounding).
    """
    if torch.compiler.is_compiling():  # torch.compile: an opaque custom op, no graph break
        out, scales, residual_out = _ops.rms_norm_dynamic_quant_op(x, weight, float(eps), residual,
                                                                   float(weight_offset), quant_dtype)
        return out, scales, residual_out if residual is not None else None
    x = _validate_x("x", x)
    check_quant_dtype("quant_dtype", quant_dtype)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    n = x.shape[-1]
    m = x.numel() // n
    x_in, x_stride = _input_rows("x", x)
    residual_out, r_in, r_stride = None, None, 0
    if residual is not None:
        residual = require_tensor("residual", residual)
        if residual.shape != x.shape:
            raise ValueError(f"residual: expected shape {tuple(x.shape)} (same as x), got {tuple(residual.shape)}")
        if residual.dtype != x.dtype:
            raise TypeError(f"residual: expected dtype {x.dtype} (same as x), got {residual.dtype}")
        require_same_device("residual", residual, "x", x)
        r_in, r_stride = _input_rows("residual", residual)
        residual_out = _new_rows(x)
    out = _new_rows(x, quant_dtype)
    scales = torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device)
    _launch(x_in, x_stride, r_in, r_stride, residual_out, n, weight, out, n, m, n, eps, weight_offset,
            quant=QUANT_DYNAMIC, scale=scales)
    return out, scales, residual_out


def _validate_out(name: str, t: object, x: torch.Tensor) -> None:
    t = require_tensor(name, t)
    if t.shape != x.shape:
        raise ValueError(f"{name}: expected shape {tuple(x.shape)} (same as x), got {tuple(t.shape)}")
    if t.dtype != x.dtype:
        raise TypeError(f"{name}: expected dtype {x.dtype} (same as x), got {t.dtype}")
    require_same_device(name, t, "x", x)


def fused_add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    weight_offset: float = 0.0,
    inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add then RMSNorm, one pass over memory: returns ``(out, residual_out)``.

    ``residual_out = x + residual`` rounded to x's dtype, and ``out`` equals, bitwise, ``rms_norm(residual_out,
    weight, eps, weight_offset=...)``. ``residual`` must have x's shape and dtype. With ``inplace=True`` out is
    written into ``x`` and residual_out into ``residual`` (the vLLM / FlashInfer convention) and those two
    tensors are returned; their last dims must then be contiguous and their rows viewable in place.
    """
    if torch.compiler.is_compiling():  # torch.compile: opaque custom ops, no graph break
        if inplace:
            _ops.fused_add_rms_norm_inplace_op(x, residual, weight, float(eps), float(weight_offset))
            return x, residual
        return _ops.fused_add_rms_norm_op(x, residual, weight, float(eps), float(weight_offset))
    x = _validate_x("x", x)
    residual = require_tensor("residual", residual)
    if residual.shape != x.shape:
        raise ValueError(f"residual: expected shape {tuple(x.shape)} (same as x), got {tuple(residual.shape)}")
    if residual.dtype != x.dtype:
        raise TypeError(f"residual: expected dtype {x.dtype} (same as x), got {residual.dtype}")
    require_same_device("residual", residual, "x", x)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    n = x.shape[-1]
    m = x.numel() // n
    if inplace:
        x_stride, r_stride = _output_rows("x", x), _output_rows("residual", residual)
        _launch(x, x_stride, residual, r_stride, residual, r_stride, weight, x, x_stride, m, n, eps, weight_offset)
        return x, residual
    out = _new_rows(x)
    residual_out = _new_rows(x)
    x_in, x_stride = _input_rows("x", x)
    r_in, r_stride = _input_rows("residual", residual)
    _launch(x_in, x_stride, r_in, r_stride, residual_out, n, weight, out, n, m, n, eps, weight_offset)
    return out, residual_out


# Registered after the functions above exist (torch_ops wraps them).
from ridgeline.kernels import torch_ops as _ops  # noqa: E402

__all__ = ["rms_norm", "fused_add_rms_norm", "rms_norm_dynamic_quant", "launch_config", "config_for", "LaunchConfig",
           "FLOAT_DTYPES"]
