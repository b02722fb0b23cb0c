"""FlashAttention-style prefill kernels (Triton): the forward (online softmax over K/V tiles) and a deterministic
two-kernel backward (dK/dV per key tile, dQ per query tile; no atomics, so repeated calls agree bitwise).

Conventions shared by every kernel:
- q [.., S_q, H, D], k/v [.., S_k, H_kv, D] read through strides (the last dim contiguous): a [B, S, H, D] tensor,
  a [B, H, S, D] tensor seen as [B, S, H, D] (a transposed view) and packed [total, H, D] all read in place.
  Dense batches: base of sequence b = b * stride_b (cu = None); packed: base = cu[b] * stride_s (stride_b = 0).
- Query row i sits at key position i + (S_k - S_q) (bottom-right alignment). Key j is visible from row i when
  i' - LEFT <= j <= i' + RIGHT with i' = i + S_k - S_q; HAS_LEFT / HAS_RIGHT say whether that side is bounded
  (causal: RIGHT = 0). A row with no visible key gives out = 0 and lse = -inf.
- Scores are held in base 2: s2 = q.k * scale * log2(e) (the scale folded into one multiply), p = exp2(s2 - m2);
  the public lse is natural: lse = (m2 + log2(l)) * ln(2).
- Each key loop runs in three phases: masked blocks on the left edge, unmasked blocks in the middle (no mask
  arithmetic, no bounds checks), masked blocks on the right edge and the ragged end (`_phases`).
- UPCAST (the CPU interpreter only): tiles go to fp32 before tl.dot, which is wrong on bf16 there.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _phases(lo_row, hi_row, seq_k, shift, left, right, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
            BLOCK: tl.constexpr):
    """Key range [lo, hi) seen by rows [lo_row, hi_row] (inclusive, aligned positions = row + shift), split at
    full_lo <= full_hi: blocks in [full_lo, full_hi) are visible from every row of the tile and inside seq_k."""
    lo = 0
    hi = seq_k
    full_lo = 0
    full_hi = (seq_k // BLOCK) * BLOCK
    if HAS_LEFT:
        lo = tl.maximum(lo_row + shift - left, 0)
        lo = (lo // BLOCK) * BLOCK
        full_lo = tl.maximum(hi_row + shift - left, 0)
        full_lo = ((full_lo + BLOCK - 1) // BLOCK) * BLOCK
    if HAS_RIGHT:
        hi = tl.minimum(hi_row + shift + right + 1, seq_k)
        full_hi = tl.minimum(full_hi, ((lo_row + shift + right + 1) // BLOCK) * BLOCK)
    hi = tl.maximum(hi, lo)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    if full_hi <= full_lo:  # no block is visible from every row: the whole range is masked
        full_lo = hi
        full_hi = hi
    return lo, full_lo, full_hi, hi


@triton.jit
def _visible(rows, cols, seq_k, shift, left, right, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """[rows, cols] mask of visible (row, key) pairs; rows/cols are 1-D index vectors broadcast by the caller."""
    ok = cols < seq_k
    pos = rows + shift
    if HAS_LEFT:
        ok = ok & (cols >= pos - left)
    if HAS_RIGHT:
        ok = ok & (cols <= pos + right)
    return ok


@triton.jit
def _seq_bounds(cu_q, cu_k, b, seqlen_q, seqlen_k, VARLEN: tl.constexpr):
    """(first token, length) of sequence b's queries and keys."""
    if VARLEN:
        q0 = tl.load(cu_q + b)
        q1 = tl.load(cu_q + b + 1)
        k0 = tl.load(cu_k + b)
        k1 = tl.load(cu_k + b + 1)
        return q0.to(tl.int64), q1 - q0, k0.to(tl.int64), k1 - k0
    return tl.zeros((), tl.int64), seqlen_q, tl.zeros((), tl.int64), seqlen_k


@triton.jit
def _tile_views(a_base, b_base, s_a, s_b, rows, HEAD_D: tl.constexpr, BLOCK: tl.constexpr, TMA: tl.constexpr):
    """The two tensors a loop streams in BLOCK-row tiles: with TMA, descriptors of one sequence and one head
    ([rows, HEAD_D], so rows past the sequence arrive as zeros); without, their base pointers as they are (the
    constexpr branches that read descriptors are then never compiled)."""
    if TMA:
        return (tl.make_tensor_descriptor(a_base, shape=[rows, HEAD_D], strides=[s_a, 1], block_shape=[BLOCK, HEAD_D]),
                tl.make_tensor_descriptor(b_base, shape=[rows, HEAD_D], strides=[s_b, 1], block_shape=[BLOCK, HEAD_D]))
    else:
        return a_base, b_base


@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, s_k, s_v, offs_m, offs_d, seq_k, shift, left,
               right, qk_scale, start, end, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
               BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr, FOLD: tl.constexpr):
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        if TMA:  # the copy engine fetches the tile (rows past seq_k arrive as zeros): no per-element addresses
            k = k_desc.load([n0, 0])
        elif MASKED:
            kv_off = offs_n.to(tl.int64)[:, None] * s_k + offs_d[None, :]
            k = tl.load(k_base + kv_off, mask=(offs_n < seq_k)[:, None], other=0.0)
        else:
            kv_off = offs_n.to(tl.int64)[:, None] * s_k + offs_d[None, :]
            k = tl.load(k_base + kv_off)
        if UPCAST:
            k = k.to(tl.float32)
        s = tl.dot(q, tl.trans(k))
        if not FOLD:
            s = s * qk_scale
        if MASKED:
            ok = _visible(offs_m[:, None], offs_n[None, :], seq_k, shift, left, right, HAS_LEFT, HAS_RIGHT)
            s = tl.where(ok, s, float("-inf"))
        if FOLD:  # scale > 0, so max(s) * scale = max(s * scale); s * scale - m is then one FMA an element
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1))
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing visible yet stays at zero
        if FOLD:
            p = tl.math.exp2(s * qk_scale - m_sub[:, None])
        else:
            p = tl.math.exp2(s - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        if TMA:
            v = v_desc.load([n0, 0])
        elif MASKED:
            v_off = offs_n.to(tl.int64)[:, None] * s_v + offs_d[None, :]
            v = tl.load(v_base + v_off, mask=(offs_n < seq_k)[:, None], other=0.0)
        else:
            v_off = offs_n.to(tl.int64)[:, None] * s_v + offs_d[None, :]
            v = tl.load(v_base + v_off)
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "H", "GROUP", "left", "right"])
def _attn_fwd(Q, K, V, Out, LSE, cu_q, cu_k,
              s_qb, s_qs, s_qh, s_kb, s_ks, s_kh, s_vb, s_vs, s_vh, s_ob, s_os, s_oh, s_lb, s_lh,
              seqlen_q, seqlen_k, H, GROUP, qk_scale, left, right,
              VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, STORE_LSE: tl.constexpr,
              HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr,
              TMA: tl.constexpr, FOLD: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    q0, seq_q, k0, seq_k = _seq_bounds(cu_q, cu_k, b, seqlen_q, seqlen_k, VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= seq_q:
        return
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    kvh = (h // GROUP).to(tl.int64)
    shift = seq_k - seq_q
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    row_ok = offs_m < seq_q
    q_base = Q + b64 * s_qb + q0 * s_qs + h64 * s_qh
    q = tl.load(q_base + offs_m.to(tl.int64)[:, None] * s_qs + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = K + b64 * s_kb + k0 * s_ks + kvh * s_kh
    v_base = V + b64 * s_vb + k0 * s_vs + kvh * s_vh

    k_desc, v_desc = _tile_views(k_base, v_base, s_ks, s_vs, seq_k, HEAD_D, BLOCK_N, TMA)

    acc = tl.zeros((BLOCK_M, HEAD_D), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    last = tl.minimum(m0 + BLOCK_M, seq_q) - 1
    lo, full_lo, full_hi, hi = _phases(m0, last, seq_k, shift, left, right, HAS_LEFT, HAS_RIGHT, BLOCK_N)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, s_ks, s_vs, offs_m, offs_d, seq_k,
                               shift, left, right, qk_scale, lo, full_lo, True, HAS_LEFT, HAS_RIGHT, BLOCK_N, UPCAST,
                               TMA, FOLD)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, s_ks, s_vs, offs_m, offs_d, seq_k,
                               shift, left, right, qk_scale, full_lo, full_hi, False, HAS_LEFT, HAS_RIGHT, BLOCK_N,
                               UPCAST, TMA, FOLD)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, s_ks, s_vs, offs_m, offs_d, seq_k,
                               shift, left, right, qk_scale, full_hi, hi, True, HAS_LEFT, HAS_RIGHT, BLOCK_N, UPCAST,
                               TMA, FOLD)
    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    o_base = Out + b64 * s_ob + q0 * s_os + h64 * s_oh
    tl.store(o_base + offs_m.to(tl.int64)[:, None] * s_os + offs_d[None, :], out.to(Out.dtype.element_ty),
             mask=row_ok[:, None])
    if STORE_LSE:
        lse = tl.where(empty, float("-inf"), (m_i + tl.math.log2(tl.where(empty, 1.0, l_i))) * LN2)
        tl.store(LSE + b64 * s_lb + h64 * s_lh + q0 + offs_m, lse, mask=row_ok)


@triton.jit(do_not_specialize=["seqlen_q", "H"])
def _attn_bwd_delta(Out, DO, LSE, DLSE, DELTA, cu_q,
                    s_ob, s_os, s_oh, s_db, s_ds, s_dh, s_lb, s_lh, seqlen_q, H,
                    VARLEN: tl.constexpr, HAS_DLSE: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta = rowsum(out * dout) - dlse (fp32, lse's layout); a gradient of lse enters dS as p * dlse."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    q0, seq_q, _k0, _sk = _seq_bounds(cu_q, cu_q, b, seqlen_q, seqlen_q, VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= seq_q:
        return
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    ok = offs_m < seq_q
    rows = offs_m.to(tl.int64)[:, None]
    o = tl.load(Out + b64 * s_ob + q0 * s_os + h64 * s_oh + rows * s_os + offs_d[None, :], mask=ok[:, None],
                other=0.0).to(tl.float32)
    do = tl.load(DO + b64 * s_db + q0 * s_ds + h64 * s_dh + rows * s_ds + offs_d[None, :], mask=ok[:, None],
                 other=0.0).to(tl.float32)
    delta = tl.sum(o * do, 1)
    lse_off = b64 * s_lb + h64 * s_lh + q0 + offs_m
    if HAS_DLSE:
        delta -= tl.load(DLSE + lse_off, mask=ok, other=0.0)
    tl.store(DELTA + lse_off, delta, mask=ok)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_base, do_base, q_desc, do_desc, lse_base, delta_base, s_q, s_do, offs_n, offs_d,
                seq_q, seq_k, shift, left, right, qk_scale, start, end, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr,
                HAS_RIGHT: tl.constexpr, BLOCK_M: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr):
    """dk, dv [BLOCK_N, D] += the contribution of query rows [start, end) of one head (transposed scores)."""
    for m0 in range(start, end, BLOCK_M):
        offs_m = m0 + tl.arange(0, BLOCK_M)
        rows = offs_m.to(tl.int64)[:, None]
        if MASKED:
            ok_m = offs_m < seq_q
        if TMA:  # the copy engine fetches both tiles (rows past seq_q arrive as zeros): no per-element addresses
            q = q_desc.load([m0, 0])
            do = do_desc.load([m0, 0])
        elif MASKED:
            q = tl.load(q_base + rows * s_q + offs_d[None, :], mask=ok_m[:, None], other=0.0)
            do = tl.load(do_base + rows * s_do + offs_d[None, :], mask=ok_m[:, None], other=0.0)
        else:
            q = tl.load(q_base + rows * s_q + offs_d[None, :])
            do = tl.load(do_base + rows * s_do + offs_d[None, :])
        if MASKED:
            lse = tl.load(lse_base + offs_m, mask=ok_m, other=float("inf"))
            delta = tl.load(delta_base + offs_m, mask=ok_m, other=0.0)
        else:
            lse = tl.load(lse_base + offs_m)
            delta = tl.load(delta_base + offs_m)
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        lse2 = lse * LOG2E
        lse2 = tl.where(lse2 == float("-inf"), float("inf"), lse2)  # a row that saw no key contributes nothing
        st = tl.dot(k, tl.trans(q)) * qk_scale  # [BLOCK_N, BLOCK_M]
        pt = tl.math.exp2(st - lse2[None, :])
        if MASKED:
            ok = _visible(offs_m[None, :], offs_n[:, None], seq_k, shift, left, right, HAS_LEFT, HAS_RIGHT)
            ok = ok & (offs_m < seq_q)[None, :]
            pt = tl.where(ok, pt, 0.0)
        dv += tl.dot(pt.to(do.dtype), do)
        dpt = tl.dot(v, tl.trans(do))
        dst = pt * (dpt - delta[None, :])
        dk += tl.dot(dst.to(q.dtype), q)
    return dk, dv


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "H_KV", "GROUP", "left", "right"])
def _attn_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, cu_q, cu_k,
                   s_qb, s_qs, s_qh, s_kb, s_ks, s_kh, s_vb, s_vs, s_vh, s_db, s_ds, s_dh,
                   s_dkb, s_dks, s_dkh, s_dvb, s_dvs, s_dvh, s_lb, s_lh,
                   seqlen_q, seqlen_k, H_KV, GROUP, qk_scale, sm_scale, left, right,
                   VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HEAD_D: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr):
    """One key tile of one kv head: dK and dV summed over the GROUP query heads that share it, in a fixed order.
    TMA: Q and dO tiles through tensor descriptors of one sequence and one query head, made per head (each inner
    loop has consumed every tile it fetched before the next head's descriptors overwrite the scratch they live in)."""
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H_KV
    kvh = bh % H_KV
    q0, seq_q, k0, seq_k = _seq_bounds(cu_q, cu_k, b, seqlen_q, seqlen_k, VARLEN)
    n0 = pid_n * BLOCK_N
    if n0 >= seq_k:
        return
    b64 = b.to(tl.int64)
    kvh64 = kvh.to(tl.int64)
    shift = seq_k - seq_q
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    ok_n = offs_n < seq_k
    cols = offs_n.to(tl.int64)[:, None]
    k = tl.load(K + b64 * s_kb + k0 * s_ks + kvh64 * s_kh + cols * s_ks + offs_d[None, :], mask=ok_n[:, None],
                other=0.0)
    v = tl.load(V + b64 * s_vb + k0 * s_vs + kvh64 * s_vh + cols * s_vs + offs_d[None, :], mask=ok_n[:, None],
                other=0.0)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    dk = tl.zeros((BLOCK_N, HEAD_D), tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_D), tl.float32)
    # Query rows that see keys [n0, last]: i' in [j - right, j + left] for some key j of the tile. Swapping the
    # roles of rows and keys turns the forward's phase split into this one (left <-> right, shift -> -shift).
    last = tl.minimum(n0 + BLOCK_N, seq_k) - 1
    lo, full_lo, full_hi, hi = _phases(n0, last, seq_q, -shift, right, left, HAS_RIGHT, HAS_LEFT, BLOCK_M)
    for g in range(0, GROUP):
        h64 = (kvh * GROUP + g).to(tl.int64)
        q_base = Q + b64 * s_qb + q0 * s_qs + h64 * s_qh
        do_base = DO + b64 * s_db + q0 * s_ds + h64 * s_dh
        lse_base = LSE + b64 * s_lb + h64 * s_lh + q0
        delta_base = DELTA + b64 * s_lb + h64 * s_lh + q0
        q_desc, do_desc = _tile_views(q_base, do_base, s_qs, s_ds, seq_q, HEAD_D, BLOCK_M, TMA)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, q_desc, do_desc, lse_base, delta_base, s_qs, s_ds,
                             offs_n, offs_d, seq_q, seq_k, shift, left, right, qk_scale, lo, full_lo, True, HAS_LEFT,
                             HAS_RIGHT, BLOCK_M, UPCAST, TMA)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, q_desc, do_desc, lse_base, delta_base, s_qs, s_ds,
                             offs_n, offs_d, seq_q, seq_k, shift, left, right, qk_scale, full_lo, full_hi, False,
                             HAS_LEFT, HAS_RIGHT, BLOCK_M, UPCAST, TMA)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, q_desc, do_desc, lse_base, delta_base, s_qs, s_ds,
                             offs_n, offs_d, seq_q, seq_k, shift, left, right, qk_scale, full_hi, hi, True, HAS_LEFT,
                             HAS_RIGHT, BLOCK_M, UPCAST, TMA)
    dk = dk * sm_scale
    tl.store(DK + b64 * s_dkb + k0 * s_dks + kvh64 * s_dkh + cols * s_dks + offs_d[None, :],
             dk.to(DK.dtype.element_ty), mask=ok_n[:, None])
    tl.store(DV + b64 * s_dvb + k0 * s_dvs + kvh64 * s_dvh + cols * s_dvs + offs_d[None, :],
             dv.to(DV.dtype.element_ty), mask=ok_n[:, None])


@triton.jit
def _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, k_desc, v_desc, s_k, s_v, offs_m, offs_d, seq_k, shift, left,
              right, qk_scale, start, end, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
              BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr):
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        cols = offs_n.to(tl.int64)[:, None]
        if TMA:  # (keys past seq_k arrive as zeros)
            k = k_desc.load([n0, 0])
            v = v_desc.load([n0, 0])
        elif MASKED:
            k = tl.load(k_base + cols * s_k + offs_d[None, :], mask=(offs_n < seq_k)[:, None], other=0.0)
            v = tl.load(v_base + cols * s_v + offs_d[None, :], mask=(offs_n < seq_k)[:, None], other=0.0)
        else:
            k = tl.load(k_base + cols * s_k + offs_d[None, :])
            v = tl.load(v_base + cols * s_v + offs_d[None, :])
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        p = tl.math.exp2(s - lse2[:, None])
        if MASKED:
            ok = _visible(offs_m[:, None], offs_n[None, :], seq_k, shift, left, right, HAS_LEFT, HAS_RIGHT)
            p = tl.where(ok, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    return dq


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "H", "GROUP", "left", "right"])
def _attn_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, cu_q, cu_k,
                 s_qb, s_qs, s_qh, s_kb, s_ks, s_kh, s_vb, s_vs, s_vh, s_db, s_ds, s_dh, s_dqb, s_dqs, s_dqh,
                 s_lb, s_lh, seqlen_q, seqlen_k, H, GROUP, qk_scale, sm_scale, left, right,
                 VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HEAD_D: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    q0, seq_q, k0, seq_k = _seq_bounds(cu_q, cu_k, b, seqlen_q, seqlen_k, VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= seq_q:
        return
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    kvh = (h // GROUP).to(tl.int64)
    shift = seq_k - seq_q
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    ok_m = offs_m < seq_q
    rows = offs_m.to(tl.int64)[:, None]
    q = tl.load(Q + b64 * s_qb + q0 * s_qs + h64 * s_qh + rows * s_qs + offs_d[None, :], mask=ok_m[:, None],
                other=0.0)
    do = tl.load(DO + b64 * s_db + q0 * s_ds + h64 * s_dh + rows * s_ds + offs_d[None, :], mask=ok_m[:, None],
                 other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    lse_off = b64 * s_lb + h64 * s_lh + q0 + offs_m
    lse2 = tl.load(LSE + lse_off, mask=ok_m, other=float("inf")) * LOG2E
    lse2 = tl.where(lse2 == float("-inf"), float("inf"), lse2)
    delta = tl.load(DELTA + lse_off, mask=ok_m, other=0.0)
    k_base = K + b64 * s_kb + k0 * s_ks + kvh * s_kh
    v_base = V + b64 * s_vb + k0 * s_vs + kvh * s_vh
    k_desc, v_desc = _tile_views(k_base, v_base, s_ks, s_vs, seq_k, HEAD_D, BLOCK_N, TMA)
    dq = tl.zeros((BLOCK_M, HEAD_D), tl.float32)
    last = tl.minimum(m0 + BLOCK_M, seq_q) - 1
    lo, full_lo, full_hi, hi = _phases(m0, last, seq_k, shift, left, right, HAS_LEFT, HAS_RIGHT, BLOCK_N)
    dq = _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, k_desc, v_desc, s_ks, s_vs, offs_m, offs_d, seq_k, shift,
                   left, right, qk_scale, lo, full_lo, True, HAS_LEFT, HAS_RIGHT, BLOCK_N, UPCAST, TMA)
    dq = _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, k_desc, v_desc, s_ks, s_vs, offs_m, offs_d, seq_k, shift,
                   left, right, qk_scale, full_lo, full_hi, False, HAS_LEFT, HAS_RIGHT, BLOCK_N, UPCAST, TMA)
    dq = _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, k_desc, v_desc, s_ks, s_vs, offs_m, offs_d, seq_k, shift,
                   left, right, qk_scale, full_hi, hi, True, HAS_LEFT, HAS_RIGHT, BLOCK_N, UPCAST, TMA)
    dq = dq * sm_scale
    tl.store(DQ + b64 * s_dqb + q0 * s_dqs + h64 * s_dqh + rows * s_dqs + offs_d[None, :],
             dq.to(DQ.dtype.element_ty), mask=ok_m[:, None])
