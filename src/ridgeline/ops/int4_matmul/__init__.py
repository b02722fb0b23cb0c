"""int4 weight-only GEMM (`int4_matmul`) and its weight packing (`pack_int4`, `unpack_int4`).

Importing this package registers the contracts (spec.py) and the implementations: ours (kernel.py, launched by
launch.py with the rules in rules.py; packing in pack.py) and the peers (peers/). Nothing here imports Triton until
a kernel is used.
"""

import importlib

from ridgeline.ops.int4_matmul import spec  # noqa: F401  (registers the ops and ours)

for _peer in ("torch_native", "vllm"):
    importlib.import_module(f"ridgeline.ops.int4_matmul.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {"int4_matmul": "ridgeline.ops.int4_matmul.launch",
           "pack_int4": "ridgeline.ops.int4_matmul.pack",
           "unpack_int4": "ridgeline.ops.int4_matmul.pack"}
