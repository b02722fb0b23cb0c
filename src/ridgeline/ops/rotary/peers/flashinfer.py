"""FlashInfer peer (pip `flashinfer-python`): the vLLM/SGLang-compatible in-place RoPE.

    flashinfer.rope.apply_rope_with_cos_sin_cache_inplace(positions, query, key, head_size, cos_sin_cache,
                                                          is_neox=True) -> None

FlashInfer requires a float32 cos_sin_cache (it raises otherwise): bench it on the "cache-fp32" variant, as vLLM
keeps the cache in float32 when it uses FlashInfer. Registered with mutates=("q", "k").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "flashinfer-python"
_PKG = OptionalPackage(PIP)
ROPE_MODULE = "flashinfer.rope"


def _rotary() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(ROPE_MODULE), "apply_rope_with_cos_sin_cache_inplace", 5, ("is_neox",))

    def rotary(positions, q, k, head_size, cos_sin_cache, is_neox):
        fn(positions, q, k, head_size, cos_sin_cache, is_neox=is_neox)
        return q, k

    return rotary


register_impl("rotary_embedding", "flashinfer", "peer", _rotary, mutates=("q", "k"),
              description="FlashInfer apply_rope_with_cos_sin_cache_inplace (float32 cache), in place on q and k")
