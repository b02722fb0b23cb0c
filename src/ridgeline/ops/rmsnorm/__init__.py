"""RMSNorm: plain, fused residual-add, and the FP8-quantizing epilogues (static and per-token dynamic scales).

Importing this package registers the contracts (spec.py, spec_quant.py, spec_bwd.py) and the implementations: ours
(kernel.py, launched by launch.py with the rules in rules.py; the backward: kernel_bwd.py, backward.py, rules_bwd.py,
wired into the custom ops' autograd by autograd.py) and the peers (peers/). Nothing here imports Triton until a kernel
is used.
"""

import importlib

from ridgeline.ops.rmsnorm import spec, spec_bwd, spec_quant  # noqa: F401  (registers the ops and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_native", "liger", "vllm", "flashinfer", "quack"):
    importlib.import_module(f"ridgeline.ops.rmsnorm.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {name: "ridgeline.ops.rmsnorm.launch" for name in ("rms_norm", "fused_add_rms_norm",
                                                              "rms_norm_dynamic_quant")}
EXPORTS.update({name: "ridgeline.ops.rmsnorm.backward" for name in ("rms_norm_backward",
                                                                     "fused_add_rms_norm_backward")})
