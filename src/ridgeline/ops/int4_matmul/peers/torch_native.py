"""torch peers of int4_matmul.

cublas-bf16: torch.matmul (F.linear) of x with the dequantized weight in x's dtype: the bf16 baseline the
    issue's 3x target is measured against (the weight is dequantized once per weight, outside timing).
torch-int4:  torch._weight_int4pack_mm(x, w_int4pack, group_size, scales_and_zeros), torch's tinygemm kernel, CUDA
    only, bf16 x. Its weight comes from torch._convert_weight_to_int4pack(w_uint8 [N, K/2], inner_k_tiles) whose
    input (torch 2.5+; unchanged through 2.13) holds the EVEN k in the HIGH nibble, values q + 8 (unsigned); the
    output is int32 [N/8, K/(inner_k_tiles*16), 32, inner_k_tiles/2]. scales_and_zeros is [K/group, N, 2] in x's
    dtype; torch dequantizes (q - 8) * scale + zero, so our symmetric weight is scale = ours, zero = 0. Needs
    N % 8 == 0 and K % (inner_k_tiles * 16) == 0; inner_k_tiles 8 (torchao's default) where K allows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import Unavailable, register_impl
from ridgeline.ops.int4_matmul.pack import unpack_int4, unpack_nibbles
from ridgeline.ops.int4_matmul.peers._cache import WeightCache


def _dequant(dtype: torch.dtype) -> Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]:
    return lambda w, s, g: unpack_int4(w, s, g, dtype=torch.float32).to(dtype)


def _cublas() -> Callable[..., Any]:
    caches: dict[torch.dtype, WeightCache] = {}

    def cublas(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
        cache = caches.setdefault(x.dtype, WeightCache(_dequant(x.dtype)))
        return torch.nn.functional.linear(x, cache.get(w_packed, scales, group_size))

    return cublas


def inner_k_tiles_for(k: int) -> int:
    for t in (8, 4, 2):
        if k % (t * 16) == 0:
            return t
    raise ValueError(f"K: torch's int4 pack needs K a multiple of 32, got {k}")


def to_torch_int4(w_packed: torch.Tensor, scales: torch.Tensor, group_size: int, dtype: torch.dtype = torch.bfloat16
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Our (w_packed, scales) -> torch's (int4pack, scales_and_zeros), no re-quantization."""
    u = (unpack_nibbles(w_packed).to(torch.int16) + 8).to(torch.uint8)  # [N, K] in k order (our words: pack.py)
    bytes_kn = (u[:, 0::2] << 4) | u[:, 1::2]  # torch's: k = 2j in byte j's high nibble, 2j + 1 in its low one
    packed = torch._convert_weight_to_int4pack(bytes_kn.contiguous(), inner_k_tiles_for(w_packed.shape[1] * 2))
    s = scales.t().to(dtype)
    scales_and_zeros = torch.stack((s, torch.zeros_like(s)), dim=-1).contiguous()
    return packed, scales_and_zeros


def _torch_int4() -> Callable[..., Any]:
    if not torch.cuda.is_available():
        raise Unavailable("torch-int4: torch._weight_int4pack_mm is checked on CUDA only (no CUDA here)")
    if not hasattr(torch, "_weight_int4pack_mm") or not hasattr(torch, "_convert_weight_to_int4pack"):
        raise Unavailable(f"torch {torch.__version__} has no _weight_int4pack_mm")
    cache = WeightCache(lambda w, s, g: to_torch_int4(w, s, g))

    def torch_int4(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
        packed, sz = cache.get(w_packed, scales, group_size)
        # tinygemm takes contiguous activations only (strided or transposed x: RuntimeError "Expected
        # A.is_contiguous()"); its callers copy first, and so do we (the copy is timed, as theirs is).
        return torch._weight_int4pack_mm(x if x.is_contiguous() else x.contiguous(), packed, group_size, sz)

    return torch_int4


register_impl("int4_matmul", "cublas-bf16", "peer", _cublas,
              description="torch.nn.functional.linear (cuBLAS) on the dequantized weight in x's dtype")
register_impl("int4_matmul", "torch-int4", "peer", _torch_int4,
              description="torch._weight_int4pack_mm (tinygemm) on torch's own packing of the same weight")


def _torch_pack() -> Callable[..., Any]:
    return lambda w, group_size: _pack_eager(w, group_size)


def _pack_eager(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The packing as a model-conversion script writes it in plain torch (float32 math throughout)."""
    n, k = w.shape
    g = w.float().reshape(n, k // group_size, group_size)
    scales = (g.abs().amax(-1) / 7).to(w.dtype)
    s = scales.double()[..., None]
    q = torch.round(g.double() / torch.where(s == 0, 1.0, s)).clamp(-8, 7).reshape(n, k // 8, 8).to(torch.int16) + 8
    # Words of 8 k: bytes (k0 | k2 << 4), (k4 | k6 << 4), (k1 | k3 << 4), (k5 | k7 << 4), pack.py's order.
    words = torch.stack((q[..., 0] | q[..., 2] << 4, q[..., 4] | q[..., 6] << 4, q[..., 1] | q[..., 3] << 4,
                         q[..., 5] | q[..., 7] << 4), dim=-1)
    return words.reshape(n, k // 2).to(torch.uint8), scales


register_impl("pack_int4", "torch-eager", "peer", _torch_pack, description="plain torch packing")
