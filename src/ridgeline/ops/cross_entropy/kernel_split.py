"""Split-row cross-entropy (a candidate layout; launch.py runs it when the config says `split`): each row of V
columns is cut into S = cdiv(V, CHUNK) chunks (CHUNK from V and the dtype only, never from the row count: a row's
loss and gradient bits do not depend on the batch), one program per (row, chunk), program id = row * S + chunk over
a group of rows starting at `row0` (the host launches the rows in groups small enough for L2; no bit changes).

- `_xent_split_stats` (kernel 1): the chunk's max m and sum of exp(x - m) d in float32 to WS[row, chunk, 0:2]; the
  chunk that holds the target also stores the target's logit in WS[row, chunk, 2]; with smoothing, the chunk's sum
  of logits goes to WS[row, chunk, 3]. Loads evict_last (kernel 2 re-reads them from L2).
- `_xent_split_write` (kernel 2): combines the row's S (m, d) pairs as one block reduction of fixed shape (S_BLOCK,
  from V only): M = max m_s, D = sum d_s exp(m_s - M), lse = M + log D; with HAS_GRAD re-reads its own chunk
  (evict_first) and writes the gradient chunk (softmax - one-hot, smoothing, z-loss, scaled by the reduction's 1/N
  exactly as kernel.py: `_grad_of`, 1 / stats[0]); the chunk-0 program of each row writes the row's loss (the
  formulas of kernel.py). Without HAS_GRAD (the forward-only contract) it runs one program per row, the loss only,
  so the forward and the training step give the same loss bits.

In place (the gradient written over the logits): kernel 2's program (row, k) reads chunk k of the row and then
writes that same chunk and nothing else; every value it needs from the row's other chunks (max, sum, target
logit, sum of logits) comes from the workspace kernel 1 wrote, and kernel 1 of a group runs (same stream) before
kernel 2 of that group and never touches rows of other groups. So no program reads a byte another program writes:
safe. (The target's logit, in particular, is never re-read from the logits in kernel 2: its chunk may already be
the gradient.)

As in kernel.py: ignored rows are not read (loss 0, gradient 0), a target outside [0, V) is never an address (its
row's loss and gradient are NaN), every load is upcast to float32 at once (the CPU interpreter's 16-bit math is
wrong otherwise), row offsets are 64-bit. A NaN logit poisons its chunk's d, so its row; +inf gives inf - inf =
NaN, as kernel.py. Unlike kernel.py's online loop, a chunk of only -inf logits in a finite row contributes exactly
0 (its sum is taken against 0, never -inf - -inf). No atomics, fixed-shape reductions: deterministic.
Row strides and V are passed as (value / ALIGN, ALIGN constexpr) so Triton sees 16-byte alignment (vector loads).

Compiled for sm_90 ahead of time on the CPU (ridgeline.profile.aot with triton 3.7.1's ptxas; ptxas reports),
stride and V multiples of 8 (16-byte rows), S_BLOCK 16:
| config | kernel 1 (plain / smoothing) | kernel 2, training step (plain / smoothing + z) | forward kernel 2 (1 warp) |
|---|---|---|---|
| bf16, 8192 columns, 8 warps (the default) | 47 / 48 registers, 5 blocks/SM | 33 / 47, 6 / 5 blocks/SM | 16 |
| bf16, 4096, 4 warps | 47 / 56 | 36 / 47 | 16 |
| bf16, 16384, 16 warps | 40 / 59 | 60 / 64 (2 blocks/SM) | 16 |
| bf16, 8192, 4 warps | 72 / 96 | 67 / 68 | 16 |
| fp32, 4096, 8 warps | 32 / 32 (8 blocks/SM) | 32 / 32 | 16 |
0 spills and 0 stack everywhere; kernel 1 loads with LDG.E.EL.128 (16 bytes, evict-last), kernel 2 with
LDG.E.EF.128 and stores with STG.E.EF.128. A row of odd V (50257) or stride cannot be vectorized: 16-bit accesses
(LDG.E.U16), 80-87 registers, still no spills.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.rounding import to_storage
from ridgeline.ops.cross_entropy.kernel import _grad_of

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)
WS_SLOTS = 4  # float32 per (row, chunk): max, sum of exp, target logit (its chunk only), sum of logits (smoothing)


@triton.jit
def _program(row0, n_chunks, REVERSE: tl.constexpr):
    """(row as int64, chunk index) of this program."""
    pid = tl.program_id(0)
    if REVERSE:
        pid = tl.num_programs(0) - 1 - pid
    return tl.cast(row0, tl.int64) + pid // n_chunks, pid % n_chunks


@triton.jit(do_not_specialize=["row0"])
def _xent_split_stats(
    X, x_stride_q, T, t_stride, WS, row0, v_q, ignore_index,
    X_ALIGN: tl.constexpr, V_ALIGN: tl.constexpr, CHUNK: tl.constexpr, HAS_SMOOTH: tl.constexpr,
):
    """Kernel 1: this chunk's (max, sum of exp relative to it), its target logit and sum of logits, to WS."""
    V = v_q * V_ALIGN
    n_chunks = tl.cdiv(V, CHUNK)
    row, k = _program(row0, n_chunks, False)
    t = tl.load(T + row * t_stride).to(tl.int64)
    valid = t != ignore_index
    start = k * CHUNK
    cols = start + tl.arange(0, CHUNK)
    mask = cols < V
    x_row = X + row * x_stride_q * X_ALIGN
    # (an ignored row is not read: m = -inf, d = 0, never used)
    x = tl.load(x_row + cols, mask=mask & valid, other=float("-inf"), eviction_policy="evict_last").to(tl.float32)
    m = tl.max(x, axis=0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)  # a chunk of only -inf: d = 0, not NaN
    d = tl.sum(tl.exp2((x - m_ref) * LOG2E), axis=0)
    ws = WS + (row * n_chunks + k) * 4
    tl.store(ws, m)
    tl.store(ws + 1, d)
    # The target's logit, from the one chunk that holds it (a scalar load of a line just read: L1/L2).
    holds = valid & (t >= start) & (t < start + CHUNK) & (t < V)
    t_safe = tl.where(holds, t, 0)
    x_t = tl.load(x_row + t_safe, mask=holds, other=0.0).to(tl.float32)
    tl.store(ws + 2, x_t, mask=holds)
    if HAS_SMOOTH:
        tl.store(ws + 3, tl.sum(tl.where(mask, x, 0.0), axis=0))


@triton.jit
def _combine_row(ws_row, n_chunks, t, valid, in_range, k, loss_ptr, V, label_smoothing, z_loss,
                 CHUNK: tl.constexpr, S_BLOCK: tl.constexpr, HAS_SMOOTH: tl.constexpr, HAS_Z: tl.constexpr,
                 CACHE: tl.constexpr):
    """A row's S partials from its workspace (max, sum of exp, target logit, sum of logits per chunk) combined as
    one reduction of fixed shape: (lse, the z-loss factor of the gradient); chunk 0 (k == 0) stores the row's loss.
    CACHE: the loads' cache modifier (".cg" where the workspace was written in the same launch)."""
    s = tl.arange(0, S_BLOCK)
    ms = tl.load(ws_row + s * 4, mask=s < n_chunks, other=float("-inf"), cache_modifier=CACHE)
    ds = tl.load(ws_row + s * 4 + 1, mask=s < n_chunks, other=0.0, cache_modifier=CACHE)
    m = tl.max(ms, axis=0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)  # (an ignored row: lse = -inf, never used)
    lse = m_ref + tl.log2(tl.sum(ds * tl.exp2((ms - m_ref) * LOG2E), axis=0)) * LN2
    zfac = 1.0
    if HAS_Z:
        zfac = 1.0 + 2.0 * z_loss * lse
    if k == 0:
        ok = valid & in_range
        t_chunk = tl.where(ok, t // CHUNK, 0)
        loss = lse - tl.load(ws_row + t_chunk * 4 + 2, mask=ok, other=0.0, cache_modifier=CACHE)
        if HAS_SMOOTH:
            sum_x = tl.sum(tl.load(ws_row + s * 4 + 3, mask=s < n_chunks, other=0.0, cache_modifier=CACHE), axis=0)
            loss = (1.0 - label_smoothing) * loss + label_smoothing * (lse - sum_x / V)
        if HAS_Z:
            loss += z_loss * lse * lse
        tl.store(loss_ptr, tl.where(valid, tl.where(in_range, loss, float("nan")), 0.0))
    return lse, zfac


@triton.jit(do_not_specialize=["row0"])
def _xent_split_write(
    X, x_stride_q, T, t_stride, LOSS, G, g_stride_q, WS, STATS, row0, v_q, ignore_index,
    label_smoothing, z_loss,
    X_ALIGN: tl.constexpr, G_ALIGN: tl.constexpr, V_ALIGN: tl.constexpr, CHUNK: tl.constexpr,
    S_BLOCK: tl.constexpr,
    HAS_GRAD: tl.constexpr,  # one program per (row, chunk) writing the gradient; else one per row, the loss only
    MEAN: tl.constexpr, HAS_SMOOTH: tl.constexpr, HAS_Z: tl.constexpr,
    REVERSE: tl.constexpr,  # walk the programs last to first (the most recently read lines first)
    EMULATE: tl.constexpr,  # round-to-nearest casts under the CPU interpreter (lib/rounding.py)
):
    """Kernel 2: combine the row's S partials (fixed order and shape), write the loss (chunk 0) and, with HAS_GRAD,
    re-read this chunk and write its gradient."""
    V = v_q * V_ALIGN
    n_chunks = tl.cdiv(V, CHUNK)
    if HAS_GRAD:
        row, k = _program(row0, n_chunks, REVERSE)
    else:
        row = tl.cast(row0, tl.int64) + tl.program_id(0)
        k = 0
    t = tl.load(T + row * t_stride).to(tl.int64)
    valid = t != ignore_index
    in_range = (t >= 0) & (t < V)
    ws_row = WS + row * n_chunks * 4
    lse, zfac = _combine_row(ws_row, n_chunks, t, valid, in_range, k, LOSS + row, V, label_smoothing, z_loss,
                             CHUNK, S_BLOCK, HAS_SMOOTH, HAS_Z, "")
    if HAS_GRAD:
        gscale = 1.0
        if MEAN:
            gscale = 1.0 / tl.load(STATS).to(tl.float32)  # (0 valid rows: inf, but every row is then ignored)
        rscale = tl.where(valid, tl.where(in_range, gscale, float("nan")), 0.0)
        cols = k * CHUNK + tl.arange(0, CHUNK)
        mask = cols < V
        x = tl.load(X + row * x_stride_q * X_ALIGN + cols, mask=mask & valid, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        g = _grad_of(x, cols, t, lse, rscale, zfac, label_smoothing / V, 1.0 - label_smoothing)
        g = tl.where(valid, g, 0.0)  # (an ignored row: 0, never NaN from 0 * inf)
        tl.store(G + row * g_stride_q * G_ALIGN + cols, to_storage(g, G.dtype.element_ty, EMULATE), mask=mask,
                 eviction_policy="evict_first")


__all__ = ["_xent_split_stats", "_xent_split_write", "WS_SLOTS", "triton"]
