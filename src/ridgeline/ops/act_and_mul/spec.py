"""Contracts of the gated activations (the MLP's act(gate) * up), forward and backward.

A case's shape is x's: (M, 2d) or (B, S, 2d), gate = x[..., :d], up = x[..., d:] (vLLM's layout).

silu_and_mul:      out = silu(gate) * up                              fn(x) -> out              out (..., d)
gelu_and_mul:      out = gelu(gate, approximate) * up                 fn(x, approximate) -> out
                   variant "tanh": approximate = "tanh"; otherwise "none" (exact, erf). The variant picks the
                   value and the implementation is handed it, so one that lacks a form says so (raises).
silu_and_mul_bwd:  dx = [dy * up * silu'(gate), dy * silu(gate)]    fn(dy, x) -> dx           dx (..., 2d)
gelu_and_mul_bwd:  the same for GELU                                  fn(dy, x, approximate) -> dx
                   The inputs are what the standard formulation saves for backward: x alone (the activation
                   is recomputed from it, as Liger does; nothing of size d is saved), and the incoming dy.

Reference: float64 torch (F.silu / F.gelu; the backward by float64 autograd of the same expression).
Cost per row of d output columns, itemsize s: forward 3 d s bytes (read gate and up, write out); backward 5 d s
(read dy, gate, up; write dgate, dup). FLOPs per element (a transcendental counts one): see `_FLOPS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ridgeline.core.models import model_dims
from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

# Rows of the "strided" variant sit in a buffer this many columns wider: an odd pad makes every row start
# unaligned, the hardest case for vector loads.
STRIDE_PAD = 13

# x = (M, 2d) for the MLPs of Llama-2-7B (d 11008), Llama-3-8B / Mistral-7B (14336) and Llama-3-70B (28672), from
# one decode token to prefill batches (about ten shapes: the H200 plan benches them all in a few minutes).
SWEEP: list[Shape] = [
    (1, 28672), (64, 28672), (1024, 22016), (1024, 28672), (4096, 22016), (4096, 28672), (4096, 57344),
    (16384, 22016), (16384, 28672), (16384, 57344),
]
DECODE: list[Shape] = [(m, 2 * 14336) for m in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
EDGE: list[Shape] = [(1, 2), (7, 14), (5, 1538), (3, 8200), (2, 40000), (1, 28672), (2, 3, 128), (0, 28672)]
CPU: list[Shape] = [(1, 8192), (16, 8192), (64, 2000), (32, 8200)]
# The shipped models' MLP widths (ridgeline.core.models) at decode batches and a prefill.
MODELS: list[Shape] = [(m, 2 * w) for w in sorted({d.intermediate for d in model_dims().values()})
                       for m in (1, 32, 256, 4096)]
# More than 2^31 elements (CUDA only): the output too (HUGE), or x only (HUGE_X: the backward's case, 4.3 GB of x).
HUGE: Shape = (2**31 // 14336 + 1, 2 * 14336)
HUGE_X: Shape = (2**31 // 28672 + 1, 28672)

TOLERANCES = {
    torch.float32: Tolerance(atol=1e-5, rtol=1e-5),
    # Two roundings must pass: eager PyTorch, vLLM and Liger round act(gate) before multiplying by up.
    torch.float16: Tolerance(atol=1e-3, rtol=2e-3),
    torch.bfloat16: Tolerance(atol=1e-2, rtol=1.6e-2),
}
# FLOPs per output element: (forward, backward), by activation.
_FLOPS = {"silu": (4, 11), "gelu": (6, 13), "gelu_tanh": (10, 17)}


def numel(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _parts(variant: str) -> set[str]:
    return set(variant.split("+")) if variant else set()


def approximate_of(variant: str) -> str:
    return "tanh" if "tanh" in _parts(variant) else "none"


def _generator(device: torch.device | str, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


def _rand(shape: Shape, dtype: torch.dtype, variant: str, device, gen: torch.Generator) -> torch.Tensor:
    """Fresh normal values (never zeros), in a wider buffer for the strided variant."""
    wide = (*shape[:-1], shape[-1] + STRIDE_PAD) if "strided" in _parts(variant) else shape
    t = torch.randn(wide, generator=gen, device=device, dtype=torch.float32).to(dtype)
    return t[..., : shape[-1]] if wide != shape else t


def make_x(shape: Shape, dtype: torch.dtype, variant: str, device, gen: torch.Generator) -> torch.Tensor:
    """x = [gate, up], scaled by 2 so the gate reaches where the activations bend and saturate; the nan and inf
    variants put NaN / +inf in a gate and -inf in an up value."""
    x = _rand(shape, dtype, variant, device, gen)
    x.mul_(2.0)
    d = shape[-1] // 2
    first, last = (0,) * (x.dim() - 1), (-1,) * (x.dim() - 1)
    if "nan" in _parts(variant) and x.numel():
        x[(*first, d // 2)] = float("nan")
    if "inf" in _parts(variant) and x.numel():
        x[(*first, 0)] = float("inf")
        x[(*last, 2 * d - 1)] = float("-inf")
    return x


def _act64(act: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if act == "silu":
        return F.silu
    return lambda g: F.gelu(g, approximate="tanh" if act == "gelu_tanh" else "none")


def reference_forward(x: torch.Tensor, act: str) -> torch.Tensor:
    xd = x.double()
    d = xd.shape[-1] // 2
    return _act64(act)(xd[..., :d]) * xd[..., d:]


def reference_backward(dy: torch.Tensor, x: torch.Tensor, act: str) -> torch.Tensor:
    with torch.enable_grad():
        xd = x.detach().double().requires_grad_(True)
        (dx,) = torch.autograd.grad(reference_forward(xd, act), xd, dy.double())
    return dx


class _ActFamily(OpSpec):
    """What the four contracts share: x's shape, dtypes, shape sets, tolerances, the launch record."""

    act = "silu"  # "gelu" contracts pick gelu / gelu_tanh by variant
    backward = False

    def __init__(self, name: str, summary: str, signature: str, outputs: tuple[str, ...],
                 batch_inputs: tuple[str, ...], variants: tuple[str, ...]) -> None:
        super().__init__(
            name=name, summary=summary, signature=signature, outputs=outputs, batch_inputs=batch_inputs,
            dtypes=(torch.bfloat16, torch.float16, torch.float32), dims=("M", "2d"), ranks=(2, 3),
            shape_sets={"sweep": SWEEP, "decode": DECODE, "models": MODELS, "edge": EDGE, "cpu": CPU},
            variants=variants,
        )

    def act_of(self, variant: str) -> str:
        if self.act == "silu":
            return "silu"
        return "gelu_tanh" if approximate_of(variant) == "tanh" else "gelu"

    def check_shape(self, shape: Shape) -> None:
        super().check_shape(shape)
        if shape and shape[-1] % 2:
            raise ValueError(f"shape: {self.name} takes x = [gate, up] with an even last dim; got {shape[-1]}")

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return TOLERANCES[dtype]

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems = numel(shape) // 2  # output elements: rows x d
        fwd, bwd = _FLOPS[self.act_of(variant)]
        if self.backward:
            return Cost(bytes=5 * elems * dtype.itemsize, flops=bwd * elems)
        return Cost(bytes=3 * elems * dtype.itemsize, flops=fwd * elems)

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        extra = ("tanh",) if "tanh" in self.variants else ()
        cases = [Case(s, dtype, v) for v in ("", *extra) for s in EDGE]
        cases += [Case(s, dtype, "strided") for s in [(5, 1538), (3, 8200), (2, 3, 128)]]
        cases += [Case((5, 1538), dtype, "nan"), Case((3, 8200), dtype, "inf")]
        if extra:
            cases += [Case((5, 1538), dtype, "tanh+strided"), Case((3, 8200), dtype, "tanh+inf")]
        if torch.device(device).type == "cuda":
            cases += [Case((4096, 28672), dtype), Case((4096, 22016), dtype, "strided")]
            if dtype.itemsize == 2:  # 64-bit offsets do not depend on the dtype; 16-bit keeps the case small
                cases.append(Case(HUGE_X if self.backward else HUGE, dtype))
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.act_and_mul.kernel import grid_size
        from ridgeline.ops.act_and_mul.rules import config_for

        m, d = numel(case.shape[:-1]), case.shape[-1] // 2
        cfg = config_for(d, case.dtype.itemsize, m, self.backward)
        return {"config": cfg.describe(), "block_m": cfg.block_m, "block_n": cfg.block_n,
                "num_warps": cfg.num_warps, "grid": grid_size(m, d, cfg.block_m, cfg.block_n) if m and d else 0}


_SILU_VARIANTS = ("", "strided", "nan", "inf")
_GELU_VARIANTS = ("", "tanh", "strided", "nan", "inf")


class SiluAndMulSpec(_ActFamily):
    def __init__(self) -> None:
        super().__init__("silu_and_mul", "silu(x[..., :d]) * x[..., d:] (SwiGLU's gate, vLLM's SiluAndMul)",
                         "fn(x) -> out", ("out",), ("x",), _SILU_VARIANTS)

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        return {"x": make_x(case.shape, case.dtype, case.variant, device, _generator(device, seed))}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (reference_forward(inputs["x"], "silu"),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"]),)


class GeluAndMulSpec(_ActFamily):
    act = "gelu"

    def __init__(self) -> None:
        super().__init__("gelu_and_mul", "gelu(x[..., :d]) * x[..., d:] (GeGLU; variant tanh: the tanh GELU)",
                         "fn(x, approximate) -> out", ("out",), ("x",), _GELU_VARIANTS)

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        x = make_x(case.shape, case.dtype, case.variant, device, _generator(device, seed))
        return {"x": x, "approximate": approximate_of(case.variant)}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (reference_forward(inputs["x"], "gelu_tanh" if inputs["approximate"] == "tanh" else "gelu"),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"], inputs["approximate"]),)


def _make_dy(case: Case, device, gen: torch.Generator) -> torch.Tensor:
    shape = (*case.shape[:-1], case.shape[-1] // 2)
    variant = "strided" if "strided" in _parts(case.variant) else ""
    return _rand(shape, case.dtype, variant, device, gen)


class SiluAndMulBwdSpec(_ActFamily):
    backward = True

    def __init__(self) -> None:
        super().__init__("silu_and_mul_bwd", "d/dx of silu_and_mul: dgate = dy * up * silu'(gate), "
                         "dup = dy * silu(gate), silu recomputed from x", "fn(dy, x) -> dx", ("dx",), ("dy", "x"),
                         _SILU_VARIANTS)

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = make_x(case.shape, case.dtype, case.variant, device, gen)
        return {"dy": _make_dy(case, device, gen), "x": x}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (reference_backward(inputs["dy"], inputs["x"], "silu"),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["dy"], inputs["x"]),)


class GeluAndMulBwdSpec(_ActFamily):
    act = "gelu"
    backward = True

    def __init__(self) -> None:
        super().__init__("gelu_and_mul_bwd", "d/dx of gelu_and_mul (variant tanh: the tanh GELU), gelu recomputed "
                         "from x", "fn(dy, x, approximate) -> dx", ("dx",), ("dy", "x"), _GELU_VARIANTS)

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = make_x(case.shape, case.dtype, case.variant, device, gen)
        return {"dy": _make_dy(case, device, gen), "x": x, "approximate": approximate_of(case.variant)}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        act = "gelu_tanh" if inputs["approximate"] == "tanh" else "gelu"
        return (reference_backward(inputs["dy"], inputs["x"], act),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["dy"], inputs["x"], inputs["approximate"]),)


for _spec in (SiluAndMulSpec(), GeluAndMulSpec(), SiluAndMulBwdSpec(), GeluAndMulBwdSpec()):
    register_spec(_spec)


def _ours(name: str) -> Callable[[], Callable[..., Any]]:
    def factory() -> Callable[..., Any]:
        from ridgeline.ops.act_and_mul import launch

        return getattr(launch, name)

    return factory


register_impl("silu_and_mul", "ridgeline", "ours", _ours("silu_and_mul"), description="ridgeline Triton kernel")
register_impl("gelu_and_mul", "ridgeline", "ours", _ours("gelu_and_mul"), description="ridgeline Triton kernel")
register_impl("silu_and_mul_bwd", "ridgeline", "ours", _ours("silu_and_mul_backward"),
              description="ridgeline Triton backward kernel (silu recomputed from x)")
register_impl("gelu_and_mul_bwd", "ridgeline", "ours", _ours("gelu_and_mul_backward"),
              description="ridgeline Triton backward kernel (gelu recomputed from x)")
