"""Split-row cross-entropy read once (the training step): the programs of a row each hold one chunk of its logits in
registers and exchange their chunk statistics through global memory, then write the gradient from the registers.

kernel_split.py's two kernels read every chunk twice (kernel 2 re-reads what kernel 1 reduced); the one-program
layouts of kernel.py walk a row twice too. Here a row of V columns is cut into S = cdiv(V, CHUNK) chunks and a
group of S programs handles rows g, g + groups, ... of a persistent, cooperative grid (lib/coop.py: sized from
the compiled kernel's occupancy, a per-stream counter per group, reset by the group's last program). Per row each
program loads its chunk and stores to WS[row, chunk, 0:4] what kernel_split.py's kernel 1 stores (max, sum of exp
relative to it, the target's logit from the chunk that holds it, the sum of logits with smoothing), arrives at its
group's counter (release) and waits for the row's S programs (acquire); then it combines the S partials exactly as
kernel_split.py's kernel 2 (the same block reduction of fixed shape S_BLOCK, from V only), chunk 0 writes the row's
loss, and every program writes its chunk of the gradient (`_grad_of`, scaled as kernel.py). The same arithmetic
chunk for chunk as kernel_split.py: deterministic and batch invariant, the same bits.

In place (the gradient over the logits): a program writes only the chunk it read into its registers, after every
program of the row has published (the target's logit comes from the workspace, never re-read). Ignored rows are
not read (loss 0, gradient 0); a target outside [0, V) is never an address (its row's loss and gradient are NaN).

The CPU interpreter runs programs one after another, so there it is launched twice (PHASE 1 publishes, PHASE 2
combines and writes; lib/coop.py); PHASE 0 on the GPU.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.coop import arrive, arrive_and_wait, coop_program, keep_in_storage, leave_and_reset, wait_for
from ridgeline.lib.rounding import to_storage
from ridgeline.ops.cross_entropy.kernel import _grad_of
from ridgeline.ops.cross_entropy.kernel_split import _combine_row

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _target_and_chunk(X, x_stride_q, T, t_stride, row, M, ignore_index, cols, mask, X_ALIGN: tl.constexpr):
    """Row `row`'s target (int64; ignore_index past the last row) and this program's chunk of its logits. An
    ignored row (or one past the last) is not read: -inf, its m = -inf and d = 0 are never used."""
    t = tl.load(T + row * t_stride, mask=row < M, other=ignore_index).to(tl.int64)
    x = tl.load(X + row * x_stride_q * X_ALIGN + cols, mask=mask & (t != ignore_index), other=float("-inf"))
    return t, x


@triton.jit(do_not_specialize=["groups"])  # the grid is sized from this very kernel's occupancy: one compile
def _xent_coop(
    X, x_stride_q, T, t_stride, LOSS, G, g_stride_q, WS, STATS, SYNC, M, v_q, ignore_index, label_smoothing,
    z_loss, groups,
    X_ALIGN: tl.constexpr, G_ALIGN: tl.constexpr, V_ALIGN: tl.constexpr, CHUNK: tl.constexpr,
    S_BLOCK: tl.constexpr, MEAN: tl.constexpr, HAS_SMOOTH: tl.constexpr, HAS_Z: tl.constexpr,
    PHASE: tl.constexpr, EMULATE: tl.constexpr, PREFETCH: tl.constexpr,
):
    V = v_q * V_ALIGN
    n_chunks, group, k, cols, mask, sync = coop_program(V, CHUNK, SYNC)
    start = k * CHUNK
    gscale = 1.0
    if MEAN:
        gscale = 1.0 / tl.load(STATS).to(tl.float32)  # (0 valid rows: inf, but every row is then ignored)
    done = 0
    if PREFETCH:
        t, x = _target_and_chunk(X, x_stride_q, T, t_stride, tl.cast(group, tl.int64), M, ignore_index, cols, mask,
                                 X_ALIGN)
    for r in range(group, M, groups):
        row = tl.cast(r, tl.int64)
        if not PREFETCH:
            t, x = _target_and_chunk(X, x_stride_q, T, t_stride, row, M, ignore_index, cols, mask, X_ALIGN)
        valid = t != ignore_index
        x_row = X + row * x_stride_q * X_ALIGN
        ws_row = WS + row * n_chunks * 4
        if PHASE != 2:
            xf = x.to(tl.float32)
            m = tl.max(xf, axis=0)
            m_ref = tl.where(m == float("-inf"), 0.0, m)  # a chunk of only -inf: d = 0, not NaN
            ws = ws_row + k * 4
            tl.store(ws, m)
            tl.store(ws + 1, tl.sum(tl.exp2((xf - m_ref) * LOG2E), axis=0))
            # The target's logit, from the one chunk that holds it (a scalar load of a line just read: L1/L2).
            holds = valid & (t >= start) & (t < start + CHUNK) & (t < V)
            x_t = tl.load(x_row + tl.where(holds, t, 0), mask=holds, other=0.0).to(tl.float32)
            tl.store(ws + 2, x_t, mask=holds)
            if HAS_SMOOTH:
                tl.store(ws + 3, tl.sum(tl.where(mask, xf, 0.0), axis=0))
        if PREFETCH:  # the group's next row, in flight while this one waits for its group
            arrive(sync, PHASE)
            t_next, x_next = _target_and_chunk(X, x_stride_q, T, t_stride, row + groups, M, ignore_index, cols, mask,
                                               X_ALIGN)
            wait_for(sync, (done + 1) * n_chunks, PHASE)
        else:
            arrive_and_wait(sync, (done + 1) * n_chunks, PHASE)
        if PHASE != 1:
            in_range = (t >= 0) & (t < V)
            # .cg: from L2, never a stale L1 line of this workspace (written in this launch).
            lse, zfac = _combine_row(ws_row, n_chunks, t, valid, in_range, k, LOSS + row, V, label_smoothing,
                                     z_loss, CHUNK, S_BLOCK, HAS_SMOOTH, HAS_Z, ".cg")
            rscale = tl.where(valid, tl.where(in_range, gscale, float("nan")), 0.0)
            if not EMULATE:  # on the GPU: x held in its storage type through the wait
                x = keep_in_storage(x)
            xg = tl.where(mask & valid, x.to(tl.float32), 0.0)  # (kernel_split.py's kernel 2 loads other=0.0)
            g = _grad_of(xg, cols, t, lse, rscale, zfac, label_smoothing / V, 1.0 - label_smoothing)
            g = tl.where(valid, g, 0.0)  # (an ignored row: 0, never NaN from 0 * inf)
            tl.store(G + row * g_stride_q * G_ALIGN + cols, to_storage(g, G.dtype.element_ty, EMULATE), mask=mask)
        if PREFETCH:
            t = t_next
            x = x_next
        done += 1
    leave_and_reset(sync, done, n_chunks, PHASE)


__all__ = ["_xent_coop", "triton"]
