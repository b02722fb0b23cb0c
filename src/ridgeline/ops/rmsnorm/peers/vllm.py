"""vLLM peers (pip `vllm`): the CUDA RMSNorm kernels behind vllm._custom_ops.

    rms_norm(out, input, weight, epsilon) -> None              writes `out`
    fused_add_rms_norm(input, residual, weight, epsilon) -> None
                                                               residual <- input + residual, input <- normed

The fused one works in place, so it is registered with mutates=("x", "residual") and returns those two
tensors as (out, residual_out). Nothing from vLLM is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "vllm"
_PKG = OptionalPackage(PIP)
_version = _PKG.version
_import = _PKG.import_module
_function = _PKG.function
OPS_MODULE = "vllm._custom_ops"


def _missing_compiled_ops(names: tuple[str, ...]) -> list[str]:
    """Names not registered under torch.ops._C.

    vllm._custom_ops still imports when vLLM's compiled extension failed to load (it only logs a warning), and
    its wrappers then fail on first call; looking the ops up now lets us say why instead.
    """
    return [n for n in names if not hasattr(torch.ops._C, n)]


def _ops(name: str, n_positional: int) -> Callable[..., Any]:
    fn = _function(_import(OPS_MODULE), name, n_positional)
    missing = _missing_compiled_ops((name,))
    if missing:
        hint = "" if torch.cuda.is_available() else "; no CUDA on this machine, which vLLM's CUDA build needs"
        raise Unavailable(f"{PIP} {_version()} is installed but its compiled ops are not loaded "
                          f"(torch.ops._C.{missing[0]} missing){hint}")
    return fn


def _rms() -> Callable[..., Any]:
    rms_norm = _ops("rms_norm", 4)

    def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        # The kernel writes rows densely and checks that `out` is contiguous, whatever x's row stride.
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        rms_norm(out, x, weight, eps)
        return out

    return rms


def _fused() -> Callable[..., Any]:
    fused_add_rms_norm = _ops("fused_add_rms_norm", 4)

    def fused(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        fused_add_rms_norm(x, residual, weight, eps)
        return x, residual

    return fused


register_impl("rmsnorm", "vllm", "peer", _rms,
              description="vLLM CUDA RMSNorm (vllm._custom_ops.rms_norm into a fresh contiguous out)")
register_impl("fused_add_rmsnorm", "vllm", "peer", _fused, mutates=("x", "residual"),
              description="vLLM CUDA fused add + RMSNorm (vllm._custom_ops.fused_add_rms_norm), in place: "
                          "residual <- x + residual, x <- out")
