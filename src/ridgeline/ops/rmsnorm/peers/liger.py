"""Liger-Kernel peers (pip `liger-kernel`): its Triton RMSNorm and fused add + RMSNorm autograd functions.

Both are called the way Liger's Hugging Face patch calls them: casting_mode "llama" (only the inverse RMS in
fp32, the weight multiply in the input dtype, as LlamaRMSNorm does) and offset 0 (the weight used as is, not
1 + weight as Gemma does). Nothing from Liger is imported until an implementation is asked for.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "liger-kernel"
_PKG = OptionalPackage(PIP)
_version = _PKG.version
_import = _PKG.import_module
# The submodules, not the `liger_kernel.ops` package: the package swaps in another backend's classes when
# LIGER_KERNEL_IMPL says so, the submodules always hold the Triton kernels we mean to measure.
RMS_MODULE = "liger_kernel.ops.rms_norm"
FUSED_MODULE = "liger_kernel.ops.fused_add_rms_norm"
CASTING_MODE = "llama"
OFFSET = 0.0


def _function_class(module: str, cls_name: str, n_args: int) -> Any:
    """`module.cls_name`, an autograd Function whose forward takes at least `n_args` positional arguments."""
    cls = getattr(_import(module), cls_name, None)
    if cls is None or not callable(getattr(cls, "apply", None)):
        raise Unavailable(f"{PIP} {_version()}: {module} has no {cls_name}")
    try:
        params = list(inspect.signature(cls.forward).parameters.values())
    except (TypeError, ValueError):  # nothing to inspect: the call itself will tell
        return cls
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return cls
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) - 1 < n_args:  # minus ctx
        sig = inspect.signature(cls.forward)
        raise Unavailable(f"{PIP} {_version()}: {cls_name}.forward{sig} takes fewer than {n_args} arguments "
                          "after ctx; expected (X, W, ..., eps, offset, casting_mode)")
    return cls


def _rms() -> Callable[..., Any]:
    fn = _function_class(RMS_MODULE, "LigerRMSNormFunction", 5)  # X, W, eps, offset, casting_mode

    def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return fn.apply(x, weight, eps, OFFSET, CASTING_MODE)

    return rms


def _fused() -> Callable[..., Any]:
    # Older releases ship no fused add + RMSNorm; say so rather than stand in an unfused pair.
    fn = _function_class(FUSED_MODULE, "LigerFusedAddRMSNormFunction", 6)  # X, R, W, eps, offset, mode

    def fused(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out, residual_out = fn.apply(x, residual, weight, eps, OFFSET, CASTING_MODE)
        return out, residual_out

    return fused


register_impl("rmsnorm", "liger", "peer", _rms,
              description="Liger-Kernel Triton RMSNorm (LigerRMSNormFunction, casting_mode='llama', "
                          "offset 0)")
register_impl("fused_add_rmsnorm", "liger", "peer", _fused,
              description="Liger-Kernel Triton fused add + RMSNorm (LigerFusedAddRMSNormFunction, "
                          "casting_mode='llama', offset 0); writes fresh out and residual_out")
