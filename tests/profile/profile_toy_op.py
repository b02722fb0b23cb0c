"""A user's op in a file of their own, for the profiler's tests: out = x * alpha + 1, with its own Triton kernels.

`ridgeline profile tests/profile/profile_toy_op.py:ScaleAdd --impl tests/profile/profile_toy_op.py:scale_add`
(no profile hook: the profiler calls it on CPU inputs and finds the kernels from their launches).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ridgeline import Case, Cost, OpSpec, Tolerance


@triton.jit
def _scale_add_kernel(X, Y, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask).to(tl.float32)
    tl.store(Y + offs, (x * alpha + 1.0).to(Y.dtype.element_ty), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 512}, num_warps=4)],
                 key=["n"])
@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def _scale_add_tuned_kernel(X, Y, alpha, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(X + offs).to(tl.float32)
        tl.store(Y + offs, (x * alpha + 1.0).to(Y.dtype.element_ty))
    else:
        mask = offs < n
        x = tl.load(X + offs, mask=mask).to(tl.float32)
        tl.store(Y + offs, (x * alpha + 1.0).to(Y.dtype.element_ty), mask=mask)


def scale_add(x: torch.Tensor, alpha: float) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    _scale_add_kernel[(triton.cdiv(n, 1024),)](x, y, alpha, n, BLOCK=1024, num_warps=4)
    return y


def scale_add_tuned(x: torch.Tensor, alpha: float) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    _scale_add_tuned_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, alpha, n)
    return y


def scale_add_torch(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha + 1


class ScaleAdd(OpSpec):
    def __init__(self) -> None:
        super().__init__(name="toy_scale_add", summary="out = x * alpha + 1", signature="fn(x, alpha) -> out",
                         outputs=("out",), batch_inputs=("x",), dtypes=(torch.float32, torch.float16),
                         dims=("M", "N"), shape_sets={"edge": [(3, 5)]})

    def make_inputs(self, case: Case, device, seed: int) -> dict:
        gen = torch.Generator().manual_seed(seed)
        return {"x": torch.randn(case.shape, generator=gen).to(case.dtype).to(device), "alpha": 0.5}

    def reference(self, inputs: dict) -> tuple[torch.Tensor, ...]:
        return (inputs["x"].double() * inputs["alpha"] + 1,)

    def call(self, fn, inputs: dict) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"], inputs["alpha"]),)

    def cost(self, shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems = shape[0] * shape[1]
        return Cost(bytes=2 * elems * dtype.itemsize, flops=2 * elems)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return Tolerance(1e-6, 1e-6) if dtype == torch.float32 else Tolerance(1e-3, 1e-3)
