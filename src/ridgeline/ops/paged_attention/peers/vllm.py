"""vLLM peer (pip `vllm`): its Triton unified attention (vllm.attention.ops.triton_unified_attention), which reads
the contract's layout directly (key/value cache [num_blocks, block_size, Hkv, D], block table [B, max_blocks]).

    unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k, softmax_scale, causal,
                      window_size, block_table, softcap, q_descale, k_descale, v_descale)

q is packed [total_q, Hq, D] with cu_seqlens_q (B * Q tokens, Q per sequence), causal with the queries at the end
of each sequence (the contract's semantics). vLLM's CUDA paged_attention_v1/v2 need another K layout
([num_blocks, Hkv, D / x, block_size, x]): calling them would mean a layout copy no engine makes, so they are
not the peer. max_seqlen_k is the block table's capacity (no host read of seq_lens). Not installed here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "vllm"
_PKG = OptionalPackage(PIP)
MODULE = "vllm.attention.ops.triton_unified_attention"


def _unified() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(MODULE), "unified_attention", 16)

    def run(q, k_cache, v_cache, block_table, seq_lens, scale=None, k_scale=None, v_scale=None):
        q4 = q.unsqueeze(1) if q.dim() == 3 else q
        b, nq, hq, d = q4.shape
        packed = q4.reshape(b * nq, hq, d)
        out = torch.empty_like(packed)
        cu = torch.arange(0, b + 1, dtype=torch.int32, device=q.device) * nq
        one = torch.ones((1,), dtype=torch.float32, device=q.device)

        def t(s):
            return s if isinstance(s, torch.Tensor) else one * (1.0 if s is None else float(s))

        sm_scale = d**-0.5 if scale is None else scale
        descale = k_cache.dtype != q.dtype
        fn(packed, k_cache, v_cache, out, cu, nq, seq_lens, block_table.shape[1] * k_cache.shape[1], sm_scale, True,
           (-1, -1), block_table, 0, None, t(k_scale) if descale else None, t(v_scale) if descale else None)
        return out.view(q.shape)

    return run


register_impl("paged_decode_attention", "vllm", "peer", _unified,
              description="vLLM Triton unified_attention on the paged cache (its v1 backend's decode path)")
