"""Liger-Kernel peers (pip `liger-kernel`): its Triton SwiGLU and GeGLU.

SiLU: `LigerFusedGateUpSiLUMulFunction.apply(x)` on x = [gate, up] (0.8.5; no copies, as its Megatron integration
calls it) and its backward entry point `swiglu_fused_gate_up_backward(x, dy)`; a Liger without them falls back to
`LigerSiLUMulFunction.apply(gate, up)` / `swiglu_backward(gate, up, dy)` on the halves (copied: Liger makes its
inputs contiguous, and its backward overwrites them with the gradients).
GELU: only the tanh form exists (`LigerGELUMulFunction.apply(gate, up)`, `geglu_backward(gate, up, dy)`), for two
tensors: on x = [gate, up] the halves are copied (what calling it on this layout costs); approximate="none" raises.
Nothing from Liger is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "liger-kernel"
_PKG = OptionalPackage(PIP)
# The submodules, not `liger_kernel.ops`: the package may swap in another backend's classes.
SWIGLU = "liger_kernel.ops.swiglu"
GEGLU = "liger_kernel.ops.geglu"


def _attr(module: str, name: str) -> Any:
    value = getattr(_PKG.import_module(module), name, None)
    if value is None:
        raise Unavailable(f"{PIP} {_PKG.version()}: {module} has no {name}")
    return value


def _halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Private contiguous copies of gate and up (Liger's backward writes its gradients into them)."""
    d = x.shape[-1] // 2
    return (x[..., :d].clone(memory_format=torch.contiguous_format),
            x[..., d:].clone(memory_format=torch.contiguous_format))


def _tanh_only(approximate: str) -> None:
    if approximate != "tanh":
        raise NotImplementedError(f"{PIP} {_PKG.version()} has only the tanh GELU (LigerGELUMulFunction); "
                                  f"got approximate={approximate!r}")


def _silu() -> Callable[..., Any]:
    mod = _PKG.import_module(SWIGLU)
    fused = getattr(mod, "LigerFusedGateUpSiLUMulFunction", None)
    if fused is not None:
        return lambda x: fused.apply(x)
    pair = _attr(SWIGLU, "LigerSiLUMulFunction")
    return lambda x: pair.apply(*_halves(x))


def _silu_bwd() -> Callable[..., Any]:
    mod = _PKG.import_module(SWIGLU)
    fused = getattr(mod, "swiglu_fused_gate_up_backward", None)
    if fused is not None:
        # (Its autograd Function hands it contiguous tensors; it writes dx with x's row stride.)
        return lambda dy, x: fused(x.contiguous(), dy.contiguous())
    pair = _attr(SWIGLU, "swiglu_backward")

    def bwd(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        da, db = pair(*_halves(x), dy.contiguous())
        return torch.cat([da, db], dim=-1)

    return bwd


def _gelu() -> Callable[..., Any]:
    fn = _attr(GEGLU, "LigerGELUMulFunction")

    def gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
        _tanh_only(approximate)
        d = x.shape[-1] // 2
        return fn.apply(x[..., :d], x[..., d:])  # (Liger copies the non-contiguous halves itself)

    return gelu


def _gelu_bwd() -> Callable[..., Any]:
    fn = _attr(GEGLU, "geglu_backward")

    def bwd(dy: torch.Tensor, x: torch.Tensor, approximate: str) -> torch.Tensor:
        _tanh_only(approximate)
        da, db = fn(*_halves(x), dy.contiguous())
        return torch.cat([da, db], dim=-1)

    return bwd


register_impl("silu_and_mul", "liger", "peer", _silu,
              description="Liger-Kernel LigerFusedGateUpSiLUMulFunction on x = [gate, up]")
register_impl("silu_and_mul_bwd", "liger", "peer", _silu_bwd,
              description="Liger-Kernel swiglu_fused_gate_up_backward(x, dy) (silu recomputed)")
register_impl("gelu_and_mul", "liger", "peer", _gelu,
              description="Liger-Kernel LigerGELUMulFunction(gate, up), tanh GELU only, halves copied")
register_impl("gelu_and_mul_bwd", "liger", "peer", _gelu_bwd,
              description="Liger-Kernel geglu_backward(gate, up, dy), tanh GELU only, halves copied")
