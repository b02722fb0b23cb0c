"""Softmax rows too wide for one program's registers, split across programs: forward and backward, two kernels each.

A row of N columns is cut into S = cdiv(N, CHUNK) chunks (CHUNK a power of two chosen from N, the dtype and the
direction only: rules.py), and every kernel runs one program per (row, chunk), program id = row * S + chunk, over
a group of rows starting at `row0` (the host may launch the rows in groups small enough for L2: no bit changes).

- forward, `_softmax_fwd_split_stats`: each chunk's (m, l) = (max of x * log2(e), sum of exp2(x * log2(e) - m))
  in float32 to a workspace WS[M, S, 2]; `_softmax_fwd_split_write`: the row's S pairs combined as one block
  reduction of fixed shape (S_BLOCK, from N only): M = max m_s, L = sum l_s * exp2(m_s - M); then the chunk is
  re-read and y = exp2(x * log2(e) - M) * (1 / L) written.
- backward, `_softmax_bwd_split_dot`: each chunk's partial sum(y * dy) (float32) to WS[M, S];
  `_softmax_bwd_split_write`: the S partials summed (fixed shape), y and dy re-read, dx = y * (dy - sum) written.

The first kernel loads with evict_last and the second re-reads with evict_first (its stores too), walking the
programs last to first when REVERSE (the most recently read lines first), so the re-read comes mostly from L2
when the group of rows fits it. No atomics, every reduction of a fixed shape: deterministic, batch invariant.

NaN and inf as in the one-pass kernels (kernel.py): a chunk of only -inf has m = -inf and l = 0 (its exponents are
taken against 0, never -inf - -inf); a row holding +inf gets l = NaN in that chunk (inf - inf) so NaN everywhere;
a NaN anywhere makes its chunk's l NaN, so the row's L and every y; a row of only -inf has L = 0 and y = 0 * inf
= NaN, as torch gives; -inf entries of a finite row give 0. Row offsets are 64-bit; N = n_q * N_ALIGN and row
strides = stride_q * ALIGN tell Triton how far rows are aligned (16-byte vector accesses where possible).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.rounding import to_storage

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _program(row0, N, CHUNK: tl.constexpr, REVERSE: tl.constexpr):
    """(row as int64, chunk index, number of chunks) of this program."""
    n_chunks = tl.cdiv(N, CHUNK)
    pid = tl.program_id(0)
    if REVERSE:
        pid = tl.num_programs(0) - 1 - pid
    row = tl.cast(row0, tl.int64) + pid // n_chunks
    return row, pid % n_chunks, n_chunks


@triton.jit(do_not_specialize=["row0"])
def _softmax_fwd_split_stats(
    X, x_stride_q, WS, row0, n_q,
    X_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr, CHUNK: tl.constexpr,
):
    """Kernel 1 of the forward: this chunk's (max, sum of exp2 relative to it) in log2 units, to WS[row, chunk]."""
    N = n_q * N_ALIGN
    row, k, n_chunks = _program(row0, N, CHUNK, False)
    cols = k * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(X + row * x_stride_q * X_ALIGN + cols, mask=cols < N, other=float("-inf"),
                eviction_policy="evict_last")
    # Upcast right after the load: float32 math on the GPU, and the CPU interpreter gets bf16 math wrong.
    x = x.to(tl.float32) * LOG2E
    m = tl.max(x, axis=0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)  # a chunk of only -inf: l = 0, not NaN
    l_sum = tl.sum(tl.exp2(x - m_ref), axis=0)
    ws = WS + (row * n_chunks + k) * 2
    tl.store(ws, m)
    tl.store(ws + 1, l_sum)


@triton.jit(do_not_specialize=["row0"])
def _softmax_fwd_split_write(
    X, x_stride_q, Y, y_stride_q, WS, row0, n_q,
    X_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr, CHUNK: tl.constexpr,
    S_BLOCK: tl.constexpr, REVERSE: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """Kernel 2 of the forward: combine the row's S pairs (one reduction of fixed shape), re-read the chunk, write y."""
    N = n_q * N_ALIGN
    row, k, n_chunks = _program(row0, N, CHUNK, REVERSE)
    s = tl.arange(0, S_BLOCK)
    ws = WS + row * n_chunks * 2 + s * 2
    ms = tl.load(ws, mask=s < n_chunks, other=float("-inf"))
    ls = tl.load(ws + 1, mask=s < n_chunks, other=0.0)
    m = tl.max(ms, axis=0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)  # a row of only -inf: L = 0, y = 0 * inf = NaN as torch
    inv = 1.0 / tl.sum(ls * tl.exp2(ms - m_ref), axis=0)
    cols = k * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    x = tl.load(X + row * x_stride_q * X_ALIGN + cols, mask=mask, other=float("-inf"),
                eviction_policy="evict_first")
    y = tl.exp2(x.to(tl.float32) * LOG2E - m_ref) * inv
    tl.store(Y + row * y_stride_q * Y_ALIGN + cols, to_storage(y, Y.dtype.element_ty, EMULATE_RNE), mask=mask,
             eviction_policy="evict_first")


@triton.jit(do_not_specialize=["row0"])
def _softmax_bwd_split_dot(
    Yt, y_stride_q, DY, dy_stride_q, WS, row0, n_q,
    Y_ALIGN: tl.constexpr, DY_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr, CHUNK: tl.constexpr,
):
    """Kernel 1 of the backward: this chunk's sum(y * dy) in float32, to WS[row, chunk]."""
    N = n_q * N_ALIGN
    row, k, n_chunks = _program(row0, N, CHUNK, False)
    cols = k * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    y = tl.load(Yt + row * y_stride_q * Y_ALIGN + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    g = tl.load(DY + row * dy_stride_q * DY_ALIGN + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    tl.store(WS + row * n_chunks + k, tl.sum(y.to(tl.float32) * g.to(tl.float32), axis=0))


@triton.jit(do_not_specialize=["row0"])
def _softmax_bwd_split_write(
    Yt, y_stride_q, DY, dy_stride_q, DX, dx_stride_q, WS, row0, n_q,
    Y_ALIGN: tl.constexpr, DY_ALIGN: tl.constexpr, DX_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr,
    CHUNK: tl.constexpr, S_BLOCK: tl.constexpr, REVERSE: tl.constexpr, EMULATE_RNE: tl.constexpr,
):
    """Kernel 2 of the backward: sum the row's S partials (fixed shape), re-read y and dy, write dx."""
    N = n_q * N_ALIGN
    row, k, n_chunks = _program(row0, N, CHUNK, REVERSE)
    s = tl.arange(0, S_BLOCK)
    dot = tl.sum(tl.load(WS + row * n_chunks + s, mask=s < n_chunks, other=0.0), axis=0)
    cols = k * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    y = tl.load(Yt + row * y_stride_q * Y_ALIGN + cols, mask=mask, other=0.0, eviction_policy="evict_first")
    g = tl.load(DY + row * dy_stride_q * DY_ALIGN + cols, mask=mask, other=0.0, eviction_policy="evict_first")
    dx = y.to(tl.float32) * (g.to(tl.float32) - dot)
    tl.store(DX + row * dx_stride_q * DX_ALIGN + cols, to_storage(dx, DX.dtype.element_ty, EMULATE_RNE), mask=mask,
             eviction_policy="evict_first")
