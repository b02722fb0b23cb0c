"""FlashInfer peers (pip `flashinfer-python`): flashinfer.activation.silu_and_mul / gelu_and_mul /
gelu_tanh_and_mul(input) -> out, forward only, as SGLang's SiluAndMul.forward_cuda calls them. They refuse rows
that are not a multiple of 16 bytes (ValueError). Nothing from FlashInfer is imported until asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "flashinfer-python"
_PKG = OptionalPackage(PIP)
MODULE = "flashinfer.activation"
NAMES = {"none": "gelu_and_mul", "tanh": "gelu_tanh_and_mul"}


def _silu() -> Callable[..., Any]:
    return _PKG.function(_PKG.import_module(MODULE), "silu_and_mul", 1)


def _gelu() -> Callable[..., Any]:
    mod = _PKG.import_module(MODULE)
    fns = {k: _PKG.function(mod, name, 1) for k, name in NAMES.items()}

    def gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
        return fns[approximate](x)

    return gelu


register_impl("silu_and_mul", "flashinfer", "peer", _silu, description="FlashInfer CUDA silu_and_mul(x)")
register_impl("gelu_and_mul", "flashinfer", "peer", _gelu,
              description="FlashInfer CUDA gelu_and_mul / gelu_tanh_and_mul(x)")
