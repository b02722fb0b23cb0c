"""PyTorch peers: eager PyTorch as the reference layers write it, and torch.compile of the same functions.

Forward: vLLM's SiluAndMul.forward_native / Hugging Face's act_fn(gate) * up on x = [gate, up].
Backward: the kernels eager autograd runs for that expression (aten.silu_backward / aten.gelu_backward of dy * up,
and dy * act(gate)), the activation recomputed from x as the contract says, concatenated into dx.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ridgeline.core.registry import register_impl
from ridgeline.lib.peers import compiled_factory


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


_EAGER = {"silu_and_mul": eager_silu_and_mul, "gelu_and_mul": eager_gelu_and_mul,
          "silu_and_mul_bwd": eager_silu_and_mul_bwd, "gelu_and_mul_bwd": eager_gelu_and_mul_bwd}
for _op, _fn in _EAGER.items():
    _what = "aten backward kernels (as eager autograd runs them)" if _op.endswith("_bwd") else "act(gate) * up"
    register_impl(_op, "torch-eager", "peer", (lambda f=_fn: f), description=f"eager PyTorch: {_what}")
    register_impl(_op, "torch-compile", "peer", compiled_factory(_fn),
                  description=f"torch.compile(dynamic=False) of the eager {_what}")
