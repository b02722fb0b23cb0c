"""QuACK peers (pip `quack-kernels`, module `quack`): the CuTe-DSL softmax of Dao-AILab/quack (quack/softmax.py).

    quack.softmax.softmax_fwd(x) -> y             x of shape (M, N), fp32/fp16/bf16
    quack.softmax.softmax_bwd(dy, y) -> dx        (what its SoftmaxFunction.backward calls)

Both take 2-D inputs only: a user with more leading dims flattens them into rows, and so does the adapter (a
view, no copy, where the rows allow). Nothing from QuACK is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "quack-kernels"
_PKG = OptionalPackage(PIP)
# Imported by module name: `quack/__init__.py` does `from quack.softmax import softmax`, so the attribute
# `quack.softmax` is the function, not the module.
SOFTMAX_MODULE = "quack.softmax"


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 2 else t.reshape(-1, t.shape[-1])


def _fwd() -> Callable[..., Any]:
    fwd = _PKG.function(_PKG.import_module(SOFTMAX_MODULE), "softmax_fwd", 1)

    def softmax(x: torch.Tensor) -> torch.Tensor:
        return fwd(_rows(x)).view(x.shape)

    return softmax


def _bwd() -> Callable[..., Any]:
    bwd = _PKG.function(_PKG.import_module(SOFTMAX_MODULE), "softmax_bwd", 2)

    def softmax_bwd(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        return bwd(_rows(dy), _rows(y)).view(y.shape)

    return softmax_bwd


register_impl("softmax", "quack", "peer", _fwd, description="QuACK CuTe-DSL softmax (quack.softmax.softmax_fwd)")
register_impl("softmax_bwd", "quack", "peer", _bwd,
              description="QuACK CuTe-DSL softmax backward (quack.softmax.softmax_bwd(dy, y))")
