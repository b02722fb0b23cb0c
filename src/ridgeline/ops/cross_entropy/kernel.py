"""Triton kernels of the fused cross-entropy (launch.py launches them).

Three kernels per call, at most:
- `_xent_prep_kernel` (one program): counts the rows whose target is not ignore_index (the "mean" divisor, which the
  main kernel needs before it writes a gradient) and the out-of-range targets (a flag the host reads only when asked:
  `check_targets=True`). Skipped when neither is needed.
- `_xent_rows_kernel`: per row, in float32: max, sum of exp, lse, the target's logit, the row's loss and, with
  HAS_GRAD, the gradient of the reduced loss written once in the logits' dtype. SINGLE: the row lives in registers
  (one read). Else the row is walked in chunks of BLOCK: one online (max, sum) pass, then, with HAS_GRAD, a second pass
  that re-reads the chunks (BACK: last chunk first, the most recently read, more of it from L2). LANES > 0 (every
  shipped rule since s19): the first pass keeps (max, sum) per lane and reduces across the program once a row
  (`_lane_stats`: no barrier in the loop); LANES = 0 is s16's loop of block reductions every chunk, kept as the
  tuning driver's baseline.
- `_xent_finish_kernel` (one program): the sum of the per-row losses in a fixed order (deterministic), divided by the
  count for "mean" (0 rows -> 0/0 = NaN, as torch).
Every load is upcast to float32 right away (the CPU interpreter's 16-bit math is wrong otherwise). Row offsets are
64-bit (rows * stride may pass 2^31). A target outside [0, V) that is not ignore_index is never used as an address:
its row's loss and gradient are NaN.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled
from ridgeline.lib.rounding import to_storage

_INTERPRETED = interpreter_enabled()
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
PREP_BLOCK = 4096


@triton.jit
def _xent_prep_kernel(target_ptr, t_stride, n_rows, n_cols, ignore_index, stats_ptr, BLOCK: tl.constexpr):
    """stats[0] = rows with target != ignore_index, stats[1] = such rows whose target is outside [0, n_cols)."""
    valid = tl.zeros((BLOCK,), dtype=tl.int32)
    bad = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(0, n_rows, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        mask = rows < n_rows
        t = tl.load(target_ptr + rows.to(tl.int64) * t_stride, mask=mask, other=ignore_index).to(tl.int64)
        v = mask & (t != ignore_index)
        valid += v.to(tl.int32)
        bad += (v & ((t < 0) | (t >= n_cols))).to(tl.int32)
    tl.store(stats_ptr, tl.sum(valid, axis=0))
    tl.store(stats_ptr + 1, tl.sum(bad, axis=0))


@triton.jit
def _grad_of(x, cols, t, lse, gscale, zfac, smooth, hit):
    """d loss / d x for one chunk: gscale * ((1 + 2 z lse) softmax - ls / V - (1 - ls) [col == t])."""
    p = tl.exp2((x - lse) * 1.4426950408889634)
    g = zfac * p - smooth
    g = tl.where(cols == t, g - hit, g)
    return g * gscale


@triton.jit
def _online_update(m, d, xc):
    """The running (max, sum of exp relative to it) after chunk xc, reduced over xc's axis 0: scalars for a 1-D
    chunk, one pair per lane for a [rows, LANES] tile. Lanes (or rows) of only -inf so far keep d = 0, not NaN."""
    m_new = tl.maximum(m, tl.max(xc, axis=0))
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    d = d * tl.exp2((m - m_ref) * 1.4426950408889634) + tl.sum(tl.exp2((xc - m_ref) * 1.4426950408889634), axis=0)
    return m_new, d


@triton.jit
def _lane_stats(x_row, n_cols, t, valid, in_range, BLOCK: tl.constexpr, LANES: tl.constexpr,
                HAS_SMOOTH: tl.constexpr):
    """A row's (max, sum of exp relative to it, the target's logit, sum of logits) with no barrier in the loop:
    each chunk of BLOCK columns is a [BLOCK // LANES, LANES] tile whose column j a thread holds whole (LANES = 16
    bytes a thread times the program's threads: the tile's rows are the thread's registers), so its (max, sum) per
    lane are the thread's own; one block reduction after the loop. Exps: 1 + LANES / BLOCK an element (the rescale
    is per lane, once a chunk). The target's logit is one scalar load (never through a reduction)."""
    lanes = tl.arange(0, LANES)[None, :]
    offs = tl.arange(0, BLOCK // LANES)[:, None] * LANES + lanes
    m_lane = tl.full((LANES,), float("-inf"), tl.float32)
    d_lane = tl.zeros((LANES,), tl.float32)
    s_lane = tl.zeros((LANES,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        xc = tl.load(x_row + cols, mask=mask & valid, other=float("-inf"), eviction_policy="evict_last"
                     ).to(tl.float32)
        m_lane, d_lane = _online_update(m_lane, d_lane, xc)
        if HAS_SMOOTH:
            s_lane += tl.sum(tl.where(mask, xc, 0.0), axis=0)
    m = tl.max(m_lane, axis=0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(d_lane * tl.exp2((m_lane - m_ref) * 1.4426950408889634), axis=0)
    hit = valid & in_range
    x_t = tl.load(x_row + tl.where(hit, t, 0), mask=hit, other=0.0).to(tl.float32)
    sum_x = 0.0
    if HAS_SMOOTH:
        sum_x = tl.sum(s_lane, axis=0)
    return m, d, x_t, sum_x


@triton.jit
def _xent_rows_kernel(
    x_ptr, x_stride,
    target_ptr, t_stride,
    loss_ptr,
    g_ptr, g_stride,
    stats_ptr,
    n_rows, n_cols, ignore_index,
    label_smoothing, z_loss,
    BLOCK: tl.constexpr,
    SINGLE: tl.constexpr,  # the whole row in one block (BLOCK >= n_cols)
    HAS_GRAD: tl.constexpr,
    MEAN: tl.constexpr,  # the gradient is that of the mean over valid rows (needs stats[0])
    HAS_SMOOTH: tl.constexpr,
    HAS_Z: tl.constexpr,
    LOOP: tl.constexpr,  # grid-stride over rows (persistent grid); else one program per row
    EMULATE: tl.constexpr,  # round-to-nearest casts under the CPU interpreter (lib/rounding.py)
    LANES: tl.constexpr = 0,  # > 0: the chunked pass keeps (max, sum) per lane of a [BLOCK // LANES, LANES] tile
    BACK: tl.constexpr = False,  # the gradient pass walks the row's chunks last to first
):
    pid = tl.program_id(0)
    step = tl.num_programs(0) if LOOP else 1
    end = n_rows if LOOP else pid + 1
    gscale = 1.0
    if HAS_GRAD and MEAN:
        gscale = 1.0 / tl.load(stats_ptr).to(tl.float32)  # (0 valid rows: inf, but every row is then ignored)
    smooth_w = label_smoothing / n_cols  # ls / V, the smoothing's weight on each column
    for row in range(pid, end, step):
        row64 = tl.cast(row, tl.int64)  # (64-bit before the stride multiply: rows * stride may pass 2^31)
        t = tl.load(target_ptr + row64 * t_stride).to(tl.int64)
        valid = t != ignore_index
        in_range = (t >= 0) & (t < n_cols)
        x_row = x_ptr + row64 * x_stride
        g_row = g_ptr + row64 * g_stride
        cols0 = tl.arange(0, BLOCK)
        if SINGLE:
            mask = cols0 < n_cols
            # (an ignored row is not read: its loss and gradient are 0 whatever the logits hold)
            x = tl.load(x_row + cols0, mask=mask & valid, other=float("-inf")).to(tl.float32)
            m = tl.max(x, axis=0)
            d = tl.sum(tl.exp2((x - m) * 1.4426950408889634), axis=0)
            x_t = tl.sum(tl.where(cols0 == t, x, 0.0), axis=0)
            sum_x = 0.0
            if HAS_SMOOTH:
                sum_x = tl.sum(tl.where(mask, x, 0.0), axis=0)
        elif LANES:
            m, d, x_t, sum_x = _lane_stats(x_row, n_cols, t, valid, in_range, BLOCK, LANES, HAS_SMOOTH)
        else:
            # Online (max, sum): the chunk's max first, the running sum rescaled once per chunk.
            m = float("-inf")
            d = 0.0
            x_t = 0.0
            sum_x = 0.0
            for start in range(0, n_cols, BLOCK):
                cols = start + cols0
                mask = cols < n_cols
                xc = tl.load(x_row + cols, mask=mask & valid, other=float("-inf"), eviction_policy="evict_last"
                             ).to(tl.float32)
                m, d = _online_update(m, d, xc)
                x_t += tl.sum(tl.where(cols == t, xc, 0.0), axis=0)
                if HAS_SMOOTH:
                    sum_x += tl.sum(tl.where(mask, xc, 0.0), axis=0)
        lse = m + tl.log2(d) * 0.6931471805599453
        loss = lse - x_t
        if HAS_SMOOTH:
            # (1 - ls) * nll + ls * mean_i(-log p_i), and mean_i(-log p_i) = lse - mean(x)
            loss = (1.0 - label_smoothing) * loss + label_smoothing * (lse - sum_x / n_cols)
        zfac = 1.0
        if HAS_Z:
            loss += z_loss * lse * lse
            zfac = 1.0 + 2.0 * z_loss * lse
        nan = float("nan")
        loss = tl.where(valid, tl.where(in_range, loss, nan), 0.0)
        tl.store(loss_ptr + row, loss)
        if HAS_GRAD:
            # Ignored rows: 0; a bad target: NaN; the factor folds both into one multiply.
            rscale = tl.where(valid, tl.where(in_range, gscale, nan), 0.0)
            hit = 1.0 - label_smoothing
            if SINGLE:
                g = _grad_of(x, cols0, t, lse, rscale, zfac, smooth_w, hit)
                g = tl.where(valid, g, 0.0)  # (x = -inf padding or an ignored row: 0, never NaN from 0 * inf)
                tl.store(g_row + cols0, to_storage(g, g_ptr.dtype.element_ty, EMULATE), mask=mask)
            else:
                last = tl.cdiv(n_cols, BLOCK) - 1
                for i in range(0, n_cols, BLOCK):
                    # BACK: the last chunks first, the ones the stats pass read most recently (still in L2).
                    start = last * BLOCK - i if BACK else i
                    cols = start + cols0
                    mask = cols < n_cols
                    xc = tl.load(x_row + cols, mask=mask & valid, other=0.0, eviction_policy="evict_first"
                                 ).to(tl.float32)
                    g = _grad_of(xc, cols, t, lse, rscale, zfac, smooth_w, hit)
                    g = tl.where(valid, g, 0.0)
                    tl.store(g_row + cols, to_storage(g, g_ptr.dtype.element_ty, EMULATE), mask=mask)


@triton.jit
def _xent_finish_kernel(loss_ptr, n_rows, stats_ptr, out_ptr, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    """out[0] = sum of the per-row losses (fixed order: blocks of BLOCK, then the block's tree), / count for mean."""
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_rows, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        acc += tl.load(loss_ptr + rows, mask=rows < n_rows, other=0.0)
    total = tl.sum(acc, axis=0)
    if MEAN:
        total = total / tl.load(stats_ptr).to(tl.float32)
    tl.store(out_ptr, total)


@triton.jit
def _xent_scale_kernel(g_ptr, g_stride, n_cols, n_chunks, go_ptr, go_stride, BLOCK: tl.constexpr,
                       PER_ROW: tl.constexpr, EMULATE: tl.constexpr):
    """g[row] *= grad_output (grad_output[row] with PER_ROW), in place, one program per (row, chunk of BLOCK); a
    factor of exactly 1 leaves the chunk untouched without reading it (the usual training step: the backward of a
    loss whose grad_output is 1 costs one launch, no traffic)."""
    pid = tl.program_id(0)
    row = tl.cast(pid // n_chunks, tl.int64)
    chunk = pid % n_chunks
    if PER_ROW:
        s = tl.load(go_ptr + row * go_stride).to(tl.float32)
    else:
        s = tl.load(go_ptr).to(tl.float32)
    if s != 1.0:
        cols = chunk * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n_cols
        g = tl.load(g_ptr + row * g_stride + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(g_ptr + row * g_stride + cols, to_storage(g * s, g_ptr.dtype.element_ty, EMULATE), mask=mask)


__all__ = ["_xent_prep_kernel", "_xent_rows_kernel", "_xent_finish_kernel", "_xent_scale_kernel", "PREP_BLOCK",
           "triton", "_INTERPRETED", "LOG2E", "LN2"]
