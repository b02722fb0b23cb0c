"""Rotary position embedding: the serving form (vLLM's in-place `rotary_embedding` on a cos|sin cache) and the
training form (Hugging Face's `apply_rotary_pos_emb` layout, out of place, with its backward).

Importing this package registers the contracts (spec.py: rotary_embedding; spec_train.py: rotary_train and
rotary_train_bwd) and the implementations: ours (kernel.py, launched by launch.py and launch_train.py with the rules
in rules.py) and the peers (peers/). Nothing here imports Triton until a kernel is used.
"""

import importlib

from ridgeline.ops.rotary import spec, spec_train  # noqa: F401  (registers the ops and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_native", "liger", "vllm", "flashinfer", "sglang"):
    importlib.import_module(f"ridgeline.ops.rotary.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {
    "rotary_embedding": "ridgeline.ops.rotary.launch",
    "apply_rotary": "ridgeline.ops.rotary.launch_train",
    "apply_rotary_backward": "ridgeline.ops.rotary.launch_train",
}
