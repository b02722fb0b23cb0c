"""Triton kernels of ridgeline's small-message all-reduce over peer-accessible buffers (no multicast, ever).

Every rank owns one buffer that every peer can address: a flag region (uint32 slots) followed by a data region.
`table` holds, per rank p, the address of p's buffer *as this process sees it* (CUDA symmetric memory's
`buffer_ptrs` on a GPU; shared-memory mappings on a CPU), so one kernel body serves both.

Cross-rank barrier (per program, one slot per (phase, program, source rank)): a program signals every peer by
CAS 0->1 on the peer's slot for this rank (release, system scope) and then waits for every peer's signal on its
own slots by CAS 1->0 (acquire, system scope). Each slot has one writer that sets it and one owner that clears
it, so a barrier leaves every slot at 0 and the next one can reuse it; a signal to a slot not yet cleared spins
until it is. `tl.debug_barrier()` before the signal orders all threads' stores before the one thread's release;
after the wait it holds every thread until the acquire has happened. Program b of a rank only meets program b
of its peers and only reads what they wrote, so the grid must be co-resident on each GPU (the launch rules keep
it at most MAX_PROGRAMS, far below the SM count). Triton's CPU interpreter runs programs one after another in the
same order on every rank, so the same pairing holds there.

Reductions accumulate in fp32 in rank order 0..n-1, so every rank ends with the same bits.
"""

from __future__ import annotations

import triton
import triton.language as tl

FLAG_BYTES = 4096  # flag region at the start of each buffer; the data region starts after it (aligned)
MAX_PROGRAMS = 32
PHASES = 3
MAX_WORLD = 8  # one node: PHASES * MAX_PROGRAMS * MAX_WORLD uint32 slots fit in FLAG_BYTES
assert PHASES * MAX_PROGRAMS * MAX_WORLD * 4 <= FLAG_BYTES


@triton.jit
def _barrier(table, slot0, rank, WORLD: tl.constexpr):
    """Meet program `pid` of every rank: signal each peer's slot slot0+rank, then consume slots slot0..+WORLD."""
    tl.debug_barrier()
    for p in tl.static_range(WORLD):
        peer_flags = tl.load(table + p).to(tl.pointer_type(tl.uint32))
        while tl.atomic_cas(peer_flags + slot0 + rank, 0, 1, sem="release", scope="sys") != 0:
            pass
    my_flags = tl.load(table + rank).to(tl.pointer_type(tl.uint32))
    for p in tl.static_range(WORLD):
        while tl.atomic_cas(my_flags + slot0 + p, 1, 0, sem="acquire", scope="sys") != 1:
            pass
    tl.debug_barrier()


@triton.jit
def _data(table, p, DATA_OFF: tl.constexpr, ELEM: tl.constexpr):
    return (tl.load(table + p) + DATA_OFF).to(tl.pointer_type(ELEM))


@triton.jit
def one_shot_kernel(x_ptr, out_ptr, table, n, span, rank,
                    WORLD: tl.constexpr, BLOCK: tl.constexpr, DATA_OFF: tl.constexpr):
    """out = sum over ranks of x. Program b owns elements [b*span, (b+1)*span): it copies its part of x into
    this rank's buffer, meets the peers, reads that part of every peer's buffer and sums, and meets them again
    (so nobody overwrites a buffer that a peer still reads)."""
    elem = x_ptr.dtype.element_ty
    pid = tl.program_id(0)
    start = pid * span  # (int32 is enough: messages are at most a few MiB)
    stop = tl.minimum(start + span, n)
    mine = _data(table, rank, DATA_OFF, elem)
    for s in range(start, stop, BLOCK):
        o = s + tl.arange(0, BLOCK)
        m = o < stop
        tl.store(mine + o, tl.load(x_ptr + o, mask=m), mask=m)
    _barrier(table, (0 * tl.num_programs(0) + pid) * WORLD, rank, WORLD)
    for s in range(start, stop, BLOCK):
        o = s + tl.arange(0, BLOCK)
        m = o < stop
        acc = tl.zeros([BLOCK], tl.float32)
        for p in tl.static_range(WORLD):
            # .cg: past L1, which is not coherent with what a peer wrote
            acc += tl.load(_data(table, p, DATA_OFF, elem) + o, mask=m, cache_modifier=".cg").to(tl.float32)
        tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=m)
    _barrier(table, (1 * tl.num_programs(0) + pid) * WORLD, rank, WORLD)


@triton.jit
def two_shot_kernel(x_ptr, out_ptr, table, n, shard, span, rank,
                    WORLD: tl.constexpr, BLOCK: tl.constexpr, DATA_OFF: tl.constexpr):
    """Reduce-scatter then all-gather. Shard q is [q*shard, (q+1)*shard) ∩ [0, n); program b owns the
    sub-range [b*span, (b+1)*span) of every shard. Phase 1: copy x into this rank's buffer; meet. Phase 2: sum
    shard `rank` over every peer's buffer, write it to out and back into this rank's buffer; meet. Phase 3: copy
    every other shard q from rank q's buffer (where q reduced it) into out; meet (buffers free for reuse)."""
    elem = x_ptr.dtype.element_ty
    pid = tl.program_id(0)
    lo = pid * span
    hi = tl.minimum(lo + span, shard)
    mine = _data(table, rank, DATA_OFF, elem)
    for q in tl.static_range(WORLD):
        for s in range(lo, hi, BLOCK):
            o = q * shard + s + tl.arange(0, BLOCK)
            m = (o < n) & (o < q * shard + hi)
            tl.store(mine + o, tl.load(x_ptr + o, mask=m), mask=m)
    _barrier(table, (0 * tl.num_programs(0) + pid) * WORLD, rank, WORLD)
    base = rank * shard
    for s in range(lo, hi, BLOCK):
        o = base + s + tl.arange(0, BLOCK)
        m = (o < n) & (o < base + hi)
        acc = tl.zeros([BLOCK], tl.float32)
        for p in tl.static_range(WORLD):
            acc += tl.load(_data(table, p, DATA_OFF, elem) + o, mask=m, cache_modifier=".cg").to(tl.float32)
        tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=m)
        tl.store(mine + o, acc.to(elem), mask=m)
    _barrier(table, (1 * tl.num_programs(0) + pid) * WORLD, rank, WORLD)
    for q in tl.static_range(WORLD):
        if q != rank:
            src = _data(table, q, DATA_OFF, elem)
            for s in range(lo, hi, BLOCK):
                o = q * shard + s + tl.arange(0, BLOCK)
                m = (o < n) & (o < q * shard + hi)
                tl.store(out_ptr + o, tl.load(src + o, mask=m, cache_modifier=".cg"), mask=m)
    _barrier(table, (2 * tl.num_programs(0) + pid) * WORLD, rank, WORLD)
