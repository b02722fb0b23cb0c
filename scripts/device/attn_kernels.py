"""The attention forward's two kernels, each past the rules, as user implementations for `ridgeline bench` /
`check` (so one run times both beside cuDNN and FlexAttention, and the rules' choice follows from a record):

  ridgeline bench attention --impl ridgeline --impl scripts/device/attn_kernels.py:ws \
      --impl scripts/device/attn_kernels.py:ws_overlap --impl scripts/device/attn_kernels.py:triton ...
  (and :ws_overlap_pingpong)

`ws`, `ws_overlap` and `ws_persistent` raise (a recorded failure) where the Gluon forward cannot run: not sm_90,
windows, D other than 64 / 128 / 256.
"""

from __future__ import annotations

import torch

from ridgeline.ops.attention.launch import _forward, _new_lse, _prepare
from ridgeline.ops.attention.launch_ws import launch_ws, ws_supported
from ridgeline.ops.attention.rules import WS_FORWARD, config_for


def triton(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None) -> torch.Tensor:
    """The Triton forward at its rule's tile (an explicit config bypasses the Gluon dispatch)."""
    args = _prepare(q, k, v, causal, None, window, cu_seqlens, max_seqlen)
    left, right = args[-2], args[-1]
    return _forward(*args, store_lse=False, cfg=config_for("fwd", q.shape[-1], left >= 0 or right >= 0))[0]


def _gluon(q, k, v, causal, window, cu_seqlens, max_seqlen, overlap: bool, pingpong: bool = False,
           pairs: bool = False, persistent: bool = False) -> torch.Tensor:
    q, k, v, cu_q, cu_k, max_q, max_k, scale, left, right = _prepare(q, k, v, causal, None, window, cu_seqlens,
                                                                     max_seqlen)
    varlen = cu_q is not None
    if not ws_supported(q, k, v, varlen, left, right):
        raise ValueError("ws / ws_overlap: the Gluon forward runs dense or packed full or causal attention, "
                         "D 64, 128 or 256, 16-bit, on sm_90; not this call")
    out = (torch.zeros if varlen else torch.empty)(q.shape, dtype=q.dtype, device=q.device)
    launch_ws(q, k, v, out, _new_lse(q, varlen), scale, right == 0, False, WS_FORWARD.stages, overlap,
              pingpong=pingpong, pairs=pairs, persistent=persistent, cu_q=cu_q, cu_k=cu_k, max_q=max_q,
              max_k=max_k, left=left)
    return out


def ws_persistent(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None) -> torch.Tensor:
    """Overlapped, one program an SM walking the query tiles (causal: in pairs m, n_m - 1 - m, not overlapped:
    ptxas moves the PV wait up in that form, attention.md)."""
    return _gluon(q, k, v, causal, window, cu_seqlens, max_seqlen, not causal, pairs=causal, persistent=True)


def ws(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None) -> torch.Tensor:
    """The warp-specialized Gluon forward at the rules' pipeline depth, the softmax after each tile's S."""
    return _gluon(q, k, v, causal, window, cu_seqlens, max_seqlen, False)


def ws_overlap(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None) -> torch.Tensor:
    """The same with each warpgroup's softmax under its previous tile's PV (FlashAttention-3's pipelining)."""
    return _gluon(q, k, v, causal, window, cu_seqlens, max_seqlen, True)


def ws_overlap_pingpong(q, k, v, causal=False, window=None, cu_seqlens=None, max_seqlen=None) -> torch.Tensor:
    """The overlapped forward with the two warpgroups taking turns issuing their wgmmas (FlashAttention-3's
    ping-pong)."""
    return _gluon(q, k, v, causal, window, cu_seqlens, max_seqlen, True, True)
