"""Contract of paged decode attention (serving engines' paged KV cache, flash-decoding).

paged_decode_attention:  fn(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale) -> out
  q [B, Hq, D] (one new token per sequence) or [B, Q, Hq, D] (speculative decoding: the Q new tokens are the last
  Q of each sequence, their K/V already in the cache; token i sees keys [0, seq_len - Q + i], causal among the Q);
  k_cache, v_cache [num_blocks, block_size, Hkv, D] in q's dtype or fp8 e4m3 with per-tensor scales
  (K = k_cache * k_scale); block_table int32 [B, max_blocks_per_seq] in any order; seq_lens int32 [B].
  out = softmax(scale * q K^T) V per q head over its kv head (GQA: Hq / Hkv q heads per kv head), q's shape and
  dtype. A row that sees no key (seq_len 0; the first tokens when seq_len < Q) is zeros (defined here).

Shapes are (B, L, Hq, Hkv, D, BS) with one query token, or (B, L, Hq, Hkv, D, BS, Q): L the context (every
sequence's seq_len, unless the variant "ragged" spreads them), BS the block size. Variants ("+" combines):
  fp8kv      K/V stored as fp8 e4m3 with per-tensor scales (amax / 448), dequantized in the reference;
  ragged     seq_lens spread over [0, L] by a fixed formula (the first is 0 and the second 1 when B >= 3);
  contiguous the block table is the identity (sequence b owns blocks b * M .. b * M + M - 1 in order): the layout
             the "sdpa-flash-contiguous" peer needs to view the cache as [B, L, Hkv, D] without a copy.
Cost: bytes = the KV bytes actually read (sum of seq_len * Hkv * D * 2 * itemsize) + q + out + the live block table
entries + seq_lens; FLOPs = 4 * Hq * D * (keys each query token sees), i.e. 4 * sum(seq_len) * Hq * D at Q = 1,
held against the tensor-core rate of q's dtype. Decode is bandwidth-bound (FLOPs / bytes ~ G = Hq / Hkv at bf16),
so its speed of light is the KV bytes over copy bandwidth; the harness takes the larger of the two times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

FP8_MAX = 448.0
VARIANTS = ("", "fp8kv", "ragged", "contiguous", "fp8kv+ragged")
SPARE_BLOCKS = 3  # blocks in the cache no sequence owns (random data: a read of one shows)

# Llama-3-8B (32 q / 8 kv heads) and Llama-3-70B (64 / 8), D 128, blocks of 16 (vLLM's default) and 64.
SWEEP: list[Shape] = [
    (1, 4096, 32, 8, 128, 16), (1, 131072, 32, 8, 128, 64),
    (8, 4096, 32, 8, 128, 16), (8, 32768, 32, 8, 128, 64), (8, 131072, 64, 8, 128, 16),
    (32, 4096, 64, 8, 128, 64), (32, 32768, 32, 8, 128, 16),
    (64, 1024, 32, 8, 128, 16), (64, 4096, 32, 8, 128, 64), (64, 32768, 64, 8, 128, 16),
    (256, 1024, 64, 8, 128, 64), (256, 4096, 32, 8, 128, 16),
]
DECODE: list[Shape] = [(b, 4096, 32, 8, 128, 16) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
# Speculative decoding (Q = 4 new tokens) and fp8 cells for the device plan's extra bench.
SPEC: list[Shape] = [(8, 4096, 32, 8, 128, 16, 4), (64, 4096, 32, 8, 128, 16, 4), (32, 32768, 32, 8, 128, 64, 4)]
EDGE: list[Shape] = [
    (0, 16, 4, 2, 64, 16), (1, 1, 4, 4, 64, 16), (3, 37, 4, 1, 64, 16), (2, 200, 8, 1, 128, 128),
    (3, 77, 6, 2, 80, 32), (2, 45, 4, 2, 64, 16, 4), (2, 3, 4, 2, 64, 16, 4), (2, 600, 4, 2, 64, 16),
    (1, 19, 2, 2, 16, 16),
]
CPU: list[Shape] = [(2, 64, 4, 2, 64, 16), (4, 100, 8, 2, 64, 32), (2, 300, 4, 1, 64, 16), (2, 40, 4, 2, 32, 16, 3)]
# A cache of more than 2^31 elements per tensor: 64-bit page offsets or bust (CUDA only; 4.3 GB each for K and V).
HUGE: Shape = (2, 2**31 // (2 * 8 * 128) + 1024, 32, 8, 128, 16)

# The output is a convex combination of V rows: the error is P's and the output's rounding (a few ulps of |V|).
TOLERANCES = {
    torch.float32: Tolerance(atol=2e-5, rtol=2e-5),
    torch.float16: Tolerance(atol=2e-3, rtol=5e-3),
    torch.bfloat16: Tolerance(atol=1.2e-2, rtol=2e-2),
}
UNITS = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def dims_of(shape: Shape) -> tuple[int, int, int, int, int, int, int]:
    """(B, L, Hq, Hkv, D, BS, Q); Q = 1 unless given."""
    b, length, hq, hkv, d, bs = shape[:6]
    return b, length, hq, hkv, d, bs, shape[6] if len(shape) > 6 else 1


def seq_lens_for(batch: int, length: int, variant: str) -> list[int]:
    """Each sequence's length: L, or with "ragged" a fixed spread over [0, L] (seed-independent: exact costs)."""
    if "ragged" not in variant or "contiguous" in variant:
        return [length] * batch
    out = [1 + (b * 2654435761) % max(length, 1) for b in range(batch)]
    if batch >= 3:
        out[0], out[1] = 0, 1
    return [min(x, length) for x in out]


def visible_keys(seq_len: int, q_tokens: int) -> int:
    """Keys seen by the Q query tokens of a sequence, summed (token i sees seq_len - Q + i + 1 of them)."""
    return sum(max(0, seq_len - q_tokens + i + 1) for i in range(q_tokens))


def _fp8(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    scale = max(float(x.abs().max()), 1e-6) / FP8_MAX
    return (x / scale).to(torch.float8_e4m3fn), scale


def attention_reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                        seq_lens: torch.Tensor, scale: float | None = None, k_scale: Any = None,
                        v_scale: Any = None) -> torch.Tensor:
    """float64: gather each sequence's pages, dequantize, then plain attention (one sequence at a time, so the
    float64 copy of a long context stays small)."""
    squeeze = q.dim() == 3
    q4 = q.unsqueeze(1) if squeeze else q
    b, nq, hq, d = q4.shape
    page, hkv = k_cache.shape[1], k_cache.shape[2]
    ks = 1.0 if k_scale is None else float(k_scale)
    vs = 1.0 if v_scale is None else float(v_scale)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = torch.zeros((b, nq, hq, d), dtype=torch.float64, device=q.device)
    lens = seq_lens.tolist()
    pos = torch.arange(nq, device=q.device)
    for i, n in enumerate(lens):
        if n <= 0:
            continue
        pages = block_table[i, : (n + page - 1) // page].long()
        k = k_cache[pages].reshape(-1, hkv, d)[:n].double() * ks  # [n, Hkv, D]
        v = v_cache[pages].reshape(-1, hkv, d)[:n].double() * vs
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
        s = torch.einsum("qhd,khd->hqk", q4[i].double(), k) * scale  # [Hq, Q, n]
        visible = torch.arange(n, device=q.device)[None, :] <= (n - nq + pos)[:, None]  # [Q, n]
        s = s.masked_fill(~visible[None], float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row with no key: zeros
        out[i] = torch.einsum("hqk,khd->qhd", p, v)
    return out.squeeze(1) if squeeze else out


class PagedDecodeAttentionSpec(OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="paged_decode_attention",
            summary="decode attention of a few query tokens over a paged KV cache (GQA, fp8 KV, split-KV)",
            signature="fn(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale) -> out",
            outputs=("out",),
            batch_inputs=("q", "block_table", "seq_lens"),
            dtypes=(torch.bfloat16, torch.float16, torch.float32),
            shape_sets={"sweep": SWEEP, "decode": DECODE, "spec": SPEC, "edge": EDGE, "cpu": CPU},
            variants=VARIANTS,
            dims=("B", "L", "Hq", "Hkv", "D", "BS"),
            ranks=(6, 7),
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        b, length, hq, hkv, d, bs, nq = dims_of(case.shape)
        v = case.variant
        gen = torch.Generator(device=torch.device(device)).manual_seed(seed)
        blocks = max(1, -(-length // bs))  # per sequence
        n_blocks = b * blocks + (0 if "contiguous" in v else SPARE_BLOCKS)
        q_shape = (b, hq, d) if len(case.shape) == 6 else (b, nq, hq, d)
        q = torch.randn(q_shape, generator=gen, device=device).to(case.dtype)
        k = torch.randn((n_blocks, bs, hkv, d), generator=gen, device=device, dtype=torch.float32)
        val = torch.randn((n_blocks, bs, hkv, d), generator=gen, device=device, dtype=torch.float32)
        k_scale = v_scale = None
        if "fp8kv" in v:
            (k, k_scale), (val, v_scale) = _fp8(k), _fp8(val)
        else:
            k, val = k.to(case.dtype), val.to(case.dtype)
        if "contiguous" in v:
            table = torch.arange(b * blocks, device=device, dtype=torch.int32).view(b, blocks)
        else:  # every sequence's pages anywhere in the cache, in any order
            perm = torch.randperm(n_blocks, generator=gen, device=device)[: b * blocks]
            table = perm.view(b, blocks).to(torch.int32)
        lens = torch.tensor(seq_lens_for(b, length, v), dtype=torch.int32, device=device)
        return {"q": q, "k_cache": k, "v_cache": val, "block_table": table, "seq_lens": lens, "scale": None,
                "k_scale": k_scale, "v_scale": v_scale}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (attention_reference(inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["block_table"],
                                    inputs["seq_lens"], inputs["scale"], inputs["k_scale"], inputs["v_scale"]),)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["block_table"], inputs["seq_lens"],
                   inputs["scale"], inputs["k_scale"], inputs["v_scale"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        b, length, hq, hkv, d, bs, nq = dims_of(shape)
        lens = seq_lens_for(b, length, variant)
        kv_item = 1 if "fp8kv" in variant else dtype.itemsize
        kv = sum(lens) * hkv * d * 2 * kv_item
        qo = 2 * b * nq * hq * d * dtype.itemsize
        table = sum(-(-n // bs) for n in lens) * 4 + b * 4  # live block-table entries and seq_lens
        flops = 4 * hq * d * sum(visible_keys(n, nq) for n in lens)
        return Cost(bytes=kv + qo + table, flops=flops, unit=UNITS[dtype])

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return TOLERANCES[dtype]

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return inputs["q"].dtype

    def check_shape(self, shape: Shape) -> None:
        super().check_shape(shape)
        b, length, hq, hkv, d, bs, nq = dims_of(shape)
        if min(hq, hkv, d, bs, nq) < 1 or hq % hkv:
            raise ValueError(f"shape: paged_decode_attention takes BxLxHqxHkvxDxBS[xQ] with Hkv dividing Hq and "
                             f"every dim but B and L >= 1; got {'x'.join(map(str, shape))}")

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case(s, dtype, "ragged") for s in [(5, 40, 4, 2, 64, 16), (4, 33, 4, 2, 64, 16, 3),
                                                      (3, 600, 4, 1, 64, 16)]]
        cases += [Case((3, 64, 4, 2, 64, 16), dtype, "contiguous")]
        cases += [Case((3, 50, 4, 2, 64, 16), dtype, "fp8kv"), Case((5, 300, 4, 2, 64, 16), dtype, "fp8kv+ragged")]
        if torch.device(device).type == "cuda":
            cases += [Case((64, 32768, 32, 8, 128, 16), dtype), Case((8, 131072, 64, 8, 128, 64), dtype, "ragged"),
                      Case((32, 4096, 32, 8, 128, 16, 4), dtype, "fp8kv")]
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.lib.launch import multiprocessor_count
        from ridgeline.ops.paged_attention.launch import decode_config
        from ridgeline.ops.paged_attention.rules import split_tokens_for

        b, length, hq, hkv, d, bs, nq = dims_of(case.shape)
        capacity = max(1, -(-length // bs)) * bs
        kv_item = 1 if "fp8kv" in case.variant else case.dtype.itemsize
        cfg = decode_config(capacity, hkv, hq // hkv * nq, d, kv_item, device)
        split = split_tokens_for(cfg, capacity, hkv, multiprocessor_count(torch.device(device)))
        n_splits = -(-capacity // split)
        return {"config": cfg.describe(), "num_warps": cfg.num_warps, "split_tokens": split, "n_splits": n_splits,
                "grid": b * hkv * n_splits, "merge": n_splits > 1}


register_spec(PagedDecodeAttentionSpec())


def _ours() -> Callable[..., Any]:
    from ridgeline.ops.paged_attention.launch import paged_decode_attention

    return paged_decode_attention


register_impl("paged_decode_attention", "ridgeline", "ours", _ours,
              description="ridgeline Triton split-KV kernel over the paged cache + logsumexp merge")
