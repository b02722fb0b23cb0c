"""Paged decode attention in Triton: split-KV (flash-decoding) over a paged KV cache, and the logsumexp merge.

`_paged_decode_kernel`: one program per (sequence, kv head, split), a pair's splits adjacent in the grid. It holds
every query row of its kv head's GQA group (G = Hq / Hkv heads x Q query tokens = M rows, padded to BLOCK_M >= 16
for the tensor cores) in registers, and walks the split's tokens BLOCK_N at a time: each token's page comes from the
block table (pages in any order,
any block size), K and V tiles [BLOCK_N, D] are loaded once for the whole group (the point of GQA: KV bytes are
read once per kv head, not once per q head), scores S = q K^T on the tensor cores (fp32 accumulation), an online
softmax in base 2 (the softmax scale and k_scale folded into one multiplier), and acc += P V (v_scale applied
once at the end). FP8 (e4m3) K/V are widened to the query's dtype in registers (exact: e4m3 fits in bf16/fp16),
to bf16 by lib/fp8.py's integer path (Triton's cast is bound by the conversion pipe), or, as the fp8 rules launch
it (f16_dots) with a bf16 query, to fp16 by the hardware's paired conversion with q rescaled into fp16 (F16_DOTS);
K in the dot's operand layout,
V in the layout it was loaded in (V is P V's B operand with tokens, its K dimension, strided in the cache: 8-bit
data would reach that layout a byte at a time; widened first, it takes ldmatrix.trans like a bf16 cache; s20 SASS:
699 instructions a 64-token step instead of 1061).

Causal among the Q new tokens: query token i (0-based, of Q) sits at position seq_len - Q + i, so it sees keys
[0, seq_len - Q + i]. A row that sees no key (seq_len 0, or seq_len < Q for the first tokens) outputs zeros.

With one split the program writes the normalized output. With several it writes fp32 partials (o normalized by
its own sum, and its base-2 logsumexp) to a workspace and `_merge_kernel` combines the splits of a row in a fixed
order: deterministic (no atomics), and a sequence's result depends only on its own data and the split size (which
the launch rules choose from the block table's width, Hkv and the SMs, never the batch: batch invariant).
Page ids and token offsets are 64-bit (a cache of more than 2^31 elements).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.fp8 import e4m3_to_bf16, e4m3_to_f16
from ridgeline.lib.launch import interpreter_enabled
from ridgeline.lib.rounding import to_storage

# Read once: the interpreter gives garbage for tl.dot on bf16 and truncates fp32 -> bf16 (emulated there).
INTERPRETED = interpreter_enabled()
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _widen(x, dtype: tl.constexpr, IN_PLACE: tl.constexpr = False):
    """A K or V tile in the query's dtype; e4m3 -> bf16 through `e4m3_to_bf16` (the plain cast is bound by the
    conversion pipe: lib/fp8.py)."""
    if x.dtype == tl.float8e4nv and dtype == tl.bfloat16:
        return e4m3_to_bf16(x, IN_PLACE)
    return x.to(dtype)


@triton.jit
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, out_ptr, part_o_ptr, part_lse_ptr, ks_ptr, vs_ptr,
    qk_scale, k_scale, v_scale,
    stride_qb, stride_qq, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_btb, stride_ob, stride_oq, stride_oh,
    split_tokens, n_splits,
    HKV: tl.constexpr, G: tl.constexpr, Q: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    PAGE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLIT: tl.constexpr, SCALE_FROM_PTR: tl.constexpr, FP32_DOT: tl.constexpr, F16_DOTS: tl.constexpr,
    EMULATE: tl.constexpr,
):
    pid = tl.program_id(0)  # (a 1-D grid: the fast launcher's) = (sequence, kv head) * n_splits + split
    split = pid % n_splits
    bh = pid // n_splits
    b = bh // HKV
    kvh = bh % HKV
    seq_len = tl.load(lens_ptr + b)
    start = split * split_tokens
    if start >= seq_len and start > 0:  # nothing of this sequence here: the merge reads only live splits
        return
    end = tl.minimum(start + split_tokens, seq_len)

    rows = tl.arange(0, BLOCK_M)  # row m: query token m // G, q head kvh * G + m % G
    qi = rows // G
    head = kvh * G + rows % G
    row_ok = rows < G * Q
    cols = tl.arange(0, BLOCK_D)
    col_ok = cols < D
    q_off = b.to(tl.int64) * stride_qb + qi * stride_qq + head * stride_qh
    q = tl.load(q_ptr + q_off[:, None] + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    if F16_DOTS:
        # fp8 cache, bf16 query: the dots in fp16, whose e4m3 widening is one hardware instruction for two elements.
        # Each row of q is scaled by 2^e so its largest entry lands in [2^14, 2^15): exact for every entry down to
        # 2^-31 of the row's largest (fp16's normal range), rounded to fp16's subnormal step below that and dropped
        # under 2^-38; 2^-e joins the row's softmax multiplier.
        qf = q.to(tl.float32)
        top = (tl.max(tl.abs(qf), 1).to(tl.int32, bitcast=True) >> 23) & 0xFF  # biased exponent of the row's max
        # e = 14 - (top - 127): -114 at the largest exponent; 126 at most (a denormal or tiny max); 0 for a zero row
        e = tl.where(top > 0, tl.minimum(141 - top, 126), 0)
        q = (qf * ((e + 127) << 23).to(tl.float32, bitcast=True)[:, None]).to(tl.float16)
        row_scale = ((127 - e) << 23).to(tl.float32, bitcast=True)  # 2^-e
    if FP32_DOT:
        q = q.to(tl.float32)
    # Position of each row's query token; it sees keys at positions <= last.
    last = seq_len - Q + qi

    if SCALE_FROM_PTR:
        k_scale = tl.load(ks_ptr)
        v_scale = tl.load(vs_ptr)
    mult = qk_scale * k_scale * LOG2E  # base-2 logits
    if F16_DOTS:
        mult = mult * row_scale  # (one multiplier a row)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    bt_row = bt_ptr + b.to(tl.int64) * stride_btb
    offs_n = tl.arange(0, BLOCK_N)
    for t0 in range(start, end, BLOCK_N):
        tok = t0 + offs_n
        tok_ok = tok < end
        page = tl.load(bt_row + tok // PAGE, mask=tok_ok, other=0).to(tl.int64)
        slot = (tok % PAGE).to(tl.int64)
        kv_mask = tok_ok[:, None] & col_ok[None, :]
        k_off = page * stride_kb + slot * stride_kt + kvh * stride_kh
        k = tl.load(k_ptr + k_off[:, None] + cols[None, :], mask=kv_mask, other=0.0)
        v_off = page * stride_vb + slot * stride_vt + kvh * stride_vh
        v = tl.load(v_ptr + v_off[:, None] + cols[None, :], mask=kv_mask, other=0.0)
        if F16_DOTS:
            k = e4m3_to_f16(k, False)
        elif not FP32_DOT:
            k = _widen(k, q.dtype, False)
        if FP32_DOT:  # (the interpreter: the operands' values, fp32 products and sums, as the tensor cores)
            s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        if F16_DOTS:
            s = s * mult[:, None]
        else:
            s = s * mult
        visible = tok_ok[None, :] & (tok[None, :] <= last[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing visible yet: no NaN
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if F16_DOTS:  # (P in [0, 1]: fp16 holds it finer than bf16)
            pw = p.to(tl.float16)
            v = e4m3_to_f16(v, True)
        elif FP32_DOT:
            pw = p
        else:
            pw = p.to(q.dtype)
            v = _widen(v, q.dtype, True)
        if FP32_DOT:
            acc = acc * alpha[:, None] + tl.dot(pw.to(tl.float32), v.to(tl.float32), input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(pw, v)
        m_i = m_new

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    o = acc * (v_scale / l_safe)[:, None]
    o_mask = row_ok[:, None] & col_ok[None, :]
    if SPLIT:
        # Partials: [B, Q, Hq, n_splits, D] fp32 and [B, Q, Hq, n_splits] base-2 logsumexp (-inf: nothing seen).
        lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.log2(l_safe))
        prow = ((b.to(tl.int64) * Q + qi) * (HKV * G) + head) * n_splits + split
        tl.store(part_lse_ptr + prow, lse, mask=row_ok)
        tl.store(part_o_ptr + prow[:, None] * D + cols[None, :], o, mask=o_mask)
    else:
        o_off = b.to(tl.int64) * stride_ob + qi * stride_oq + head * stride_oh
        tl.store(out_ptr + o_off[:, None] + cols[None, :], to_storage(o, out_ptr.dtype.element_ty, EMULATE),
                 mask=o_mask)


@triton.jit
def _merge_kernel(
    part_o_ptr, part_lse_ptr, lens_ptr, out_ptr,
    stride_ob, stride_oq, stride_oh,
    split_tokens, n_splits,
    HQ: tl.constexpr, Q: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """One program per (sequence, query token, q head): out = sum_s 2^(lse_s - m) o_s / sum_s 2^(lse_s - m) over
    the sequence's live splits, in split order. All -inf (nothing visible): zeros."""
    row = tl.program_id(0)
    b = row // (Q * HQ)
    qi = (row // HQ) % Q
    h = row % HQ
    seq_len = tl.load(lens_ptr + b)
    live = tl.maximum(tl.cdiv(seq_len, split_tokens), 1)
    s = tl.arange(0, BLOCK_S)
    s_ok = s < live
    base = row.to(tl.int64) * n_splits
    lse = tl.load(part_lse_ptr + base + s, mask=s_ok, other=float("-inf"))
    m = tl.max(lse, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lse - m_safe)  # (0 for dead splits)
    cols = tl.arange(0, BLOCK_D)
    col_ok = cols < D
    o = tl.load(part_o_ptr + (base + s)[:, None] * D + cols[None, :], mask=s_ok[:, None] & col_ok[None, :],
                other=0.0)
    total = tl.sum(w, 0)
    res = tl.sum(o * w[:, None], 0) / tl.where(total == 0.0, 1.0, total)
    o_off = b.to(tl.int64) * stride_ob + qi * stride_oq + h * stride_oh
    tl.store(out_ptr + o_off + cols, to_storage(res, out_ptr.dtype.element_ty, EMULATE), mask=col_ok)
