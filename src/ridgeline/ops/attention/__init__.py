"""Attention prefill (FlashAttention-style forward and backward), dense and packed batches, GQA, causal and
sliding-window masks.

Importing this package registers the contracts (spec.py: "attention", "attention_bwd") and the implementations:
ours (kernel.py, launched by launch.py with the rules in rules.py) and the peers (peers/). Nothing here launches
a kernel until one is called.
"""

import importlib

from ridgeline.ops.attention import spec  # noqa: F401  (registers the ops and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_sdpa", "flex", "external"):
    importlib.import_module(f"ridgeline.ops.attention.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {name: "ridgeline.ops.attention.launch" for name in ("attention", "attention_backward")}
