"""PyTorch peers: "cublas" (F.linear / x @ b + bias: the cuBLAS GEMM torch dispatches to; on a CPU, torch's own)
and "torch-compile" (torch.compile(mode="max-autotune-no-cudagraphs", dynamic=False) of the same expression:
Inductor benchmarks its Triton GEMM templates against cuBLAS per shape and keeps the fastest).

Measured on the H200 (FACTS.md, 2026-12-01): cuBLAS F.linear 683-747 TFLOP/s at M >= 1024 of the Llama-3 layers;
at M = 1, 1762 GB/s of weight on 8B's 4096x4096 o-projection and 3665 GB/s on 70B's down projection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ridgeline.core.registry import register_impl
from ridgeline.lib.peers import compiled

# Inductor's max-autotune without its own CUDA graphs: the harness captures the call in its graph regimes (inductor's
# cudagraph trees would nest inside that capture); the kernels autotuned are the same.
COMPILE_MODE = "max-autotune-no-cudagraphs"


def torch_matmul(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, *,
                 layout: str = "nt") -> torch.Tensor:
    """How users call it: nn.Linear's F.linear for w [N, K]; ``x @ b (+ bias)`` for b [K, N]."""
    if layout == "nt":
        return F.linear(x, w, bias)
    y = x @ w
    return y + bias if bias is not None else y


def _compiled() -> Callable[..., Any]:
    return compiled(torch_matmul, mode=COMPILE_MODE)


register_impl("matmul", "cublas", "peer", lambda: torch_matmul,
              description="torch F.linear / x @ b (cuBLAS on a GPU)")
register_impl("matmul", "torch-compile", "peer", _compiled,
              description='torch.compile(mode="max-autotune-no-cudagraphs", dynamic=False) of F.linear / x @ b')
