"""Contracts of LayerNorm over the last dim (normalized_shape = (N,)), forward and backward.

layernorm:      out = (x - mean) / sqrt(var + eps) * weight + bias           fn(x, weight, bias, eps) -> out
                (mean and biased variance of each row; F.layer_norm semantics)
layernorm_bwd:  fn(dy, x, weight, mean, rstd) -> (dx, dweight, dbias)
                Its inputs are what the standard autograd formulation saves: torch's native_layer_norm returns
                (out, mean, rstd) with mean and rstd = 1 / sqrt(var + eps) in float32 for every input dtype, and its
                backward (native_layer_norm_backward) takes (dy, x, mean, rstd, weight). Here mean and rstd are float32
                of shape [M] (M rows, leading dims merged; torch shapes them [..., 1], the same values). eps is not an
                input: rstd carries it.
                xhat = (x - mean) * rstd; dx = rstd * (w dy - xhat * mean_N(xhat w dy) - mean_N(w dy));
                dweight = sum over rows of dy * xhat; dbias = sum over rows of dy (both in the weight's dtype).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

EPS = 1e-5
# Rows of the "strided" variant sit in a buffer this many columns wider: an odd pad makes the row stride unaligned.
STRIDE_PAD = 13
# Inputs are centred off zero: the kernel must subtract the mean (a row mean of 0 would hide a skipped centring).
X_SHIFT = 0.5

# Real hidden sizes (BERT/ViT 768 and 1024, GPT-2 XL 1600-ish 2048, Llama/Falcon 4096, 5120, 8192) at prefill token
# counts, plus an unaligned one. ~10 shapes: the sweep of both contracts fits the device plan's ~2 minutes.
SWEEP: list[Shape] = [
    (4096, 768), (4096, 1024), (16384, 1024), (4096, 2048), (4096, 4096), (16384, 4096), (4096, 5120),
    (4096, 8192), (8192, 8192), (4096, 4100),
]
DECODE: list[Shape] = [(m, 4096) for m in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
EDGE: list[Shape] = [
    (1, 1), (7, 7), (83, 64), (7, 769), (7, 4100), (7, 5125), (1, 16384), (3, 20000), (2, 5, 769), (0, 4096),
]
MODELS: list[Shape] = [(m, n) for n in (768, 1024, 1280, 1600, 2048, 4096, 5120, 8192) for m in (1, 256, 4096)]
# Small enough that the CPU interpreter checks and benches the whole set in well under a minute.
CPU: list[Shape] = [(1, 4096), (16, 1024), (32, 768), (16, 4100), (8, 8192)]
# More than 2^31 elements: 64-bit offsets or bust (CUDA only).
HUGE: Shape = (2**31 // 4096 + 1, 4096)

FWD_VARIANTS = ("", "strided", "w-fp32", "nan", "inf")
BWD_VARIANTS = ("", "strided", "w-fp32")

TOLERANCES = {
    torch.float32: Tolerance(atol=1e-5, rtol=1e-5),
    # One rounding of a float32 result (a bf16 ulp is 2^-8 relative) plus float32 noise.
    torch.float16: Tolerance(atol=1e-3, rtol=2e-3),
    torch.bfloat16: Tolerance(atol=1e-2, rtol=1.6e-2),
}
# dx sums two row reductions of N terms in float32 before one rounding: fp32 outputs get sqrt(N)-scaled noise room.
DX_FP32_PER_SQRT_N = 2e-6


def _numel(shape: Shape) -> int:
    return math.prod(shape)


def _generator(device: torch.device | str, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


def _rand(shape: Shape, dtype: torch.dtype, device, gen: torch.Generator, shift: float = 0.0,
          strided: bool = False) -> torch.Tensor:
    wide = (*shape[:-1], shape[-1] + STRIDE_PAD) if strided else shape
    t = (torch.randn(wide, generator=gen, device=device, dtype=torch.float32) + shift).to(dtype)
    return t[..., : shape[-1]] if strided else t


def _vector(n: int, dtype: torch.dtype, device, gen, center: float) -> torch.Tensor:
    # Spread around `center`, like trained weights (around 1) and biases (around 0); never all ones or zeros.
    return (center + 0.5 * torch.randn((n,), generator=gen, device=device, dtype=torch.float32)).to(dtype)


def _special(x: torch.Tensor, variant: str) -> torch.Tensor:
    if x.numel() == 0:
        return x
    lead0, lead_last = (0,) * (x.dim() - 1), (-1,) * (x.dim() - 1)
    if "nan" in variant:
        x[(*lead0, x.shape[-1] // 2)] = float("nan")
    if "inf" in variant:
        x[(*lead0, 0)] = float("inf")
        x[(*lead_last, -1)] = float("-inf")
    return x


def stats_of(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, rstd) of each row of x in float64, rounded to float32, shape [M]: what the forward saves."""
    xd = x.double().reshape(-1, x.shape[-1])
    mean = xd.mean(-1)
    var = (xd - mean[:, None]).pow(2).mean(-1)
    return mean.float(), torch.rsqrt(var + eps).float()


def ln_ref(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    xd = x.double()
    mean = xd.mean(-1, keepdim=True)
    var = (xd - mean).pow(2).mean(-1, keepdim=True)
    y = (xd - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y


# Rows of float64 at a time in the backward reference: a case of 2^31 elements never holds all its float64 temporaries.
REF_CHUNK_ELEMENTS = 1 << 25


def ln_bwd_ref(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, mean: torch.Tensor,
               rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) in float64 from the given mean and rstd (float32 [M], taken as exact)."""
    n = x.shape[-1]
    x2, dy2 = x.reshape(-1, n), dy.reshape(-1, n)
    m = x2.shape[0]
    w = weight.double() if weight is not None else None
    dx = torch.empty((m, n), dtype=torch.float64, device=x.device)
    dw = torch.zeros((n,), dtype=torch.float64, device=x.device)
    db = torch.zeros((n,), dtype=torch.float64, device=x.device)
    step = max(1, REF_CHUNK_ELEMENTS // max(1, n))
    for s in range(0, m, step):
        xd, dyd = x2[s:s + step].double(), dy2[s:s + step].double()
        mu, rs = mean.reshape(-1)[s:s + step].double()[:, None], rstd.reshape(-1)[s:s + step].double()[:, None]
        xhat = (xd - mu) * rs
        wdy = dyd * w if w is not None else dyd
        c1 = (xhat * wdy).mean(-1, keepdim=True)
        c2 = wdy.mean(-1, keepdim=True)
        dx[s:s + step] = (wdy - xhat * c1 - c2) * rs
        dw += (dyd * xhat).sum(0)
        db += dyd.sum(0)
    return dx.reshape(x.shape), dw, db


def _vector_bytes(n: int, dtype: torch.dtype, variant: str) -> int:
    return n * (4 if "w-fp32" in variant else dtype.itemsize)


class LayerNormSpec(OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="layernorm",
            summary="LayerNorm over the last dim: (x - mean) / sqrt(var + eps) * weight + bias",
            signature="fn(x, weight, bias, eps) -> out",
            outputs=("out",),
            batch_inputs=("x",),
            dims=("M", "N"), ranks=(2, 3),
            dtypes=(torch.bfloat16, torch.float16, torch.float32),
            shape_sets={"sweep": SWEEP, "decode": DECODE, "models": MODELS, "edge": EDGE, "cpu": CPU},
            variants=FWD_VARIANTS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        x = _special(_rand(case.shape, case.dtype, device, gen, X_SHIFT, "strided" in case.variant), case.variant)
        vdtype = torch.float32 if "w-fp32" in case.variant else case.dtype
        n = case.shape[-1]
        return {"x": x, "weight": _vector(n, vdtype, device, gen, 1.0), "bias": _vector(n, vdtype, device, gen, 0.0),
                "eps": EPS}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (ln_ref(inputs["x"], inputs["weight"], inputs["bias"], inputs["eps"]),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["x"], inputs["weight"], inputs["bias"], inputs["eps"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        elems = _numel(shape)
        # Read x, write y, read weight and bias once. Per element: sum, centre, square-accumulate (2), scale,
        # weight, bias: 7 FLOPs.
        return Cost(bytes=2 * elems * dtype.itemsize + 2 * _vector_bytes(shape[-1], dtype, variant), flops=7 * elems)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return TOLERANCES[dtype]

    def auto_regime(self, case: Case) -> str:
        return "graph-hot" if _numel(case.shape) < 4 * 1024 * 1024 else "cold-eager"

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case(s, dtype, "strided") for s in [(7, 769), (83, 64), (7, 4100), (3, 20000), (2, 5, 769)]]
        if dtype != torch.float32:
            cases += [Case((7, 769), dtype, "w-fp32"), Case((3, 20000), dtype, "w-fp32")]
        cases += [Case((7, 769), dtype, "nan"), Case((7, 4100), dtype, "inf"), Case((3, 20000), dtype, "nan")]
        if torch.device(device).type == "cuda":
            cases += [Case((65536, 4096), dtype), Case((4096, 4100), dtype, "strided")]
            if dtype.itemsize == 2:  # 64-bit offsets do not depend on the dtype; 16-bit keeps the case to 4.3 GB
                cases.append(Case(HUGE, dtype))
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.lib.launch import l2_cache_bytes
        from ridgeline.ops.layernorm.rules import fwd_config_for_call, fwd_load_policy, trace

        n = case.shape[-1]
        m = math.prod(case.shape[:-1])
        policy = fwd_load_policy(m, n, case.dtype.itemsize, l2_cache_bytes(torch.device(device)))
        cfg = fwd_config_for_call(n, case.dtype, policy)
        return {"config": cfg.describe(), "num_warps": cfg.num_warps, "rules": list(trace(n, case.dtype))}


class LayerNormBwdSpec(OpSpec):
    """The backward. dweight and dbias sum over every row, so this contract has no batch dim for the harness to slice:
    `batch_inputs` is empty (its float64 reference then sees all rows at once; `ln_bwd_ref` chunks internally) and
    `rows` is 1 (no row-subset check: a subset's dweight is another sum). dx's batch invariance and determinism are
    checked by the op's own tests (tests/ops/layernorm), dweight/dbias's determinism by the harness."""

    def __init__(self) -> None:
        super().__init__(
            name="layernorm_bwd",
            summary="LayerNorm backward from the saved (x, weight, mean, rstd): dx, dweight, dbias",
            signature="fn(dy, x, weight, mean, rstd) -> (dx, dweight, dbias)",
            outputs=("dx", "dweight", "dbias"),
            batch_inputs=(),
            dims=("M", "N"), ranks=(2, 3),
            dtypes=(torch.bfloat16, torch.float16, torch.float32),
            shape_sets={"sweep": SWEEP, "decode": DECODE, "models": MODELS, "edge": EDGE, "cpu": CPU},
            variants=BWD_VARIANTS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _generator(device, seed)
        strided = "strided" in case.variant
        x = _rand(case.shape, case.dtype, device, gen, X_SHIFT, strided)
        dy = _rand(case.shape, case.dtype, device, gen, 0.0, strided)
        wdtype = torch.float32 if "w-fp32" in case.variant else case.dtype
        mean, rstd = stats_of(x, EPS)
        return {"dy": dy, "x": x, "weight": _vector(case.shape[-1], wdtype, device, gen, 1.0), "mean": mean,
                "rstd": rstd}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return ln_bwd_ref(inputs["dy"], inputs["x"], inputs["weight"], inputs["mean"], inputs["rstd"])

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        out = fn(inputs["dy"], inputs["x"], inputs["weight"], inputs["mean"], inputs["rstd"])
        if not (isinstance(out, (tuple, list)) and len(out) == 3):
            raise TypeError("layernorm_bwd implementation must return (dx, dweight, dbias)")
        return tuple(out)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        n, elems, m = shape[-1], _numel(shape), _numel(shape[:-1])
        wb = _vector_bytes(n, dtype, variant)
        # Read dy and x, write dx; read the weight and mean/rstd (2 float32 a row); write dweight and dbias. (A
        # partial-sum buffer between kernels is extra traffic an implementation chooses, not part of the floor.)
        # Per element: xhat (2), w dy, two row sums (2 each), dx (4), dweight and dbias accumulation (3): 14 FLOPs.
        return Cost(bytes=3 * elems * dtype.itemsize + wb + 8 * m + 2 * wb, flops=14 * elems)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return TOLERANCES[dtype]

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        base = TOLERANCES[dtype]
        if output == "dx":
            if dtype == torch.float32:
                return Tolerance(atol=base.atol + DX_FP32_PER_SQRT_N * math.sqrt(case.shape[-1]), rtol=base.rtol)
            return base
        # A sum of M terms of order 1 is of order sqrt(M); float32 accumulation over M terms adds ~M ulps of them.
        m = max(1, _numel(case.shape[:-1]))
        return Tolerance(atol=base.atol * math.sqrt(m) + 1e-7 * m, rtol=base.rtol)

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return inputs["x"].dtype if name == "dx" else inputs["weight"].dtype

    def rows(self, shape: Shape) -> int:
        return 1 if _numel(shape) else 0

    def auto_regime(self, case: Case) -> str:
        return "graph-hot" if _numel(case.shape) < 4 * 1024 * 1024 else "cold-eager"

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case(s, dtype, "strided") for s in [(7, 769), (83, 64), (7, 4100), (3, 20000), (2, 5, 769)]]
        if dtype != torch.float32:
            cases += [Case((7, 769), dtype, "w-fp32"), Case((3, 20000), dtype, "w-fp32")]
        if torch.device(device).type == "cuda":
            cases += [Case((65536, 4096), dtype), Case((4096, 4100), dtype, "strided")]
            if dtype.itemsize == 2:
                cases.append(Case(HUGE, dtype))
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.layernorm.launch import bwd_programs
        from ridgeline.ops.layernorm.rules import bwd_config, trace

        cfg = bwd_config(case.shape[-1], case.dtype)
        m = _numel(case.shape[:-1])
        programs = bwd_programs(m, cfg, torch.device(device))[0] if m else 0
        return {"config": cfg.describe(), "num_warps": cfg.num_warps, "programs": programs,
                "rules": list(trace(case.shape[-1], case.dtype, backward=True))}


register_spec(LayerNormSpec())
register_spec(LayerNormBwdSpec())


def _ours_fwd() -> Callable[..., Any]:
    from ridgeline.ops.layernorm.launch import layer_norm

    return lambda x, weight, bias, eps: layer_norm(x, weight, bias, eps)


def _ours_bwd() -> Callable[..., Any]:
    from ridgeline.ops.layernorm.launch import layer_norm_backward

    return lambda dy, x, weight, mean, rstd: layer_norm_backward(dy, x, weight, mean, rstd)


register_impl("layernorm", "ridgeline", "ours", _ours_fwd, description="ridgeline Triton kernel")
register_impl("layernorm_bwd", "ridgeline", "ours", _ours_bwd,
              description="ridgeline Triton backward (dx + per-program partials) and partials reduction")
