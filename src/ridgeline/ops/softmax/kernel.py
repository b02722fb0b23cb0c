"""Softmax over the last dim, forward and backward, in Triton (float32 math whatever the storage dtype).

Two layouts per direction, chosen from the row width and dtype only (rules.py), never from the row count, and
every reduction of a fixed shape: outputs are deterministic and batch invariant.

- one pass (here: `_softmax_fwd_rows`, `_softmax_bwd_rows`): a tile of ROWS rows held in registers, as one
  power-of-two block or as two pieces (BLOCK unmasked + PIECE_B masked: 4100 = 4096 + 256 instead of a half-idle
  8192 block). Every byte is read once and written once.
- split rows (kernel_split.py): rows too wide for registers, cut into chunks, one program per (row, chunk), two
  kernels (chunk statistics to a small float32 workspace, then combine and write).

exp(x - max) is computed as exp2(x * log2(e) - max * log2(e)) (one FMA and one MUFU.EX2 per element); y is
e * (1 / sum). A row holding +inf gives NaN everywhere and a row of -inf gives NaN, as torch.softmax does;
-inf entries of an otherwise finite row give 0. Sizes: N = n_q * N_ALIGN and row strides = stride_q * ALIGN with
constexpr ALIGNs tell Triton how far rows are aligned (16-byte vector accesses on unaligned shapes where they
are possible); row offsets are 64-bit, so tensors over 2^31 elements are fine.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.rounding import to_storage

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _tile_load(base, rows, cols, M, N, stride, ROW_MASK: tl.constexpr, COL_MASK: tl.constexpr, other,
               POLICY: tl.constexpr):
    """A [ROWS, P] tile of a 2D tensor (float32); masks only where the tile can run past the rows / columns."""
    ptrs = base + rows[:, None] * stride + cols[None, :]
    if ROW_MASK and COL_MASK:
        v = tl.load(ptrs, mask=(rows[:, None] < M) & (cols[None, :] < N), other=other, eviction_policy=POLICY)
    elif ROW_MASK:
        v = tl.load(ptrs, mask=rows[:, None] < M, other=other, eviction_policy=POLICY)
    elif COL_MASK:
        v = tl.load(ptrs, mask=cols[None, :] < N, other=other, eviction_policy=POLICY)
    else:
        v = tl.load(ptrs, eviction_policy=POLICY)
    # Upcast right after the load: float32 math on the GPU, and the CPU interpreter gets bf16 math wrong.
    return v.to(tl.float32)


@triton.jit
def _tile_store(base, rows, cols, M, N, stride, value, ROW_MASK: tl.constexpr, COL_MASK: tl.constexpr,
                EMULATE_RNE: tl.constexpr, STORE_CM: tl.constexpr):
    """STORE_CM: the store's cache modifier ("" or ".cs": streamed, likely not read again soon)."""
    ptrs = base + rows[:, None] * stride + cols[None, :]
    v = to_storage(value, base.dtype.element_ty, EMULATE_RNE)
    if ROW_MASK and COL_MASK:
        tl.store(ptrs, v, mask=(rows[:, None] < M) & (cols[None, :] < N), cache_modifier=STORE_CM)
    elif ROW_MASK:
        tl.store(ptrs, v, mask=rows[:, None] < M, cache_modifier=STORE_CM)
    elif COL_MASK:
        tl.store(ptrs, v, mask=cols[None, :] < N, cache_modifier=STORE_CM)
    else:
        tl.store(ptrs, v, cache_modifier=STORE_CM)


@triton.jit
def _softmax_fwd_rows(
    X, x_stride_q, Y, y_stride_q, M, n_q, num_tiles,
    X_ALIGN: tl.constexpr, Y_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr,
    BLOCK: tl.constexpr, PIECE_B: tl.constexpr, ROWS: tl.constexpr, EMULATE_RNE: tl.constexpr,
    LOAD_POLICY: tl.constexpr, STORE_CM: tl.constexpr,
):
    """One pass: tiles of ROWS rows, grid-stride over the tiles (one iteration when the grid covers them)."""
    N = n_q * N_ALIGN
    # (Rows are int64, so row * stride is a 64-bit offset; a stride equal to 1 arrives as a constant.)
    x_stride = x_stride_q * X_ALIGN
    y_stride = y_stride_q * Y_ALIGN
    ca = tl.arange(0, BLOCK)
    ROW_MASK: tl.constexpr = ROWS > 1
    A_MASK: tl.constexpr = PIECE_B == 0  # with two pieces the first lies wholly inside the row
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        rows = tl.cast(tile, tl.int64) * ROWS + tl.arange(0, ROWS)
        xa = _tile_load(X, rows, ca, M, N, x_stride, ROW_MASK, A_MASK, float("-inf"), LOAD_POLICY) * LOG2E
        m = tl.max(xa, axis=1)
        if PIECE_B > 0:
            cb = BLOCK + tl.arange(0, PIECE_B)
            xb = _tile_load(X, rows, cb, M, N, x_stride, ROW_MASK, True, float("-inf"), LOAD_POLICY) * LOG2E
            m = tl.maximum(m, tl.max(xb, axis=1))
        ea = tl.exp2(xa - m[:, None])
        s = tl.sum(ea, axis=1)
        if PIECE_B > 0:
            eb = tl.exp2(xb - m[:, None])
            s += tl.sum(eb, axis=1)
        inv = 1.0 / s
        _tile_store(Y, rows, ca, M, N, y_stride, ea * inv[:, None], ROW_MASK, A_MASK, EMULATE_RNE, STORE_CM)
        if PIECE_B > 0:
            _tile_store(Y, rows, cb, M, N, y_stride, eb * inv[:, None], ROW_MASK, True, EMULATE_RNE, STORE_CM)


@triton.jit
def _softmax_bwd_rows(
    Yt, y_stride_q, DY, dy_stride_q, DX, dx_stride_q, M, n_q, num_tiles,
    Y_ALIGN: tl.constexpr, DY_ALIGN: tl.constexpr, DX_ALIGN: tl.constexpr, N_ALIGN: tl.constexpr,
    BLOCK: tl.constexpr, PIECE_B: tl.constexpr, ROWS: tl.constexpr, EMULATE_RNE: tl.constexpr,
    LOAD_POLICY: tl.constexpr, STORE_CM: tl.constexpr,
):
    """One pass: dx = y * (dy - sum(dy * y)) for tiles of ROWS rows held in registers."""
    N = n_q * N_ALIGN
    y_stride = y_stride_q * Y_ALIGN
    dy_stride = dy_stride_q * DY_ALIGN
    dx_stride = dx_stride_q * DX_ALIGN
    ca = tl.arange(0, BLOCK)
    ROW_MASK: tl.constexpr = ROWS > 1
    A_MASK: tl.constexpr = PIECE_B == 0
    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        rows = tl.cast(tile, tl.int64) * ROWS + tl.arange(0, ROWS)
        ya = _tile_load(Yt, rows, ca, M, N, y_stride, ROW_MASK, A_MASK, 0.0, LOAD_POLICY)
        ga = _tile_load(DY, rows, ca, M, N, dy_stride, ROW_MASK, A_MASK, 0.0, LOAD_POLICY)
        dot = tl.sum(ya * ga, axis=1)
        if PIECE_B > 0:
            cb = BLOCK + tl.arange(0, PIECE_B)
            yb = _tile_load(Yt, rows, cb, M, N, y_stride, ROW_MASK, True, 0.0, LOAD_POLICY)
            gb = _tile_load(DY, rows, cb, M, N, dy_stride, ROW_MASK, True, 0.0, LOAD_POLICY)
            dot += tl.sum(yb * gb, axis=1)
        dxa = ya * (ga - dot[:, None])
        _tile_store(DX, rows, ca, M, N, dx_stride, dxa, ROW_MASK, A_MASK, EMULATE_RNE, STORE_CM)
        if PIECE_B > 0:
            dxb = yb * (gb - dot[:, None])
            _tile_store(DX, rows, cb, M, N, dx_stride, dxb, ROW_MASK, True, EMULATE_RNE, STORE_CM)
