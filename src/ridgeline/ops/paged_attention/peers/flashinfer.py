"""FlashInfer peer (pip `flashinfer-python`): `BatchDecodeWithPagedKVCacheWrapper` with kv_layout "NHD", the paged
layout of the contract ([num_blocks, block_size, Hkv, D] for K and V, passed as a (k, v) tuple).

Called as serving engines call it: `plan(indptr, indices, last_page_len, Hq, Hkv, D, page_size, ...)` with the
block table in FlashInfer's CSR form, then `run(q, (k_cache, v_cache), k_scale=, v_scale=)`. Engines plan once a
step for all layers; this adapter plans in every call (the CSR conversion reads seq_lens on the host), so its
time includes one plan: say so beside its numbers. One query token per sequence only (its decode wrapper).
Not installed anywhere we run (62 MB wheel and its CUTLASS DSL dependencies, FACTS.md): reports why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "flashinfer-python"
_PKG = OptionalPackage(PIP)
WORKSPACE_BYTES = 128 * 2**20


def _decode() -> Callable[..., Any]:
    mod = _PKG.import_module("flashinfer.decode")
    wrapper_cls = getattr(mod, "BatchDecodeWithPagedKVCacheWrapper", None)
    if wrapper_cls is None:
        raise Unavailable(f"{PIP} {_PKG.version()}: flashinfer.decode has no BatchDecodeWithPagedKVCacheWrapper")
    wrappers: dict[torch.device, Any] = {}

    def run(q, k_cache, v_cache, block_table, seq_lens, scale=None, k_scale=None, v_scale=None):
        if q.dim() != 3:
            raise ValueError("flashinfer decode wrapper: one query token per sequence ([B, Hq, D])")
        if q.device not in wrappers:
            ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
            wrappers[q.device] = wrapper_cls(ws, "NHD")
        w = wrappers[q.device]
        bs = k_cache.shape[1]
        pages = (seq_lens + bs - 1) // bs
        indptr = torch.zeros(q.shape[0] + 1, dtype=torch.int32, device=q.device)
        indptr[1:] = torch.cumsum(pages, 0)
        keep = torch.arange(block_table.shape[1], device=q.device)[None, :] < pages[:, None]
        indices = block_table[keep].to(torch.int32)
        last = torch.where(seq_lens > 0, (seq_lens - 1) % bs + 1, torch.zeros_like(seq_lens)).to(torch.int32)
        w.plan(indptr, indices, last, q.shape[1], k_cache.shape[2], q.shape[2], bs, sm_scale=scale,
               q_data_type=q.dtype, kv_data_type=k_cache.dtype)
        return w.run(q, (k_cache, v_cache), k_scale=k_scale, v_scale=v_scale)

    return run


register_impl("paged_decode_attention", "flashinfer", "peer", _decode,
              description="FlashInfer BatchDecodeWithPagedKVCacheWrapper (NHD), plan + run per call")
