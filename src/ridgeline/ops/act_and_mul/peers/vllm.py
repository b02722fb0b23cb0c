"""vLLM peers (pip `vllm`): the CUDA activation kernels its SiluAndMul / GeluAndMul layers call, forward only.

    torch.ops._C.silu_and_mul(out, x)    torch.ops._C.gelu_and_mul(out, x)    torch.ops._C.gelu_tanh_and_mul(out, x)

each writing a fresh out of shape (..., d) as the layers' forward_cuda allocates it. `vllm._custom_ops` is imported
first: it loads the compiled extension that registers them. Nothing from vLLM is imported until asked for.
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
NAMES = {"none": "gelu_and_mul", "tanh": "gelu_tanh_and_mul"}


def _missing_compiled_ops(names: tuple[str, ...]) -> list[str]:
    """Names not registered under torch.ops._C (vllm._custom_ops imports even when its extension failed to load)."""
    return [n for n in names if not hasattr(torch.ops._C, n)]


def _ops(*names: str) -> list[Any]:
    _PKG.import_module(OPS_MODULE)
    missing = _missing_compiled_ops(names)
    if missing:
        hint = "" if torch.cuda.is_available() else "; no CUDA on this machine, which vLLM's CUDA build needs"
        raise Unavailable(f"{PIP} {_PKG.version()} is installed but its compiled ops are not loaded "
                          f"(torch.ops._C.{missing[0]} missing){hint}")
    return [getattr(torch.ops._C, n) for n in names]


def _new_out(x: torch.Tensor) -> torch.Tensor:
    return torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=x.dtype, device=x.device)


def _silu() -> Callable[..., Any]:
    (op,) = _ops("silu_and_mul")

    def silu(x: torch.Tensor) -> torch.Tensor:
        out = _new_out(x)
        op(out, x)
        return out

    return silu


def _gelu() -> Callable[..., Any]:
    ops = dict(zip(NAMES, _ops(*NAMES.values())))

    def gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
        out = _new_out(x)
        ops[approximate](out, x)
        return out

    return gelu


register_impl("silu_and_mul", "vllm", "peer", _silu, description="vLLM CUDA torch.ops._C.silu_and_mul(out, x)")
register_impl("gelu_and_mul", "vllm", "peer", _gelu,
              description="vLLM CUDA torch.ops._C.gelu_and_mul / gelu_tanh_and_mul(out, x)")
