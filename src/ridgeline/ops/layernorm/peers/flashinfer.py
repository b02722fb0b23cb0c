"""FlashInfer peer (pip `flashinfer-python`): its forward-only LayerNorm.

    flashinfer.norm.layernorm(input, gemma, beta, eps=1e-6) -> out

FlashInfer documents bfloat16 input with float32 gamma and beta (the contract's "w-fp32" variant of bf16); other dtypes
are passed as given and FlashInfer answers for itself. It has no backward. QuACK's layernorm (quack.layernorm) has no
bias (weight float32 only) and vLLM / SGLang ship no LayerNorm of this meaning, so they have no adapter here.
Nothing from FlashInfer is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "flashinfer-python"
_PKG = OptionalPackage(PIP)
NORM_MODULE = "flashinfer.norm"


def _fwd() -> Callable[..., Any]:
    layernorm = _PKG.function(_PKG.import_module(NORM_MODULE), "layernorm", 3, ("eps",))

    def fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        return layernorm(x, weight, bias, eps=eps)

    return fwd


register_impl("layernorm", "flashinfer", "peer", _fwd,
              description="FlashInfer LayerNorm (flashinfer.norm.layernorm; bf16 x, fp32 gamma/beta)")
