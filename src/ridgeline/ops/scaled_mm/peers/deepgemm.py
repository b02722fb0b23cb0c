"""DeepGEMM peer (pip `deep_gemm`, built from DeepSeek's repository): the block-scaled FP8 GEMM with bf16 output.

    deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), out)              (newer releases)
    deep_gemm.gemm_fp8_fp8_bf16_nt((a, sfa), (b, sfb), out)     (the first releases)
a [M, K], b [N, K] (our layout, "nt"), sfa [M, K/128] fp32 (the first releases want it column-major and TMA-aligned:
`deep_gemm.get_col_major_tma_aligned_tensor`), sfb [N/128, K/128], out [M, N] bf16. Block scales, bf16 output and no
bias only: other cases fail with the reason "unsupported".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "deep_gemm"
_PKG = OptionalPackage(PIP)


def _mm() -> Callable[..., Any]:
    dg = _PKG.import_module("deep_gemm")
    gemm = getattr(dg, "fp8_gemm_nt", None) or getattr(dg, "gemm_fp8_fp8_bf16_nt", None)
    if gemm is None:
        raise Unavailable(f"{PIP} {_PKG.version()} has neither fp8_gemm_nt nor gemm_fp8_fp8_bf16_nt")
    align = getattr(dg, "get_col_major_tma_aligned_tensor", None) if not hasattr(dg, "fp8_gemm_nt") else None
    from ridgeline.ops.scaled_mm.launch import scale_mode

    def mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None):
        if scale_mode(scale_a, scale_b, a.shape[0], b.shape[0], a.shape[1]) != "block" or bias is not None \
                or out_dtype != torch.bfloat16:
            raise ValueError("unsupported: DeepGEMM takes block scales, a bf16 output and no bias")
        out = torch.empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16, device=a.device)
        gemm((a, align(scale_a) if align else scale_a), (b, scale_b), out)
        return out

    return mm


register_impl("scaled_mm", "deepgemm", "peer", _mm, description="DeepGEMM block-scaled FP8 GEMM (bf16 out)")
