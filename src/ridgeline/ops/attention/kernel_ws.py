"""The attention forward for Hopper with warp specialization, in Gluon (Triton's explicit-layout language): a
candidate beside kernel.py's `_attn_fwd`, for dense [B, S, H, D] batches and packed ones (cu_seqlens), full,
causal or a sliding window (a left bound, `HAS_LEFT`: whole key tiles before it are skipped, the rest masked).

Why: kernel.py's forward reaches 0.69-0.88x cuDNN at D = 128 (s17-s23). One instruction stream there issues the
loads, both GEMMs and the softmax, so the tensor core waits while the softmax runs. Here (FlashAttention-3's split,
written out as Gluon partitions):

- a load partition (one warp) brings Q once and then K and V tiles of BLOCK_N keys into a STAGES-deep ring by TMA,
  each tile guarded by its own `ready` mbarrier (S = QK^T may start before V lands) and its own `empty` one (a K
  slot frees once both warpgroups' S retired, a V slot once their PV did);
- two MMA partitions (a warpgroup each) own the upper and lower BLOCK_M / 2 rows of the query tile: S by wgmma
  from shared memory, the online softmax in registers, P handed to the second wgmma as a register operand (no trip
  through shared memory). While one warpgroup runs its softmax the other's wgmmas keep the tensor core busy.
- `OVERLAP` (FlashAttention-3's intra-warpgroup pipelining): each warpgroup issues S of tile j, then PV of tile
  j - 1, and runs tile j's softmax while that PV is on the tensor core. acc * alpha + PV in the same order as the
  plain loop, only issued earlier: the same bits (the GPU tests compare them).
- `PINGPONG` (FlashAttention-3's inter-warpgroup schedule): the two warpgroups take turns issuing their wgmmas (S,
  and with OVERLAP the previous tile's PV), handing the turn over by a pair of mbarriers, so one's softmax runs
  while the other's matmuls hold the tensor core instead of both asking for it at once. Only the issue order
  changes: the same bits.

The arithmetic is kernel.py's: scores in base 2 with the scale folded into one FMA, the row maximum tracked from
-inf (a row with nothing visible keeps 0 and writes out = 0, lse = -inf), P rounded to the input dtype before the
second GEMM, fp32 accumulation. K and V come through 3-D views [B, S_k, H_kv * D], so keys past a sequence's
end arrive as zeros (a 2-D [B * S_k, ...] view would read the next sequence's, and one inf or NaN there would turn
p = 0 times it into NaN); their scores are masked. Q comes through a 2-D view [B * S_q, H * D]: rows past the
sequence compute rows that are never stored. Output goes out through masked pointer stores. Packed batches
(`VARLEN`): Q through a 2-D view [T_q, H * D] the same way, K and V through views of one sequence and head that
the load warp makes on the device ([1, S_k, D], rows H_kv * D apart: zeros past the sequence's end again).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

WARPGROUP = gl.constexpr(4)
LN2 = gl.constexpr(0.6931471805599453)


@gluon.jit
def _items_per_head(seq_q, BLOCK_M: gl.constexpr, PAIRS: gl.constexpr):
    # A program's unit of work is an item: one query tile, or with PAIRS (causal) tiles m and n_m - 1 - m, whose
    # key counts add up to about the same for every pair (the middle tile of an odd count alone).
    n_m = gl.cdiv(seq_q, BLOCK_M)
    if PAIRS:
        n_m = gl.cdiv(n_m, 2)
    return n_m


@gluon.jit
def _item(item, seq_q, H, BLOCK_M: gl.constexpr, PAIRS: gl.constexpr):
    # (item within its head, batch, head). Items of one head are adjacent (they read the same K and V: L2 hits for
    # the programs running beside each other). seq_q: the longest sequence's queries (packed batches).
    per_head = _items_per_head(seq_q, BLOCK_M, PAIRS)
    bh = item // per_head
    return item % per_head, bh // H, bh % H


@gluon.jit
def _seq(cu_q, cu_k, b, seq_q, seq_k, VARLEN: gl.constexpr):
    # (Q view row of the sequence's first query, its queries, first key token, its keys). Dense: batch b's rows of
    # the [B * S_q, H * D] view; packed (cu_seqlens): the sequence's own bounds.
    if VARLEN:
        q0 = gl.load(cu_q + b)
        k0 = gl.load(cu_k + b)
        return q0, gl.load(cu_q + b + 1) - q0, k0, gl.load(cu_k + b + 1) - k0
    else:
        return b * seq_q, seq_q, 0, seq_k


@gluon.jit
def _n_sub(j, seq_q, BLOCK_M: gl.constexpr, PAIRS: gl.constexpr, VARLEN: gl.constexpr):
    # Query tiles of item j in a sequence of seq_q queries: a packed batch's shorter sequences have fewer items
    # than the grid's (counted on the longest), and those items do nothing.
    n_m = gl.cdiv(seq_q, BLOCK_M)
    if PAIRS:
        n_sub = gl.maximum(gl.minimum(n_m - 2 * j, 2), 0)
    elif VARLEN:
        n_sub = (j < n_m).to(gl.int32)
    else:
        n_sub = 1
    return n_sub


@gluon.jit
def _sub_tile(j, k, seq_q, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr, PAIRS: gl.constexpr):
    # The k-th query tile of item j. Causal: the longest rows first (they have the most keys), so a program's or
    # the grid's last work is short.
    pid_m = j
    if CAUSAL or PAIRS:
        pid_m = j + (1 - k) * (gl.cdiv(seq_q, BLOCK_M) - 1 - 2 * j)
    return pid_m


@gluon.jit
def _key_end(m0, seq_q, seq_k, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
    # Keys any row of the tile sees: all of them, or (causal, bottom-right aligned) up to the last row's diagonal.
    hi = seq_k
    if CAUSAL:
        hi = gl.minimum(seq_k, gl.maximum(gl.minimum(m0 + BLOCK_M, seq_q) + seq_k - seq_q, 0))
    return hi


@gluon.jit
def _key_tiles(m0, seq_q, seq_k, left, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
               HAS_LEFT: gl.constexpr):
    # (first key tile, key tiles) any row of the query tile at m0 sees. HAS_LEFT (a sliding window): keys from the
    # first row's aligned position - left on, in whole tiles.
    n_end = gl.cdiv(_key_end(m0, seq_q, seq_k, BLOCK_M, CAUSAL), BLOCK_N)
    if HAS_LEFT:
        t0 = gl.maximum(m0 + seq_k - seq_q - left, 0) // BLOCK_N
        return t0, gl.maximum(n_end - t0, 0)
    else:
        return 0, n_end


@gluon.jit
def _kv_views(k_desc, v_desc, k_ptr, v_ptr, k0, seq_k, b, h, H, GROUP, VARLEN: gl.constexpr):
    # (K view, V view, coordinates of this head's first key in them). Dense: the launch's [B, S_k, H_kv * D]
    # views. Packed: views made on the device over this sequence's keys of this head alone ([1, seq_k, D], rows
    # H_kv * D apart), so keys past its end arrive as zeros, as in the dense views, never as the next sequence's
    # (an inf or NaN there would turn a masked p = 0 times V into NaN).
    HEAD_D: gl.constexpr = k_desc.block_type.shape[2]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    kv_col = (h // GROUP) * HEAD_D
    if VARLEN:
        row = (H // GROUP).to(gl.int64) * HEAD_D
        first = k0.to(gl.int64) * row + kv_col
        plane = gl.maximum(seq_k, 1).to(gl.int64) * row
        k_view = tma.make_tensor_descriptor(k_ptr + first, [1, seq_k, HEAD_D], [plane, row, 1], [1, BLOCK_N, HEAD_D],
                                            k_desc.layout)
        v_view = tma.make_tensor_descriptor(v_ptr + first, [1, seq_k, HEAD_D], [plane, row, 1], [1, BLOCK_N, HEAD_D],
                                            v_desc.layout)
        return k_view, v_view, 0, 0
    else:
        return k_desc, v_desc, b, kv_col


@gluon.jit
def _load_tile(q_desc, k_desc, v_desc, k_ptr, v_ptr, q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready, v_ready,
               k_empty, v_empty, b, h, q_row0, k0, m0, kv, tiles, seq_q, seq_k, left, H, GROUP, CAUSAL: gl.constexpr,
               MULTI: gl.constexpr, VARLEN: gl.constexpr, HAS_LEFT: gl.constexpr):
    # Q of the query tile at m0 (the program's tiles-th; q_row0: its sequence's first row in Q's view), then its K
    # and V tiles into the ring from its kv-th slot on; returns how many K / V tiles it loaded.
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_D: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    # Q's buffer frees once both warpgroups' last S of the previous tile retired (a fresh barrier passes phase 1):
    # the next Q lands under the previous tile's last PV and its stores.
    if MULTI:
        mbarrier.wait(q_empty, (tiles & 1) ^ 1)
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row0 + m0, h * HEAD_D], q_bar, q_smem)
    k_view, v_view, kv_b, kv_col = _kv_views(k_desc, v_desc, k_ptr, v_ptr, k0, seq_k, b, h, H, GROUP, VARLEN)
    t0, n_tiles = _key_tiles(m0, seq_q, seq_k, left, BLOCK_M, BLOCK_N, CAUSAL, HAS_LEFT)
    for it in range(n_tiles):
        s, phase = _ring(kv + it, STAGES)
        # K and V slots are released apart (K once both warpgroups' S = QK^T retired, V once their PV did), so
        # the next K lands while the last PV still runs. A fresh barrier passes phase 1.
        mbarrier.wait(k_empty.index(s), phase ^ 1)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_view, [kv_b, (t0 + it) * BLOCK_N, kv_col], k_ready.index(s),
                                        k_bufs.index(s))
        mbarrier.wait(v_empty.index(s), phase ^ 1)
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_view, [kv_b, (t0 + it) * BLOCK_N, kv_col], v_ready.index(s),
                                        v_bufs.index(s))
    return n_tiles


@gluon.jit
def _load_partition(q_desc, k_desc, v_desc, k_ptr, v_ptr, cu_q, cu_k, q_smem, k_bufs, v_bufs, q_bar, q_empty,
                    k_ready, v_ready, k_empty, v_empty, seq_q, seq_k, left, H, GROUP, n_items, CAUSAL: gl.constexpr,
                    PAIRS: gl.constexpr, PERSISTENT: gl.constexpr, VARLEN: gl.constexpr, HAS_LEFT: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    if PERSISTENT or PAIRS:
        kv = 0  # K / V tiles loaded so far: the ring runs on across a program's query tiles
        tiles = 0  # query tiles so far (the phase of q_bar and q_empty)
        for item in range(gl.program_id(0), n_items, gl.num_programs(0)):
            j, b, h = _item(item, seq_q, H, BLOCK_M, PAIRS)
            q_row0, sq, k0, sk = _seq(cu_q, cu_k, b, seq_q, seq_k, VARLEN)
            for k in range(_n_sub(j, sq, BLOCK_M, PAIRS, VARLEN)):
                m0 = _sub_tile(j, k, sq, BLOCK_M, CAUSAL, PAIRS) * BLOCK_M
                kv += _load_tile(q_desc, k_desc, v_desc, k_ptr, v_ptr, q_smem, k_bufs, v_bufs, q_bar, q_empty,
                                 k_ready, v_ready, k_empty, v_empty, b, h, q_row0, k0, m0, kv, tiles, sq, sk, left,
                                 H, GROUP, CAUSAL, True, VARLEN, HAS_LEFT)
                tiles += 1
    else:  # one tile a program: no loop-carried counters (the MMA side's registers are tight)
        j, b, h = _item(gl.program_id(0), seq_q, H, BLOCK_M, PAIRS)
        q_row0, sq, k0, sk = _seq(cu_q, cu_k, b, seq_q, seq_k, VARLEN)
        if _n_sub(j, sq, BLOCK_M, PAIRS, VARLEN) > 0:  # (packed: past a shorter sequence's end, nothing)
            m0 = _sub_tile(j, 0, sq, BLOCK_M, CAUSAL, PAIRS) * BLOCK_M
            _load_tile(q_desc, k_desc, v_desc, k_ptr, v_ptr, q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready,
                       v_ready, k_empty, v_empty, b, h, q_row0, k0, m0, 0, 0, sq, sk, left, H, GROUP, CAUSAL, False,
                       VARLEN, HAS_LEFT)


@gluon.jit
def _masked(sc, n0, full, lo_full, offs_m, seq_k, shift, left, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
            HAS_LEFT: gl.constexpr):
    # Key tiles in [lo_full, full) are visible from every row of this warpgroup: no mask arithmetic there.
    if n0 + BLOCK_N > full or (HAS_LEFT and n0 < lo_full):
        offs_n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, sc.type.layout))
        ok = offs_n[None, :] < seq_k
        if CAUSAL:
            ok = ok & (offs_n[None, :] <= offs_m[:, None] + shift)
        if HAS_LEFT:
            ok = ok & (offs_n[None, :] >= offs_m[:, None] + shift - left)
        sc = gl.where(ok, sc, float("-inf"))
    return sc


@gluon.jit
def _softmax_step(sc, m_i, l_i, qk_scale):
    # scale > 0: max(s) * scale = max(s * scale), and s * scale - m is one FMA an element
    m_new = gl.maximum(m_i, gl.max(sc, 1) * qk_scale)
    m_sub = gl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing visible yet stays at zero
    p = gl.exp2(sc * qk_scale - m_sub[:, None])
    alpha = gl.exp2(m_i - m_sub)
    return p, alpha, m_new, l_i * alpha + gl.sum(p, 1)


@gluon.jit
def _take_turn(turn, HALF: gl.constexpr, t, PINGPONG: gl.constexpr):
    # Turn t of this warpgroup. The lower half goes first: its first wait is on parity 1, which a fresh barrier
    # passes; the upper half's turn t needs the lower half's t-th hand-over, and the lower half's turn t the upper's
    # (t - 1)-th.
    if PINGPONG:
        mbarrier.wait(turn.index(HALF), (t & 1) ^ (1 - HALF))


@gluon.jit
def _pass_turn(turn, HALF: gl.constexpr, PINGPONG: gl.constexpr):
    if PINGPONG:
        mbarrier.arrive(turn.index(1 - HALF), count=1)


@gluon.jit
def _ring(g, STAGES: gl.constexpr):
    # The slot and phase of the g-th K / V tile a program uses (the ring runs on across its query tiles).
    return g % STAGES, (g // STAGES) & 1


@gluon.jit
def _attend(q_smem, k_bufs, v_bufs, q_empty, k_ready, v_ready, k_empty, v_empty, turn, m0, t0, n_tiles, kv, turns,
            seq_q, seq_k, left, qk_scale, HALF: gl.constexpr, CAUSAL: gl.constexpr, OVERLAP: gl.constexpr,
            PINGPONG: gl.constexpr, RELEASE_Q: gl.constexpr, HAS_LEFT: gl.constexpr):
    """One warpgroup's 64 rows of the query tile at m0 against its n_tiles key tiles from key tile t0 on (the
    program's kv-th K / V tile on): the unnormalized output, the row maxima and sums. With RELEASE_Q (a program of
    several query tiles) it frees Q's buffer once its last S retired."""
    BLOCK_M: gl.constexpr = q_smem.type.shape[0]
    HEAD_D: gl.constexpr = q_smem.type.shape[1]
    BLOCK_N: gl.constexpr = k_bufs.type.shape[2]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    ROWS: gl.constexpr = BLOCK_M // 2
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPGROUP, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPGROUP, 1],
                                                       instr_shape=[16, HEAD_D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s_rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)

    row0 = m0 + HALF * ROWS
    shift = seq_k - seq_q
    offs_m = row0 + gl.arange(0, ROWS, layout=s_rows)
    full = seq_k
    if CAUSAL:
        full = gl.minimum(seq_k, gl.maximum(row0 + shift + 1, 0))
    lo_full = 0
    if HAS_LEFT:  # the last row's first visible key: tiles from there on need no left mask
        lo_full = row0 + ROWS - 1 + shift - left

    m_i = gl.full([ROWS], float("-inf"), gl.float32, s_rows)
    l_i = gl.zeros([ROWS], gl.float32, s_rows)
    acc = gl.zeros([ROWS, HEAD_D], gl.float32, o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)
    q_tile = q_smem.slice(HALF * ROWS, ROWS)
    if OVERLAP:
        # FlashAttention-3's intra-warpgroup pipelining: S of tile `it` is issued, then acc * alpha and PV of
        # tile it - 1; the softmax of S runs on the CUDA cores while that PV runs on the tensor core. P crosses
        # the loop in fp32 and is rounded at the next trip's top: rounded at the bottom, ptxas packed the new P
        # into the registers the running PV reads and waited for that PV before the exp2s (sm_90 SASS, s26).
        # Even so ptxas keeps the exp2s under PV only where registers are tight (D = 128 at 232 a thread, with
        # 44-76 bytes of spill); at 240 registers or D = 64 it moves the PV wait up (compile_for_sm90 counts it).
        p = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)
        alpha = gl.zeros([ROWS], gl.float32, s_rows)
        if n_tiles > 0:
            s0, ph0 = _ring(kv, STAGES)
            mbarrier.wait(k_ready.index(s0), ph0)
            _take_turn(turn, HALF, turns, PINGPONG)
            sc = warpgroup_mma(q_tile, k_bufs.index(s0).reshape([BLOCK_N, HEAD_D]).permute((1, 0)), s_zero,
                               use_acc=False, is_async=True)
            _pass_turn(turn, HALF, PINGPONG)
            sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc,))
            mbarrier.arrive(k_empty.index(s0), count=1)
            sc = _masked(sc, t0 * BLOCK_N, full, lo_full, offs_m, seq_k, shift, left, BLOCK_N, CAUSAL, HAS_LEFT)
            p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i, qk_scale)
        for it in range(1, n_tiles):
            s, phase = _ring(kv + it, STAGES)
            prev, prev_phase = _ring(kv + it - 1, STAGES)
            mbarrier.wait(k_ready.index(s), phase)
            mbarrier.wait(v_ready.index(prev), prev_phase)
            _take_turn(turn, HALF, turns + it, PINGPONG)
            sc = warpgroup_mma(q_tile, k_bufs.index(s).reshape([BLOCK_N, HEAD_D]).permute((1, 0)), s_zero,
                               use_acc=False, is_async=True)
            # acc * alpha of tile it - 1, then its PV: the plain loop's order, while S of tile `it` runs
            acc = acc * gl.convert_layout(alpha, o_rows)[:, None]
            p_op = gl.convert_layout(p.to(q_smem.dtype), p_layout)
            acc = warpgroup_mma(p_op, v_bufs.index(prev).reshape([BLOCK_N, HEAD_D]), acc, is_async=True)
            _pass_turn(turn, HALF, PINGPONG)
            sc = warpgroup_mma_wait(num_outstanding=1, deps=(sc,))  # S retired; PV may still run
            mbarrier.arrive(k_empty.index(s), count=1)
            sc = _masked(sc, (t0 + it) * BLOCK_N, full, lo_full, offs_m, seq_k, shift, left, BLOCK_N, CAUSAL,
                         HAS_LEFT)
            p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i, qk_scale)
            acc, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op))
            mbarrier.arrive(v_empty.index(prev), count=1)
        if RELEASE_Q:
            mbarrier.arrive(q_empty, count=1)  # every S of this tile retired
        if n_tiles > 0:
            last, last_phase = _ring(kv + n_tiles - 1, STAGES)
            acc = acc * gl.convert_layout(alpha, o_rows)[:, None]
            p_op = gl.convert_layout(p.to(q_smem.dtype), p_layout)
            mbarrier.wait(v_ready.index(last), last_phase)
            _take_turn(turn, HALF, turns + n_tiles, PINGPONG)
            acc = warpgroup_mma(p_op, v_bufs.index(last).reshape([BLOCK_N, HEAD_D]), acc, is_async=True)
            _pass_turn(turn, HALF, PINGPONG)
            acc, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op))
            mbarrier.arrive(v_empty.index(last), count=1)
    else:
        for it in range(n_tiles):
            s, phase = _ring(kv + it, STAGES)
            mbarrier.wait(k_ready.index(s), phase)
            _take_turn(turn, HALF, turns + it, PINGPONG)
            sc = warpgroup_mma(q_tile, k_bufs.index(s).reshape([BLOCK_N, HEAD_D]).permute((1, 0)), s_zero,
                               use_acc=False, is_async=True)
            _pass_turn(turn, HALF, PINGPONG)
            sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc,))
            mbarrier.arrive(k_empty.index(s), count=1)
            sc = _masked(sc, (t0 + it) * BLOCK_N, full, lo_full, offs_m, seq_k, shift, left, BLOCK_N, CAUSAL,
                         HAS_LEFT)
            p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i, qk_scale)
            acc = acc * gl.convert_layout(alpha, o_rows)[:, None]
            p_op = gl.convert_layout(p.to(q_smem.dtype), p_layout)
            mbarrier.wait(v_ready.index(s), phase)
            acc = warpgroup_mma(p_op, v_bufs.index(s).reshape([BLOCK_N, HEAD_D]), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(v_empty.index(s), count=1)
        if RELEASE_Q:
            mbarrier.arrive(q_empty, count=1)
    return acc, m_i, l_i


@gluon.jit
def _store_tile(acc, m_i, l_i, out_ptr, lse_ptr, b, h, tok0, m0, s_ob, s_os, s_oh, s_lb, s_lh, seq_q,
                HALF: gl.constexpr, STORE_LSE: gl.constexpr):
    # tok0: the sequence's first token in a packed batch (its s_ob, s_lb are 0), 0 in a dense one
    ROWS: gl.constexpr = acc.type.shape[0]
    HEAD_D: gl.constexpr = acc.type.shape[1]
    o_layout: gl.constexpr = acc.type.layout
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
    row0 = m0 + HALF * ROWS
    empty = l_i == 0.0
    l_safe = gl.where(empty, 1.0, l_i)
    out = acc / gl.convert_layout(l_safe, o_rows)[:, None]
    offs_mo = row0 + gl.arange(0, ROWS, layout=o_rows)
    row_ok = offs_mo < seq_q
    offs_mo = offs_mo + tok0
    offs_d = gl.arange(0, HEAD_D, layout=gl.SliceLayout(0, o_layout))
    base = out_ptr + b.to(gl.int64) * s_ob + h.to(gl.int64) * s_oh
    ptrs = base + offs_mo.to(gl.int64)[:, None] * s_os + offs_d[None, :]
    gl.store(ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
    if STORE_LSE:
        offs_m = row0 + gl.arange(0, ROWS, layout=m_i.type.layout)
        lse = gl.where(empty, float("-inf"), (m_i + gl.log2(l_safe)) * LN2)
        gl.store(lse_ptr + b.to(gl.int64) * s_lb + h.to(gl.int64) * s_lh + (offs_m + tok0), lse,
                 mask=offs_m < seq_q)


@gluon.jit
def _mma_tile(q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, turn, out_ptr, lse_ptr,
              s_ob, s_os, s_oh, s_lb, s_lh, b, h, tok0, m0, kv, tiles, turns, seq_q, seq_k, left, qk_scale,
              HALF: gl.constexpr, CAUSAL: gl.constexpr, STORE_LSE: gl.constexpr, OVERLAP: gl.constexpr,
              PINGPONG: gl.constexpr, MULTI: gl.constexpr, HAS_LEFT: gl.constexpr):
    # This warpgroup's rows of the query tile at m0 (the program's tiles-th, its K / V from the kv-th on): attend
    # and store; returns the K / V tiles it used.
    BLOCK_M: gl.constexpr = q_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_bufs.type.shape[2]
    t0, n_tiles = _key_tiles(m0, seq_q, seq_k, left, BLOCK_M, BLOCK_N, CAUSAL, HAS_LEFT)
    mbarrier.wait(q_bar, tiles & 1)
    acc, m_i, l_i = _attend(q_smem, k_bufs, v_bufs, q_empty, k_ready, v_ready, k_empty, v_empty, turn, m0, t0,
                            n_tiles, kv, turns, seq_q, seq_k, left, qk_scale, HALF, CAUSAL, OVERLAP, PINGPONG, MULTI,
                            HAS_LEFT)
    _store_tile(acc, m_i, l_i, out_ptr, lse_ptr, b, h, tok0, m0, s_ob, s_os, s_oh, s_lb, s_lh, seq_q, HALF,
                STORE_LSE)
    return n_tiles


@gluon.jit
def _mma_partition(q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, turn, out_ptr,
                   lse_ptr, cu_q, cu_k, s_ob, s_os, s_oh, s_lb, s_lh, seq_q, seq_k, left, H, qk_scale, n_items,
                   HALF: gl.constexpr, CAUSAL: gl.constexpr, STORE_LSE: gl.constexpr, OVERLAP: gl.constexpr,
                   PINGPONG: gl.constexpr, PAIRS: gl.constexpr, PERSISTENT: gl.constexpr, VARLEN: gl.constexpr,
                   HAS_LEFT: gl.constexpr):
    BLOCK_M: gl.constexpr = q_smem.type.shape[0]
    if PERSISTENT or PAIRS:
        kv = 0  # K / V tiles consumed so far (the load partition's count)
        tiles = 0  # query tiles so far (q_bar's phase)
        turns = 0  # wgmma turns taken so far (PINGPONG)
        for item in range(gl.program_id(0), n_items, gl.num_programs(0)):
            j, b, h = _item(item, seq_q, H, BLOCK_M, PAIRS)
            q_row0, sq, _k0, sk = _seq(cu_q, cu_k, b, seq_q, seq_k, VARLEN)
            tok0 = q_row0 if VARLEN else 0
            for k in range(_n_sub(j, sq, BLOCK_M, PAIRS, VARLEN)):
                m0 = _sub_tile(j, k, sq, BLOCK_M, CAUSAL, PAIRS) * BLOCK_M
                n_tiles = _mma_tile(q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty,
                                    turn, out_ptr, lse_ptr, s_ob, s_os, s_oh, s_lb, s_lh, b, h, tok0, m0, kv, tiles,
                                    turns, sq, sk, left, qk_scale, HALF, CAUSAL, STORE_LSE, OVERLAP, PINGPONG, True,
                                    HAS_LEFT)
                kv += n_tiles
                tiles += 1
                if PINGPONG:
                    if OVERLAP:
                        turns += n_tiles + gl.minimum(n_tiles, 1)  # the last PV takes a turn of its own
                    else:
                        turns += n_tiles
    else:  # one tile a program: no loop-carried counters (registers are tight at D = 128)
        j, b, h = _item(gl.program_id(0), seq_q, H, BLOCK_M, PAIRS)
        q_row0, sq, _k0, sk = _seq(cu_q, cu_k, b, seq_q, seq_k, VARLEN)
        tok0 = q_row0 if VARLEN else 0
        if _n_sub(j, sq, BLOCK_M, PAIRS, VARLEN) > 0:  # (packed: past a shorter sequence's end, nothing)
            m0 = _sub_tile(j, 0, sq, BLOCK_M, CAUSAL, PAIRS) * BLOCK_M
            _mma_tile(q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, turn, out_ptr,
                      lse_ptr, s_ob, s_os, s_oh, s_lb, s_lh, b, h, tok0, m0, 0, 0, 0, sq, sk, left, qk_scale, HALF,
                      CAUSAL, STORE_LSE, OVERLAP, PINGPONG, False, HAS_LEFT)


@gluon.jit
def _attn_fwd_ws(q_desc, k_desc, v_desc, k_ptr, v_ptr, cu_q, cu_k, out_ptr, lse_ptr, s_ob, s_os, s_oh, s_lb, s_lh,
                 seq_q, seq_k, H, GROUP, qk_scale, left, n_items, CAUSAL: gl.constexpr, STORE_LSE: gl.constexpr,
                 STAGES: gl.constexpr, OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, PAIRS: gl.constexpr,
                 PERSISTENT: gl.constexpr, VARLEN: gl.constexpr, HAS_LEFT: gl.constexpr, MMA_REGS: gl.constexpr,
                 LOAD_REGS: gl.constexpr):
    # A 1-D grid of programs over the n_items (B * H heads' items, a head's adjacent): one item a program, or with
    # PERSISTENT one program an SM taking items pid, pid + grid, ... VARLEN: a packed batch (cu_seqlens); seq_q and
    # seq_k are then the longest sequence's, which the items are counted on; k_ptr and v_ptr are read only then.
    # HAS_LEFT: a sliding window, keys from a row's aligned position - left on (with CAUSAL: to the position).
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_D: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[1]
    gl.static_assert(BLOCK_M == 2 * 64, "two warpgroups of one 64-row wgmma each")
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [BLOCK_M, HEAD_D], q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [STAGES, 1, BLOCK_N, HEAD_D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(v_desc.dtype, [STAGES, 1, BLOCK_N, HEAD_D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    mbarrier.init(q_empty, count=2)  # both MMA warpgroups release Q
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)  # both MMA warpgroups release a slot
        mbarrier.init(v_empty.index(i), count=2)
    gl.warp_specialize([
        (_mma_partition, (q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, turn,
                          out_ptr, lse_ptr, cu_q, cu_k, s_ob, s_os, s_oh, s_lb, s_lh, seq_q, seq_k, left, H,
                          qk_scale, n_items, 0, CAUSAL, STORE_LSE, OVERLAP, PINGPONG, PAIRS, PERSISTENT, VARLEN,
                          HAS_LEFT)),
        (_mma_partition, (q_smem, k_bufs, v_bufs, q_bar, q_empty, k_ready, v_ready, k_empty, v_empty, turn,
                          out_ptr, lse_ptr, cu_q, cu_k, s_ob, s_os, s_oh, s_lb, s_lh, seq_q, seq_k, left, H,
                          qk_scale, n_items, 1, CAUSAL, STORE_LSE, OVERLAP, PINGPONG, PAIRS, PERSISTENT, VARLEN,
                          HAS_LEFT)),
        (_load_partition, (q_desc, k_desc, v_desc, k_ptr, v_ptr, cu_q, cu_k, q_smem, k_bufs, v_bufs, q_bar,
                           q_empty, k_ready, v_ready, k_empty, v_empty, seq_q, seq_k, left, H, GROUP, n_items,
                           CAUSAL, PAIRS, PERSISTENT, VARLEN, HAS_LEFT)),
    ], [WARPGROUP, 1], [MMA_REGS, LOAD_REGS])
