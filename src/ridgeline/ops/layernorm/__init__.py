"""LayerNorm over the last dim (F.layer_norm semantics), forward and backward.

Importing this package registers the contracts "layernorm" and "layernorm_bwd" (spec.py) and their implementations:
ours (kernel.py, launched by launch.py with the rules in rules.py) and the peers (peers/). Nothing here imports
Triton until a kernel is used.
"""

import importlib

from ridgeline.ops.layernorm import spec  # noqa: F401  (registers the ops and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_native", "liger", "apex", "flashinfer"):
    importlib.import_module(f"ridgeline.ops.layernorm.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {name: "ridgeline.ops.layernorm.launch" for name in ("layer_norm", "layer_norm_forward",
                                                                "layer_norm_backward")}
