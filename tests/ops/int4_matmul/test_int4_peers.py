"""Peers of int4_matmul on the CPU: availability answers, cuBLAS-on-dequantized agreement, weight conversions."""

from __future__ import annotations

import pytest
import torch

from ridgeline.core.registry import resolve
from ridgeline.ops.int4_matmul.pack import pack_int4, unpack_nibbles
from ridgeline.ops.int4_matmul.peers.torch_native import inner_k_tiles_for
from ridgeline.ops.int4_matmul.peers.vllm import to_gptq


def test_unavailable_answers():
    assert resolve("int4_matmul", "vllm").reason == "vllm not installed"
    if not torch.cuda.is_available():
        assert "CUDA only" in resolve("int4_matmul", "torch-int4").reason


def test_cublas_peer_agrees_and_sees_refreshed_weights():
    fn = resolve("int4_matmul", "cublas-bf16").fn
    w = torch.randn((24, 256)).to(torch.float16)
    wp, s = pack_int4(w)
    x = torch.randn((3, 256), dtype=torch.float16)
    from ridgeline.ops.int4_matmul.pack import unpack_int4

    ref = x.double() @ unpack_int4(wp, s).t()
    assert torch.allclose(fn(x, wp, s, 128).double(), ref, atol=0.05, rtol=2e-3)
    wp2, s2 = pack_int4(torch.randn((24, 256)).to(torch.float16))
    wp.copy_(wp2)
    s.copy_(s2)  # in place: the version counters move, the cached conversion must not be reused
    ref2 = x.double() @ unpack_int4(wp, s).t()
    assert torch.allclose(fn(x, wp, s, 128).double(), ref2, atol=0.05, rtol=2e-3)


def test_gptq_layout():
    wp, _ = pack_int4(torch.randn((16, 256)))
    words = to_gptq(wp)
    assert words.shape == (32, 16) and words.dtype == torch.int32
    q = unpack_nibbles(wp)  # [N, K]
    for kk, nn in [(0, 0), (9, 3), (255, 15)]:
        assert int((words[kk // 8, nn] >> (4 * (kk % 8))) & 15) - 8 == int(q[nn, kk])


def test_inner_k_tiles():
    assert inner_k_tiles_for(4096) == 8 and inner_k_tiles_for(96) == 2
    with pytest.raises(ValueError, match="^K:"):
        inner_k_tiles_for(48)
