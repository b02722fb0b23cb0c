"""Contract of the serving form of rotary position embedding (vLLM's `rotary_embedding` op, in place).

rotary_embedding:  fn(positions, q, k, head_size, cos_sin_cache, is_neox) -> (q, k)
  positions int64 [T]; q [T, Hq * D], k [T, Hk * D] (GQA: Hk divides Hq); cos_sin_cache [max_position, R] with
  cos = cache[p, :R/2], sin = cache[p, R/2:]. The first R columns of every head are rotated (R <= D; the rest
  pass through untouched): NeoX pairs (i, i + R/2) or, with is_neox False, GPT-J pairs (2i, 2i + 1):
      x' = x cos_i - y sin_i,   y' = y cos_i + x sin_i.
  Implementations may write q and k in place (vLLM's convention: ours, vLLM, FlashInfer, SGLang do, and are
  registered with mutates=("q", "k")) or return new tensors (PyTorch's forward_native does).

Shapes are (T, Hq, Hk, D) or (T, Hq, Hk, D, R) for partial rotary (R = D when not given).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

MAX_POSITION = 4096  # cache rows (graph-cold keeps up to thousands of input sets: 1 MiB a cache at bf16, R 128)
ROPE_THETA = 500000.0  # Llama-3's base
POSITION_BYTES = 8  # int64 positions

# One rounding of float32 math is far inside these; they are set so the standard peers pass: PyTorch's
# forward_native (and HF's formula) round x*cos, y*sin and their sum in the input dtype (and cos/sin to it), and
# products of unit-variance inputs reach ~6 over millions of elements (half an ulp there: 0.016 in bf16).
TOLERANCES = {
    torch.float32: Tolerance(atol=1e-5, rtol=1e-5),
    torch.float16: Tolerance(atol=5e-3, rtol=2e-3),
    torch.bfloat16: Tolerance(atol=4e-2, rtol=1.6e-2),
}

# Llama-3.1-8B (32 q / 8 kv heads), Llama-3.1-70B (64 / 8), Qwen2.5-7B (28 / 4); head dim 128.
HEADS = {"llama3-8b": (32, 8, 128), "llama3-70b": (64, 8, 128), "qwen2.5-7b": (28, 4, 128)}
SWEEP: list[Shape] = [
    (1, 32, 8, 128), (32, 32, 8, 128), (256, 32, 8, 128), (4096, 32, 8, 128), (16384, 32, 8, 128),
    (4096, 64, 8, 128), (16384, 64, 8, 128), (4096, 28, 4, 128), (16384, 28, 4, 128),
    (4096, 32, 8, 128, 64), (16384, 32, 8, 128, 64),
]
DECODE: list[Shape] = [(t, 32, 8, 128) for t in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
MODELS: list[Shape] = [(t, *h) for h in HEADS.values() for t in (1, 32, 256, 4096, 16384)]
EDGE: list[Shape] = [(0, 4, 2, 64), (1, 1, 1, 2), (3, 4, 2, 64), (5, 7, 1, 80), (4, 6, 3, 96, 24), (2, 4, 4, 128, 64),
                     (3, 2, 2, 256)]
CPU: list[Shape] = [(1, 4, 2, 64), (8, 4, 2, 64), (16, 8, 2, 128), (16, 4, 4, 64, 32)]
# q of more than 2^31 elements (Llama-3-8B heads): 64-bit token offsets or bust (CUDA only; 5.4 GB at bf16).
HUGE: Shape = (2**31 // (32 * 128) + 1, 32, 8, 128)

VARIANTS = ("", "gptj", "fused-qkv", "cache-fp32", "heads-3d", "nan")


def dims_of(shape: Shape) -> tuple[int, int, int, int, int]:
    """(T, Hq, Hk, D, R) of a shape; R = D unless given."""
    t, hq, hk, d = shape[:4]
    return t, hq, hk, d, shape[4] if len(shape) > 4 else d


def cos_sin_cache(max_position: int, rot_dim: int, dtype: torch.dtype, device: torch.device | str,
                  theta: float = ROPE_THETA) -> torch.Tensor:
    """[max_position, rot_dim]: cos(p * inv_freq) then sin(p * inv_freq), computed in float64, as vLLM builds it."""
    inv_freq = 1.0 / theta ** (torch.arange(0, rot_dim, 2, dtype=torch.float64, device=device) / rot_dim)
    freqs = torch.arange(max_position, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype)


def rotate_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_size: int, neox: bool
                     ) -> torch.Tensor:
    """x [T, ...] (H * head_size per token) rotated in float64 by cos, sin [T, R/2]; x's shape."""
    t, half = cos.shape[0], cos.shape[1]
    heads = (x.shape[-1] if x.dim() == 2 else x.shape[-2] * x.shape[-1]) // head_size
    xd = x.double().reshape(t, heads, head_size).clone()
    r = xd[..., : 2 * half]
    x1, x2 = (r[..., :half], r[..., half:]) if neox else (r[..., 0::2], r[..., 1::2])
    c, s = cos.double()[:, None, :], sin.double()[:, None, :]
    o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
    xd[..., : 2 * half] = torch.cat((o1, o2), -1) if neox else torch.stack((o1, o2), -1).flatten(-2)
    return xd.reshape(x.shape)


def _generator(device: torch.device | str, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


class RotaryEmbeddingSpec(OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="rotary_embedding",
            summary="rotary position embedding on q and k from a cos|sin cache at positions (vLLM's op, in place)",
            signature="fn(positions, q, k, head_size, cos_sin_cache, is_neox) -> (q, k)",
            outputs=("q", "k"),
            batch_inputs=("positions", "q", "k"),
            dtypes=(torch.bfloat16, torch.float16, torch.float32),
            shape_sets={"sweep": SWEEP, "decode": DECODE, "models": MODELS, "edge": EDGE, "cpu": CPU},
            variants=VARIANTS,
            dims=("T", "Hq", "Hk", "D"),
            ranks=(4, 5),
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        t, hq, hk, d, r = dims_of(case.shape)
        v = case.variant
        gen = _generator(device, seed)
        # Positions in [1, max): position 0 rotates by nothing (a graph replay must change q and k).
        positions = torch.randint(1, MAX_POSITION, (t,), generator=gen, device=device, dtype=torch.int64)
        if "fused-qkv" in v:  # q, k, v = qkv.split(...): strided views of the fused projection, as vLLM passes them
            qkv = torch.randn((t, (hq + 2 * hk) * d), generator=gen, device=device).to(case.dtype)
            q, k = qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]
        else:
            q = torch.randn((t, hq * d), generator=gen, device=device).to(case.dtype)
            k = torch.randn((t, hk * d), generator=gen, device=device).to(case.dtype)
        if "heads-3d" in v:
            q, k = q.view(t, hq, d), k.view(t, hk, d)
        if "nan" in v and t:
            q.view(t, -1)[0, 1] = float("nan")
            k.view(t, -1)[t - 1, d - 1] = float("inf")
        cache_dtype = torch.float32 if "cache-fp32" in v else case.dtype
        return {"positions": positions, "q": q, "k": k, "head_size": d,
                "cos_sin_cache": cos_sin_cache(MAX_POSITION, r, cache_dtype, device), "is_neox": "gptj" not in v}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        pos = inputs["positions"].reshape(-1)
        cache = inputs["cos_sin_cache"]
        half = cache.shape[1] // 2
        cos, sin = cache[pos, :half], cache[pos, half:]
        d, neox = inputs["head_size"], inputs["is_neox"]
        return (rotate_reference(inputs["q"], cos, sin, d, neox), rotate_reference(inputs["k"], cos, sin, d, neox))

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        out = fn(inputs["positions"], inputs["q"], inputs["k"], inputs["head_size"], inputs["cos_sin_cache"],
                 inputs["is_neox"])
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("rotary_embedding implementation must return (q, k)")
        return tuple(out)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        t, hq, hk, _, r = dims_of(shape)
        cache_item = 4 if "cache-fp32" in variant else dtype.itemsize
        # In place: the R rotated columns of every q and k head read once and written once; per token one cos|sin
        # row (R values) and one position; 6 FLOPs per pair (4 multiplies, 2 adds).
        rotated = t * (hq + hk) * r
        return Cost(bytes=2 * rotated * dtype.itemsize + t * (r * cache_item + POSITION_BYTES), flops=3 * rotated)

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return TOLERANCES[dtype]

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return inputs["q"].dtype

    def check_shape(self, shape: Shape) -> None:
        super().check_shape(shape)
        _, hq, hk, d, r = dims_of(shape)
        if hq < 1 or hk < 1 or d < 2 or r % 2 or not 2 <= r <= d:
            raise ValueError(f"shape: rotary_embedding takes TxHqxHkxD[xR] with heads >= 1, R even in [2, D]; "
                             f"got {'x'.join(map(str, shape))}")

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case(s, dtype, "gptj") for s in [(5, 7, 1, 80), (4, 6, 3, 96, 24), (3, 2, 2, 256)]]
        cases += [Case(s, dtype, "fused-qkv") for s in [(3, 4, 2, 64), (4, 6, 3, 96, 24)]]
        cases += [Case((4, 6, 3, 96, 24), dtype, "gptj+fused-qkv"), Case((3, 4, 2, 64), dtype, "heads-3d"),
                  Case((5, 7, 1, 80), dtype, "nan")]
        if dtype != torch.float32:
            cases.append(Case((3, 4, 2, 64), dtype, "cache-fp32"))
        if torch.device(device).type == "cuda":
            cases += [Case((16384, 32, 8, 128), dtype), Case((4096, 28, 4, 128, 64), dtype, "fused-qkv"),
                      Case((4096, 32, 8, 128), dtype, "gptj")]
            if dtype.itemsize == 2:
                cases.append(Case(HUGE, dtype))
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.rotary.launch import serving_config
        from ridgeline.ops.rotary.rules import resolve

        t, hq, hk, _, r = dims_of(case.shape)
        cfg = serving_config(t, hq, hk, r, case.dtype, device)
        plan = resolve(cfg, hq, hk, r // 2)
        return {"config": cfg.describe(), "num_warps": plan.num_warps, "grid": plan.grid(t),
                "block_hq": plan.block_hq, "block_hk": plan.block_hk}


register_spec(RotaryEmbeddingSpec())


def _ours() -> Callable[..., Any]:
    from ridgeline.ops.rotary.launch import rotary_embedding

    return rotary_embedding


register_impl("rotary_embedding", "ridgeline", "ours", _ours, mutates=("q", "k"),
              description="ridgeline Triton kernel, in place on q and k (vLLM convention)")
