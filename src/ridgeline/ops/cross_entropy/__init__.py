"""Cross-entropy over a vocabulary (logits [N, V], class-index targets), forward and backward fused.

Importing this package registers the contracts (spec.py: `cross_entropy`, the forward; `cross_entropy_fwd_bwd`, the
training step) and the implementations: ours (kernel.py, launched by launch.py with the rules in rules.py) and the
peers (peers/). Nothing here imports Triton until a kernel is used.
"""

import importlib

from ridgeline.ops.cross_entropy import spec  # noqa: F401  (registers the ops and ours)

for _peer in ("torch_native", "liger", "quack"):
    importlib.import_module(f"ridgeline.ops.cross_entropy.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {name: "ridgeline.ops.cross_entropy.launch" for name in ("cross_entropy", "cross_entropy_fwd_bwd")}
