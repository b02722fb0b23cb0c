"""The bf16/fp16 GEMM (issue 24): y = x @ w^T (nn.Linear's layout) or x @ b, fp32 accumulation.

Importing this package registers the contract (spec.py: matmul) and the implementations: ours (kernel.py, launched
by launch.py with the rules in rules.py) and the peers (peers/: cuBLAS through torch, torch.compile max-autotune,
and a plain Triton matmul of the public tutorial's design). Nothing here imports Triton until a kernel is used.
"""

import importlib

from ridgeline.ops.matmul import spec  # noqa: F401  (registers the op and ours)

for _peer in ("torch_native", "triton_tutorial"):
    importlib.import_module(f"ridgeline.ops.matmul.peers.{_peer}")

# Public functions of `ridgeline` this package provides (loaded on first use).
EXPORTS = {"matmul": "ridgeline.ops.matmul.launch"}
