"""Triton kernels of the FP8 scaled GEMM and of the activation quantizers that feed it.

`_scaled_mm_kernel`: y[m, n] = sum_k a[m, k] * b[n, k] with the scales of one of three modes (constexpr SCALE):
- SCALE_TENSOR: y = acc * scale_a * scale_b (two scalars), once in the epilogue;
- SCALE_ROW:    y = acc * scale_a[m] * scale_b[n] in the epilogue;
- SCALE_BLOCK:  DeepSeek-V3's block scales: each K step of 128 (one scale group) is a fresh fp32 partial product,
                multiplied by scale_a[m, kb] * scale_b[n // 128, kb] and added to the fp32 accumulator (what
                DeepSeek's kernels do: the scales differ per K block, so they cannot wait for the epilogue).
Both accumulate in fp32 at least every BLOCK_K (the tensor core's own FP8 accumulation is narrower; see the loop).
Persistent: a grid of at most one program per SM walks the output tiles in grouped order (GROUP_M row tiles share
the B columns they read, so B stays in L2). Operands come through TMA tensor descriptors made on the device
(USE_TMA: K-contiguous rows at 16-byte aligned strides) or through masked pointer loads (any strides, odd K);
both feed wgmma through `tl.dot`, pipelined by num_stages. Offsets are 64-bit on the pointer path.
The quantizers compute in fp32 and round once to e4m3 (round to nearest even, saturated to +-448); x / scale is
the correctly rounded fp32 quotient, from the scale's reciprocal and two FMA corrections (`_div_by_scale`).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled

_INTERPRETED = interpreter_enabled()

SCALE_TENSOR, SCALE_ROW, SCALE_BLOCK = 0, 1, 2
SCALE_NAMES = {SCALE_TENSOR: "tensor", SCALE_ROW: "row", SCALE_BLOCK: "block"}
BLOCK_SCALE = 128  # DeepSeek-V3: 1x128 activation groups, 128x128 weight blocks
FP8_MAX = 448.0  # largest finite float8_e4m3fn
_EMULATE_ROUND = tl.constexpr(_INTERPRETED)


@triton.jit
def _abs_bits(x):
    # |x| as int32 bits: non-negative floats order like their bits, and every NaN's bits lie above inf's, so an
    # integer max of these is the float amax, or a NaN when the row (group) holds one, as torch's amax gives.
    # (One plain integer reduction: a NaN-propagating float combine in tl.reduce runs ~10x slower interpreted.)
    return tl.abs(x).to(tl.int32, bitcast=True)


@triton.jit
def _scale_of(amax):
    # amax / 448; 1 for an all-zero row or group, and for a NaN amax (NaN > 0 is false), as the contract's
    # torch.where(amax > 0, amax / 448, 1) gives: the row's NaN then stays NaN in x_fp8.
    return tl.where(amax > 0.0, tl.math.div_rn(amax, 448.0), 1.0)


# Scales outside [2^-100, 2^127] (a group of tiny values, or inf in it) leave the reciprocal division's range: their
# rows (tiles) divide with div.rn.
_FAST_MIN_SCALE = tl.constexpr(2.0**-100)
_FAST_MAX_SCALE = tl.constexpr(2.0**127)


@triton.jit
def _fma(a, b, c, EMULATE: tl.constexpr):
    # The interpreter's fma rounds the product first; in float64 the product is exact and so is the remainder.
    if EMULATE:
        return (a.to(tl.float64) * b.to(tl.float64) + c.to(tl.float64)).to(tl.float32)
    return tl.fma(a, b, c)


@triton.jit
def _div_by_scale(x, s, r, EMULATE: tl.constexpr):
    # x / s correctly rounded to fp32 (the contract) from r = RN(1 / s): q0 = RN(x r) lies within ~2 ulps of the
    # quotient, and each step q + RN(x - q s) r (the remainder exact by FMA once q is within an ulp) brings it to
    # the correctly rounded one (Markstein's theorem after the second step; checked in exact arithmetic by
    # tests/ops/scaled_mm/test_quant_division.py). 5 instructions against div.rn's ~10 and its slow-path test, in
    # a kernel that issues ~24 an element with div.rn (s21 SASS). A zero quotient takes x's sign (OR-ed in: a
    # nonzero quotient has it already). For s in [_FAST_MIN_SCALE, _FAST_MAX_SCALE] and finite x (or NaN).
    neg_s = -s  # (negated once: -q in the FMA made ptxas multiply x by -r again, one more FFMA a step)
    q = x * r
    q = _fma(_fma(q, neg_s, x, EMULATE), r, q, EMULATE)
    q = _fma(_fma(q, neg_s, x, EMULATE), r, q, EMULATE)
    sign = x.to(tl.int32, bitcast=True) & -2147483648
    return (q.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)


@triton.jit
def _fast_range(scale):
    return (scale >= _FAST_MIN_SCALE) & (scale <= _FAST_MAX_SCALE)


@triton.jit
def _divide(x, s, r, fast, EMULATE: tl.constexpr):
    # x / s, correctly rounded: by the reciprocal r where `fast` (a uniform test of the row's or tile's scales),
    # else div.rn.
    if fast:
        q = _div_by_scale(x, s, r, EMULATE)
    else:
        q = tl.math.div_rn(x, s)
    return q


@triton.jit
def _clamp_fp8(q):
    # Saturate to +-448, keeping NaN (x / scale of a NaN or of inf / inf) NaN rather than -448.
    return tl.minimum(tl.maximum(q, -448.0, propagate_nan=tl.PropagateNan.ALL), 448.0,
                      propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _to_e4m3(q, dtype: tl.constexpr, EMULATE: tl.constexpr):
    # The GPU converts with cvt.rn.satfinite (round to nearest even, saturated to +-448, NaN kept): no clamp
    # needed there (two NaN-propagating min/max an element, s21 SASS). Triton's CPU
    # interpreter does not carry a rounded-up mantissa into the exponent (125.7 -> 64, not 128): there (EMULATE)
    # |q| is first rounded onto the e4m3 grid in fp32 (ulp 2^(e-3), subnormal ulp 2^-9; adding and subtracting
    # 1.5 * 2^23 ulps rounds to nearest even), so the conversion is exact.
    if EMULATE:
        q = _clamp_fp8(q)
        e = ((q.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
        e = tl.maximum(e, -6)
        ulp = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)
        big = ulp * 12582912.0
        neg = q.to(tl.int32, bitcast=True) < 0
        q8 = ((tl.abs(q) + big) - big).to(dtype)
        # (its conversion also drops the sign of zero: the sign bit is set on the 8-bit pattern)
        # (and its NaN comes out as 384: e4m3fn's NaN is 0x7F, sign aside)
        mag = tl.where(q != q, 0x7F, q8.to(tl.uint8, bitcast=True)).to(tl.uint8)
        bits = mag | tl.where(neg, 128, 0).to(tl.uint8)
        return bits.to(dtype, bitcast=True)
    return q.to(dtype)


@triton.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Grouped order: GROUP_M row tiles walk the columns together, so the B tiles they share stay in L2.
    in_group = GROUP_M * num_pid_n
    group = tile // in_group
    first_m = group * GROUP_M
    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % in_group) % size_m
    pid_n = (tile % in_group) // size_m
    return pid_m, pid_n


@triton.jit
def _oriented(of_a, of_b, SWAP_AB: tl.constexpr):
    # (of a, of b) as the tile's (rows, columns) take them: swapped, b's side comes first.
    if SWAP_AB:
        first, second = of_b, of_a
    else:
        first, second = of_a, of_b
    return first, second  # (one return: Triton types a function by its returns, and these two shapes differ)


@triton.jit
def _scaled_mm_kernel(
    a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    stride_sam, stride_sak, stride_sbn, stride_sbk,
    SCALE: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    USE_TMA: tl.constexpr, NUM_STAGES: tl.constexpr, DEFER_SCALE: tl.constexpr = False,
    SWAP_AB: tl.constexpr = False,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    if USE_TMA:
        # Out-of-bounds rows and K columns read as zeros: no masks in the main loop.
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    if SCALE == 0:
        s_all = tl.load(sa_ptr).to(tl.float32) * tl.load(sb_ptr).to(tl.float32)
    for tile in range(pid, num_tiles, tl.num_programs(0)):  # (the grid size is not a constexpr: no recompiles)
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        m_mask = offs_m < M
        n_mask = offs_n < N
        offs_m64 = offs_m.to(tl.int64)
        offs_n64 = offs_n.to(tl.int64)
        # SWAP_AB (decode): the tile is computed as y^T = b a^T, the weight's BLOCK_N rows the MMA's M side and a's
        # BLOCK_M rows its narrow N side (8-32 where a wgmma's M side is 64 rows of padding); acc is [BLOCK_N,
        # BLOCK_M] until the epilogue. The same products, scales and promotions per output as the plain tile (the
        # scale product sb * sa = sa * sb exactly).
        if SWAP_AB:
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if SCALE == 2 and DEFER_SCALE:
            # The previous K step's partial and its scales (of the tile's rows and columns): it is scaled into acc
            # after this step's dot is issued.
            prev = tl.zeros_like(acc)
            prev_sr, prev_sc = _oriented(tl.zeros((BLOCK_M,), dtype=tl.float32), tl.zeros((BLOCK_N,), dtype=tl.float32),
                                         SWAP_AB)
        for ki in tl.range(0, k_tiles, num_stages=NUM_STAGES):
            k0 = ki * BLOCK_K
            if USE_TMA:
                a = a_desc.load([pid_m * BLOCK_M, k0])
                b = b_desc.load([pid_n * BLOCK_N, k0])
            else:
                offs_k = k0 + tl.arange(0, BLOCK_K)
                k_mask = offs_k < K
                offs_k64 = offs_k.to(tl.int64)  # (N-major b: k * N passes 2^31 for a large weight)
                a = tl.load(a_ptr + offs_m64[:, None] * stride_am + offs_k64[None, :] * stride_ak,
                            mask=m_mask[:, None] & k_mask[None, :], other=0.0)
                b = tl.load(b_ptr + offs_n64[:, None] * stride_bn + offs_k64[None, :] * stride_bk,
                            mask=n_mask[:, None] & k_mask[None, :], other=0.0)
            lhs, rhs = _oriented(a, b, SWAP_AB)
            if SCALE == 2:
                kb = k0 // 128  # BLOCK_K divides 128: one scale group per step
                sa = tl.load(sa_ptr + offs_m64 * stride_sam + kb * stride_sak, mask=m_mask, other=0.0)
                sb = tl.load(sb_ptr + (offs_n64 // 128) * stride_sbn + kb * stride_sbk, mask=n_mask, other=0.0)
                s_rows, s_cols = _oriented(sa, sb, SWAP_AB)
                if DEFER_SCALE:
                    # A tuning candidate: the step's dot result is consumed one iteration later, so its wgmma can
                    # run while the previous partial is scaled (in place, each step waits for its own dot). The
                    # same products, scales and additions in the same order: the same bits (acc += 0 * 0 first).
                    part = tl.dot(lhs, rhs.T)
                    acc += prev * (prev_sr[:, None] * prev_sc[None, :])
                    prev, prev_sr, prev_sc = part, s_rows, s_cols
                else:
                    acc += tl.dot(lhs, rhs.T) * (s_rows[:, None] * s_cols[None, :])
            else:
                # Hopper's FP8 wgmma keeps fewer accumulator bits than fp32 (~14, DeepSeek-V3 report, 3.3.2); Triton's
                # default on sm_90 lets the whole K loop accumulate that way (max_num_imprecise_acc = 2^30), which
                # missed the contract's tolerance at K >= 14336 on the H200 (0.37 against 0.11). Promoting into the
                # fp32 accumulator every BLOCK_K, as cuBLAS does without fast accumulation, keeps fp32 sums.
                acc = tl.dot(lhs, rhs.T, acc, max_num_imprecise_acc=BLOCK_K)
        if SCALE == 2 and DEFER_SCALE:
            acc += prev * (prev_sr[:, None] * prev_sc[None, :])
        if SWAP_AB:
            acc = tl.trans(acc)  # [BLOCK_M, BLOCK_N] for the epilogue (a small tile: one shared-memory round trip)
        if SCALE == 0:
            acc = acc * s_all
        elif SCALE == 1:
            sa = tl.load(sa_ptr + offs_m64 * stride_sam, mask=m_mask, other=0.0)
            sb = tl.load(sb_ptr + offs_n64 * stride_sbn, mask=n_mask, other=0.0)
            acc = acc * sa[:, None] * sb[None, :]
        if HAS_BIAS:
            acc += tl.load(bias_ptr + offs_n64, mask=n_mask, other=0.0).to(tl.float32)[None, :]
        c_ptrs = c_ptr + offs_m64[:, None] * stride_cm + offs_n64[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def _quant_per_token_kernel(
    x_ptr, q_ptr, s_ptr, M, K, stride_xm, stride_xk, stride_qm,
    BLOCK_K: tl.constexpr, ONE_PASS: tl.constexpr,
):
    # One row at a time (persistent over rows; the grid size is a runtime value, so a new M compiles nothing);
    # ONE_PASS: the whole row in registers, else two passes over the row in BLOCK_K chunks (the second read mostly
    # from L2). Column offsets are 64-bit: a column-major x's k * stride passes 2^31 past 2^31 elements.
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_xm
        q_row = q_ptr + tl.cast(row, tl.int64) * stride_qm
        if ONE_PASS:
            offs = tl.arange(0, BLOCK_K)
            mask = offs < K
            x = tl.load(x_row + offs.to(tl.int64) * stride_xk, mask=mask, other=0.0).to(tl.float32)
            amax = tl.max(_abs_bits(x), axis=0).to(tl.float32, bitcast=True)
            scale = _scale_of(amax)
            q = _divide(x, scale, tl.math.div_rn(1.0, scale), _fast_range(scale), _EMULATE_ROUND)
            tl.store(q_row + offs, _to_e4m3(q, q_ptr.dtype.element_ty, _EMULATE_ROUND), mask=mask)
        else:
            run = tl.zeros((BLOCK_K,), dtype=tl.int32)
            for k0 in range(0, K, BLOCK_K):
                offs = k0 + tl.arange(0, BLOCK_K)
                x = tl.load(x_row + offs.to(tl.int64) * stride_xk, mask=offs < K, other=0.0).to(tl.float32)
                run = tl.maximum(run, _abs_bits(x))
            amax = tl.max(run, axis=0).to(tl.float32, bitcast=True)
            scale = _scale_of(amax)
            fast = _fast_range(scale)
            recip = tl.math.div_rn(1.0, scale)
            for k0 in range(0, K, BLOCK_K):
                offs = k0 + tl.arange(0, BLOCK_K)
                mask = offs < K
                x = tl.load(x_row + offs.to(tl.int64) * stride_xk, mask=mask, other=0.0).to(tl.float32)
                q = _divide(x, scale, recip, fast, _EMULATE_ROUND)
                tl.store(q_row + offs, _to_e4m3(q, q_ptr.dtype.element_ty, _EMULATE_ROUND), mask=mask)
        tl.store(s_ptr + row, scale)


@triton.jit
def _quant_per_group_kernel(
    x_ptr, q_ptr, s_ptr, M, K, stride_xm, stride_xk, stride_qm, stride_sm, stride_sg,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, GROUPS: tl.constexpr,
):
    # A program quantizes BLOCK_M rows x GROUPS groups of GROUP columns: one scale per row and group.
    chunks = tl.cdiv(tl.cdiv(K, GROUP), GROUPS)  # (a 1-D grid: the cached launcher takes one dimension)
    pid_m = tl.program_id(0) // chunks
    pid_g = tl.program_id(0) % chunks
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = offs_m < M
    offs_m64 = offs_m.to(tl.int64)
    for g in tl.static_range(GROUPS):
        group = pid_g * GROUPS + g
        offs_k = group * GROUP + tl.arange(0, GROUP)
        mask = m_mask[:, None] & (offs_k < K)[None, :]
        x = tl.load(x_ptr + offs_m64[:, None] * stride_xm + offs_k.to(tl.int64)[None, :] * stride_xk, mask=mask,
                    other=0.0).to(tl.float32)
        amax = tl.max(_abs_bits(x), axis=1).to(tl.float32, bitcast=True)
        scale = _scale_of(amax)
        # One test for the tile (a uniform branch): every row's scale in the reciprocal path's range.
        fast = tl.min(_fast_range(scale).to(tl.int32), axis=0) == 1
        q = _divide(x, scale[:, None], tl.math.div_rn(1.0, scale)[:, None], fast, _EMULATE_ROUND)
        q8 = _to_e4m3(q, q_ptr.dtype.element_ty, _EMULATE_ROUND)
        tl.store(q_ptr + offs_m64[:, None] * stride_qm + offs_k[None, :], q8, mask=mask)
        tl.store(s_ptr + offs_m64 * stride_sm + group * stride_sg, scale, mask=m_mask & (group * GROUP < K))
