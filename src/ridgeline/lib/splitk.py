"""The ordered split-K reduction two GEMM packages share (int4_matmul's split programs, matmul's GEMV candidate):
fp32 partials [SPLITS, M, N] summed in split order (+ a bias), rounded once into y. Deterministic, no atomics, and a
row's bits depend on the split count only, never on M."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ridgeline.lib.fastlaunch import CachedLauncher

REDUCE_BLOCK = 1024  # outputs per program (4 KiB of fp32 partials a split)


@triton.jit
def _splitk_reduce_kernel(p_ptr, bias_ptr, y_ptr, numel, N, stride_ym, SPLITS: tl.constexpr, BLOCK: tl.constexpr,
                          HAS_BIAS: tl.constexpr):
    """y = sum over s (in order) of partials[s] (+ bias[n]): [SPLITS, M, N] fp32 -> [M, N] in y's dtype."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    total = tl.zeros([BLOCK], dtype=tl.float32)
    p = p_ptr + offs
    for _ in tl.static_range(SPLITS):
        total += tl.load(p, mask=mask, other=0.0)
        p += numel  # (a pointer step: s * numel in 32 bits would wrap past 2^31 partial elements)
    m = offs // N
    n = offs - m * N
    if HAS_BIAS:
        total += tl.load(bias_ptr + n, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + m * stride_ym + n, total.to(y_ptr.dtype.element_ty), mask=mask)


_LAUNCHER = CachedLauncher(_splitk_reduce_kernel)


def reduce_splits(partials: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    """y [M, N] (any row stride) = the ordered sum of contiguous fp32 `partials` [SPLITS, M, N] (+ `bias` [N])."""
    splits, m, n = partials.shape
    _LAUNCHER.launch(-(-(m * n) // REDUCE_BLOCK), (partials, bias if bias is not None else y, y, m * n, n, y.stride(0)),
                     {"SPLITS": splits, "BLOCK": REDUCE_BLOCK, "HAS_BIAS": bias is not None}, 4)
