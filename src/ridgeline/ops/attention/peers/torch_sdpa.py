"""PyTorch peers: `torch.nn.functional.scaled_dot_product_attention` pinned to one backend each, and (backward)
the private aten entry points that SDPA's autograd calls for the flash and cuDNN backends.

    with sdpa_kernel(SDPBackend.X): F.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...,
                                                                    scale=..., enable_gqa=...)
q/k/v go in as [B, H, S, D] views of our [B, S, H, D] tensors (no copies; what a model does after its
projections). A backend that refuses a case (a mask on flash, an odd head dim, GQA) raises, and the harness
records that case as a failure of that peer. Causal with S_q != S_k uses torch's bottom-right `causal_lower_right`
bias (our convention); a window is an explicit boolean mask, which flash refuses. Packed (varlen) batches are run
one sequence at a time (SDPA has no varlen entry): a loop, said here because it costs host time; cuDNN refuses
them by name (its per-sequence calls found no kernel on the H200).
Backward: the aten entry points are called with the arguments SDPA's autograd gives them after a dense forward
(undefined cum_seq offsets and bias, lse in the forward's layout; see flash_bwd_args / cudnn_bwd_args). Both take
GQA natively (flash's mha_bwd sums dK/dV over each group of H_q / H_kv heads inside the timed call).
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
    key = (sq, sk, left, right, str(torch.device(device)))
    if key not in _WINDOW_MASKS:  # built once per shape, as a model builds its mask once for all its layers
        while len(_WINDOW_MASKS) >= MAX_WINDOW_MASKS:
            _WINDOW_MASKS.pop(next(iter(_WINDOW_MASKS)))
        pos = torch.arange(sq, device=device)[:, None] + (sk - sq)
        cols = torch.arange(sk, device=device)[None, :]
        ok = torch.ones(sq, sk, dtype=torch.bool, device=device)
        if left >= 0:
            ok &= cols >= pos - left
        if right >= 0:
            ok &= cols <= pos + right
        _WINDOW_MASKS[key] = ok
    return _WINDOW_MASKS[key], False


# Window masks (S_q x S_k bools) kept per shape: building one per call was timed as the peer's work.
_WINDOW_MASKS: dict[tuple, torch.Tensor] = {}
MAX_WINDOW_MASKS = 4


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
                if name == "sdpa-cudnn":  # its per-sequence calls raise "No available kernel" (H200, torch 2.11)
                    raise ValueError("cuDNN SDPA: no packed variable-length batches")
                out = torch.zeros_like(q)
                c = cu_seqlens.tolist()
                for i in range(len(c) - 1):
                    if c[i + 1] > c[i]:
                        sl = slice(c[i], c[i + 1])
                        out[sl] = _sdpa(q[None, sl], k[None, sl], v[None, sl], causal, window)[0]
                return out

        return attention

    return factory


def _dense_causal(name: str, q, k, causal: bool, window, cu_seqlens) -> bool:
    """is_causal for SDPA's backward entry points, or a one-line refusal of what they cannot express: they take
    dense [B, H, S, D] batches and no window, and their causal mask is top-left aligned (ours is bottom-right,
    the same only when S_q == S_k)."""
    from ridgeline.ops.attention.launch import resolve_window

    if cu_seqlens is not None:
        raise ValueError(f"{name} backward: no packed variable-length batches (SDPA's entry takes dense ones)")
    left, right = resolve_window(causal, window)
    if left >= 0 or right > 0:
        raise ValueError(f"{name} backward: no window (SDPA's entry takes none)")
    is_causal = right == 0
    if is_causal and q.shape[1] != k.shape[1]:
        raise ValueError(f"{name} backward: causal only with S_q == S_k (its mask is top-left aligned, ours "
                         "bottom-right)")
    return is_causal


def _bhsd(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2)  # our [B, S, H, D] as the [B, H, S, D] view SDPA's autograd saves (no copy)


_NO_RNG: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}


def _no_rng(device) -> tuple[torch.Tensor, torch.Tensor]:
    """(philox seed, offset) for dropout 0: never read by either backward, but the schema takes tensors. Made once
    per device (SDPA's autograd passes the forward's; a fresh torch.zeros per call was a fill kernel timed as the
    peer's work)."""
    key = str(torch.device(device))
    if key not in _NO_RNG:
        z = torch.zeros((), dtype=torch.int64, device=device)
        _NO_RNG[key] = (z, z)
    return _NO_RNG[key]


def flash_bwd_args(q, k, v, out, dout, lse, is_causal: bool) -> tuple:
    """The arguments of aten._scaled_dot_product_flash_attention_backward as SDPA's autograd passes them after a
    dense forward: cum_seq_q / cum_seq_k are undefined tensors (None here; a defined one, even empty, selects the
    varlen kernel, which wants int32 offsets), lse the forward's [B, H, S_q] fp32. GQA goes in as is: flash's
    mha_bwd takes H_kv | H_q and sums dK / dV over each group itself."""
    seed, offset = _no_rng(q.device)
    return (_bhsd(dout), _bhsd(q), _bhsd(k), _bhsd(v), _bhsd(out), lse, None, None, q.shape[1], k.shape[1], 0.0,
            is_causal, seed, offset)


def _bwd_flash() -> Callable[..., Any]:
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_backward", None)
    if op is None:
        raise Unavailable(f"torch {torch.__version__} has no aten._scaled_dot_product_flash_attention_backward")

    def attention_bwd(q, k, v, out, dout, lse, causal=False, window=None, cu_seqlens=None, max_seqlen=None):
        is_causal = _dense_causal("sdpa-flash", q, k, causal, window, cu_seqlens)
        dq, dk, dv = op(*flash_bwd_args(q, k, v, out, dout, lse, is_causal))
        return _bhsd(dq), _bhsd(dk), _bhsd(dv)

    return attention_bwd


_CUDNN_LSE_DIMS: dict[str, int] = {}


def cudnn_lse_dims(device) -> int:
    """Rank of the logsumexp cuDNN's SDPA forward returns on this torch ([B, H, S_q, 1] or [B, H, S_q]): its
    backward takes that tensor back, so one tiny forward, once per device and outside any timed call, says which
    (torch has changed it between releases)."""
    key = str(device)
    if key not in _CUDNN_LSE_DIMS:
        fwd = torch.ops.aten._scaled_dot_product_cudnn_attention
        x = torch.ones(1, 1, 64, 64, dtype=torch.bfloat16, device=device)
        try:
            lse = fwd(x, x, x, None, True, 0.0, False, False)[1]
        except RuntimeError:  # the probe found no kernel: the meta kernel's layout, which torch keeps in step
            lse = fwd(*[torch.empty(1, 1, 64, 64, dtype=torch.bfloat16, device="meta")] * 3, None, True)[1]
        _CUDNN_LSE_DIMS[key] = lse.dim()
    return _CUDNN_LSE_DIMS[key]


def cudnn_bwd_args(q, k, v, out, dout, lse, is_causal: bool, lse_dims: int) -> tuple:
    """The arguments of aten._scaled_dot_product_cudnn_attention_backward after a dense forward: no attn_bias and
    no cum_seq offsets (undefined tensors: a defined cum_seq_q selects the nested-tensor path, and a defined
    1-D bias is expanded with its dim 1, the IndexError the H200 showed), lse in the forward's layout."""
    seed, offset = _no_rng(q.device)
    stats = lse.unsqueeze(-1) if lse_dims == 4 else lse
    return (_bhsd(dout), _bhsd(q), _bhsd(k), _bhsd(v), _bhsd(out), stats, seed, offset, None, None, None,
            q.shape[1], k.shape[1], 0.0, is_causal)


def _bwd_cudnn() -> Callable[..., Any]:
    op = getattr(torch.ops.aten, "_scaled_dot_product_cudnn_attention_backward", None)
    if op is None:
        raise Unavailable(f"torch {torch.__version__} has no aten._scaled_dot_product_cudnn_attention_backward")

    def attention_bwd(q, k, v, out, dout, lse, causal=False, window=None, cu_seqlens=None, max_seqlen=None):
        is_causal = _dense_causal("sdpa-cudnn", q, k, causal, window, cu_seqlens)
        dq, dk, dv = op(*cudnn_bwd_args(q, k, v, out, dout, lse, is_causal, cudnn_lse_dims(q.device)))
        return _bhsd(dq), _bhsd(dk), _bhsd(dv)

    return attention_bwd


for _name in BACKENDS:
    register_impl("attention", _name, "peer", _fwd(_name),
                  description=f"F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.{BACKENDS[_name]})")
register_impl("attention_bwd", "sdpa-flash", "peer", _bwd_flash,
              description="aten._scaled_dot_product_flash_attention_backward (SDPA flash backend's autograd; GQA "
                          "native: flash sums dK/dV over each group inside the timed call)")
register_impl("attention_bwd", "sdpa-cudnn", "peer", _bwd_cudnn,
              description="aten._scaled_dot_product_cudnn_attention_backward (SDPA cuDNN backend's autograd; GQA "
                          "passed as is)")
