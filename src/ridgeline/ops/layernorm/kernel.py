"""LayerNorm in Triton: the forward kernel, the backward kernel (dx and per-program dweight/dbias partial sums) and
the small kernel that reduces those partials in a fixed order.

Every row is reduced by one program in an order that follows the launch config, and the config depends on the hidden
size and dtype only (rules.py): a row's y, mean, rstd and dx do not depend on how many rows are in the call, and
repeated calls agree bitwise. dweight/dbias sum over rows: each program of the backward adds its rows' terms in
float32 into its own row of a [programs, N] buffer (no atomics), then `_ln_dw_reduce_kernel` sums the buffer's rows in
a fixed order. They are deterministic for a given row count and device; being sums over the batch, they are not batch
invariant (no contract asks it of them).

Under the CPU interpreter bf16 arithmetic is wrong and its fp32 -> bf16 cast truncates, so every load is upcast to
fp32 at once and every store goes through `to_storage` (round to nearest even there too).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled
from ridgeline.lib.rounding import to_storage

# Read once: Triton decided at import (when the kernels were decorated) whether it interprets.
_INTERPRETED = interpreter_enabled()


@triton.jit
def _ld(ptrs, mask, MASKED: tl.constexpr, POLICY: tl.constexpr):
    """A float32 load, masked only where the piece can run past the row (or the tile past the rows); POLICY: its L2
    eviction policy ("", "evict_first", "evict_last"; passed at every call: Triton 3.6 on the GPU rejects a
    defaulted constexpr parameter left out of a call to a jit function, which its CPU interpreter accepts)."""
    if MASKED:
        return tl.load(ptrs, mask=mask, other=0.0, eviction_policy=POLICY).to(tl.float32)
    return tl.load(ptrs, eviction_policy=POLICY).to(tl.float32)


@triton.jit
def _st(ptrs, value, mask, MASKED: tl.constexpr, EMULATE_RNE: tl.constexpr):
    v = to_storage(value, ptrs.dtype.element_ty, EMULATE_RNE)
    if MASKED:
        tl.store(ptrs, v, mask=mask)
    else:
        tl.store(ptrs, v)


@triton.jit
def _affine(xhat, W, B, cols, cmask, MASKED: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    y = xhat
    if HAS_W:
        y = y * _ld(W + cols, cmask, MASKED, "")
    if HAS_B:
        y = y + _ld(B + cols, cmask, MASKED, "")
    return y


@triton.jit
def _ln_fwd_tile(
    tile, X, x_off_q, x_stride_q, W, B, Y, y_stride_q, Mean, Rstd, M, N, eps, inv_n,
    X_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    STORE_STATS: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr, ROWS: tl.constexpr,
    EMULATE_RNE: tl.constexpr, X_POLICY: tl.constexpr,
):
    """ROWS rows held in registers as one power-of-two block of columns or two pieces (5120 = 4096 + 1024: no idle
    lanes); the mean first, then the variance of the centred row (two reductions: no cancellation of sum(x^2) -
    N mean^2 for rows far from zero)."""
    rows = tile * ROWS + tl.arange(0, ROWS)
    rmask = rows < M
    rows64 = rows.to(tl.int64)  # int64 before the stride: row offsets past 2^31 elements must not wrap
    x_rows = X + (x_off_q + rows64[:, None] * x_stride_q) * X_ALIGN
    y_rows = Y + rows64[:, None] * y_stride_q * Y_ALIGN
    # Only the last piece can run past the row; a tile of several rows can run past the last row.
    MASK_A: tl.constexpr = BLOCK_B == 0 or ROWS > 1
    ca = tl.arange(0, BLOCK_A)[None, :]
    ma = rmask[:, None] & (ca < N)
    xa = _ld(x_rows + ca, ma, MASK_A, X_POLICY)
    total = tl.sum(xa, axis=1)
    if BLOCK_B > 0:
        cb = BLOCK_A + tl.arange(0, BLOCK_B)[None, :]
        mb = rmask[:, None] & (cb < N)
        xb = _ld(x_rows + cb, mb, True, X_POLICY)
        total += tl.sum(xb, axis=1)
    mean = total * inv_n
    xa = xa - mean[:, None]
    if MASK_A:
        xa = tl.where(ma, xa, 0.0)
    sq = tl.sum(xa * xa, axis=1)
    if BLOCK_B > 0:
        xb = tl.where(mb, xb - mean[:, None], 0.0)
        sq += tl.sum(xb * xb, axis=1)
    rstd = tl.rsqrt(sq * inv_n + eps)
    if STORE_STATS:
        tl.store(Mean + rows64, mean, mask=rmask)
        tl.store(Rstd + rows64, rstd, mask=rmask)
    ya = _affine(xa * rstd[:, None], W, B, ca, ca < N, MASK_A and BLOCK_B == 0, HAS_W, HAS_B)
    _st(y_rows + ca, ya, ma, MASK_A, EMULATE_RNE)
    if BLOCK_B > 0:
        yb = _affine(xb * rstd[:, None], W, B, cb, cb < N, True, HAS_W, HAS_B)
        _st(y_rows + cb, yb, mb, True, EMULATE_RNE)


@triton.jit
def _ln_fwd_kernel(
    X, x_off_q, x_stride_q, W, B, Y, y_stride_q, Mean, Rstd, M, n_q, eps, inv_n,
    X_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr, HAS_W: tl.constexpr,
    HAS_B: tl.constexpr, STORE_STATS: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr,
    ROWS: tl.constexpr, LOOP: tl.constexpr, EMULATE_RNE: tl.constexpr, X_POLICY: tl.constexpr,
):
    # N = n_q * N_ALIGN: the compiler then knows the column mask is constant over N_ALIGN lanes and keeps vector
    # accesses for hidden sizes that are not multiples of 16 (4100 = 4 * 1025: 8-byte accesses).
    N = n_q * N_ALIGN
    pid = tl.program_id(0)
    if LOOP:  # persistent grid: a grid-stride loop over tiles of rows (the CPU interpreter; small grids)
        for tile in range(pid, tl.cdiv(M, ROWS), tl.num_programs(0)):
            _ln_fwd_tile(tile, X, x_off_q, x_stride_q, W, B, Y, y_stride_q, Mean, Rstd, M, N, eps, inv_n, X_ALIGN,
                         Y_ALIGN, HAS_W, HAS_B, STORE_STATS, BLOCK_A, BLOCK_B, ROWS, EMULATE_RNE, X_POLICY)
    else:  # one program per tile
        _ln_fwd_tile(pid, X, x_off_q, x_stride_q, W, B, Y, y_stride_q, Mean, Rstd, M, N, eps, inv_n, X_ALIGN, Y_ALIGN,
                     HAS_W, HAS_B, STORE_STATS, BLOCK_A, BLOCK_B, ROWS, EMULATE_RNE, X_POLICY)


@triton.jit
def _ln_fwd_wide_kernel(
    X, x_off_q, x_stride_q, W, B, Y, y_stride_q, Mean, Rstd, M, n_q, eps, inv_n,
    X_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr, HAS_W: tl.constexpr,
    HAS_B: tl.constexpr, STORE_STATS: tl.constexpr, CHUNK: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """Rows too wide for registers: three passes over chunks (sum, centred sum of squares, y); the second and third
    re-read the row, mostly from L2 (one row is at most a few hundred KB)."""
    N = n_q * N_ALIGN
    cols = tl.arange(0, CHUNK)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = X + (x_off_q + row64 * x_stride_q) * X_ALIGN
        y_row = Y + row64 * y_stride_q * Y_ALIGN
        acc = tl.zeros([CHUNK], dtype=tl.float32)
        for start in range(0, N, CHUNK):
            c = start + cols
            acc += tl.load(x_row + c, mask=c < N, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) * inv_n
        acc = tl.zeros([CHUNK], dtype=tl.float32)
        for start in range(0, N, CHUNK):
            c = start + cols
            xc = tl.where(c < N, tl.load(x_row + c, mask=c < N, other=0.0).to(tl.float32) - mean, 0.0)
            acc += xc * xc
        rstd = tl.rsqrt(tl.sum(acc, axis=0) * inv_n + eps)
        if STORE_STATS:
            tl.store(Mean + row64, mean)
            tl.store(Rstd + row64, rstd)
        for start in range(0, N, CHUNK):
            c = start + cols
            xhat = (tl.load(x_row + c, mask=c < N, other=0.0).to(tl.float32) - mean) * rstd
            y = _affine(xhat, W, B, c, c < N, True, HAS_W, HAS_B)
            _st(y_row + c, y, c < N, True, EMULATE_RNE)


@triton.jit
def _ln_bwd_piece(dy_row, x_row, w, mean, rstd, cols, cmask, MASKED: tl.constexpr, HAS_W: tl.constexpr):
    """(dy, xhat, w * dy) of one piece of a row, float32 (masked lanes: dy = 0, so they add nothing below)."""
    dy = _ld(dy_row + cols, cmask, MASKED, "")
    xhat = (_ld(x_row + cols, cmask, MASKED, "") - mean) * rstd
    wdy = dy
    if HAS_W:
        wdy = w * dy
    return dy, xhat, wdy


@triton.jit
def _ln_bwd_row(
    row, DY, dy_off_q, dy_stride_q, X, x_off_q, x_stride_q, DX, dx_stride_q, Mean, Rstd, wa, wb, dwa, dba, dwb, dbb, N,
    inv_n,
    DY_ALIGN: tl.constexpr, X_ALIGN: tl.constexpr, DX_ALIGN: tl.constexpr, HAS_W: tl.constexpr,
    BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """dx of one row: rstd * (w dy - xhat * mean(xhat w dy) - mean(w dy)); the row's dy * xhat and dy added to the
    program's partial sums (returned)."""
    row64 = tl.cast(row, tl.int64)
    mean = tl.load(Mean + row64)
    rstd = tl.load(Rstd + row64)
    dy_row = DY + (dy_off_q + row64 * dy_stride_q) * DY_ALIGN
    x_row = X + (x_off_q + row64 * x_stride_q) * X_ALIGN
    dx_row = DX + row64 * dx_stride_q * DX_ALIGN
    MASK_A: tl.constexpr = BLOCK_B == 0
    ca = tl.arange(0, BLOCK_A)
    dya, xha, wdya = _ln_bwd_piece(dy_row, x_row, wa, mean, rstd, ca, ca < N, MASK_A, HAS_W)
    c1 = tl.sum(xha * wdya, axis=0)
    c2 = tl.sum(wdya, axis=0)
    if BLOCK_B > 0:
        cb = BLOCK_A + tl.arange(0, BLOCK_B)
        dyb, xhb, wdyb = _ln_bwd_piece(dy_row, x_row, wb, mean, rstd, cb, cb < N, True, HAS_W)
        c1 += tl.sum(xhb * wdyb, axis=0)
        c2 += tl.sum(wdyb, axis=0)
    c1 = c1 * inv_n
    c2 = c2 * inv_n
    _st(dx_row + ca, (wdya - (xha * c1 + c2)) * rstd, ca < N, MASK_A, EMULATE_RNE)
    dwa += dya * xha
    dba += dya
    if BLOCK_B > 0:
        _st(dx_row + cb, (wdyb - (xhb * c1 + c2)) * rstd, cb < N, True, EMULATE_RNE)
        dwb += dyb * xhb
        dbb += dyb
    return dwa, dba, dwb, dbb


@triton.jit
def _ln_bwd_kernel(
    DY, dy_off_q, dy_stride_q, X, x_off_q, x_stride_q, W, Mean, Rstd, DX, dx_stride_q, DWP, DBP, M, n_q,
    rows_per_program, inv_n,
    DY_ALIGN: tl.constexpr, X_ALIGN: tl.constexpr, DX_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr,
    HAS_W: tl.constexpr, STORE_DW: tl.constexpr, STORE_DB: tl.constexpr, BLOCK_A: tl.constexpr,
    BLOCK_B: tl.constexpr, STAGES: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """Program p takes rows [p * rows_per_program, (p + 1) * rows_per_program) in order, one at a time, the weight
    held in registers throughout, and writes its partial sums of dy * xhat and dy to row p of DWP and DBP (float32)."""
    N = n_q * N_ALIGN
    pid = tl.program_id(0)
    start = pid * rows_per_program
    end = tl.minimum(start + rows_per_program, M)
    ca = tl.arange(0, BLOCK_A)
    wa = tl.zeros([BLOCK_A], dtype=tl.float32)
    if HAS_W:
        wa = _ld(W + ca, ca < N, BLOCK_B == 0, "")
    dwa = tl.zeros([BLOCK_A], dtype=tl.float32)
    dba = tl.zeros([BLOCK_A], dtype=tl.float32)
    if BLOCK_B > 0:
        cb = BLOCK_A + tl.arange(0, BLOCK_B)
        wb = tl.zeros([BLOCK_B], dtype=tl.float32)
        if HAS_W:
            wb = _ld(W + cb, cb < N, True, "")
        dwb = tl.zeros([BLOCK_B], dtype=tl.float32)
        dbb = tl.zeros([BLOCK_B], dtype=tl.float32)
    else:  # (placeholders of the second piece's values: the row function leaves them untouched)
        wb = wa
        dwb = tl.zeros([BLOCK_A], dtype=tl.float32)
        dbb = tl.zeros([BLOCK_A], dtype=tl.float32)
    if STAGES > 0:  # software-pipelined: the next rows' loads are issued while this row is reduced
        for row in tl.range(start, end, num_stages=STAGES):
            dwa, dba, dwb, dbb = _ln_bwd_row(row, DY, dy_off_q, dy_stride_q, X, x_off_q, x_stride_q, DX, dx_stride_q,
                                             Mean, Rstd, wa, wb, dwa, dba, dwb, dbb, N, inv_n, DY_ALIGN, X_ALIGN,
                                             DX_ALIGN, HAS_W, BLOCK_A, BLOCK_B, EMULATE_RNE)
    else:
        for row in range(start, end):
            dwa, dba, dwb, dbb = _ln_bwd_row(row, DY, dy_off_q, dy_stride_q, X, x_off_q, x_stride_q, DX, dx_stride_q,
                                             Mean, Rstd, wa, wb, dwa, dba, dwb, dbb, N, inv_n, DY_ALIGN, X_ALIGN,
                                             DX_ALIGN, HAS_W, BLOCK_A, BLOCK_B, EMULATE_RNE)
    part = tl.cast(pid, tl.int64) * N
    if STORE_DW:
        tl.store(DWP + part + ca, dwa, mask=ca < N)
        if BLOCK_B > 0:
            tl.store(DWP + part + cb, dwb, mask=cb < N)
    if STORE_DB:
        tl.store(DBP + part + ca, dba, mask=ca < N)
        if BLOCK_B > 0:
            tl.store(DBP + part + cb, dbb, mask=cb < N)


@triton.jit
def _ln_bwd_wide_kernel(
    DY, dy_off_q, dy_stride_q, X, x_off_q, x_stride_q, W, Mean, Rstd, DX, dx_stride_q, DWP, DBP, M, n_q,
    rows_per_program, inv_n,
    DY_ALIGN: tl.constexpr, X_ALIGN: tl.constexpr, DX_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr,
    HAS_W: tl.constexpr, STORE_DW: tl.constexpr, STORE_DB: tl.constexpr, CHUNK: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):
    """Rows too wide for registers: per row, a first pass over chunks for the two row sums, a second for dx; the
    program's partial sums live in its own row of DWP/DBP (read, added to, written back: no other program touches
    it), the first of its rows initialising them."""
    N = n_q * N_ALIGN
    pid = tl.program_id(0)
    start = pid * rows_per_program
    end = tl.minimum(start + rows_per_program, M)
    cols = tl.arange(0, CHUNK)
    part = tl.cast(pid, tl.int64) * N
    for row in range(start, end):
        row64 = tl.cast(row, tl.int64)
        mean = tl.load(Mean + row64)
        rstd = tl.load(Rstd + row64)
        dy_row = DY + (dy_off_q + row64 * dy_stride_q) * DY_ALIGN
        x_row = X + (x_off_q + row64 * x_stride_q) * X_ALIGN
        dx_row = DX + row64 * dx_stride_q * DX_ALIGN
        acc1 = tl.zeros([CHUNK], dtype=tl.float32)
        acc2 = tl.zeros([CHUNK], dtype=tl.float32)
        for c0 in range(0, N, CHUNK):
            c = c0 + cols
            w = tl.zeros([CHUNK], dtype=tl.float32)
            if HAS_W:
                w = _ld(W + c, c < N, True, "")
            dy, xhat, wdy = _ln_bwd_piece(dy_row, x_row, w, mean, rstd, c, c < N, True, HAS_W)
            acc1 += xhat * wdy
            acc2 += wdy
        c1 = tl.sum(acc1, axis=0) * inv_n
        c2 = tl.sum(acc2, axis=0) * inv_n
        for c0 in range(0, N, CHUNK):
            c = c0 + cols
            m = c < N
            w = tl.zeros([CHUNK], dtype=tl.float32)
            if HAS_W:
                w = _ld(W + c, m, True, "")
            dy, xhat, wdy = _ln_bwd_piece(dy_row, x_row, w, mean, rstd, c, m, True, HAS_W)
            _st(dx_row + c, (wdy - (xhat * c1 + c2)) * rstd, m, True, EMULATE_RNE)
            if STORE_DW:
                pw = dy * xhat
                if row > start:
                    pw += tl.load(DWP + part + c, mask=m, other=0.0)
                tl.store(DWP + part + c, pw, mask=m)
            if STORE_DB:
                pb = dy
                if row > start:
                    pb += tl.load(DBP + part + c, mask=m, other=0.0)
                tl.store(DBP + part + c, pb, mask=m)


@triton.jit
def _ln_dw_reduce_kernel(
    DWP, DBP, DW, DB, P, N,
    STORE_DW: tl.constexpr, STORE_DB: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):
    """dweight[c] = sum over programs p of DWP[p, c] (dbias likewise), BLOCK_P rows of partials at a time, always in
    the same order; rounded once to the output dtype."""
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < N
    accw = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)
    accb = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        ps = p0 + tl.arange(0, BLOCK_P)
        m = (ps < P)[:, None] & cmask[None, :]
        offs = ps.to(tl.int64)[:, None] * N + cols[None, :]
        if STORE_DW:
            accw += tl.load(DWP + offs, mask=m, other=0.0)
        if STORE_DB:
            accb += tl.load(DBP + offs, mask=m, other=0.0)
    if STORE_DW:
        _st(DW + cols, tl.sum(accw, axis=0), cmask, True, EMULATE_RNE)
    if STORE_DB:
        _st(DB + cols, tl.sum(accb, axis=0), cmask, True, EMULATE_RNE)


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(n)
