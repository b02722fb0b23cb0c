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

This module holds the kernels and their compile-time arguments; the host side (the public functions, their
checks, the grid and the launches) is launch.py.
"""


from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled, stride_alignment
from ridgeline.lib.rounding import rstd_of, to_storage
from ridgeline.ops.rmsnorm.rules import LaunchConfig


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

def row_alignments(n: int, strides: tuple[int, int, int, int]) -> tuple[int, int, int, int, int]:
    """(x, residual, residual_out, y, N) alignments in elements for the ALIGN constexprs.

    No row is taken as more aligned than N allows: Triton picks the register layout (and with it the order of
    the row's sum) from the widest access it can prove, so a stride more aligned than N (x[:, :4100] of a
    4104-wide buffer) would sum in another order than contiguous rows and break batch invariance across
    layouts and `fused.out == rms_norm(residual_out)` bitwise (scripts/compile_configs.py --check-layouts)."""
    na = stride_alignment(n)
    xa, ra, roa, ya = (min(na, stride_alignment(s)) for s in strides)
    return xa, ra, roa, ya, na


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


def split_constexprs(cfg: LaunchConfig, aligns: tuple[int, int, int, int, int], has_residual: bool,
                     has_weight: bool) -> dict[str, object]:
    """The split kernel's compile-time arguments (kernels/rmsnorm_split.py), in signature order."""
    xa, ra, roa, ya, na = aligns
    return {"X_ALIGN": xa, "R_ALIGN": ra, "RO_ALIGN": roa, "Y_ALIGN": ya, "N_ALIGN": na,
            "HAS_RESIDUAL": has_residual, "HAS_WEIGHT": has_weight, "CHUNK": cfg.block_n, "SPLIT": cfg.split,
            "SPLIT_P2": triton.next_power_of_2(cfg.split), "WEIGHT_FIRST": cfg.weight_first,
            "EMULATE_RNE": _INTERPRETED}
