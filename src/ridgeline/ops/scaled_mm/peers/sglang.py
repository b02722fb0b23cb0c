"""sglang peers (pip `sglang`): its Triton kernels for DeepSeek-style block FP8, as its FP8 linear layers call them:

    sglang.srt.layers.quantization.fp8_kernel.w8a8_block_fp8_matmul(A, B, As, Bs, block_size, output_dtype)
        A [M, K], B [N, K] (our layout), As [M, K/128], Bs [N/128, K/128], block_size [128, 128]
    sglang.srt.layers.quantization.fp8_kernel.per_token_group_quant_fp8(x, group_size) -> (x_fp8, scale)
Block scales only (a per-tensor or per-row case fails with the reason "unsupported").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "sglang"
_PKG = OptionalPackage(PIP)
MODULE = "sglang.srt.layers.quantization.fp8_kernel"


def _mm() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(MODULE), "w8a8_block_fp8_matmul", 6)
    from ridgeline.ops.scaled_mm.launch import scale_mode

    def mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None):
        if scale_mode(scale_a, scale_b, a.shape[0], b.shape[0], a.shape[1]) != "block" or bias is not None:
            raise ValueError("unsupported: sglang's w8a8_block_fp8_matmul takes block scales and no bias")
        return fn(a, b, scale_a, scale_b, [128, 128], out_dtype)

    return mm


def _per_group() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(MODULE), "per_token_group_quant_fp8", 2)
    return lambda x, group: tuple(fn(x, group))[:2]


register_impl("scaled_mm", "sglang", "peer", _mm, description="sglang Triton block-FP8 GEMM (w8a8_block_fp8_matmul)")
register_impl("quantize_fp8_per_group", "sglang", "peer", _per_group,
              description="sglang Triton per-token-group FP8 quantization")
