"""Rotary position embedding in Triton: the serving form (vLLM's in-place `rotary_embedding` on a cos|sin cache
indexed by positions, NeoX or GPT-J pairs, partial rotary) and the training form (Hugging Face's layout, explicit
cos and sin rows, forward and its transpose for the backward).

Both are memory-bound elementwise work: one program takes one token and one group of its heads, loads the token's
cos/sin row once (float32 in registers) and reuses it for every head of the group, tile by tile of BLOCK_H heads.
Every output element is computed in float32 from the stored inputs and rounded once, by the same expression
whatever the launch configuration: results do not depend on the grid, the tile or the batch (batch invariant,
deterministic, no atomics). Heads of a token may sit anywhere (a token stride and a head stride, in elements),
so q and k may be strided views of a fused qkv buffer; the last dim must be contiguous. Token and head offsets are
64-bit.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled
from ridgeline.lib.rounding import to_storage

# Read once: Triton decided at import whether it interprets (the interpreter truncates float32 -> bfloat16).
INTERPRETED = interpreter_enabled()


@triton.jit
def _rotate_heads_neox(row, head0, head_stride, n_heads, cos, sin, cols, cmask,
                       HALF: tl.constexpr, BLOCK_H: tl.constexpr, MASK_H: tl.constexpr, EMULATE: tl.constexpr):
    """Heads [head0, head0 + BLOCK_H) of one token, in place: x1 = cols [0, HALF), x2 = cols [HALF, 2 HALF)."""
    h = head0 + tl.arange(0, BLOCK_H)
    mask = cmask[None, :]
    if MASK_H:
        mask = mask & (h < n_heads)[:, None]
    # 64-bit head offsets: heads * head stride may pass 2^31 ([T, H, D] views with heads outermost).
    ptr = (row + h.to(tl.int64) * head_stride)[:, None] + cols[None, :]
    # Upcast right after the load: float32 math on the GPU, and bf16 arithmetic is wrong in the interpreter.
    x1 = tl.load(ptr, mask=mask).to(tl.float32)
    x2 = tl.load(ptr + HALF, mask=mask).to(tl.float32)
    o1 = x1 * cos[None, :] - x2 * sin[None, :]
    o2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(ptr, to_storage(o1, row.dtype.element_ty, EMULATE), mask=mask)
    tl.store(ptr + HALF, to_storage(o2, row.dtype.element_ty, EMULATE), mask=mask)


@triton.jit
def _rotate_heads_gptj(row, head0, head_stride, n_heads, cos, sin,
                       HALF: tl.constexpr, HALF_P: tl.constexpr, BLOCK_H: tl.constexpr, MASK_H: tl.constexpr,
                       EMULATE: tl.constexpr):
    """Heads [head0, head0 + BLOCK_H) of one token, in place: pairs (2i, 2i + 1), read as one contiguous tile of
    the 2 HALF rotated columns (16-byte loads) and split into even and odd columns in registers."""
    h = head0 + tl.arange(0, BLOCK_H)
    cols = tl.arange(0, 2 * HALF_P)
    mask = (cols < 2 * HALF)[None, :]
    if MASK_H:
        mask = mask & (h < n_heads)[:, None]
    ptr = (row + h.to(tl.int64) * head_stride)[:, None] + cols[None, :]
    x = tl.load(ptr, mask=mask).to(tl.float32)
    xe, xo = tl.split(tl.reshape(x, (BLOCK_H, HALF_P, 2)))
    oe = xe * cos[None, :] - xo * sin[None, :]
    oo = xo * cos[None, :] + xe * sin[None, :]
    out = tl.reshape(tl.join(oe, oo), (BLOCK_H, 2 * HALF_P))
    tl.store(ptr, to_storage(out, row.dtype.element_ty, EMULATE), mask=mask)


@triton.jit
def _rotate_group(row, head0, head_stride, n_heads, cos, sin, cols, cmask,
                  N_HEADS: tl.constexpr, HALF: tl.constexpr, HALF_P: tl.constexpr, BLOCK_H: tl.constexpr,
                  NEOX: tl.constexpr, EMULATE: tl.constexpr):
    """N_HEADS heads from head0 (a group), BLOCK_H at a time; the last tile is masked when BLOCK_H does not
    divide N_HEADS (n_heads: where the group ends)."""
    MASK_H: tl.constexpr = N_HEADS % BLOCK_H != 0
    for i in tl.static_range(0, N_HEADS, BLOCK_H):
        if NEOX:
            _rotate_heads_neox(row, head0 + i, head_stride, n_heads, cos, sin, cols, cmask, HALF, BLOCK_H,
                               MASK_H, EMULATE)
        else:
            _rotate_heads_gptj(row, head0 + i, head_stride, n_heads, cos, sin, HALF, HALF_P, BLOCK_H, MASK_H,
                               EMULATE)


@triton.jit
def _rotary_embedding_kernel(
    POS, Q, K, CACHE,
    q_tok_stride, q_head_stride, k_tok_stride, k_head_stride, cache_stride, max_position,
    GROUPS: tl.constexpr,  # programs per token; each takes Q_HEADS q heads and K_HEADS k heads
    Q_HEADS: tl.constexpr, K_HEADS: tl.constexpr,
    HALF: tl.constexpr, HALF_P: tl.constexpr,  # rot_dim / 2 and the next power of two
    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr,
    NEOX: tl.constexpr, EMULATE: tl.constexpr,
):
    """vLLM's rotary_embedding, in place on the first 2 HALF columns of every head of q and k.

    cos = CACHE[pos, :HALF], sin = CACHE[pos, HALF:2 HALF]. A position outside [0, max_position) reads nothing
    and turns its token's rotated columns into NaN (rather than reading another row's memory)."""
    pid = tl.program_id(0)
    tok = (pid // GROUPS).to(tl.int64)
    grp = pid % GROUPS
    pos = tl.load(POS + tok).to(tl.int64)
    inside = (pos >= 0) & (pos < max_position)
    cols = tl.arange(0, HALF_P)
    cmask = cols < HALF
    crow = CACHE + pos * cache_stride
    cos = tl.load(crow + cols, mask=cmask & inside, other=float("nan")).to(tl.float32)
    sin = tl.load(crow + HALF + cols, mask=cmask & inside, other=float("nan")).to(tl.float32)
    q0 = grp * Q_HEADS
    _rotate_group(Q + tok * q_tok_stride, q0, q_head_stride, q0 + Q_HEADS, cos, sin, cols, cmask, Q_HEADS, HALF,
                  HALF_P, BLOCK_HQ, NEOX, EMULATE)
    if K_HEADS > 0:
        k0 = grp * K_HEADS
        _rotate_group(K + tok * k_tok_stride, k0, k_head_stride, k0 + K_HEADS, cos, sin, cols, cmask, K_HEADS,
                      HALF, HALF_P, BLOCK_HK, NEOX, EMULATE)


@triton.jit
def _train_heads(src, dst, head0, s_head, d_head, n_heads, c1, c2, s1, s2, cols, cmask,
                 HALF: tl.constexpr, BLOCK_H: tl.constexpr, MASK_H: tl.constexpr, BACKWARD: tl.constexpr,
                 EMULATE: tl.constexpr):
    """Heads [head0, head0 + BLOCK_H) of one token, src -> dst, NeoX halves (Hugging Face's rotate_half).

    forward:  y1 = x1 c1 - x2 s1,  y2 = x2 c2 + x1 s2      (x * cos + rotate_half(x) * sin)
    backward: g1 = d1 c1 + d2 s2,  g2 = d2 c2 - d1 s1      (its transpose: rotation by -theta when the halves of
                                                            cos and of sin are equal, as HF's are)"""
    h = head0 + tl.arange(0, BLOCK_H)
    mask = cmask[None, :]
    if MASK_H:
        mask = mask & (h < n_heads)[:, None]
    # 64-bit head offsets: in a contiguous [B, H, S, D] tensor a head is S * D apart, heads * that may pass 2^31.
    h64 = h.to(tl.int64)
    sp = (src + h64 * s_head)[:, None] + cols[None, :]
    dp = (dst + h64 * d_head)[:, None] + cols[None, :]
    x1 = tl.load(sp, mask=mask).to(tl.float32)
    x2 = tl.load(sp + HALF, mask=mask).to(tl.float32)
    if BACKWARD:
        y1 = x1 * c1[None, :] + x2 * s2[None, :]
        y2 = x2 * c2[None, :] - x1 * s1[None, :]
    else:
        y1 = x1 * c1[None, :] - x2 * s1[None, :]
        y2 = x2 * c2[None, :] + x1 * s2[None, :]
    tl.store(dp, to_storage(y1, dst.dtype.element_ty, EMULATE), mask=mask)
    tl.store(dp + HALF, to_storage(y2, dst.dtype.element_ty, EMULATE), mask=mask)


@triton.jit
def _train_group(src, dst, head0, s_head, d_head, c1, c2, s1, s2, cols, cmask,
                 N_HEADS: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr, BACKWARD: tl.constexpr,
                 EMULATE: tl.constexpr):
    MASK_H: tl.constexpr = N_HEADS % BLOCK_H != 0
    for i in tl.static_range(0, N_HEADS, BLOCK_H):
        _train_heads(src, dst, head0 + i, s_head, d_head, head0 + N_HEADS, c1, c2, s1, s2, cols, cmask, HALF,
                     BLOCK_H, MASK_H, BACKWARD, EMULATE)


@triton.jit
def _rotary_train_kernel(
    Q, K, QO, KO, COS, SIN,
    q_sb, q_ss, q_sh, k_sb, k_ss, k_sh,
    qo_sb, qo_ss, qo_sh, ko_sb, ko_ss, ko_sh,
    c_sb, c_ss, s_sb, s_ss, seq_len,
    GROUPS: tl.constexpr, Q_HEADS: tl.constexpr, K_HEADS: tl.constexpr,
    HALF: tl.constexpr, HALF_P: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr,
    BACKWARD: tl.constexpr, EMULATE: tl.constexpr,
):
    """q [B, Hq, S, D] and k [B, Hk, S, D] (any strides, last dim contiguous) -> QO, KO of the same shapes;
    cos and sin rows [B or 1 (stride 0), S, D]. Token t = b * S + s; D = 2 HALF."""
    pid = tl.program_id(0)
    tok = (pid // GROUPS).to(tl.int64)
    grp = pid % GROUPS
    b = tok // seq_len
    s = tok % seq_len
    cols = tl.arange(0, HALF_P)
    cmask = cols < HALF
    cp = COS + b * c_sb + s * c_ss + cols
    sp = SIN + b * s_sb + s * s_ss + cols
    c1 = tl.load(cp, mask=cmask).to(tl.float32)
    c2 = tl.load(cp + HALF, mask=cmask).to(tl.float32)
    s1 = tl.load(sp, mask=cmask).to(tl.float32)
    s2 = tl.load(sp + HALF, mask=cmask).to(tl.float32)
    q0 = grp * Q_HEADS
    _train_group(Q + b * q_sb + s * q_ss, QO + b * qo_sb + s * qo_ss, q0, q_sh, qo_sh, c1, c2, s1, s2, cols,
                 cmask, Q_HEADS, HALF, BLOCK_HQ, BACKWARD, EMULATE)
    k0 = grp * K_HEADS
    _train_group(K + b * k_sb + s * k_ss, KO + b * ko_sb + s * ko_ss, k0, k_sh, ko_sh, c1, c2, s1, s2, cols,
                 cmask, K_HEADS, HALF, BLOCK_HK, BACKWARD, EMULATE)


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(max(1, n))
