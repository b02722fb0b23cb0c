"""Softmax over the last dim (any dim through a copy) and its backward from the saved output.

Importing this package registers the contracts (spec.py: "softmax", "softmax_bwd") and the implementations:
ours (kernel.py, launched by launch.py with the rules in rules.py) and the peers (peers/). Nothing here launches
a kernel until one is called.
"""

import importlib

from ridgeline.ops.softmax import spec  # noqa: F401  (registers the ops and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_native", "liger", "quack"):
    importlib.import_module(f"ridgeline.ops.softmax.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {name: "ridgeline.ops.softmax.launch" for name in ("softmax", "softmax_backward")}
