"""Liger-Kernel peers (pip `liger-kernel`, 0.8.5): its Triton RoPE in Hugging Face's layout, forward and backward.

    liger_kernel.ops.rope.LigerRopeFunction.apply(q, k, cos, sin)   -> (q_out, k_out)   (what Liger's HF patch calls)
    liger_kernel.ops.rope.rope_backward(dq, dk, cos, sin)           -> (dq_in, dk_in)   (its Function's backward)

Liger works on the physical [B, S, H, D] layout: it transposes q back, makes it contiguous (a no-op for HF's
transposed projections) and rotates that buffer in place, so with HF's layout the caller's q and k (and dq, dk)
are overwritten: both are registered with mutates=(...) so the harness hands them private copies. It reads only
the first half of each cos/sin row (HF's halves are equal). Nothing from Liger is imported until asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "liger-kernel"
_PKG = OptionalPackage(PIP)
ROPE_MODULE = "liger_kernel.ops.rope"


def _forward() -> Callable[..., Any]:
    fn = getattr(_PKG.import_module(ROPE_MODULE), "LigerRopeFunction", None)
    if fn is None or not callable(getattr(fn, "apply", None)):
        raise Unavailable(f"{PIP} {_PKG.version()}: {ROPE_MODULE} has no LigerRopeFunction")

    def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        q_out, k_out = fn.apply(q, k, cos, sin)
        return q_out, k_out

    return rope


def _backward() -> Callable[..., Any]:
    backward = _PKG.function(_PKG.import_module(ROPE_MODULE), "rope_backward", 4)

    def rope_bwd(dq: torch.Tensor, dk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        dq_in, dk_in = backward(dq, dk, cos, sin)
        return dq_in, dk_in

    return rope_bwd


register_impl("rotary_train", "liger", "peer", _forward, mutates=("q", "k"),
              description="Liger-Kernel Triton RoPE (LigerRopeFunction.apply), in place on HF's [B, S, H, D] buffers")
register_impl("rotary_train_bwd", "liger", "peer", _backward, mutates=("dq", "dk"),
              description="Liger-Kernel's RoPE backward (liger_kernel.ops.rope.rope_backward), in place like it")
