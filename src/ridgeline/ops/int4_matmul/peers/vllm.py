"""vLLM peers of int4_matmul (pip `vllm`): the GPTQ-Marlin kernel, as vLLM's GPTQ-Marlin linear method calls it.

Weight conversion (once per weight, outside timing), with vLLM's own helpers:
  GPTQ layout: qweight int32 [K/8, N], eight k's per word, lowest nibble first, values q + 8 (scalar type uint4b8,
  no zero point) -- the same offset-8 nibbles as ours, regrouped along K;
  vllm._custom_ops.gptq_marlin_repack(qweight, perm, size_k, size_n, num_bits) with an empty perm (no act-order);
  marlin_utils.marlin_permute_scales(scales [K/g, N], size_k, size_n, group_size);
  marlin_utils.marlin_make_workspace_new(device).
The call: marlin_utils.apply_gptq_marlin_linear(input=, weight=, weight_scale=, weight_zp=, g_idx=,
g_idx_sort_indices=, workspace=, wtype=, output_size_per_partition=, input_size_per_partition=, is_k_full=),
keywords checked against the installed signature (the positional order changed across vLLM releases).
vLLM is not installed here, nor on the H200 (too large to carry: FACTS.md): this adapter answers "not installed"
and has not been run against a real vLLM.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import Unavailable, register_impl
from ridgeline.ops.int4_matmul.pack import unpack_nibbles
from ridgeline.ops.int4_matmul.peers._cache import WeightCache

PIP = "vllm"
_PKG = OptionalPackage(PIP)
MARLIN_UTILS = "vllm.model_executor.layers.quantization.utils.marlin_utils"
KEYWORDS = ("input", "weight", "weight_scale", "weight_zp", "g_idx", "g_idx_sort_indices", "workspace", "wtype",
            "output_size_per_partition", "input_size_per_partition", "is_k_full")


def to_gptq(w_packed: torch.Tensor) -> torch.Tensor:
    """Our [N, K/2] bytes -> GPTQ's int32 [K/8, N] (k = 8i + j in bits 4j..4j+3 of word i, values q + 8)."""
    u = (unpack_nibbles(w_packed).to(torch.int32) + 8).t().contiguous()  # [K, N]
    k, n = u.shape
    u = u.view(k // 8, 8, n)
    word = torch.zeros((k // 8, n), dtype=torch.int32, device=w_packed.device)
    for j in range(8):
        word |= u[:, j, :] << (4 * j)
    return word


def _marlin() -> Callable[..., Any]:
    ops = _PKG.import_module("vllm._custom_ops")
    utils = _PKG.import_module(MARLIN_UTILS)
    scalar_types = getattr(_PKG.import_module("vllm.scalar_type"), "scalar_types", None)
    for name in ("gptq_marlin_repack",):
        if not callable(getattr(ops, name, None)):
            raise Unavailable(f"{PIP} {_PKG.version()}: vllm._custom_ops has no {name}")
    for name in ("apply_gptq_marlin_linear", "marlin_permute_scales", "marlin_make_workspace_new"):
        if not callable(getattr(utils, name, None)):
            raise Unavailable(f"{PIP} {_PKG.version()}: {MARLIN_UTILS} has no {name}")
    params = inspect.signature(utils.apply_gptq_marlin_linear).parameters
    missing = [k for k in KEYWORDS if k not in params]
    if missing or scalar_types is None:
        raise Unavailable(f"{PIP} {_PKG.version()}: apply_gptq_marlin_linear takes no {', '.join(missing)}")
    if not torch.cuda.is_available():
        raise Unavailable(f"{PIP} {_PKG.version()}: Marlin needs CUDA")

    def convert(w_packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> dict[str, Any]:
        n, k = w_packed.shape[0], w_packed.shape[1] * 2
        perm = torch.empty(0, dtype=torch.int32, device=w_packed.device)
        q = ops.gptq_marlin_repack(to_gptq(w_packed), perm, k, n, 4)
        s = utils.marlin_permute_scales(scales.t().contiguous(), k, n, group_size)
        return {"weight": q, "weight_scale": s, "workspace": utils.marlin_make_workspace_new(w_packed.device),
                "weight_zp": torch.empty(0, dtype=torch.int32, device=w_packed.device), "g_idx": perm,
                "g_idx_sort_indices": perm, "n": n, "k": k}

    cache = WeightCache(convert)

    def marlin(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
        c = cache.get(w_packed, scales.to(x.dtype), group_size)
        return utils.apply_gptq_marlin_linear(
            input=x, weight=c["weight"], weight_scale=c["weight_scale"], weight_zp=c["weight_zp"], g_idx=c["g_idx"],
            g_idx_sort_indices=c["g_idx_sort_indices"], workspace=c["workspace"], wtype=scalar_types.uint4b8,
            output_size_per_partition=c["n"], input_size_per_partition=c["k"], is_k_full=True)

    return marlin


register_impl("int4_matmul", "vllm", "peer", _marlin,
              description="vLLM GPTQ-Marlin (apply_gptq_marlin_linear, uint4b8, groups along K)")
