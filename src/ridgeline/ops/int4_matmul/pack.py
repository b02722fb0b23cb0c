"""The int4 weight format of `int4_matmul`: symmetric per-group quantization, two 4-bit values per byte.

Format (what `pack_int4` writes and the kernel reads):
- w_packed: uint8 [N, K // 2], contiguous, K-major like nn.Linear's weight. Each 4-byte word holds 8 consecutive k
  (8i .. 8i + 7) in the order the kernel's unpack produces MMA register pairs (unpack.py): byte 0 = (k0 low nibble,
  k2 high), byte 1 = (k4, k6), byte 2 = (k1, k3), byte 3 = (k5, k7). Masking a nibble of each 16-bit half of the
  word then gives the pairs (k0, k1), (k2, k3), (k4, k5), (k6, k7) with no byte re-pairing (the s20 format, even k
  low / odd k high, spent 32 PRMT a 64 x 128 step re-pairing them). A nibble stores q + 8 (offset-8, unsigned
  0..15) for q in -8..7: no sign extension, and torch's and GPTQ's int4 kernels use the same offset, so the peers
  convert our weights (a permutation of nibbles, `unpack_nibbles`) without re-quantizing.
- scales: [N, K // group_size] in the weight's dtype (bf16/fp16; fp32 stays fp32). The dequantized weight is
  w_deq[n, k] = q[n, k] * scales[n, k // group_size], exactly (a 4-bit integer times a 16-bit float fits in fp32).
Quantization of one group: scale = round_to_scale_dtype(float32(amax / 7)); q = clamp(round_half_even(w / scale),
-8, 7); a group of zeros has scale 0 and q 0. K must be a multiple of group_size (refused otherwise: pad the weight
with zero columns yourself if you need to; that is a model-format decision, not the kernel's).
This is a one-time weight conversion, done with torch ops (not a hot path).
"""

from __future__ import annotations

import torch

GROUP_SIZES = (32, 64, 128, 256)
QMAX = 7
QMIN = -8
OFFSET = 8
W_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


class GroupSizeError(ValueError):
    """K is not a multiple of the group size (or the group size is not one the kernel takes)."""


def check_group(k: int, group_size: object, what: str = "K") -> int:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size not in GROUP_SIZES:
        raise GroupSizeError(f"group_size: expected one of {', '.join(map(str, GROUP_SIZES))}, got {group_size!r}")
    if k % group_size:
        raise GroupSizeError(f"{what}: {k} is not a multiple of group_size {group_size}; pad the weight's K with "
                             "zero columns (and x with zeros) to a multiple of the group")
    return group_size


def _check_weight(w: object) -> torch.Tensor:
    if not isinstance(w, torch.Tensor):
        raise TypeError(f"w: expected a torch.Tensor, got {type(w).__name__}")
    if w.dtype not in W_DTYPES:
        raise TypeError(f"w: expected dtype bfloat16, float16 or float32; got {str(w.dtype).replace('torch.', '')}")
    if w.dim() != 2:
        raise ValueError(f"w: expected a 2-D [N, K] weight (nn.Linear layout), got shape {tuple(w.shape)}")
    return w


def quantize_groups(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q int8 [N, K] in -8..7, scales [N, K/group] in w's dtype), by the rule in the module docstring."""
    n, k = w.shape
    g = w.reshape(n, k // group_size, group_size).float()
    amax = g.abs().amax(-1)
    scales = (amax / QMAX).to(w.dtype)  # float32 division (correctly rounded), then the scale dtype's rounding
    # The quotient in float64: a float32 one can round onto a .5 tie that the exact quotient misses (fp32 weights).
    s = scales.double()[..., None]
    safe = torch.where(s == 0, torch.ones_like(s), s)
    q = torch.where(s == 0, torch.zeros_like(s), torch.round(g.double() / safe)).clamp_(QMIN, QMAX)
    return q.reshape(n, k).to(torch.int8), scales


# The nibble slot of k = 8i + j in word i (slot 2b + t: byte b, t = 0 low / 1 high nibble).
_WORD_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)


def pack_nibbles(q: torch.Tensor) -> torch.Tensor:
    """int8 [N, K] in -8..7 (K a multiple of 8) -> uint8 [N, K/2] in the word order of the module docstring."""
    n, k = q.shape
    u = (q.to(torch.int16) + OFFSET).to(torch.uint8).reshape(n, k // 8, 8)
    slots = torch.empty_like(u)
    slots[..., list(_WORD_ORDER)] = u  # slot s of each word takes k = 8i + j where _WORD_ORDER[j] = s
    return (slots[..., 0::2] | (slots[..., 1::2] << 4)).reshape(n, k // 2).contiguous()


def unpack_nibbles(w_packed: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K/2] -> int8 [N, K] in -8..7 in k order (the inverse of pack_nibbles)."""
    n = w_packed.shape[0]
    b = w_packed.reshape(n, -1, 4)
    slots = torch.stack(((b & 15).to(torch.int8), (b >> 4).to(torch.int8)), dim=-1).reshape(n, -1, 8) - OFFSET
    return slots[..., list(_WORD_ORDER)].reshape(n, -1)


def pack_int4(w: torch.Tensor, group_size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a [N, K] weight (nn.Linear layout) to int4 per group of `group_size` along K.

    Returns (w_packed uint8 [N, K // 2], scales [N, K // group_size] in w's dtype); see the module docstring for
    the exact rounding and layout. K must be a multiple of group_size (GroupSizeError otherwise)."""
    w = _check_weight(w)
    group_size = check_group(w.shape[1], group_size)
    q, scales = quantize_groups(w, group_size)
    return pack_nibbles(q), scales


def unpack_int4(w_packed: torch.Tensor, scales: torch.Tensor, group_size: int = 128,
                dtype: torch.dtype | None = None) -> torch.Tensor:
    """The dequantized weight [N, K]: q * scale per group, in `dtype` (default float64, where it is exact)."""
    if not isinstance(w_packed, torch.Tensor) or w_packed.dtype != torch.uint8 or w_packed.dim() != 2:
        raise TypeError("w_packed: expected a 2-D uint8 tensor [N, K // 2] from pack_int4")
    q = unpack_nibbles(w_packed)
    n, k = q.shape
    group_size = check_group(k, group_size)
    if not isinstance(scales, torch.Tensor) or tuple(scales.shape) != (n, k // group_size):
        raise ValueError(f"scales: expected shape {(n, k // group_size)}, got "
                         f"{tuple(scales.shape) if isinstance(scales, torch.Tensor) else type(scales).__name__}")
    deq = q.double().reshape(n, k // group_size, group_size) * scales.double()[..., None]
    return deq.reshape(n, k).to(dtype or torch.float64)
