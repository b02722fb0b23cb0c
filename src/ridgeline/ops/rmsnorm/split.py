"""Wide rows split across programs: each program holds one chunk of the row in registers, and the programs of a
row exchange their partial sums of squares through global memory, so every byte is read once.

A row of 65536 bf16 columns (128 KB) does not fit one program's registers. The two-pass kernel re-reads it from
L2, and with hundreds of rows in flight part of that re-read misses (0.71 of the speed of light at 2048x65536 on
the H200). Here SPLIT programs share a row; each keeps its chunk of x in registers (in x's own 16-bit type while
it waits), publishes its chunk's sum of squares, waits until the row's SPLIT partials are in, sums them in a fixed
order and writes its chunk of y. Its chunk of the weight is loaded with x when the program has few rows (latency
hidden) or after the wait (from L1, registers spared); the caller chooses (WEIGHT_FIRST).

The grid is persistent: `groups` groups of SPLIT programs, group g handling rows g, g + groups, ... Programs of a
group wait on each other, so all must be resident at once: the launch is cooperative (the driver refuses a grid
that cannot be co-resident instead of letting it hang), sized from the compiled kernel's occupancy.

Synchronization, per group: two slots of SPLIT partial sums (float32), used by alternate rows, and a counter `sync`
(int32), all zero between launches. A program stores its partial, adds 1 to the counter (release), and waits until
it reaches (k + 1) * SPLIT for the group's k-th row (acquire) before loading the row's partials. A slot is
rewritten two rows later, by which time every program of the group has passed the barrier in between, so has read
it. After its last row each program adds 1 more; the last one to do so resets the group's workspace to 0 for the
next launch. (A variant that published each partial with its row's tag in one 64-bit word, polled without the
counter, ran 1.3-2x slower on the H200: docs/perf/rmsnorm.md.)

The arithmetic depends on N, the dtype, CHUNK, SPLIT and the warps only (never on M or the grid): batch
invariant, and the fused op's out equals the plain op on residual_out bitwise. The CPU interpreter runs programs
one after another, so it cannot run this kernel (a program would wait forever for the next); `config_for`
(rmsnorm_config.py) takes the two-pass kernel there.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.coop import SplitWorkspace, keep_in_storage, resident_programs  # noqa: F401 (re-exported)
from ridgeline.lib.rounding import rstd_of, to_storage


@triton.jit(do_not_specialize=["groups"])  # the grid is sized from this very kernel's occupancy: one compile
def _rms_norm_split_kernel(
    X, x_stride_q, R, r_stride_q, RO, ro_stride_q, W, Y, y_stride_q,
    M, n_q, eps, inv_n, weight_offset, PART, SYNC, groups,
    X_ALIGN: tl.constexpr, R_ALIGN: tl.constexpr, RO_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr,
    N_ALIGN: tl.constexpr, HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr,
    CHUNK: tl.constexpr, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, WEIGHT_FIRST: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):
    N = n_q * N_ALIGN
    pid = tl.program_id(0)
    group = pid // SPLIT
    part = pid % SPLIT
    # (N = n_q * N_ALIGN: the mask is constant over N_ALIGN lanes, so accesses stay vectorized.)
    c = part * CHUNK + tl.arange(0, CHUNK)
    mask = c < N
    sync = SYNC + group
    slots = PART + group * (2 * SPLIT)
    p = tl.arange(0, SPLIT_P2)  # (SPLIT_P2: SPLIT rounded up to a power of two)
    k = 0
    for row in range(group, M, groups):
        row64 = tl.cast(row, tl.int64)
        x = tl.load(X + row64 * x_stride_q * X_ALIGN + c, mask=mask, other=0.0)
        w = x
        if HAS_WEIGHT and WEIGHT_FIRST:  # with x: its latency hidden (few rows), but held through the wait
            w = tl.load(W + c, mask=mask, other=0.0, eviction_policy="evict_last")
        if HAS_RESIDUAL:
            r = tl.load(R + row64 * r_stride_q * R_ALIGN + c, mask=mask, other=0.0)
            x = to_storage(x.to(tl.float32) + r.to(tl.float32), RO.dtype.element_ty, EMULATE_RNE)
            tl.store(RO + row64 * ro_stride_q * RO_ALIGN + c, x, mask=mask)
        xf = x.to(tl.float32)
        slot = slots + (k % 2) * SPLIT
        # Publish the partial, then arrive: the release orders the partial's store before the count. (Scalar
        # stores and atomics are issued by one thread of the program, after the reduction's barrier.)
        tl.store(slot + part, tl.sum(xf * xf, axis=0))
        tl.atomic_add(sync, 1, sem="release")
        target = (k + 1) * SPLIT
        arrived = tl.atomic_add(sync, 0, sem="acquire")
        while arrived < target:
            arrived = tl.atomic_add(sync, 0, sem="acquire")
        # .cg: from L2, never a stale L1 line of this slot's use two rows ago. Summed in a fixed order.
        partials = tl.load(slot + p, mask=p < SPLIT, other=0.0, cache_modifier=".cg")
        rstd = rstd_of(tl.sum(partials, axis=0), inv_n, eps)
        if not EMULATE_RNE:  # on the GPU: x held in its storage type through the wait (see lib.coop.keep_in_storage)
            xf = keep_in_storage(x).to(tl.float32)
        y = xf * rstd
        if HAS_WEIGHT:
            if not WEIGHT_FIRST:
                # The same chunk for every row of this program: re-read (from L1) rather than held in registers
                # through the loop, where the compiler keeps it as float32 (fewer programs per SM).
                w = tl.load(W + c, mask=mask, other=0.0, eviction_policy="evict_last")
            y = y * (w.to(tl.float32) + weight_offset)
        tl.store(Y + row64 * y_stride_q * Y_ALIGN + c, to_storage(y, Y.dtype.element_ty, EMULATE_RNE), mask=mask)
        k += 1
    # Leave the workspace at 0 for the next launch: the last program of the group to get here resets it (every
    # program has passed the group's last barrier by then, so none reads it again).
    if tl.atomic_add(sync, 1, sem="acq_rel") == (k + 1) * SPLIT - 1:
        q = tl.arange(0, 2 * SPLIT_P2)
        tl.store(slots + q, tl.zeros([2 * SPLIT_P2], dtype=tl.float32), mask=q < 2 * SPLIT)
        tl.atomic_xchg(sync, 0, sem="relaxed")


WORKSPACE = SplitWorkspace()


def split_grid(m: int, split: int, programs_per_sm: int, sms: int) -> tuple[int, int]:
    """(groups, programs): as many groups of `split` programs as fit resident, and no more than rows."""
    groups = max(1, min(m, (sms * programs_per_sm) // split))
    return groups, groups * split


def chunk_for(n: int, split: int) -> int:
    """Columns per program: the row's share rounded up to a power of two (masked if that overshoots)."""
    return triton.next_power_of_2(triton.cdiv(n, split))
