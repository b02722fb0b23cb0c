"""The attention backward past its rules, as user implementations for `ridgeline bench` / `check` (one run times
the candidate beside the rules' kernels and SDPA's flash and cuDNN backends, and the rules follow from a record):

  ridgeline bench attention_bwd --impl ridgeline --impl scripts/device/attn_bwd_kernels.py:tma \
      --impl sdpa-flash --impl sdpa-cudnn ...

`tma`: both backward kernels at their rules' tiles with the tiles each loop step streams (dK/dV's Q and dO, dQ's
K and V) through TMA descriptors (rules.AttnConfig.tma; the same bits as the pointer loads, GPU-tested). Where
launch.tma_readable refuses a tensor (unaligned strides), that kernel keeps its pointer loads, as the rules would.
"""

from __future__ import annotations

import dataclasses

import torch

from ridgeline.ops.attention.launch import _backward, _check_like, _prepare
from ridgeline.ops.attention.rules import config_for


def tma(q, k, v, out, dout, lse, causal=False, window=None, cu_seqlens=None,
        max_seqlen=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v, cu_q, cu_k, max_q, max_k, scale, left, right = _prepare(q, k, v, causal, None, window, cu_seqlens,
                                                                     max_seqlen)
    masked = left >= 0 or right >= 0
    d = q.shape[-1]
    cfgs = (dataclasses.replace(config_for("dkdv", d, masked), tma=True),
            dataclasses.replace(config_for("dq", d, masked), tma=True))
    return _backward(q, k, v, _check_like("out", out, q), _check_like("dout", dout, q), lse.contiguous(), None,
                     cu_q, cu_k, max_q, max_k, scale, left, right, cfgs=cfgs)
