"""Stand-in for liger-kernel: LigerRMSNormFunction and LigerFusedAddRMSNormFunction (forward only)."""

from __future__ import annotations

import types
from typing import Any

import torch

from stand_ins import module
from stand_ins._math import rms_llama

# (function, offset, casting_mode) of every forward call, so tests can see how the adapter called it.
CALLS: list[tuple[str, float, str]] = []


def _check_mode(casting_mode: str) -> None:
    if casting_mode != "llama":
        raise NotImplementedError(f"stand-in implements casting_mode='llama' only, got {casting_mode!r}")


class LigerRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None):
        CALLS.append(("rms_norm", offset, casting_mode))
        _check_mode(casting_mode)
        return rms_llama(X, W + offset, eps)

    @staticmethod
    def backward(ctx: Any, dY):
        raise NotImplementedError("stand-in: forward only")


class LigerFusedAddRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, X, R, W, eps, offset=0.0, casting_mode="llama", in_place=False):
        CALLS.append(("fused_add_rms_norm", offset, casting_mode))
        _check_mode(casting_mode)
        S = X + R  # fresh tensors, as Liger allocates Y and S
        return rms_llama(S, W + offset, eps), S

    @staticmethod
    def backward(ctx: Any, dY, dS):
        raise NotImplementedError("stand-in: forward only")


class _ThreeArgRMSNormFunction(torch.autograd.Function):
    """A forward without offset / casting_mode: not the API the adapter was written for."""

    @staticmethod
    def forward(ctx: Any, X, W, eps):
        return rms_llama(X, W, eps)

    @staticmethod
    def backward(ctx: Any, dY):
        raise NotImplementedError


def build(*, fused: bool = True, old_rms_signature: bool = False) -> dict[str, types.ModuleType]:
    rms_cls = _ThreeArgRMSNormFunction if old_rms_signature else LigerRMSNormFunction
    mods = {
        "liger_kernel": module("liger_kernel", package=True),
        "liger_kernel.ops": module("liger_kernel.ops", package=True, LigerRMSNormFunction=rms_cls),
        "liger_kernel.ops.rms_norm": module("liger_kernel.ops.rms_norm", LigerRMSNormFunction=rms_cls),
    }
    if fused:
        mods["liger_kernel.ops.fused_add_rms_norm"] = module(
            "liger_kernel.ops.fused_add_rms_norm", LigerFusedAddRMSNormFunction=LigerFusedAddRMSNormFunction
        )
    return mods
