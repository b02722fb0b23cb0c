"""PyTorch peers: `torch.nn.functional.scaled_dot_product_attention` pinned to one backend each, and (backward)
the private aten entry points that SDPA's autograd calls for the flash and cuDNN backends.

    with sdpa_kernel(SDPBackend.X): F.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...,
                                                                    scale=..., enable_gqa=...)
q/k/v go in as [B, H, S, D] views of our [B, S, H, D] tensors (no copies; what a model does after its
projections). A backend that refuses a case (a mask on flash, an odd head dim, GQA) raises, and the harness
records that case as a failure of that peer. Causal with S_q != S_k uses torch's bottom-right `causal_lower_right`
bias (our convention); a window is an explicit boolean mask, which flash refuses. Packed (varlen) batches are run
one sequence at a time (SDPA has no varlen entry): a loop, said here because it costs host time.
Measured on the H200 (FACTS.md, B4 H32 S4096 D128 bf16): cuDNN 659 / 540 TFLOP/s (non-causal / causal), flash
349 / 318, memory-efficient 177 / 167.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ridgeline.core.registry import Unavailable, register_impl

BACKENDS = {"sdpa-cudnn": "CUDNN_ATTENTION", "sdpa-flash": "FLASH_ATTENTION",
            "sdpa-efficient": "EFFICIENT_ATTENTION", "sdpa-math": "MATH"}


def _backend(name: str):
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:  # torch < 2.3
        raise Unavailable(f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel: {e}") from None
    member = getattr(SDPBackend, BACKENDS[name], None)
    if member is None:
        raise Unavailable(f"torch {torch.__version__} has no SDPBackend.{BACKENDS[name]}")
    return sdpa_kernel, member


def _mask(sq: int, sk: int, causal: bool, window, device) -> tuple[Any, bool]:
    """(attn_mask, is_causal) for SDPA in our bottom-right convention."""
    from ridgeline.ops.attention.launch import resolve_window

    left, right = resolve_window(causal, window)
    if left < 0 and right < 0:
        return None, False
    if left < 0 and right == 0:
        if sq == sk:
            return None, True
        from torch.nn.attention.bias import causal_lower_right

        return causal_lower_right(sq, sk), False
    pos = torch.arange(sq, device=device)[:, None] + (sk - sq)
    cols = torch.arange(sk, device=device)[None, :]
    ok = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if left >= 0:
        ok &= cols >= pos - left
    if right >= 0:
        ok &= cols <= pos + right
    return ok, False


def _sdpa(q, k, v, causal, window, scale=None):
    """One dense batch [B, S, H, D] through SDPA as [B, H, S, D] views."""
    mask, is_causal = _mask(q.shape[1], k.shape[1], causal, window, q.device)
    kw: dict[str, Any] = {"attn_mask": mask, "is_causal": is_causal, "scale": scale}
    if q.shape[2] != k.shape[2]:
        kw["enable_gqa"] = True
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kw)
    return out.transpose(1, 2)


def _fwd(name: str) -> Callable[[], Callable[..., Any]]:
    def factory() -> Callable[..., Any]:
        sdpa_kernel, backend = _backend(name)

        def attention(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None):
            with sdpa_kernel(backend):
                if cu_seqlens is None:
                    return _sdpa(q, k, v, causal, window)
                out = torch.zeros_like(q)
                c = cu_seqlens.tolist()
                for i in range(len(c) - 1):
                    if c[i + 1] > c[i]:
                        sl = slice(c[i], c[i + 1])
                        out[sl] = _sdpa(q[None, sl], k[None, sl], v[None, sl], causal, window)[0]
                return out

        return attention

    return factory


def _philox(device) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.zeros((), dtype=torch.int64, device=device)
    return z, z


def _bwd_flash() -> Callable[..., Any]:
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_backward", None)
    if op is None:
        raise Unavailable(f"torch {torch.__version__} has no aten._scaled_dot_product_flash_attention_backward")

    def attention_bwd(q, k, v, out, dout, lse, causal=False, window=None, cu_seqlens=None, max_seqlen=None):
        from ridgeline.ops.attention.launch import resolve_window

        left, right = resolve_window(causal, window)
        if cu_seqlens is not None or left >= 0 or (right >= 0 and right != 0) or (
                causal and q.shape[1] != k.shape[1]):
            raise ValueError("sdpa-flash backward: dense batches, no window, causal only with S_q == S_k")
        if q.shape[2] != k.shape[2]:
            raise ValueError("sdpa-flash backward: no GQA (flash's SDPA entry takes equal head counts)")
        seed, offset = _philox(q.device)
        t = (lambda x: x.transpose(1, 2))
        dq, dk, dv = op(t(dout), t(q), t(k), t(v), t(out), lse, torch.empty(0, device=q.device),
                        torch.empty(0, device=q.device), q.shape[1], k.shape[1], 0.0, causal, seed, offset)
        return t(dq), t(dk), t(dv)

    return attention_bwd


def _bwd_cudnn() -> Callable[..., Any]:
    op = getattr(torch.ops.aten, "_scaled_dot_product_cudnn_attention_backward", None)
    if op is None:
        raise Unavailable(f"torch {torch.__version__} has no aten._scaled_dot_product_cudnn_attention_backward")

    def attention_bwd(q, k, v, out, dout, lse, causal=False, window=None, cu_seqlens=None, max_seqlen=None):
        from ridgeline.ops.attention.launch import resolve_window

        left, right = resolve_window(causal, window)
        if cu_seqlens is not None or left >= 0 or (causal and q.shape[1] != k.shape[1]):
            raise ValueError("sdpa-cudnn backward: dense batches, no window, causal only with S_q == S_k")
        seed, offset = _philox(q.device)
        t = (lambda x: x.transpose(1, 2))
        # cuDNN's forward keeps lse as [B, H, S_q, 1] (torch >= 2.5); ours is [B, H, S_q].
        none = torch.empty(0, device=q.device)  # (no bias, no packed offsets: the schema takes tensors)
        dq, dk, dv = op(t(dout), t(q), t(k), t(v), t(out), lse.unsqueeze(-1), seed, offset, none,
                        none, none, q.shape[1], k.shape[1], 0.0, causal)
        return t(dq), t(dk), t(dv)

    return attention_bwd


for _name in BACKENDS:
    register_impl("attention", _name, "peer", _fwd(_name),
                  description=f"F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.{BACKENDS[_name]})")
register_impl("attention_bwd", "sdpa-flash", "peer", _bwd_flash,
              description="aten._scaled_dot_product_flash_attention_backward (SDPA flash backend's autograd)")
register_impl("attention_bwd", "sdpa-cudnn", "peer", _bwd_cudnn,
              description="aten._scaled_dot_product_cudnn_attention_backward (SDPA cuDNN backend's autograd)")
