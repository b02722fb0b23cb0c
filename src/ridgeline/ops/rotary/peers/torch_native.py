"""PyTorch peers: vLLM's RotaryEmbedding.forward_native and Hugging Face's apply_rotary_pos_emb in eager PyTorch,
and torch.compile (dynamic=False) of the same expressions.

Written from what those functions compute (the float math and the roundings in the input dtype), not copied:
- serving (vLLM forward_native): gather cos|sin rows at positions, cast them to q's dtype, rotate the first
  rot_dim columns of each head (NeoX halves or GPT-J pairs) in q's dtype, concatenate the pass-through columns,
  and return new tensors (query, key); the inputs are left as they are.
- training (HF): q * cos + rotate_half(q) * sin with cos, sin unsqueezed at dim 1; its backward as autograd
  evaluates it: dq * cos + rotate_half^T(dq * sin).
"""

from __future__ import annotations

import torch

from ridgeline.core.registry import register_impl
from ridgeline.lib.peers import compiled_factory


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, neox: bool) -> torch.Tensor:
    """x [T, H, R], cos/sin [T, R/2] -> rotated x, in x's dtype (vLLM's native rotation)."""
    cos, sin = cos.unsqueeze(-2).to(x.dtype), sin.unsqueeze(-2).to(x.dtype)
    if neox:
        x1, x2 = torch.chunk(x, 2, dim=-1)
    else:
        x1, x2 = x[..., ::2], x[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if neox:
        return torch.cat((o1, o2), dim=-1)
    return torch.stack((o1, o2), dim=-1).flatten(-2)


def native_rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None,
                            head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool
                            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """vLLM's RotaryEmbedding.forward_native: new (query, key) of the inputs' shapes."""
    positions = positions.flatten()
    tokens = positions.shape[0]
    rot = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)

    def apply(x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.view(tokens, -1, head_size)
        rotated = _rotate(x[..., :rot], cos, sin, is_neox)
        return torch.cat((rotated, x[..., rot:]), dim=-1).reshape(shape)

    return apply(query), (apply(key) if key is not None else None)


def hf_apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)."""
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    h = q.shape[-1] // 2

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def hf_apply_rotary_pos_emb_backward(dq: torch.Tensor, dk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """What autograd computes for apply_rotary_pos_emb's q and k (mul backward, then cat/neg/slice backward)."""
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    h = dq.shape[-1] // 2

    def rotate_half_t(y: torch.Tensor) -> torch.Tensor:
        return torch.cat((y[..., h:], -y[..., :h]), dim=-1)

    return dq * cos + rotate_half_t(dq * sin), dk * cos + rotate_half_t(dk * sin)


register_impl("rotary_embedding", "torch-eager", "peer", lambda: native_rotary_embedding,
              description="vLLM RotaryEmbedding.forward_native in eager PyTorch (new q, k)")
register_impl("rotary_embedding", "torch-compile", "peer", compiled_factory(native_rotary_embedding),
              description="torch.compile(dynamic=False) of vLLM's forward_native (new q, k)")
register_impl("rotary_train", "torch-eager", "peer", lambda: hf_apply_rotary_pos_emb,
              description="Hugging Face apply_rotary_pos_emb in eager PyTorch")
register_impl("rotary_train", "torch-compile", "peer", compiled_factory(hf_apply_rotary_pos_emb),
              description="torch.compile(dynamic=False) of Hugging Face apply_rotary_pos_emb")
register_impl("rotary_train_bwd", "torch-eager", "peer", lambda: hf_apply_rotary_pos_emb_backward,
              description="autograd's backward of Hugging Face apply_rotary_pos_emb, as eager PyTorch")
register_impl("rotary_train_bwd", "torch-compile", "peer", compiled_factory(hf_apply_rotary_pos_emb_backward),
              description="torch.compile(dynamic=False) of that backward")
