"""Triton kernels of the gated activations: out = act(gate) * up, and its backward (activation recomputed).

One forward and one backward kernel serve both layouts: vLLM's x = [gate, up] on the last dim (gate = x[..., :d],
up = x[..., d:], the same row stride) and two separate tensors (Hugging Face's gate_proj(x), up_proj(x)), because
each operand comes with its own pointer and row stride. A program owns a tile of BLOCK_M rows x BLOCK_N columns; the
1-D grid walks tiles row-major (column blocks of one row are neighbours, so neighbouring programs read neighbouring
DRAM pages). Every element is computed on its own with the same instructions whatever the tile, so results are
batch invariant and deterministic, and the launch rules may depend on the row count.

Math is float32 (float64 for float64 tensors, so gradcheck runs on these very kernels), rounded once on store.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled
from ridgeline.lib.rounding import to_storage

# Activation codes (compile-time constants of the kernels).
ACT_SILU = 0
ACT_GELU = 1  # exact: 0.5 * g * (1 + erf(g / sqrt(2)))
ACT_GELU_TANH = 2  # 0.5 * g * (1 + tanh(sqrt(2/pi) * (g + 0.044715 g^3)))
ACT_NAMES = {ACT_SILU: "silu", ACT_GELU: "gelu", ACT_GELU_TANH: "gelu_tanh"}

# Read once: Triton decided at import whether it interprets (then float32 -> bf16 stores are rounded by hand).
_INTERPRETED = interpreter_enabled()

# (The constants are written out in the kernels: a Triton kernel may not read plain Python globals.)
# 1/sqrt(2) = 0.7071067811865476, 1/sqrt(2 pi) = 0.3989422804014327, sqrt(2/pi) = 0.7978845608028654,
# 2 sqrt(2/pi) = 1.5957691216057308, 3 * 0.044715 = 0.134145.


@triton.jit
def _act(g, ACT: tl.constexpr):
    """act(g). tanh-GELU uses 1 + tanh(z) = 2 * sigmoid(2z): one exp, no tanh (which only libdevice has, and
    which the CPU interpreter lacks); the erf is Triton's core `tl.erf` (libdevice's erff on the GPU, the C
    library's erf in the interpreter)."""
    if ACT == 0:
        a = g / (1.0 + tl.exp(-g))
    elif ACT == 1:
        a = 0.5 * g * (1.0 + tl.erf(g * 0.7071067811865476))
    else:
        z2 = 1.5957691216057308 * g * (1.0 + 0.044715 * g * g)  # 2 sqrt(2/pi) (g + 0.044715 g^3)
        a = g / (1.0 + tl.exp(-z2))
    return a


@triton.jit
def _act_and_grad(g, ACT: tl.constexpr):
    """(act(g), act'(g)), the same formulas as torch's silu/gelu backward (so NaN/inf propagate the same way)."""
    if ACT == 0:
        s = 1.0 / (1.0 + tl.exp(-g))
        a = g * s
        da = s * (1.0 + g * (1.0 - s))
    elif ACT == 1:
        cdf = 0.5 * (1.0 + tl.erf(g * 0.7071067811865476))
        a = g * cdf
        da = cdf + g * (0.3989422804014327 * tl.exp(-0.5 * g * g))
    else:
        g2 = g * g
        s = 1.0 / (1.0 + tl.exp(-1.5957691216057308 * g * (1.0 + 0.044715 * g2)))
        a = g * s
        # d/dg [g * sigmoid(2z)] = s + g * 2 s (1 - s) * z',  z' = sqrt(2/pi) (1 + 3 * 0.044715 g^2). Where the
        # sigmoid saturates (t = 0) the second term is g * 0: 0 for finite g even when z' overflows float32
        # (|g| > 1e19), NaN for infinite g, as float64 torch gives.
        t = 2.0 * s * (1.0 - s)
        da = s + tl.where(t == 0.0, g * 0.0, g * t * (0.7978845608028654 * (1.0 + 0.134145 * g2)))
    return a, da


@triton.jit
def _load(ptrs, mask, MASKED: tl.constexpr, EVICT: tl.constexpr, F64: tl.constexpr):
    """A tile, upcast at once (the interpreter's 16-bit arithmetic is wrong); EVICT: read-once data leaves L2 first."""
    if MASKED:
        if EVICT:
            v = tl.load(ptrs, mask=mask, other=0.0, eviction_policy="evict_first")
        else:
            v = tl.load(ptrs, mask=mask, other=0.0)
    else:
        if EVICT:
            v = tl.load(ptrs, eviction_policy="evict_first")
        else:
            v = tl.load(ptrs)
    if F64:
        return v.to(tl.float64)
    return v.to(tl.float32)


@triton.jit
def _store(ptrs, v, mask, MASKED: tl.constexpr, EMULATE: tl.constexpr):
    v = to_storage(v, ptrs.dtype.element_ty, EMULATE)
    if MASKED:
        tl.store(ptrs, v, mask=mask)
    else:
        tl.store(ptrs, v)


@triton.jit
def _tile(m, d, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's rows (int64: offsets may pass 2^31), columns and bounds mask."""
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(d, BLOCK_N)
    pid_m = pid // n_col_blocks
    pid_n = pid - pid_m * n_col_blocks
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < m)[:, None] & (cols < d)[None, :]
    return rows.to(tl.int64)[:, None], cols[None, :], mask


@triton.jit
def _act_and_mul_fwd_kernel(
    G, g_stride, U, u_stride, OUT, out_stride, m, d_div,
    ACT: tl.constexpr, PACKED: tl.constexpr, GA: tl.constexpr, UA: tl.constexpr, OA: tl.constexpr, DA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, EVICT: tl.constexpr,
    F64: tl.constexpr, EMULATE: tl.constexpr,
):
    """out[r, c] = act(G[r, c]) * U[r, c] for c < d. Strides and d come divided by their alignments (GA, UA, OA,
    DA: powers of two), so Triton knows rows start on multiples of them and vectorizes (16-byte accesses).
    PACKED: up is the second half of G's rows (x = [gate, up]); U is then unused."""
    d = d_div * DA
    rows, cols, mask = _tile(m, d, BLOCK_M, BLOCK_N)
    if PACKED:
        U = G + d
    g = _load(G + rows * (g_stride * GA) + cols, mask, MASKED, EVICT, F64)
    u = _load(U + rows * (u_stride * UA) + cols, mask, MASKED, EVICT, F64)
    _store(OUT + rows * (out_stride * OA) + cols, _act(g, ACT) * u, mask, MASKED, EMULATE)


@triton.jit
def _act_and_mul_bwd_kernel(
    DY, dy_stride, G, g_stride, U, u_stride, DG, dg_stride, DU, du_stride, m, d_div,
    ACT: tl.constexpr, PACKED: tl.constexpr, YA: tl.constexpr, GA: tl.constexpr, UA: tl.constexpr, DGA: tl.constexpr,
    DUA: tl.constexpr, DA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, EVICT: tl.constexpr,
    F64: tl.constexpr, EMULATE: tl.constexpr,
):
    """dgate = dy * up * act'(gate), dup = dy * act(gate): the activation recomputed from the inputs (nothing
    but x is saved for backward, as Liger does), one read of dy, gate and up, one write of each gradient.
    PACKED: up is the second half of G's rows and dup the second half of DG's (U and DU unused)."""
    d = d_div * DA
    rows, cols, mask = _tile(m, d, BLOCK_M, BLOCK_N)
    if PACKED:
        U = G + d
        DU = DG + d
    dy = _load(DY + rows * (dy_stride * YA) + cols, mask, MASKED, EVICT, F64)
    g = _load(G + rows * (g_stride * GA) + cols, mask, MASKED, EVICT, F64)
    u = _load(U + rows * (u_stride * UA) + cols, mask, MASKED, EVICT, F64)
    a, da = _act_and_grad(g, ACT)
    _store(DG + rows * (dg_stride * DGA) + cols, dy * u * da, mask, MASKED, EMULATE)
    _store(DU + rows * (du_stride * DUA) + cols, dy * a, mask, MASKED, EMULATE)


def grid_size(m: int, d: int, block_m: int, block_n: int) -> int:
    """Programs of a launch: one per tile."""
    return triton.cdiv(m, block_m) * triton.cdiv(d, block_n)
