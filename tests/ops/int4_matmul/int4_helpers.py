"""What the int4 candidate-body tests share: fresh packed weights, activations, and the float64 check."""

from __future__ import annotations

import torch

from ridgeline.core.registry import get_spec
from ridgeline.core.spec import Case
from ridgeline.ops.int4_matmul.pack import pack_int4, unpack_int4


def weights(n: int, k: int, g: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return pack_int4(torch.randn((n, k), generator=gen).to(torch.bfloat16), g)


def activations(m: int, k: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    return torch.randn((m, k), generator=torch.Generator().manual_seed(seed)).to(dtype)


def check(y: torch.Tensor, x: torch.Tensor, wp, s, g: int) -> None:
    ref = x.double() @ unpack_int4(wp, s, g).t()
    tol = get_spec("int4_matmul").tolerance_for(Case((x.shape[0], wp.shape[0], x.shape[1]), x.dtype), "y", x.dtype)
    assert y.dtype == x.dtype and y.shape == ref.shape
    err = (y.double() - ref).abs()
    assert bool((err <= tol.atol + tol.rtol * ref.abs()).all()), float(err.max())
    assert float(ref.abs().max()) > 1.0  # (the check is not vacuous: fresh random data, not zeros)
