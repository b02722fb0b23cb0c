"""SGLang peer (pip `sgl-kernel`, the kernels SGLang's RotaryEmbedding calls on CUDA):

    sgl_kernel.apply_rope_with_cos_sin_cache_inplace(positions, query, key, head_size, cos_sin_cache,
                                                     is_neox=True) -> None

The FlashInfer-derived kernel: a float32 cos_sin_cache (the "cache-fp32" variant), q and k in place, so it is
registered with mutates=("q", "k").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "sgl-kernel"
_PKG = OptionalPackage(PIP)
MODULE = "sgl_kernel"


def _rotary() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(MODULE), "apply_rope_with_cos_sin_cache_inplace", 5, ("is_neox",))

    def rotary(positions, q, k, head_size, cos_sin_cache, is_neox):
        fn(positions, q, k, head_size, cos_sin_cache, is_neox=is_neox)
        return q, k

    return rotary


register_impl("rotary_embedding", "sglang", "peer", _rotary, mutates=("q", "k"),
              description="SGLang's sgl_kernel.apply_rope_with_cos_sin_cache_inplace (float32 cache), in place")
