"""The GEMM kernel: y[M, N] = x[M, K] @ B[K, N] (+ bias), fp32 accumulation in tl.dot (wgmma on Hopper).

One body, two launch shapes: PERSISTENT (grid = SMs, each program walks tiles tile_id = pid, pid + NUM_PROGS, ...)
or one tile per program (grid = tiles). Tiles are taken in grouped order (GROUP_M bands of rows share a column
band of B, which stays in L2). Operands come through device-side tensor descriptors (TMA) when TMA is set: x as
[M, K] (A_KM = 0) or, for a transposed view (the backward's dy^T), as its storage [K, M]; B as w [N, K] (B_KN = 0,
nn.Linear) or b [K, N]. Without TMA, pointer loads with masks take any strides. Offsets are 64-bit.

The interpreter's tl.dot on bf16 is wrong (raw 16-bit integers): UPCAST (set only there) widens the tiles to fp32.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    width = GROUP_M * num_pid_n
    group = tile_id // width
    first_m = group * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % width) % size_m
    pid_n = (tile_id % width) // size_m
    return pid_m, pid_n


# M keeps Triton's specialization (M == 1 compiled apart). Leaving it unspecialized (do_not_specialize, tried after
# the audit had M = 1 at 17.5 us against 12.1 for M = 2..4 on one tile) made M = 1 slower still on the H200: 20.4
# against 17.2 us at 1x4096x4096, 62.2 against 48.5 at 1x4096x14336, 78.2 against 69.0 at 1x10240x8192 (s22 sweep,
# 1acdefc, beside the s15 record), and M = 16-128 no faster. launch.py runs a single row as two aliasing it instead,
# so the M == 1 code is never compiled (11.6 us at 1x4096x4096).
@triton.jit
def gemm_kernel(
    x_ptr, b_ptr, bias_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_bk, stride_bn, stride_ym,
    NUM_PROGS,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr, TMA: tl.constexpr, A_KM: tl.constexpr, B_KN: tl.constexpr,
    HAS_BIAS: tl.constexpr, UPCAST: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    if TMA:
        if A_KM:
            a_desc = tl.make_tensor_descriptor(x_ptr, shape=[K, M], strides=[stride_xk, 1],
                                               block_shape=[BLOCK_K, BLOCK_M])
        else:
            a_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[stride_xm, 1],
                                               block_shape=[BLOCK_M, BLOCK_K])
        if B_KN:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                               block_shape=[BLOCK_K, BLOCK_N])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                               block_shape=[BLOCK_N, BLOCK_K])
    for tile_id in tl.range(pid, num_tiles, NUM_PROGS):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        rm64 = rm.to(tl.int64)
        rn64 = rn.to(tl.int64)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in tl.range(0, k_tiles, num_stages=NUM_STAGES):
            off_k = kt * BLOCK_K
            if TMA:
                if A_KM:
                    a = a_desc.load([off_k, off_m]).T
                else:
                    a = a_desc.load([off_m, off_k])
                if B_KN:
                    b = b_desc.load([off_k, off_n])
                else:
                    b = b_desc.load([off_n, off_k]).T
            else:
                rk64 = (off_k + tl.arange(0, BLOCK_K)).to(tl.int64)
                a = tl.load(x_ptr + rm64[:, None] * stride_xm + rk64[None, :] * stride_xk,
                            mask=(rm[:, None] < M) & (rk64[None, :] < K), other=0.0)
                b = tl.load(b_ptr + rk64[:, None] * stride_bk + rn64[None, :] * stride_bn,
                            mask=(rk64[:, None] < K) & (rn[None, :] < N), other=0.0)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        if HAS_BIAS:
            acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        tl.store(y_ptr + rm64[:, None] * stride_ym + rn64[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))
