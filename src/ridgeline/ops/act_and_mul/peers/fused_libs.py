"""FlashInfer (pip `flashinfer-python`: flashinfer.activation) and SGLang (pip `sgl-kernel`: sgl_kernel) peers: each
has silu_and_mul / gelu_and_mul / gelu_tanh_and_mul(input) -> out, forward only, its CUDA kernels (SGLang's
SiluAndMul.forward_cuda calls FlashInfer's). They refuse rows that are not a multiple of 16 bytes (ValueError).
Nothing is imported until an implementation is asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

GELU_NAMES = {"none": "gelu_and_mul", "tanh": "gelu_tanh_and_mul"}
# peer name -> (pip package, module holding the functions, label in descriptions)
LIBRARIES = {"flashinfer": ("flashinfer-python", "flashinfer.activation", "FlashInfer"),
             "sglang": ("sgl-kernel", "sgl_kernel", "sgl-kernel")}


def _register(peer: str, pip: str, module: str, label: str) -> None:
    pkg = OptionalPackage(pip)

    def silu() -> Callable[..., Any]:
        return pkg.function(pkg.import_module(module), "silu_and_mul", 1)

    def gelu() -> Callable[..., Any]:
        mod = pkg.import_module(module)
        fns = {k: pkg.function(mod, name, 1) for k, name in GELU_NAMES.items()}

        def call(x: torch.Tensor, approximate: str) -> torch.Tensor:
            return fns[approximate](x)

        return call

    register_impl("silu_and_mul", peer, "peer", silu, description=f"{label} CUDA silu_and_mul(x)")
    register_impl("gelu_and_mul", peer, "peer", gelu, description=f"{label} CUDA gelu_and_mul / gelu_tanh_and_mul(x)")


for _peer, (_pip, _module, _label) in LIBRARIES.items():
    _register(_peer, _pip, _module, _label)
