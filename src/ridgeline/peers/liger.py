"""Liger-Kernel peers (pip `liger-kernel`): its Triton RMSNorm and fused add + RMSNorm autograd functions.

Both are called the way Liger's Hugging Face patch calls them: casting_mode "llama" (only the inverse RMS in
fp32, the weight multiply in the input dtype, as LlamaRMSNorm does) and offset 0 (the weight used as is, not
1 + weight as Gemma does). Nothing from Liger is imported until an implementation is asked for.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from ridgeline.registry import Unavailable, register_impl

PIP = "liger-kernel"
# The submodules, not the `liger_kernel.ops` package: the package swaps in another backend's classes when
# LIGER_KERNEL_IMPL says so, the submodules always hold the Triton kernels we mean to measure.
RMS_MODULE = "liger_kernel.ops.rms_norm"
FUSED_MODULE = "liger_kernel.ops.fused_add_rms_norm"
CASTING_MODE = "llama"
OFFSET = 0.0


def _version() -> str:
    try:
        return importlib.metadata.version(PIP)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def _broken(module: str, e: BaseException) -> str:
    detail = (str(e).splitlines() or [""])[0][:200]
    hint = "" if torch.cuda.is_available() else " (this machine has no CUDA, which it may need)"
    return f"{PIP} is installed but `import {module}` failed: {type(e).__name__}: {detail}{hint}"


def _import(module: str) -> ModuleType:
    """Import `module`, turning every failure into Unavailable with the reason."""
    top = module.partition(".")[0]
    for name in (top, module):
        try:
            loaded = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == top:
                raise Unavailable(f"{PIP} not installed") from None
            if e.name and (name == e.name or name.startswith(e.name + ".")):
                raise Unavailable(f"{PIP} {_version()} has no module {e.name}") from None
            raise Unavailable(_broken(name, e)) from None
        except Exception as e:  # a build for another platform fails in its own ways (OSError, RuntimeError)
            raise Unavailable(_broken(name, e)) from None
    return loaded


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
