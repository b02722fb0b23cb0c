"""Gated activations of the MLP: silu_and_mul / gelu_and_mul on x = [gate, up] (vLLM's layout), silu_mul /
gelu_mul on two tensors (Hugging Face's gate_proj(x), up_proj(x)), forward and backward.

Importing this package registers the contracts (spec.py: silu_and_mul, gelu_and_mul and their _bwd contracts) and
the implementations: ours (kernel.py, launched by launch.py with the rules in rules.py) and the peers (peers/).
Nothing here imports Triton until a kernel is used.
"""

import importlib

from ridgeline.ops.act_and_mul import spec  # noqa: F401  (registers the ops and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_native", "liger", "vllm", "fused_libs"):
    importlib.import_module(f"ridgeline.ops.act_and_mul.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {name: "ridgeline.ops.act_and_mul.launch" for name in (
    "silu_and_mul", "gelu_and_mul", "silu_mul", "gelu_mul", "silu_and_mul_backward", "gelu_and_mul_backward")}
