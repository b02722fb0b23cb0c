"""RMSNorm backward in Triton: dx (and, for the fused op, + d residual_out) per row, dweight summed over rows.

For a row x with g = dy * (w + weight_offset) (g = dy without a weight), rstd = 1 / sqrt(mean(x^2) + eps):

    dx = rstd * (g - x * rstd^2 * mean(g * x))          dweight = sum over rows of dy * x * rstd

The fused op's residual_out s = x + residual is the row here; its dx (= d residual) adds the incoming gradient of
residual_out. `_rms_norm_bwd_kernel` is a persistent grid: program p handles rows p, p + P, ... Each row's dx is
reduced by one program from that row only, in an order fixed by the row's layout (BLOCK_N, warps: chosen from the
hidden size only), so dx is batch invariant and deterministic. PREFETCH (one pass): each iteration loads the
program's next row before it reduces this one, so a row's loads are in flight through the previous row's reduction
and stores (no bit changes). dweight is deterministic without atomics: each
program sums its rows into an fp32 partial (its own row of PART, in registers for one-pass rows), then
`_dweight_reduce_kernel` sums the P partials of each column in a fixed order. With one row (decode), the first
kernel writes dweight itself.

rstd is read (HAS_RSTD: what the forward saved) or recomputed from x (the row is read anyway: no extra byte, one
more reduction, joint with the dot product on the GPU: one round of shuffles). All loads are upcast to fp32 at
once (bf16 math is wrong in the CPU interpreter; fp32 accumulation on the GPU anyway).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.rounding import rstd_of, to_storage


@triton.jit
def _add_pair(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def _row_scalars(x, g, RSTD, row64, inv_n, eps, HAS_RSTD: tl.constexpr, INTERPRETED: tl.constexpr):
    """(rstd, sum(g * x)) of one row held in registers (masked lanes hold 0)."""
    if HAS_RSTD:
        rstd = tl.load(RSTD + row64)
        dot = tl.sum(g * x, axis=0)
    else:
        if INTERPRETED:  # (the interpreter folds a tuple reduction in its own order: reduce them apart there)
            sum_sq = tl.sum(x * x, axis=0)
            dot = tl.sum(g * x, axis=0)
        else:
            sum_sq, dot = tl.reduce((x * x, g * x), 0, _add_pair)
        rstd = rstd_of(sum_sq, inv_n, eps)
    return rstd, dot


@triton.jit
def _row_loads(X, x_stride_q, DY, dy_stride_q, row64, mask, cols, X_ALIGN: tl.constexpr, DY_ALIGN: tl.constexpr):
    """One row's x and dy in their storage type (upcast where used: a prefetched row holds half the registers)."""
    x = tl.load(X + row64 * x_stride_q * X_ALIGN + cols, mask=mask, other=0.0)
    dy = tl.load(DY + row64 * dy_stride_q * DY_ALIGN + cols, mask=mask, other=0.0)
    return x, dy


@triton.jit
def _dx_of(x, g, rstd, dot, inv_n):
    return (g - x * (dot * inv_n * rstd * rstd)) * rstd


@triton.jit
def _rms_norm_bwd_kernel(
    DY, dy_stride_q, X, x_stride_q, DR, dr_stride_q, W, RSTD, DX, dx_stride_q, PART,
    M, n_q, eps, inv_n, weight_offset,
    DY_ALIGN: tl.constexpr, X_ALIGN: tl.constexpr, DR_ALIGN: tl.constexpr, DX_ALIGN: tl.constexpr,
    N_ALIGN: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_RSTD: tl.constexpr, HAS_DRES: tl.constexpr,
    NEED_DW: tl.constexpr, BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr, HOLD_W: tl.constexpr,
    INTERPRETED: tl.constexpr, PREFETCH: tl.constexpr = False,
):
    # N = n_q * N_ALIGN (strides likewise): the compiler then knows masks are constant over N_ALIGN lanes and
    # rows start on N_ALIGN elements, so hidden sizes that are not multiples of 16 still get vector accesses.
    N = n_q * N_ALIGN
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    part_row = PART + tl.cast(pid, tl.int64) * N
    if SINGLE_PASS:
        mask = cols < N
        w = tl.zeros([BLOCK_N], dtype=tl.float32)
        if HAS_WEIGHT and HOLD_W:  # every row reads it: once per program, held in registers
            w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32) + weight_offset
        dw = tl.zeros([BLOCK_N], dtype=tl.float32)
        if PREFETCH:  # this program's first row; each iteration then loads the next one before it reduces
            x_in, dy_in = _row_loads(X, x_stride_q, DY, dy_stride_q, tl.cast(pid, tl.int64), mask & (pid < M),
                                     cols, X_ALIGN, DY_ALIGN)
        for row in range(pid, M, nprog):
            # int64 first, then times the stride: offsets past 2^31 elements must not wrap.
            row64 = tl.cast(row, tl.int64)
            if PREFETCH:
                x = x_in.to(tl.float32)
                dy = dy_in.to(tl.float32)
                nxt = row64 + nprog  # (in flight through this row's reduction and stores; masked past the last row)
                x_in, dy_in = _row_loads(X, x_stride_q, DY, dy_stride_q, nxt, mask & (nxt < M), cols, X_ALIGN,
                                         DY_ALIGN)
            else:
                x_in, dy_in = _row_loads(X, x_stride_q, DY, dy_stride_q, row64, mask, cols, X_ALIGN, DY_ALIGN)
                x = x_in.to(tl.float32)
                dy = dy_in.to(tl.float32)
            g = dy
            if HAS_WEIGHT:
                if not HOLD_W:  # (from L1/L2: every row reads the same columns)
                    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32) + weight_offset
                g = dy * w
            rstd, dot = _row_scalars(x, g, RSTD, row64, inv_n, eps, HAS_RSTD, INTERPRETED)
            dx = _dx_of(x, g, rstd, dot, inv_n)
            if HAS_DRES:
                dx += tl.load(DR + row64 * dr_stride_q * DR_ALIGN + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(DX + row64 * dx_stride_q * DX_ALIGN + cols, to_storage(dx, DX.dtype.element_ty, INTERPRETED),
                     mask=mask)
            if NEED_DW:
                dw += dy * (x * rstd)
        if NEED_DW:
            tl.store(part_row + cols, to_storage(dw, PART.dtype.element_ty, INTERPRETED), mask=mask)
    else:
        # Rows too wide for registers: the row's sums over chunks, then a second pass re-reads the chunks (from L2
        # where it can) and writes dx; this program's dweight partial is read, added to and written per chunk
        # (its own row of PART: ordered, no atomics).
        for row in range(pid, M, nprog):
            row64 = tl.cast(row, tl.int64)
            x_row = X + row64 * x_stride_q * X_ALIGN
            dy_row = DY + row64 * dy_stride_q * DY_ALIGN
            acc_sq = tl.zeros([BLOCK_N], dtype=tl.float32)
            acc_dot = tl.zeros([BLOCK_N], dtype=tl.float32)
            for start in range(0, N, BLOCK_N):
                c = start + cols
                m = c < N
                x = tl.load(x_row + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
                g = tl.load(dy_row + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
                if HAS_WEIGHT:
                    g = g * (tl.load(W + c, mask=m, other=0.0).to(tl.float32) + weight_offset)
                acc_sq += x * x
                acc_dot += g * x
            dot = tl.sum(acc_dot, axis=0)
            if HAS_RSTD:
                rstd = tl.load(RSTD + row64)
            else:
                rstd = rstd_of(tl.sum(acc_sq, axis=0), inv_n, eps)
            for start in range(0, N, BLOCK_N):
                c = start + cols
                m = c < N
                x = tl.load(x_row + c, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
                dy = tl.load(dy_row + c, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
                g = dy
                if HAS_WEIGHT:
                    g = dy * (tl.load(W + c, mask=m, other=0.0).to(tl.float32) + weight_offset)
                dx = _dx_of(x, g, rstd, dot, inv_n)
                if HAS_DRES:
                    dx += tl.load(DR + row64 * dr_stride_q * DR_ALIGN + c, mask=m, other=0.0).to(tl.float32)
                tl.store(DX + row64 * dx_stride_q * DX_ALIGN + c, to_storage(dx, DX.dtype.element_ty, INTERPRETED),
                         mask=m)
                if NEED_DW:
                    # The program's first row starts the partial (nothing to read); later rows add to it.
                    prev = tl.load(part_row + c, mask=m & (row != pid), other=0.0).to(tl.float32)
                    tl.store(part_row + c, to_storage(prev + dy * (x * rstd), PART.dtype.element_ty, INTERPRETED),
                             mask=m)


@triton.jit
def _dweight_reduce_kernel(PART, DW, P, N, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
                           INTERPRETED: tl.constexpr):
    """dweight[c] = sum over p of PART[p, c], in a fixed order (tiles of BLOCK_P partials, then one tree)."""
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < N
    acc = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        ptrs = PART + p[:, None].to(tl.int64) * N + c[None, :]
        acc += tl.load(ptrs, mask=(p[:, None] < P) & cmask[None, :], other=0.0)
    tl.store(DW + c, to_storage(tl.sum(acc, axis=0), DW.dtype.element_ty, INTERPRETED), mask=cmask)


def bwd_constexprs(aligns: tuple[int, int, int, int, int], has_weight: bool, has_rstd: bool, has_dres: bool,
                   need_dw: bool, block_n: int, single_pass: bool, hold_w: bool, interpreted: bool,
                   prefetch: bool = False) -> dict[str, object]:
    """The backward kernel's compile-time arguments, in signature order."""
    dya, xa, dra, dxa, na = aligns
    return {"DY_ALIGN": dya, "X_ALIGN": xa, "DR_ALIGN": dra, "DX_ALIGN": dxa, "N_ALIGN": na,
            "HAS_WEIGHT": has_weight, "HAS_RSTD": has_rstd, "HAS_DRES": has_dres, "NEED_DW": need_dw,
            "BLOCK_N": block_n, "SINGLE_PASS": single_pass, "HOLD_W": hold_w and single_pass,
            "INTERPRETED": interpreted, "PREFETCH": prefetch and single_pass}

