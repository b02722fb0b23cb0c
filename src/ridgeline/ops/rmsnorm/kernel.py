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

import torch
import triton
import triton.language as tl

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
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
from ridgeline.lib.rounding import inv_hidden, rstd_of, to_storage
from ridgeline.ops.rmsnorm.quant import (
    FP8_DTYPES,
    MIN_SCALE_FACTOR,
    QUANT_DYNAMIC,
    QUANT_STATIC,
    check_quant_dtype,
    validate_static_scale,
)
from ridgeline.ops.rmsnorm.rules import (  # (the config API is also ridgeline's, through this module)
    LaunchConfig,
    config_for,
    launch_config,
)
from ridgeline.ops.rmsnorm.split import (
    WORKSPACE,
    _rms_norm_split_kernel,
    resident_programs,
    split_grid,
)


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
    """The weight's columns [off, off + P); STREAM (1 or 2): kept in L2 (evict_last), as every row reads it."""
    c = off + tl.arange(0, P)
    policy: tl.constexpr = "evict_last" if STREAM else ""
    return _load(W + c, c, N, MASKED, policy)


@triton.jit
def _load_pair(x_row, r_row, off, N, P: tl.constexpr, MASKED: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
               STREAM: tl.constexpr):
    """x's and (with HAS_RESIDUAL) the residual's columns [off, off + P), as stored (r is x without a residual);
    STREAM (1 or 2): read once, so the first to leave L2 (evict_first)."""
    c = off + tl.arange(0, P)
    policy: tl.constexpr = "evict_first" if STREAM else ""
    x = _load(x_row + c, c, N, MASKED, policy)
    r = x
    if HAS_RESIDUAL:
        r = _load(r_row + c, c, N, MASKED, policy)
    return x, r


@triton.jit
def _add_residual(x, r, ro_row, off, N, P: tl.constexpr, MASKED: tl.constexpr, STREAM: tl.constexpr,
                  EMULATE_RNE: tl.constexpr):
    """x + r rounded to residual_out's dtype, stored to residual_out's columns [off, off + P) and returned."""
    c = off + tl.arange(0, P)
    policy: tl.constexpr = "evict_first" if STREAM == 1 else ""
    # Upcast before any math: fp32 on the GPU, and bf16 arithmetic is wrong in the CPU interpreter.
    x = to_storage(x.to(tl.float32) + r.to(tl.float32), ro_row.dtype.element_ty, EMULATE_RNE)
    _store(ro_row + c, x, c, N, MASKED, policy)
    return x


@triton.jit
def _load_piece(
    x_row, r_row, ro_row, W, off, N,
    P: tl.constexpr, MASKED: tl.constexpr, HAS_RESIDUAL: tl.constexpr, LOAD_W: tl.constexpr,
    STREAM: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """Columns [off, off + P) of a row (after the residual add, whose result is stored here) and, with LOAD_W,
    the weight there (issued before the reduction: its latency overlaps x's, but it holds registers longer).
    Only the row's last piece is masked: the others lie wholly inside it. STREAM: the row's lines are read and
    written once, so they are the first to leave L2 (evict_first): 1 (stream_hints) on every load and store of the
    row, 2 (stream_loads) on its loads only."""
    x, r = _load_pair(x_row, r_row, off, N, P, MASKED, HAS_RESIDUAL, STREAM)
    if HAS_RESIDUAL:
        x = _add_residual(x, r, ro_row, off, N, P, MASKED, STREAM, EMULATE_RNE)
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
    policy: tl.constexpr = "evict_first" if STREAM == 1 else ""
    _store(y_row + c, to_storage(y, y_row.dtype.element_ty, EMULATE_RNE), c, N, MASKED, policy)


@triton.jit
def _abs_max(y):
    return tl.max(tl.abs(y), axis=0)


@triton.jit
def _norm_row(
    row, X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q, N, eps, inv_n, weight_offset, S, qmax,
    min_scale,
    X_ALIGN: tl.constexpr, R_ALIGN: tl.constexpr, RO_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr, BLOCK_N: tl.constexpr, PIECE_B: tl.constexpr,
    PIECE_C: tl.constexpr, SINGLE_PASS: tl.constexpr, WEIGHT_FIRST: tl.constexpr, REVERSE_PASS2: tl.constexpr,
    L2_HINTS: tl.constexpr, QUANT: tl.constexpr, JOINT_MAX: tl.constexpr, UNROLL: tl.constexpr,
    STREAM_HINTS: tl.constexpr, EMULATE_RNE: tl.constexpr, CHUNK_SUM: tl.constexpr, HOIST_LOADS: tl.constexpr,
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
        if HOIST_LOADS and HAS_RESIDUAL:
            # Every piece's x and residual, and the weight when it comes first, loaded before the first residual_out
            # store: the compiler cannot move a load above a store (the tensors may alias), so piece by piece the
            # later loads wait for it (with one block, the weight's).
            xa, ra = _load_pair(x_row, r_row, 0, N, BLOCK_N, PIECE_B == 0, True, STREAM_HINTS)
            if PIECE_B > 0:
                xb, rb = _load_pair(x_row, r_row, B_OFF, N, PIECE_B, PIECE_C == 0, True, STREAM_HINTS)
            if PIECE_C > 0:
                xc, rc = _load_pair(x_row, r_row, C_OFF, N, PIECE_C, True, True, STREAM_HINTS)
            wa = xa
            if W_EARLY:
                wa = _load_weight(W, 0, N, BLOCK_N, PIECE_B == 0, STREAM_HINTS)
            if PIECE_B > 0:
                wb = xb
                if W_EARLY:
                    wb = _load_weight(W, B_OFF, N, PIECE_B, PIECE_C == 0, STREAM_HINTS)
            if PIECE_C > 0:
                wc = xc
                if W_EARLY:
                    wc = _load_weight(W, C_OFF, N, PIECE_C, True, STREAM_HINTS)
            xa = _add_residual(xa, ra, ro_row, 0, N, BLOCK_N, PIECE_B == 0, STREAM_HINTS, EMULATE_RNE)
            if PIECE_B > 0:
                xb = _add_residual(xb, rb, ro_row, B_OFF, N, PIECE_B, PIECE_C == 0, STREAM_HINTS, EMULATE_RNE)
            if PIECE_C > 0:
                xc = _add_residual(xc, rc, ro_row, C_OFF, N, PIECE_C, True, STREAM_HINTS, EMULATE_RNE)
        else:
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
        tl.static_assert(not (JOINT and CHUNK_SUM), "JOINT_MAX sums piece by piece, CHUNK_SUM elementwise")
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
        elif CHUNK_SUM:
            # Two or three equal pieces summed elementwise first, then one block reduction: the order (and the
            # bits) of the two-pass kernel over chunks of BLOCK_N (acc = fma(x, x, acc) per chunk, then tl.sum), so
            # the row count may choose either. The fma is spelled out: left to contract `x1 * x1 + x2 * x2`, the
            # compiler fused either product (unrolled, with N constant, it fused the first: other bits on the H200).
            tl.static_assert(PIECE_B == BLOCK_N and (PIECE_C == 0 or PIECE_C == BLOCK_N),
                             "CHUNK_SUM needs two or three pieces of BLOCK_N")
            xf = xa.to(tl.float32)
            acc = xf * xf
            xf = xb.to(tl.float32)
            acc = tl.fma(xf, xf, acc)
            if PIECE_C > 0:
                xf = xc.to(tl.float32)
                acc = tl.fma(xf, xf, acc)
            sum_sq = tl.sum(acc, axis=0)
        else:
            sum_sq = _sum_sq(xa)
            if PIECE_B > 0:
                sum_sq += _sum_sq(xb)
            if PIECE_C > 0:
                sum_sq += _sum_sq(xc)
        rstd = rstd_of(sum_sq, inv_n, eps)
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
            acc = tl.fma(x, x, acc)  # (spelled out: the chunk_sum one pass sums in this order)
            if QUANT == 2:
                xw = x
                if HAS_WEIGHT:
                    xw = x * (tl.load(W + c, mask=mask, other=0.0).to(tl.float32) + weight_offset)
                amax_xw = tl.maximum(amax_xw, tl.abs(xw))
        rstd = rstd_of(tl.sum(acc, axis=0), inv_n, eps)
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
    M, n_q, eps, inv_n, weight_offset, S, qmax, min_scale,
    X_ALIGN: tl.constexpr, R_ALIGN: tl.constexpr, RO_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr,
    N_ALIGN: tl.constexpr, HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr,
    BLOCK_N: tl.constexpr, PIECE_B: tl.constexpr, PIECE_C: tl.constexpr, SINGLE_PASS: tl.constexpr,
    WEIGHT_FIRST: tl.constexpr, REVERSE_PASS2: tl.constexpr, L2_HINTS: tl.constexpr, ONE_ROW: tl.constexpr,
    QUANT: tl.constexpr, JOINT_MAX: tl.constexpr, UNROLL: tl.constexpr, STREAM_HINTS: tl.constexpr,
    EMULATE_RNE: tl.constexpr, N_CONST: tl.constexpr, CHUNK_SUM: tl.constexpr, HOIST_LOADS: tl.constexpr,
):
    if N_CONST > 0:
        # The hidden size compiled in (LaunchConfig.const_n): loop bounds and masks are constants, so the
        # two-pass loops unroll (every chunk's loads in flight together) and wholly masked loads drop out.
        N = N_CONST
    else:
        # N = n_q * N_ALIGN: the compiler then knows the mask `cols < N` is constant over N_ALIGN lanes and can
        # use vector accesses for hidden sizes that are not multiples of 16 (4100 = 4 * 1025: 8-byte accesses).
        N = n_q * N_ALIGN
    pid = tl.program_id(0)
    if ONE_ROW:  # one program per row, no loop
        _norm_row(pid, X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q, N, eps, inv_n, weight_offset,
                  S, qmax, min_scale, X_ALIGN, R_ALIGN, RO_ALIGN, Y_ALIGN, HAS_RESIDUAL, HAS_WEIGHT, BLOCK_N,
                  PIECE_B, PIECE_C, SINGLE_PASS, WEIGHT_FIRST, REVERSE_PASS2, L2_HINTS, QUANT, JOINT_MAX, UNROLL,
                  STREAM_HINTS, EMULATE_RNE, CHUNK_SUM, HOIST_LOADS)
    else:  # persistent grid: a grid-stride loop over rows
        for row in range(pid, M, tl.num_programs(0)):
            _norm_row(row, X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q, N, eps, inv_n,
                      weight_offset, S, qmax, min_scale, X_ALIGN, R_ALIGN, RO_ALIGN, Y_ALIGN, HAS_RESIDUAL,
                      HAS_WEIGHT, BLOCK_N, PIECE_B, PIECE_C, SINGLE_PASS, WEIGHT_FIRST, REVERSE_PASS2, L2_HINTS,
                      QUANT, JOINT_MAX, UNROLL, STREAM_HINTS, EMULATE_RNE, CHUNK_SUM, HOIST_LOADS)


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


def grid_for(m: int, cfg: LaunchConfig, device: torch.device) -> int:
    """Programs the launch of m rows with cfg takes on device (split rows: groups of cfg.split programs)."""
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
    quant: int = 0, n: int = 0,
) -> dict[str, object]:
    """The kernel's compile-time arguments, in signature order: (x, residual, residual_out, y, N) alignments,
    the op's flags (quant: 0 none, 1 static FP8 scale, 2 dynamic per-row FP8 scales) and the launch config (n:
    the hidden size, compiled in where the config asks for it)."""
    if cfg.const_n and n <= 0:
        raise ValueError(f"cfg: {cfg.describe()} compiles the hidden size in: pass n")
    xa, ra, roa, ya, na = aligns
    return {"X_ALIGN": xa, "R_ALIGN": ra, "RO_ALIGN": roa, "Y_ALIGN": ya, "N_ALIGN": na,
            "HAS_RESIDUAL": has_residual, "HAS_WEIGHT": has_weight, "BLOCK_N": cfg.block_n,
            "PIECE_B": cfg.piece_b, "PIECE_C": cfg.piece_c, "SINGLE_PASS": cfg.single_pass,
            "WEIGHT_FIRST": cfg.weight_first, "REVERSE_PASS2": cfg.reverse_pass2, "L2_HINTS": cfg.l2_hints,
            "ONE_ROW": one_row, "QUANT": quant, "JOINT_MAX": cfg.joint_max and cfg.weight_first,
            "UNROLL": max(1, cfg.unroll),
            "STREAM_HINTS": (1 if cfg.stream_hints else 2 if cfg.stream_loads else 0) if cfg.single_pass else 0,
            "EMULATE_RNE": _INTERPRETED, "N_CONST": n if cfg.const_n else 0,
            "CHUNK_SUM": cfg.chunk_sum and cfg.single_pass,
            "HOIST_LOADS": cfg.hoist_loads and cfg.single_pass and has_residual}


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
                                         y_stride // ya, m, n // na, eps, inv_hidden(n), weight_offset, s, qmax,
                                         min_scale),
                          cvals, fast_key[0])
            return
    xa, ra, roa, ya, na = row_alignments(n, (x_stride, r_stride, ro_stride, y_stride))
    grid = grid_for(m, cfg, x.device)
    constexprs = kernel_constexprs(cfg, (xa, ra, roa, ya, na), has_res, weight is not None,
                                   cfg.loop_free and grid == m, quant, n)
    _LAUNCHER.launch(
        grid,
        (x, x_stride // xa, r, r_stride // ra, ro, ro_stride // roa, w, y, y_stride // ya, m, n // na, eps,
         inv_hidden(n), weight_offset, s, qmax, min_scale),
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
                inv_hidden(n), weight_offset, part, sync, groups)

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
    grid = grid_for(m, cfg, x.device)
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
from ridgeline.ops.rmsnorm import torch_ops as _ops  # noqa: E402

_grid = grid_for  # (the name harness/profile.py calls)

__all__ = ["rms_norm", "fused_add_rms_norm", "rms_norm_dynamic_quant", "launch_config", "config_for", "LaunchConfig",
           "FLOAT_DTYPES", "grid_for"]
