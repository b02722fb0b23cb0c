"""vLLM peers (pip `vllm`), called the way its FP8 linear layers call them:

    vllm._custom_ops.cutlass_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias=None) -> y
        b is [K, N] column-major (ours is b [N, K], so b.t()); per-tensor or per-row scales (scale_a [M, 1],
        scale_b with N elements), or DeepSeek block scales as vLLM's block path passes them: scale_a [M, K/128],
        scale_b transposed ([K/128, N/128] view of our [N/128, K/128]).
    vllm._custom_ops.scaled_fp8_quant(x, scale=None, use_per_token_if_dynamic=True) -> (x_fp8, scale [M, 1])
    vllm.model_executor.layers.quantization.utils.fp8_utils.per_token_group_quant_fp8(x, group_size)
        -> (x_fp8, scale [M, K / group_size])
Nothing from vLLM is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "vllm"
_PKG = OptionalPackage(PIP)
OPS_MODULE = "vllm._custom_ops"
FP8_UTILS = "vllm.model_executor.layers.quantization.utils.fp8_utils"


def _compiled_op(name: str) -> None:
    # vllm._custom_ops imports even when the compiled extension did not load; its wrappers then fail on first call.
    if not hasattr(torch.ops._C, name):
        raise Unavailable(f"{PIP} {_PKG.version()} is installed but torch.ops._C.{name} is not loaded")


def _mm() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(OPS_MODULE), "cutlass_scaled_mm", 5)
    _compiled_op("cutlass_scaled_mm")
    from ridgeline.ops.scaled_mm.launch import scale_mode

    def mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None):
        mode = scale_mode(scale_a, scale_b, a.shape[0], b.shape[0], a.shape[1])
        if mode == "tensor":
            sa, sb = scale_a.reshape(1), scale_b.reshape(1)
        elif mode == "row":
            sa, sb = scale_a.reshape(-1, 1), scale_b.reshape(-1, 1)
        else:
            sa, sb = scale_a, scale_b.t()
        return fn(a, b.t(), sa, sb, out_dtype, bias)

    return mm


def _per_token() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(OPS_MODULE), "scaled_fp8_quant", 1, ("use_per_token_if_dynamic",))
    _compiled_op("dynamic_per_token_scaled_fp8_quant")
    return lambda x: tuple(fn(x, use_per_token_if_dynamic=True))


def _per_group() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(FP8_UTILS), "per_token_group_quant_fp8", 2)
    return lambda x, group: tuple(fn(x, group))


register_impl("scaled_mm", "vllm", "peer", _mm,
              description="vLLM CUTLASS FP8 GEMM (vllm._custom_ops.cutlass_scaled_mm)")
register_impl("quantize_fp8_per_token", "vllm", "peer", _per_token,
              description="vLLM dynamic per-token FP8 quantization (scaled_fp8_quant)")
register_impl("quantize_fp8_per_group", "vllm", "peer", _per_group,
              description="vLLM per-token-group FP8 quantization (fp8_utils.per_token_group_quant_fp8)")
