"""vLLM peer (pip `vllm`): its CUDA rotary kernel behind vllm._custom_ops.

    rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox) -> None   (query, key in place)

(torch.ops._C.rotary_embedding; the cache in q's dtype, as vLLM's RotaryEmbedding keeps it unless FlashInfer is
used.) Registered with mutates=("q", "k"). Nothing from vLLM is imported until the implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl

PIP = "vllm"
_PKG = OptionalPackage(PIP)
OPS_MODULE = "vllm._custom_ops"


def _compiled_op_missing() -> bool:
    """vllm._custom_ops imports even when its compiled extension failed to load (it only warns)."""
    return not hasattr(torch.ops._C, "rotary_embedding")


def _rotary() -> Callable[..., Any]:
    fn = _PKG.function(_PKG.import_module(OPS_MODULE), "rotary_embedding", 6)
    if _compiled_op_missing():
        hint = "" if torch.cuda.is_available() else "; no CUDA on this machine, which vLLM's CUDA build needs"
        raise Unavailable(f"{PIP} {_PKG.version()} is installed but its compiled ops are not loaded "
                          f"(torch.ops._C.rotary_embedding missing){hint}")

    def rotary(positions, q, k, head_size, cos_sin_cache, is_neox):
        fn(positions, q, k, head_size, cos_sin_cache, is_neox)
        return q, k

    return rotary


register_impl("rotary_embedding", "vllm", "peer", _rotary, mutates=("q", "k"),
              description="vLLM CUDA rotary_embedding (vllm._custom_ops), in place on q and k")
