"""PyTorch peers: eager PyTorch as the reference layers write it, and torch.compile of the same functions.

Forward: vLLM's SiluAndMul.forward_native / Hugging Face's act_fn(gate) * up on x = [gate, up].
Backward: the kernels eager autograd runs for that expression (aten.silu_backward / aten.gelu_backward of dy * up,
and dy * act(gate)), the activation recomputed from x as the contract says, concatenated into dx.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ridgeline.core.registry import register_impl

# Every benchmarked shape is its own static graph; the default recompile limit (8) would silently fall back
# to eager after a few shapes and make torch.compile look slow.
COMPILE_RECOMPILE_LIMIT = 512


def eager_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def eager_gelu_and_mul(x: torch.Tensor, approximate: str) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d], approximate=approximate) * x[..., d:]


def eager_silu_and_mul_bwd(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    gate, up = x[..., :d], x[..., d:]
    return torch.cat([torch.ops.aten.silu_backward(dy * up, gate), dy * F.silu(gate)], dim=-1)


def eager_gelu_and_mul_bwd(dy: torch.Tensor, x: torch.Tensor, approximate: str) -> torch.Tensor:
    d = x.shape[-1] // 2
    gate, up = x[..., :d], x[..., d:]
    dgate = torch.ops.aten.gelu_backward(dy * up, gate, approximate=approximate)
    return torch.cat([dgate, dy * F.gelu(gate, approximate=approximate)], dim=-1)


def _compiled(fn: Callable[..., Any]) -> Callable[[], Callable[..., Any]]:
    def factory() -> Callable[..., Any]:
        dynamo_config = torch._dynamo.config
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo_config, knob):
                setattr(dynamo_config, knob, max(getattr(dynamo_config, knob), COMPILE_RECOMPILE_LIMIT))
        return torch.compile(fn, dynamic=False)

    return factory


_EAGER = {"silu_and_mul": eager_silu_and_mul, "gelu_and_mul": eager_gelu_and_mul,
          "silu_and_mul_bwd": eager_silu_and_mul_bwd, "gelu_and_mul_bwd": eager_gelu_and_mul_bwd}
for _op, _fn in _EAGER.items():
    _what = "aten backward kernels (as eager autograd runs them)" if _op.endswith("_bwd") else "act(gate) * up"
    register_impl(_op, "torch-eager", "peer", (lambda f=_fn: f), description=f"eager PyTorch: {_what}")
    register_impl(_op, "torch-compile", "peer", _compiled(_fn),
                  description=f"torch.compile(dynamic=False) of the eager {_what}")
