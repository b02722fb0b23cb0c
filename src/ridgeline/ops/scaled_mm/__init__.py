"""FP8 (e4m3) scaled GEMM with per-tensor, per-row and DeepSeek-V3 block scales, and the activation quantizers
(per token, per 1x128 group) that feed it.

Importing this package registers the contracts (spec.py: scaled_mm with variants tensor/row/block,
quantize_fp8_per_token, quantize_fp8_per_group) and the implementations: ours (kernel.py, launched by launch.py
with the rules in rules.py) and the peers (peers/). Nothing here imports Triton until a kernel is used.
"""

import importlib

from ridgeline.ops.scaled_mm import spec  # noqa: F401  (registers the ops and ours)

# Peers, in the order tables list them: PyTorch first, then the vendors.
for _peer in ("torch_native", "vllm", "deepgemm", "sglang"):
    importlib.import_module(f"ridgeline.ops.scaled_mm.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {name: "ridgeline.ops.scaled_mm.launch" for name in (
    "scaled_mm", "quantize_fp8_per_token", "quantize_fp8_per_group")}
