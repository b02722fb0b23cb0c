"""KV-cache bytes per token, per layer type, and vLLM's block/group accounting.

Per token and layer, per TP rank (exact):

* full / sliding-window attention: ``2 (K and V) x kv_heads_per_rank x head_dim x kv_bytes``,
  with ``kv_heads_per_rank = max(1, num_kv_heads // tp)`` (so KV heads are replicated when
  TP > num_kv_heads);
* MLA: one latent of ``kv_lora_rank + qk_rope_head_dim`` elements, not per head, and the same
  latent on every rank (vLLM ``MLAAttentionSpec``: ``num_kv_heads=1``).

Per request (what vLLM reserves, ``KVCacheSpec.max_memory_usage_bytes``):

* full attention: ``cdiv(L, block) x page``;
* sliding window ``W``: ``(cdiv(min(W - 1 + max_num_batched_tokens, L), block) + 1) x page``
  (a chunked prefill holds the window plus one chunk; +1 block because the window need not start
  on a block boundary). The plain decode-time cap, ``min(L, W)`` tokens, is reported alongside.

Hybrid models (full + sliding layers) use vLLM's hybrid allocator layout: layers of each type are
cut into groups of ``group_size`` layers (padding the last group), every group draws blocks from
one shared pool, and one block costs ``group_size x page`` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelSpec
from .weights import cdiv, kv_heads_per_rank

KV_DTYPES = {"bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class KVLayerType:
    """Layers sharing one KV layout."""

    kind: str  # "full", "sliding" or "mla"
    window: int | None
    num_layers: int
    bytes_per_token_rank: int  # per layer, per rank
    bytes_per_token_model: int  # per layer, unsharded (one copy)
    heads_per_rank: int
    elems_per_head: int  # head_dim for K (and V), latent width for MLA

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.kind, self.window)

    def tokens_held(self, length: int, block_size: int, max_num_batched_tokens: int) -> int:
        """Token slots (a multiple of block_size) one request of ``length`` tokens holds per layer."""
        if self.window is None:
            return cdiv(length, block_size) * block_size
        held = min(self.window - 1 + max_num_batched_tokens, length)
        return (cdiv(held, block_size) + 1) * block_size

    def blocks_held(self, length: int, block_size: int, max_num_batched_tokens: int) -> int:
        return self.tokens_held(length, block_size, max_num_batched_tokens) // block_size


def kv_layer_types(spec: ModelSpec, tp: int, kv_bytes: int, *, disable_sliding_window: bool = False
                   ) -> list[KVLayerType]:
    if spec.mla is not None:
        latent = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim
        b = latent * kv_bytes
        return [KVLayerType("mla", None, spec.num_layers, b, b, 1, latent)]
    hl = kv_heads_per_rank(spec, tp)
    per_rank = 2 * hl * spec.head_dim * kv_bytes
    per_model = 2 * spec.num_kv_heads * spec.head_dim * kv_bytes
    counts: dict[int | None, int] = {}
    for w in spec.layer_windows:
        key = None if disable_sliding_window else w
        counts[key] = counts.get(key, 0) + 1
    out = []
    for w, n in sorted(counts.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0)):
        out.append(KVLayerType("full" if w is None else "sliding", w, n, per_rank, per_model, hl, spec.head_dim))
    return out


@dataclass(frozen=True)
class GroupLayout:
    """vLLM KV cache groups: ``num_groups`` groups of ``group_size`` layer slots each."""

    group_size: int
    groups: tuple[tuple[tuple[str, int | None], int], ...]  # (layer type key, real layers in the group)
    padding_layers: int
    page_bytes: int  # one block of one layer, per rank

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    @property
    def block_bytes(self) -> int:
        """Bytes one block id costs across all tensors (per rank)."""
        return self.group_size * self.page_bytes


def group_layout(types: list[KVLayerType], block_size: int) -> GroupLayout:
    pages = {t.bytes_per_token_rank * block_size for t in types}
    if len(pages) != 1:  # pragma: no cover - not produced by supported architectures
        raise ValueError("layer types with different KV page sizes are not modelled")
    page = pages.pop()
    if len(types) == 1:
        t = types[0]
        return GroupLayout(t.num_layers, ((t.key, t.num_layers),), 0, page)
    counts = [t.num_layers for t in types]
    lo, hi = min(counts), max(counts)
    group_size = hi if hi < lo * 1.25 else lo
    groups: list[tuple[tuple[str, int | None], int]] = []
    for t in types:
        left = t.num_layers
        while left > 0:
            groups.append((t.key, min(group_size, left)))
            left -= group_size
    padding = len(groups) * group_size - sum(counts)
    return GroupLayout(group_size, tuple(groups), padding, page)


def blocks_per_request(types: list[KVLayerType], layout: GroupLayout, length: int, block_size: int,
                       max_num_batched_tokens: int) -> int:
    by_key = {t.key: t for t in types}
    return sum(by_key[key].blocks_held(length, block_size, max_num_batched_tokens) for key, _ in layout.groups)


def needed_bytes(types: list[KVLayerType], length: int, block_size: int, max_num_batched_tokens: int) -> int:
    """KV bytes (per rank) vLLM requires for one request of ``length`` tokens (real layers, no padding)."""
    return sum(t.num_layers * t.tokens_held(length, block_size, max_num_batched_tokens) * t.bytes_per_token_rank
               for t in types)


def window_capped_bytes(types: list[KVLayerType], length: int) -> int:
    """KV bytes (per rank) one request keeps at steady-state decode: sliding layers capped at the window."""
    return sum(t.num_layers * min(length, t.window or length) * t.bytes_per_token_rank for t in types)


def largest_length(types: list[KVLayerType], pool_bytes: int, block_size: int, max_num_batched_tokens: int,
                   limit: int = 1 << 40) -> int | None:
    """Longest request length whose :func:`needed_bytes` fits ``pool_bytes``; None if unbounded."""
    if pool_bytes <= 0 or needed_bytes(types, 1, block_size, max_num_batched_tokens) > pool_bytes:
        return 0
    if needed_bytes(types, limit, block_size, max_num_batched_tokens) <= pool_bytes:
        return None
    lo, hi = 1, limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if needed_bytes(types, mid, block_size, max_num_batched_tokens) <= pool_bytes:
            lo = mid
        else:
            hi = mid
    return lo
