"""Softmax rows too wide for one program's registers, read once: the programs of a row each hold one chunk of it in
registers and exchange their chunk statistics through global memory (forward and backward, one kernel each).

The two-kernel split (kernel_split.py) reads every chunk twice: its second kernel re-reads what the first reduced,
and at 65536-262144 columns that re-read and the second launch held it at 0.56-0.62 of the speed of light on the
H200 (Nsight Compute at 64x262144: 75.8 MB of DRAM traffic for 67.1 MB, 12.4 + 16.7 us). Here a row of N columns
is cut into S = cdiv(N, CHUNK) chunks, and a group of S programs handles rows g, g + groups, ... of a persistent
grid. Per row each program loads its chunk, publishes its statistics to WS[row, chunk], adds 1 to its group's
counter (release), waits until the counter reaches (k + 1) * S for the group's k-th row (acquire), combines the
row's S statistics as one reduction of fixed shape (S_BLOCK slots, from N only) and writes its chunk from the
registers. The programs of a group wait on each other, so the launch is cooperative and sized from the compiled
kernel's occupancy (lib.coop); after its last row each program adds 1 more, and the last one to do so resets the
counter to 0 for the next launch.

- forward: a chunk's (m, l) = (max of x * log2(e), sum of exp2(x * log2(e) - m)); the row's M = max m_s,
  L = sum l_s * exp2(m_s - M); y = exp2(x * log2(e) - M) / L.
- backward: a chunk's sum(y * dy); dx = y * (dy - the row's sum of the S partials).

WS holds one slot per (row, chunk), written before it is read in the same launch, so it needs no zeroing. The
arithmetic is that of kernel_split.py's, chunk for chunk, and depends on N, the dtype, CHUNK and the warps only
(never on M or the grid): deterministic and batch invariant. NaN and inf as there.

The CPU interpreter runs programs one after another (a program would wait forever for the next), so there the
kernel is launched twice on the same workspace: PHASE 1 publishes every chunk's statistics (and counts), PHASE 2
passes the waits at once, combines and writes, and resets the counters. On the GPU PHASE 0 does both in one launch.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.coop import arrive, arrive_and_wait, coop_program, keep_in_storage, leave_and_reset, wait_for
from ridgeline.lib.rounding import to_storage

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit(do_not_specialize=["groups"])  # the grid is sized from this very kernel's occupancy: one compile
def _softmax_fwd_coop(
    X, x_stride_q, Y, y_stride_q, WS, SYNC, M, n_q, groups,
    X_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr, CHUNK: tl.constexpr,
    S_BLOCK: tl.constexpr, PHASE: tl.constexpr, EMULATE_RNE: tl.constexpr, PREFETCH: tl.constexpr,
):
    N = n_q * N_ALIGN
    n_chunks, group, part, cols, mask, sync = coop_program(N, CHUNK, SYNC)
    s = tl.arange(0, S_BLOCK)
    k = 0
    if PREFETCH:
        x = tl.load(X + tl.cast(group, tl.int64) * x_stride_q * X_ALIGN + cols, mask=mask & (group < M),
                    other=float("-inf"))
    for row in range(group, M, groups):
        row64 = tl.cast(row, tl.int64)
        if not PREFETCH:
            x = tl.load(X + row64 * x_stride_q * X_ALIGN + cols, mask=mask, other=float("-inf"))
        ws = WS + row64 * n_chunks * 2
        if PHASE != 2:
            # Upcast right after the load: float32 math on the GPU, and the CPU interpreter gets bf16 math wrong.
            xl = x.to(tl.float32) * LOG2E
            m = tl.max(xl, axis=0)
            m_ref = tl.where(m == float("-inf"), 0.0, m)  # a chunk of only -inf: l = 0, not NaN
            tl.store(ws + part * 2, m)
            tl.store(ws + part * 2 + 1, tl.sum(tl.exp2(xl - m_ref), axis=0))
        if PREFETCH:  # the group's next row, in flight while this one waits for its group
            arrive(sync, PHASE)
            nxt = row + groups
            x_next = tl.load(X + tl.cast(nxt, tl.int64) * x_stride_q * X_ALIGN + cols, mask=mask & (nxt < M),
                             other=float("-inf"))
            wait_for(sync, (k + 1) * n_chunks, PHASE)
        else:
            arrive_and_wait(sync, (k + 1) * n_chunks, PHASE)
        if PHASE != 1:
            # .cg: from L2, never a stale L1 line of this workspace. One reduction of fixed shape.
            ms = tl.load(ws + s * 2, mask=s < n_chunks, other=float("-inf"), cache_modifier=".cg")
            ls = tl.load(ws + s * 2 + 1, mask=s < n_chunks, other=0.0, cache_modifier=".cg")
            row_m = tl.max(ms, axis=0)
            row_ref = tl.where(row_m == float("-inf"), 0.0, row_m)  # a row of only -inf: L = 0, y = NaN as torch
            inv = 1.0 / tl.sum(ls * tl.exp2(ms - row_ref), axis=0)
            if not EMULATE_RNE:  # on the GPU: x held in its storage type through the wait
                x = keep_in_storage(x)
            y = tl.exp2(x.to(tl.float32) * LOG2E - row_ref) * inv
            tl.store(Y + row64 * y_stride_q * Y_ALIGN + cols, to_storage(y, Y.dtype.element_ty, EMULATE_RNE),
                     mask=mask)
        if PREFETCH:
            x = x_next
        k += 1
    leave_and_reset(sync, k, n_chunks, PHASE)


@triton.jit(do_not_specialize=["groups"])
def _softmax_bwd_coop(
    Yt, y_stride_q, DY, dy_stride_q, DX, dx_stride_q, WS, SYNC, M, n_q, groups,
    Y_ALIGN: tl.constexpr, DY_ALIGN: tl.constexpr, DX_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr,
    CHUNK: tl.constexpr, S_BLOCK: tl.constexpr, PHASE: tl.constexpr, EMULATE_RNE: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    N = n_q * N_ALIGN
    n_chunks, group, part, cols, mask, sync = coop_program(N, CHUNK, SYNC)
    s = tl.arange(0, S_BLOCK)
    k = 0
    if PREFETCH:
        first = tl.cast(group, tl.int64)
        y = tl.load(Yt + first * y_stride_q * Y_ALIGN + cols, mask=mask & (group < M), other=0.0)
        g = tl.load(DY + first * dy_stride_q * DY_ALIGN + cols, mask=mask & (group < M), other=0.0)
    for row in range(group, M, groups):
        row64 = tl.cast(row, tl.int64)
        if not PREFETCH:
            y = tl.load(Yt + row64 * y_stride_q * Y_ALIGN + cols, mask=mask, other=0.0)
            g = tl.load(DY + row64 * dy_stride_q * DY_ALIGN + cols, mask=mask, other=0.0)
        ws = WS + row64 * n_chunks
        if PHASE != 2:
            tl.store(ws + part, tl.sum(y.to(tl.float32) * g.to(tl.float32), axis=0))
        if PREFETCH:  # the group's next row, in flight while this one waits for its group
            arrive(sync, PHASE)
            nxt = tl.cast(row + groups, tl.int64)
            y_next = tl.load(Yt + nxt * y_stride_q * Y_ALIGN + cols, mask=mask & (nxt < M), other=0.0)
            g_next = tl.load(DY + nxt * dy_stride_q * DY_ALIGN + cols, mask=mask & (nxt < M), other=0.0)
            wait_for(sync, (k + 1) * n_chunks, PHASE)
        else:
            arrive_and_wait(sync, (k + 1) * n_chunks, PHASE)
        if PHASE != 1:
            dot = tl.sum(tl.load(ws + s, mask=s < n_chunks, other=0.0, cache_modifier=".cg"), axis=0)
            if not EMULATE_RNE:
                y = keep_in_storage(y)
                g = keep_in_storage(g)
            dx = y.to(tl.float32) * (g.to(tl.float32) - dot)
            tl.store(DX + row64 * dx_stride_q * DX_ALIGN + cols, to_storage(dx, DX.dtype.element_ty, EMULATE_RNE),
                     mask=mask)
        if PREFETCH:
            y = y_next
            g = g_next
        k += 1
    leave_and_reset(sync, k, n_chunks, PHASE)
