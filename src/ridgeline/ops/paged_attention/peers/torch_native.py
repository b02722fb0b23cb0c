"""PyTorch peers of paged decode attention, called as PyTorch users write them:

- "gather-sdpa": gather each sequence's pages into a contiguous [B, Hkv, L, D] cache (index_select over the block
  table), dequantize fp8, then `F.scaled_dot_product_attention(..., attn_mask, enable_gqa=True)` (the baseline the
  issue names; torch picks the backend: a boolean mask rules out flash).
- "flex-decode": FlexAttention under torch.compile on the same gathered cache, its block mask from seq_lens (the
  mask_mod sees keys < seq_len and the causal tail of Q > 1), built once per shape over device buffers that each
  call refreshes on the device (FlexDecodeMask): the call is CUDA-graph capturable. torch >= 2.6 also ships
  torch.nn.attention.experimental._paged_attention.PagedAttention (private; it keeps its own page table and
  converts a logical BlockMask to the physical layout, with the flex block size tied to the page size); it is not
  used here, so this peer pays the gather too (open point: a paged flex peer).
- "sdpa-flash-contiguous": SDPA's flash backend over a contiguous cache (the issue's 2.5 TB/s line, FACTS.md): only
  for the "contiguous" variant (identity block table, every seq_len = the capacity), where k_cache viewed as
  [B, L, Hkv, D] is the contiguous cache without a copy; Q = 1 only.
Rows that see no key are zeros, as the contract defines (SDPA gives NaN there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ridgeline.core.registry import Unavailable, register_impl

OP = "paged_decode_attention"


def _scale_value(s: Any) -> float:
    return 1.0 if s is None else float(s)


def gather_kv(q, k_cache, v_cache, block_table, k_scale=None, v_scale=None):
    """[B, Hkv, L, D] K and V in q's dtype, L = the block table's capacity."""
    b, m = block_table.shape
    _, bs, hkv, d = k_cache.shape
    idx = block_table.reshape(-1)
    k = k_cache.index_select(0, idx).view(b, m * bs, hkv, d).transpose(1, 2)
    v = v_cache.index_select(0, idx).view(b, m * bs, hkv, d).transpose(1, 2)
    if k.dtype != q.dtype:  # fp8: dequantize
        k = (k.to(torch.float32) * _scale_value(k_scale)).to(q.dtype)
        v = (v.to(torch.float32) * _scale_value(v_scale)).to(q.dtype)
    elif k_scale is not None or v_scale is not None:
        k, v = k * _scale_value(k_scale), v * _scale_value(v_scale)
    return k, v


def visible_mask(seq_lens: torch.Tensor, q_tokens: int, length: int) -> torch.Tensor:
    """[B, 1, Q, L] bool: key j is seen by query token i when j <= seq_len - Q + i."""
    j = torch.arange(length, device=seq_lens.device)
    last = seq_lens[:, None] - q_tokens + torch.arange(q_tokens, device=seq_lens.device)[None, :]
    return (j[None, None, :] <= last[:, :, None])[:, None]


def _q4(q: torch.Tensor) -> torch.Tensor:
    return q.unsqueeze(1) if q.dim() == 3 else q


def _finish(q: torch.Tensor, out_bhqd: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = out_bhqd.transpose(1, 2)  # [B, Q, Hq, D]
    out = torch.where(mask.any(-1).transpose(1, 2)[..., None], out, torch.zeros((), dtype=out.dtype,
                                                                                  device=out.device))
    return out.squeeze(1) if q.dim() == 3 else out.contiguous()


def gather_sdpa(q, k_cache, v_cache, block_table, seq_lens, scale=None, k_scale=None, v_scale=None):
    if q.shape[0] == 0:
        return torch.empty_like(q)
    q4 = _q4(q)
    k, v = gather_kv(q, k_cache, v_cache, block_table, k_scale, v_scale)
    mask = visible_mask(seq_lens, q4.shape[1], k.shape[2])
    out = F.scaled_dot_product_attention(q4.transpose(1, 2), k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    return _finish(q, out, mask)


_FLEX: dict[str, Any] = {}
FLEX_BLOCK = 128  # FlexAttention's default sparse block (queries and keys)
MAX_MASKS = 64  # decode states kept (one per shape: graph-cold's rotating input sets share one)


def _flex_fns():
    if not _FLEX:
        try:
            from torch.nn.attention.flex_attention import BlockMask, flex_attention
        except ImportError as e:
            raise Unavailable(f"torch {torch.__version__} has no FlexAttention ({e})") from None
        _FLEX["flex"] = torch.compile(flex_attention, dynamic=False)
        _FLEX["block_mask"] = BlockMask
        _FLEX["states"] = {}
    return _FLEX["flex"], _FLEX["block_mask"]


class FlexDecodeMask:
    """The block mask of one decode shape (B, Q, L, device), built once, outside any timed call: a BlockMask over
    persistent device buffers (seq_lens, kv block counts, kv block indices 0..n-1) whose mask_mod reads the
    seq_lens buffer. A call refreshes the buffers from its seq_lens with device ops only (no host read, no new
    CPU tensor): what a serving engine's captured decode step does, and what makes the call graph-capturable
    (create_block_mask per call was not, on the H200). The same BlockMask object every call also keeps
    torch.compile's guards stable (no recompile per call). Only the kv side is refreshed: q_num_blocks /
    q_indices serve the backward, which decode never runs."""

    def __init__(self, block_mask_cls, batch: int, q_tokens: int, length: int, device) -> None:
        n = max(1, -(-length // FLEX_BLOCK))
        self.lens = torch.zeros(batch, dtype=torch.int32, device=device)
        self.kv_num_blocks = torch.full((batch, 1, 1), n, dtype=torch.int32, device=device)
        kv_indices = torch.arange(n, dtype=torch.int32, device=device).expand(batch, 1, 1, n).contiguous()
        lens = self.lens

        def mask_mod(b, h, qi, kj):  # key j is seen by query token i when j <= seq_len - Q + i
            return kj <= lens[b] - q_tokens + qi

        self.block_mask = block_mask_cls.from_kv_blocks(self.kv_num_blocks, kv_indices,
                                                        BLOCK_SIZE=(FLEX_BLOCK, FLEX_BLOCK), mask_mod=mask_mod,
                                                        seq_lengths=(q_tokens, length))

    def update(self, seq_lens: torch.Tensor):
        """Point the mask at these seq_lens (blocks past a sequence's end are skipped); returns the BlockMask."""
        self.lens.copy_(seq_lens)
        self.kv_num_blocks.view(-1).copy_(torch.clamp((seq_lens + (FLEX_BLOCK - 1)) // FLEX_BLOCK, min=0))
        return self.block_mask


def flex_decode_mask(batch: int, q_tokens: int, length: int, device) -> FlexDecodeMask:
    _, block_mask_cls = _flex_fns()
    states: dict[tuple, FlexDecodeMask] = _FLEX["states"]
    key = (batch, q_tokens, length, str(device))
    if key not in states:
        while len(states) >= MAX_MASKS:
            states.pop(next(iter(states)))
        states[key] = FlexDecodeMask(block_mask_cls, batch, q_tokens, length, device)
    return states[key]


def flex_decode(q, k_cache, v_cache, block_table, seq_lens, scale=None, k_scale=None, v_scale=None):
    if q.shape[0] == 0:
        return torch.empty_like(q)
    flex, _ = _flex_fns()
    q4 = _q4(q)
    nq = q4.shape[1]
    k, v = gather_kv(q, k_cache, v_cache, block_table, k_scale, v_scale)
    length = k.shape[2]
    block_mask = flex_decode_mask(q4.shape[0], nq, length, q.device).update(seq_lens)
    try:
        out = flex(q4.transpose(1, 2), k, v, block_mask=block_mask, scale=scale, enable_gqa=True)
    except RuntimeError as e:
        if q.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"flex-decode: torch {torch.__version__}'s compiled FlexAttention is not CUDA-graph "
                               f"capturable here ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
        raise
    return _finish(q, out, visible_mask(seq_lens, nq, length))


def sdpa_flash_contiguous(q, k_cache, v_cache, block_table, seq_lens, scale=None, k_scale=None, v_scale=None):
    b, m = block_table.shape
    nb, bs, hkv, d = k_cache.shape
    if q.dim() != 3 or nb != b * m or k_cache.dtype != q.dtype:
        raise ValueError("sdpa-flash-contiguous: needs the 'contiguous' layout (identity block table, every seq_len "
                         "the capacity), one query token and a cache in q's dtype")
    k = k_cache.view(b, m * bs, hkv, d).transpose(1, 2)
    v = v_cache.view(b, m * bs, hkv, d).transpose(1, 2)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(q.unsqueeze(2), k, v, scale=scale, enable_gqa=True)
    if k_scale is not None or v_scale is not None:
        raise ValueError("sdpa-flash-contiguous: no KV scales")
    return out.squeeze(2)


def _gather() -> Callable[..., Any]:
    return gather_sdpa


def _flex() -> Callable[..., Any]:
    _flex_fns()
    return flex_decode


def _flash() -> Callable[..., Any]:
    if not torch.cuda.is_available():
        raise Unavailable("SDPA's flash backend needs CUDA")
    return sdpa_flash_contiguous


register_impl(OP, "gather-sdpa", "peer", _gather,
              description="index_select the pages into [B, Hkv, L, D], then SDPA with a mask and enable_gqa")
register_impl(OP, "flex-decode", "peer", _flex,
              description="FlexAttention (torch.compile) on the gathered cache, block mask from seq_lens")
register_impl(OP, "sdpa-flash-contiguous", "peer", _flash,
              description="SDPA flash backend on the cache viewed as contiguous (the 'contiguous' variant only)")
