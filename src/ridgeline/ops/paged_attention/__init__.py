"""Paged decode attention (flash-decoding over serving engines' paged KV cache).

Importing this package registers the contract (spec.py: paged_decode_attention) and the implementations: ours
(kernel.py, launched by launch.py with the rules in rules.py) and the peers (peers/). Nothing here imports Triton
until a kernel is used. Inference only: no backward contract.
"""

import importlib

from ridgeline.ops.paged_attention import spec  # noqa: F401  (registers the op and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_native", "flashinfer", "vllm"):
    importlib.import_module(f"ridgeline.ops.paged_attention.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {"paged_decode_attention": "ridgeline.ops.paged_attention.launch"}
