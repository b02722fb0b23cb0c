"""Liger-Kernel peers (pip `liger-kernel`): its Triton softmax (liger_kernel.ops.softmax).

    LigerSoftmaxFunction.apply(x) -> y            (the autograd Function its Hugging Face patches use)
    _softmax_backward(dy, y, BLOCK_SIZE, num_warps, multi_block_launch) -> dx
                                                  (what LigerSoftmaxFunction.backward calls, with the forward's
                                                   launch settings: calculate_settings(n) from liger_kernel.ops.utils)

Its forward holds a whole row in one block: rows wider than 65536 columns are refused by calculate_settings
("exceeds the recommended Triton blocksize"), which the harness records as a failure of that case. Nothing from
Liger is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "liger-kernel"
_PKG = OptionalPackage(PIP)
# The submodule, not `liger_kernel.ops`: the package may swap in another backend's classes (LIGER_KERNEL_IMPL).
SOFTMAX_MODULE = "liger_kernel.ops.softmax"
UTILS_MODULE = "liger_kernel.ops.utils"


def _fwd() -> Callable[..., Any]:
    cls = getattr(_PKG.import_module(SOFTMAX_MODULE), "LigerSoftmaxFunction", None)
    if cls is None or not callable(getattr(cls, "apply", None)):
        raise Unavailable(f"{PIP} {_PKG.version()}: {SOFTMAX_MODULE} has no LigerSoftmaxFunction")

    def softmax(x: torch.Tensor) -> torch.Tensor:
        return cls.apply(x)

    return softmax


def _bwd() -> Callable[..., Any]:
    backward = _PKG.function(_PKG.import_module(SOFTMAX_MODULE), "_softmax_backward", 5)
    settings = _PKG.function(_PKG.import_module(UTILS_MODULE), "calculate_settings", 1)

    def softmax_bwd(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        n = y.shape[-1]
        block, warps = settings(n)
        # (As its forward decides: one block whenever the row fits it, which calculate_settings guarantees.)
        return backward(dy, y, block, warps, n > block)

    return softmax_bwd


register_impl("softmax", "liger", "peer", _fwd,
              description="Liger-Kernel Triton softmax (LigerSoftmaxFunction.apply)")
register_impl("softmax_bwd", "liger", "peer", _bwd,
              description="Liger-Kernel Triton softmax backward (liger_kernel.ops.softmax._softmax_backward with "
                          "calculate_settings(n), as LigerSoftmaxFunction.backward calls it)")
