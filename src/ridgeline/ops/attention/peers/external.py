"""Vendor peers, called the way their users call them (neither is installed here; each says "not installed"):

    flash-attn (pip flash-attn): flash_attn.flash_attn_func(q, k, v, softmax_scale=None, causal=False,
        window_size=(-1, -1)) on [B, S, H, D]; flash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens_q,
        cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None, causal=False, window_size=(-1, -1)) on
        packed [total, H, D]. Its causal mask is bottom-right aligned (>= 2.1), as ours; GQA native.
    FlashInfer (pip flashinfer-python): flashinfer.single_prefill_with_kv_cache(q, k, v, causal=False,
        sm_scale=None, window_left=-1) per sequence on [S, H, D] (NHD), as serving engines call it for one
        request; a batch is a loop over its sequences (host time counted: that is how the entry point is used).
Windows: ours (left, right) maps onto flash-attn's window_size directly and onto FlashInfer's window_left when
right is 0 (causal); other windows are refused by the adapter (a recorded failure).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

_FA = OptionalPackage("flash-attn")
_FI = OptionalPackage("flashinfer-python")


def _bounds(causal: bool, window) -> tuple[int, int]:
    from ridgeline.ops.attention.launch import resolve_window

    return resolve_window(causal, window)


def _flash_attn() -> Callable[..., Any]:
    mod = _FA.import_module("flash_attn")
    dense = _FA.function(mod, "flash_attn_func", 3, ("softmax_scale", "causal", "window_size"))
    packed = _FA.function(mod, "flash_attn_varlen_func", 7, ("softmax_scale", "causal", "window_size"))

    def attention(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None):
        left, right = _bounds(causal, window)
        is_causal = left < 0 and right == 0
        ws = (-1, -1) if is_causal else (left, right)
        if cu_seqlens is None:
            return dense(q, k, v, causal=is_causal, window_size=ws)
        m = max_seqlen if max_seqlen is not None else int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
        return packed(q, k, v, cu_seqlens, cu_seqlens, m, m, causal=is_causal, window_size=ws)

    return attention


def _flashinfer() -> Callable[..., Any]:
    mod = _FI.import_module("flashinfer")
    single = _FI.function(mod, "single_prefill_with_kv_cache", 3, ("causal", "window_left"))

    def attention(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None):
        left, right = _bounds(causal, window)
        if right not in (-1, 0):
            raise ValueError("flashinfer: only a left window (right side causal or unbounded) is expressible")
        if right == -1 and left >= 0:
            raise ValueError("flashinfer: window_left needs the causal right side")
        kw = {"causal": right == 0, "window_left": left}
        if cu_seqlens is None:
            return torch.stack([single(q[b], k[b], v[b], **kw) for b in range(q.shape[0])])
        out = torch.zeros_like(q)
        c = cu_seqlens.tolist()
        for i in range(len(c) - 1):
            if c[i + 1] > c[i]:
                out[c[i]:c[i + 1]] = single(q[c[i]:c[i + 1]], k[c[i]:c[i + 1]], v[c[i]:c[i + 1]], **kw)
        return out

    return attention


register_impl("attention", "flash-attn", "peer", _flash_attn,
              description="flash_attn.flash_attn_func / flash_attn_varlen_func (Dao-AILab FlashAttention-2)")
register_impl("attention", "flashinfer", "peer", _flashinfer,
              description="flashinfer.single_prefill_with_kv_cache per sequence (NHD)")
