"""The FP8 scaled GEMM for Hopper with warp specialization, in Gluon (Triton's explicit-layout language).

Why a second kernel: the Triton kernel (kernel.py) promotes the tensor core's FP8 partial into the fp32
accumulator every BLOCK_K, and one instruction stream does it all: it waits for a K step's wgmma, adds the partial,
then issues the next wgmma, so the tensor core idles during every promotion (s17: 0.76-0.86x `torch._scaled_mm` from
M = 1024; cuBLAS runs a TMA producer warp beside consumer warpgroups). Triton 3.6/3.7's `warp_specialize` does not
partition such a loop for sm_90, so the partitions are written out here:

- a load partition (one warp) walks the same persistent tile sequence and keeps STAGES K steps of A (BLOCK_M rows)
  and B (BLOCK_N rows) in flight through TMA, each stage guarded by a `ready` and an `empty` mbarrier;
- two MMA partitions (a warpgroup each) own the upper and lower BLOCK_M / 2 rows of every tile, sharing the B
  stage. Each K step is one wgmma of 64 rows a warpgroup (128-row tiles) or two (256-row tiles) into a fresh fp32
  partial, each added (scaled, for block scales) into its fp32 accumulator once complete: while one warpgroup
  adds, the other's wgmma keeps the tensor core busy. A stage is released when both warpgroups are done with it
  (`empty` counts two arrivals). The 128-row tile holds one partial and one accumulator (no spills); the rules
  take it where it needs fewer waves over the SMs (rules.py). Its pipelined form (PIPELINE, s34) holds two
  partials and issues step k+1's wgmma before promoting step k's, so a warpgroup's own next wgmma waits on the
  tensor core during its promotion (`_pipelined_steps`).

The arithmetic is the Triton kernel's: per K step of BLOCK_K (128) a fresh partial in the tensor core's precision,
added into fp32 in K order; the scales of the epilogue (tensor / row) or of each step (block) as there. So both
kernels give the same bits wherever their K steps agree (the GPU tests compare them). Needs sm_90 and TMA-readable
operands (K-contiguous rows, 16-byte aligned); the launch rules choose it (rules.py) and fall back to kernel.py.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

SUB_M = gl.constexpr(64)  # rows of one wgmma (a warpgroup's m64 instructions)
WARPGROUP = gl.constexpr(4)


@gluon.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    # Grouped order, as kernel.py: GROUP_M row tiles walk the columns together so the B tiles they share stay in L2.
    in_group = GROUP_M * num_pid_n
    group = tile // in_group
    first_m = group * GROUP_M
    size_m = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % in_group) % size_m
    pid_n = (tile % in_group) // size_m
    return pid_m, pid_n


@gluon.jit
def _load_partition(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    count = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        for ki in range(k_tiles):
            s = count % STAGES
            # Wait until both warpgroups released this stage's previous use (a fresh barrier passes phase 1).
            mbarrier.wait(empty.index(s), ((count // STAGES) & 1) ^ 1)
            # Rows and K columns past the edges read as zeros and count toward the transaction bytes.
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [pid_m * BLOCK_M, ki * BLOCK_K], ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [pid_n * BLOCK_N, ki * BLOCK_K], ready.index(s), b_bufs.index(s))
            count += 1


@gluon.jit
def _store_rows(acc, c_desc, c_buf, sa_ptr, sb_ptr, bias_ptr, row0, col0, offs_m, offs_n, M, N, stride_sam,
                stride_sbn, SCALE: gl.constexpr, HAS_BIAS: gl.constexpr):
    # Scales and bias in registers, then out through shared memory and a TMA store (it clips rows and columns past
    # the edges). 64-bit pointers to each of the 64 x BLOCK_N outputs spilled (ptxas: 360 B at 168 registers).
    m_mask = offs_m < M
    n_mask = offs_n < N
    if SCALE == 0:
        acc = acc * (gl.load(sa_ptr) * gl.load(sb_ptr))
    elif SCALE == 1:
        sa = gl.load(sa_ptr + offs_m.to(gl.int64) * stride_sam, mask=m_mask, other=0.0)
        sb = gl.load(sb_ptr + offs_n.to(gl.int64) * stride_sbn, mask=n_mask, other=0.0)
        acc = acc * sa[:, None] * sb[None, :]
    if HAS_BIAS:
        acc = acc + gl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(gl.float32)[None, :]
    tma.store_wait(pendings=0)  # this warpgroup's previous store has left the buffer
    c_buf.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(c_desc, [row0, col0], c_buf)


@gluon.jit
def _step_scale(sa_rows, sb_tile, m_mask, ki, stride_sak, stride_sbk, SCALE: gl.constexpr):
    # block scales: this warpgroup's rows' scale_a times the tile's scale_b for K step ki (else unused: 1)
    if SCALE == 2:
        sk = gl.load(sa_rows + ki * stride_sak, mask=m_mask, other=0.0) * gl.load(sb_tile + ki * stride_sbk)
    else:
        sk = gl.full(m_mask.shape, 1.0, gl.float32, m_mask.type.layout)
    return sk


@gluon.jit
def _step_scales_ahead(sa_rows, sb_tile, m_mask, ki, k_tiles, stride_sak, stride_sbk):
    # block scales only: step ki's scale_a rows and scale_b, apart (0 past the last step), for `_pipelined_steps`
    # with AHEAD, which forms their product a trip after the load
    more = ki < k_tiles
    return (gl.load(sa_rows + ki * stride_sak, mask=m_mask & more, other=0.0),
            gl.load(sb_tile + ki * stride_sbk, mask=more, other=0.0))


@gluon.jit
def _promote(acc, part, sk, SCALE: gl.constexpr):
    if SCALE == 2:
        acc = acc + part * sk[:, None]
    else:
        acc = acc + part
    return acc


@gluon.jit
def _issue(a_bufs, b_bufs, ready, part, count, ROW0: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    SUB: gl.constexpr = part.type.shape[0]
    s = count % STAGES
    mbarrier.wait(ready.index(s), (count // STAGES) & 1)
    return warpgroup_mma(a_bufs.index(s).slice(ROW0, SUB), b_bufs.index(s).permute((1, 0)), part, use_acc=False,
                         is_async=True)


@gluon.jit
def _pipelined_steps(a_bufs, b_bufs, ready, empty, acc, pa, pb, sa_rows, sb_tile, m_mask, count, k_tiles,
                     stride_sak, stride_sbk, ROW0: gl.constexpr, SCALE: gl.constexpr, AHEAD: gl.constexpr):
    # One tile's K loop with two partials (128-row tiles: one accumulator and two partials fit the registers):
    # step k+1's wgmma is issued before step k's is waited on and promoted, so a warpgroup's own next wgmma
    # queues behind the other warpgroup's while it promotes. Two steps a trip with no branch inside, so each
    # partial keeps its registers (ptxas serializes wgmmas whose accumulators are copied in flight); the last one
    # or two steps after the loop. Block scales are loaded at the top of a trip, before its wgmmas (loaded
    # between a wait and its promotion, ptxas spilled in-flight accumulators). The same K order and promotion as
    # the plain loop: the same bits. AHEAD (block scales): each trip loads the next trip's scales as they are and
    # forms their products at its end, after its wgmmas were issued. (Loaded and multiplied in the trip that uses
    # them, ptxas put the FMULs before the trip's first wgmma, which then waited for the loads: s36's profile.)
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    if k_tiles > 0:
        if AHEAD:  # the first trip's
            sa0, sb0 = _step_scales_ahead(sa_rows, sb_tile, m_mask, 0, k_tiles, stride_sak, stride_sbk)
            sa1, sb1 = _step_scales_ahead(sa_rows, sb_tile, m_mask, 1, k_tiles, stride_sak, stride_sbk)
            sk0 = sa0 * sb0
            sk1 = sa1 * sb1
        pa_acc = _issue(a_bufs, b_bufs, ready, pa, count, ROW0)  # step 0, in flight into the loop
        for t in range((k_tiles - 1) // 2):
            if AHEAD:
                na0, nb0 = _step_scales_ahead(sa_rows, sb_tile, m_mask, 2 * t + 2, k_tiles, stride_sak, stride_sbk)
                na1, nb1 = _step_scales_ahead(sa_rows, sb_tile, m_mask, 2 * t + 3, k_tiles, stride_sak, stride_sbk)
            else:
                sk0 = _step_scale(sa_rows, sb_tile, m_mask, 2 * t, stride_sak, stride_sbk, SCALE)
                sk1 = _step_scale(sa_rows, sb_tile, m_mask, 2 * t + 1, stride_sak, stride_sbk, SCALE)
            pb_acc = _issue(a_bufs, b_bufs, ready, pb, count + 1, ROW0)
            pa, pb = warpgroup_mma_wait(num_outstanding=1, deps=(pa_acc, pb_acc))  # the older one complete
            mbarrier.arrive(empty.index(count % STAGES), count=1)
            acc = _promote(acc, pa, sk0, SCALE)
            # (a no-op wait: one wgmma is outstanding) that orders the promotion before pa's next wgmma; left to
            # itself LLVM sank the FFMAs below it and ptxas serialized every wgmma
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            pa_acc = _issue(a_bufs, b_bufs, ready, pa, count + 2, ROW0)
            pb, pa = warpgroup_mma_wait(num_outstanding=1, deps=(pb, pa_acc))
            mbarrier.arrive(empty.index((count + 1) % STAGES), count=1)
            acc = _promote(acc, pb, sk1, SCALE)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))  # pb's promotion before its next wgmma
            pa_acc = warpgroup_mma_init(pa)  # still in flight: the next wait completes it
            if AHEAD:  # the next trip's products, formed after this trip's wgmmas were issued
                sk0 = na0 * nb0
                sk1 = na1 * nb1
            count += 2
        last = k_tiles - 1
        if k_tiles % 2 == 0:  # two steps left: the one in flight and the last
            if not AHEAD:
                sk0 = _step_scale(sa_rows, sb_tile, m_mask, last - 1, stride_sak, stride_sbk, SCALE)
                sk1 = _step_scale(sa_rows, sb_tile, m_mask, last, stride_sak, stride_sbk, SCALE)
            pb_acc = _issue(a_bufs, b_bufs, ready, pb, count + 1, ROW0)
            pa, pb = warpgroup_mma_wait(num_outstanding=1, deps=(pa_acc, pb_acc))
            mbarrier.arrive(empty.index(count % STAGES), count=1)
            acc = _promote(acc, pa, sk0, SCALE)
            pb = warpgroup_mma_wait(num_outstanding=0, deps=(pb,))
            mbarrier.arrive(empty.index((count + 1) % STAGES), count=1)
            acc = _promote(acc, pb, sk1, SCALE)
            count += 2
        else:
            if not AHEAD:
                sk0 = _step_scale(sa_rows, sb_tile, m_mask, last, stride_sak, stride_sbk, SCALE)
            pa = warpgroup_mma_wait(num_outstanding=0, deps=(pa_acc,))
            mbarrier.arrive(empty.index(count % STAGES), count=1)
            acc = _promote(acc, pa, sk0, SCALE)
            count += 1
    return acc, count


@gluon.jit
def _mma_partition(a_bufs, b_bufs, ready, empty, c_desc, c_bufs, sa_ptr, sb_ptr, bias_ptr, M, N, K,
                   stride_sam, stride_sak, stride_sbn, stride_sbk,
                   HALF: gl.constexpr, SCALE: gl.constexpr, HAS_BIAS: gl.constexpr, GROUP_M: gl.constexpr,
                   PIPELINE: gl.constexpr, SCALES_AHEAD: gl.constexpr):
    BLOCK_M: gl.constexpr = a_bufs.type.shape[1]
    BLOCK_K: gl.constexpr = a_bufs.type.shape[2]
    BLOCK_N: gl.constexpr = b_bufs.type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    ROW0: gl.constexpr = HALF * (BLOCK_M // 2)
    TWO: gl.constexpr = BLOCK_M == 4 * SUB_M  # two 64-row wgmmas a warpgroup (256-row tiles), else one (128)
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPGROUP, 1],
                                                     instr_shape=[16, BLOCK_N, 32])
    rows: gl.constexpr = gl.SliceLayout(1, layout)
    cols: gl.constexpr = gl.SliceLayout(0, layout)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    part = gl.zeros([SUB_M, BLOCK_N], gl.float32, layout)
    PIPE: gl.constexpr = PIPELINE and not TWO
    if PIPE:
        nxt = gl.zeros([SUB_M, BLOCK_N], gl.float32, layout)
    else:
        nxt = part
    count = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m0 = pid_m * BLOCK_M + ROW0 + gl.arange(0, SUB_M, layout=rows)
        offs_m1 = offs_m0 + SUB_M
        m_mask0 = offs_m0 < M
        m_mask1 = offs_m1 < M
        sa_rows0 = sa_ptr
        sb_tile = sb_ptr
        if SCALE == 2:
            # Block scales: scale_a[m, kb] for this warpgroup's rows, scale_b[n // 128, kb] for the tile (BLOCK_N is
            # 32-128 and divides 128, so a tile lies inside one weight block: one value a step). Row pointers once
            # a tile.
            sa_rows0 = sa_ptr + offs_m0.to(gl.int64) * stride_sam
            sa_rows1 = sa_ptr + offs_m1.to(gl.int64) * stride_sam
            sb_tile = sb_ptr + ((pid_n * BLOCK_N) // 128) * stride_sbn
        acc0 = gl.zeros([SUB_M, BLOCK_N], gl.float32, layout)
        acc1 = gl.zeros([SUB_M, BLOCK_N], gl.float32, layout)
        # Block scales: the 256-row tile loads the next K step's scales a step ahead (s30, H100: 1.75-1.87x loading
        # them in the step, whose global-load latency sat between a wgmma and its promotion); the 128-row tile,
        # measured the other way (0.89-1.0x), loads them in the step.
        AHEAD: gl.constexpr = SCALE == 2 and TWO
        if AHEAD:  # the first step's scales
            any_k = k_tiles > 0
            sb_k = gl.load(sb_tile, mask=any_k, other=0.0)
            s0 = gl.load(sa_rows0, mask=m_mask0 & any_k, other=0.0) * sb_k
            s1 = gl.load(sa_rows1, mask=m_mask1 & any_k, other=0.0) * sb_k
        if PIPE:  # (128-row tiles) the next step's wgmma in flight while this one is promoted
            acc0, count = _pipelined_steps(a_bufs, b_bufs, ready, empty, acc0, part, nxt, sa_rows0, sb_tile, m_mask0,
                                           count, k_tiles, stride_sak, stride_sbk, ROW0, SCALE,
                                           SCALES_AHEAD and SCALE == 2)
        for ki in range(0 if PIPE else k_tiles):
            s = count % STAGES
            if AHEAD:  # the next step's: their latency runs under this step's wgmmas
                more = ki + 1 < k_tiles
                sb_n = gl.load(sb_tile + (ki + 1) * stride_sbk, mask=more, other=0.0)
                n0 = gl.load(sa_rows0 + (ki + 1) * stride_sak, mask=m_mask0 & more, other=0.0) * sb_n
                n1 = gl.load(sa_rows1 + (ki + 1) * stride_sak, mask=m_mask1 & more, other=0.0) * sb_n
            elif SCALE == 2:  # (issued before the waits, so their latency hides behind them)
                sb_k = gl.load(sb_tile + ki * stride_sbk)
                s0 = gl.load(sa_rows0 + ki * stride_sak, mask=m_mask0, other=0.0) * sb_k
            mbarrier.wait(ready.index(s), (count // STAGES) & 1)
            a_tile = a_bufs.index(s)
            b_t = b_bufs.index(s).permute((1, 0))
            # A fresh partial a step (use_acc=False), complete before it is added: the promotion into fp32.
            part = warpgroup_mma(a_tile.slice(ROW0, SUB_M), b_t, part, use_acc=False, is_async=True)
            part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
            if SCALE == 2:
                acc0 = acc0 + part * s0[:, None]
            else:
                acc0 = acc0 + part
            if TWO:
                part = warpgroup_mma(a_tile.slice(ROW0 + SUB_M, SUB_M), b_t, part, use_acc=False, is_async=True)
                part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
            mbarrier.arrive(empty.index(s), count=1)
            if TWO:
                if SCALE == 2:
                    acc1 = acc1 + part * s1[:, None]
                else:
                    acc1 = acc1 + part
            if AHEAD:
                s0 = n0
                s1 = n1
            count += 1
        offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=cols)
        c_buf = c_bufs.index(HALF)
        row0 = pid_m * BLOCK_M + ROW0
        _store_rows(acc0, c_desc, c_buf, sa_ptr, sb_ptr, bias_ptr, row0, pid_n * BLOCK_N, offs_m0, offs_n, M, N,
                    stride_sam, stride_sbn, SCALE, HAS_BIAS)
        if TWO:
            _store_rows(acc1, c_desc, c_buf, sa_ptr, sb_ptr, bias_ptr, row0 + SUB_M, pid_n * BLOCK_N, offs_m1, offs_n,
                        M, N, stride_sam, stride_sbn, SCALE, HAS_BIAS)
    tma.store_wait(pendings=0)


@gluon.jit
def _scaled_mm_ws_kernel(a_desc, b_desc, c_desc, sa_ptr, sb_ptr, bias_ptr, M, N, K,
                         stride_sam, stride_sak, stride_sbn, stride_sbk,
                         SCALE: gl.constexpr, HAS_BIAS: gl.constexpr, GROUP_M: gl.constexpr,
                         STAGES: gl.constexpr, MMA_REGS: gl.constexpr, LOAD_REGS: gl.constexpr,
                         PIPELINE: gl.constexpr = False, SCALES_AHEAD: gl.constexpr = False):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    gl.static_assert(BLOCK_M == 4 * SUB_M or BLOCK_M == 2 * SUB_M, "two warpgroups of one or two 64-row wgmmas")
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [2, SUB_M, BLOCK_N], c_desc.layout)  # one per warpgroup
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # both MMA warpgroups release a stage
    gl.warp_specialize([
        (_mma_partition, (a_bufs, b_bufs, ready, empty, c_desc, c_bufs, sa_ptr, sb_ptr, bias_ptr, M, N, K,
                          stride_sam, stride_sak, stride_sbn, stride_sbk, 0, SCALE, HAS_BIAS, GROUP_M, PIPELINE,
                          SCALES_AHEAD)),
        (_mma_partition, (a_bufs, b_bufs, ready, empty, c_desc, c_bufs, sa_ptr, sb_ptr, bias_ptr, M, N, K,
                          stride_sam, stride_sak, stride_sbn, stride_sbk, 1, SCALE, HAS_BIAS, GROUP_M, PIPELINE,
                          SCALES_AHEAD)),
        (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M)),
    ], [WARPGROUP, 1], [MMA_REGS, LOAD_REGS])
