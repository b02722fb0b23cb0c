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


# --- backward contracts (spec_bwd.py): Liger's backward helpers, called as its autograd Functions call them ------
UTILS_MODULE = "liger_kernel.ops.utils"
FUSED_NUM_STAGES = 2  # what fused_add_rms_norm_forward hands its backward


def _helpers(module: str, name: str, n_args: int) -> tuple[Any, Any, int]:
    """(the backward helper, calculate_settings, the integer of casting mode 'llama')."""
    mod = _import(module)
    fn = _PKG.function(mod, name, n_args)
    settings = _PKG.function(_import(UTILS_MODULE), "calculate_settings", 1)
    modes = getattr(_import(RMS_MODULE), "_str_to_casting_mode", None)
    if not isinstance(modes, dict) or CASTING_MODE not in modes:
        raise Unavailable(f"{PIP} {_version()}: {RMS_MODULE} has no casting mode table (_str_to_casting_mode)")
    return fn, settings, modes[CASTING_MODE]


def _rms_bwd() -> Callable[..., Any]:
    # rms_norm_backward(dY, X, W, RSTD, offset, casting_mode, BLOCK_SIZE, num_warps, in_place, row_mode)
    helper, settings, mode = _helpers(RMS_MODULE, "rms_norm_backward", 10)

    def bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor):
        n = x.shape[-1]
        block, warps = settings(n)
        # As LigerRMSNormFunction.backward (its defaults: in_place=True, row_mode=None) on the contiguous rows its
        # forward saved: dx is written into dy.
        dx, dw = helper(dy.contiguous(), x.contiguous().view(-1, n), weight, rstd.contiguous().view(-1), OFFSET, mode,
                        block, warps, True, None)
        return dx.view(x.shape), dw

    return bwd


def _fused_bwd() -> Callable[..., Any]:
    # fused_add_rms_norm_backward(dY, dS_out, S, W, RSTD, offset, casting_mode, BLOCK_SIZE, num_warps, num_stages,
    # in_place)
    helper, settings, mode = _helpers(FUSED_MODULE, "fused_add_rms_norm_backward", 11)

    def bwd(dy: torch.Tensor, dresidual_out: torch.Tensor, residual_out: torch.Tensor, weight: torch.Tensor,
            rstd: torch.Tensor):
        n = residual_out.shape[-1]
        block, warps = settings(n)
        # As LigerFusedAddRMSNormFunction.backward (its default in_place=False).
        dx, _dr, dw = helper(dy.contiguous(), dresidual_out.contiguous(), residual_out.contiguous(), weight,
                             rstd.contiguous().view(-1), OFFSET, mode, block, warps, FUSED_NUM_STAGES, False)
        return dx.view(residual_out.shape), dw

    return bwd


register_impl("rmsnorm_bwd", "liger", "peer", _rms_bwd, mutates=("dy",),
              description="Liger-Kernel rms_norm_backward (casting_mode='llama', in_place=True as "
                          "LigerRMSNormFunction: dx written into dy)")
register_impl("fused_add_rmsnorm_bwd", "liger", "peer", _fused_bwd,
              description="Liger-Kernel fused_add_rms_norm_backward (casting_mode='llama', in_place=False)")
