"""Plain-torch stand-ins for the rotary APIs of Liger-Kernel, vLLM, FlashInfer and sgl-kernel: their names,
signatures and in-place conventions (what the adapters must call), each with the documented semantics.
`build_*(broken=True)` gives a library that lacks the function (an older release)."""

from __future__ import annotations

import types
from typing import Any

import torch

from stand_ins import module

CALLS: list[str] = []


def _inplace_rope(positions, query, key, head_size, cos_sin_cache, is_neox, need_fp32=False):
    if need_fp32 and cos_sin_cache.dtype != torch.float32:
        raise ValueError("cos_sin_cache should be float32")
    from ridgeline.ops.rotary.peers.torch_native import native_rotary_embedding

    q, k = native_rotary_embedding(positions, query.float(), key.float(), head_size, cos_sin_cache.float(), is_neox)
    query.copy_(q)
    key.copy_(k)


def build_vllm(broken: bool = False) -> dict[str, types.ModuleType]:
    def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
        CALLS.append("vllm")
        _inplace_rope(positions, query, key, head_size, cos_sin_cache, is_neox)

    ops = module("vllm._custom_ops", **({} if broken else {"rotary_embedding": rotary_embedding}))
    return {"vllm": module("vllm", package=True, _custom_ops=ops), "vllm._custom_ops": ops}


def _fp32_cache_rope(name: str):
    def apply_rope_with_cos_sin_cache_inplace(positions, query, key, head_size, cos_sin_cache, is_neox=True):
        CALLS.append(name)
        _inplace_rope(positions, query, key, head_size, cos_sin_cache, is_neox, need_fp32=True)

    return apply_rope_with_cos_sin_cache_inplace


def build_flashinfer(broken: bool = False) -> dict[str, types.ModuleType]:
    rope = module("flashinfer.rope", **({} if broken else {
        "apply_rope_with_cos_sin_cache_inplace": _fp32_cache_rope("flashinfer")}))
    return {"flashinfer": module("flashinfer", package=True, rope=rope), "flashinfer.rope": rope}


def build_sglang(broken: bool = False) -> dict[str, types.ModuleType]:
    attrs = {} if broken else {"apply_rope_with_cos_sin_cache_inplace": _fp32_cache_rope("sglang")}
    return {"sgl_kernel": module("sgl_kernel", package=True, **attrs)}


def _liger_rope(q, k, cos, sin, backward):
    """Liger's convention: rotate the physical [B, S, H, D] buffer (q.transpose(1, 2).contiguous()) in place."""
    from ridgeline.ops.rotary.peers.torch_native import hf_apply_rotary_pos_emb, hf_apply_rotary_pos_emb_backward

    if cos.dim() == 4:
        cos, sin = cos.squeeze(1), sin.squeeze(1)
    fn = hf_apply_rotary_pos_emb_backward if backward else hf_apply_rotary_pos_emb
    qo, ko = fn(q.float(), k.float(), cos.float(), sin.float())
    qb, kb = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()
    qb.copy_(qo.transpose(1, 2))
    kb.copy_(ko.transpose(1, 2))
    return qb.transpose(1, 2), kb.transpose(1, 2)


class LigerRopeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q, k, cos, sin, position_ids=None, unsqueeze_dim=1, rotary_dim=None):
        CALLS.append("liger")
        ctx.save_for_backward(cos, sin)
        return _liger_rope(q, k, cos, sin, False)

    @staticmethod
    def backward(ctx: Any, dq, dk):
        cos, sin = ctx.saved_tensors
        return (*_liger_rope(dq, dk, cos, sin, True), None, None, None, None, None)


def rope_backward(dq, dk, cos, sin, position_ids=None, unsqueeze_dim=1, rotary_dim=None):
    CALLS.append("liger-bwd")
    return _liger_rope(dq, dk, cos, sin, True)


def build_liger(broken: bool = False) -> dict[str, types.ModuleType]:
    attrs = {} if broken else {"LigerRopeFunction": LigerRopeFunction, "rope_backward": rope_backward}
    rope = module("liger_kernel.ops.rope", **attrs)
    ops = module("liger_kernel.ops", package=True, rope=rope)
    return {"liger_kernel": module("liger_kernel", package=True, ops=ops), "liger_kernel.ops": ops,
            "liger_kernel.ops.rope": rope}
