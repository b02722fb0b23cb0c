"""The bf16 GEMM past its rules, as user implementations for `ridgeline bench` / `audit` / `check`:

  ridgeline audit matmul --impl scripts/device/gemm_kernels.py:tails --shapes 4096x4096x4096 --dim M ...
  ridgeline bench matmul --impl ridgeline --impl scripts/device/gemm_kernels.py:tails --impl torch ...

`tails`: the rules' tiles with ops/matmul/tails.py's cuts forced (a partial last wave's columns on the 128x128
tile, a last tile row of few rows on the rules for those rows), which no rule takes until a GPU has timed them.
Where the cost model plans no cut it is the rules' single launch. The same bits as the rules (one K order).
"""

from __future__ import annotations

import torch

from ridgeline.ops.matmul.launch import _check, _rows, matmul_2d


def tails(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, *, layout: str = "nt") -> torch.Tensor:
    _check(x, w, bias, None, layout)
    n = w.shape[0] if layout == "nt" else w.shape[1]
    y = matmul_2d(_rows(x), w, bias, x.dtype, layout, tails=True)
    return y.view(*x.shape[:-1], n)
