"""``plan()``: how many KV-cache tokens fit, and why, for one model on one GPU type.

The engine model is vLLM V1 (0.19 era), per GPU rank::

    engine budget = total memory x gpu_memory_utilization
    KV pool       = budget - weights - rotary caches - activation peak - non-torch
                    [- CUDA graphs, if cudagraph_in_budget]

Weights, rotary caches, KV bytes per token, blocks, tokens and concurrency are exact for the
given architecture and vLLM's layouts; activation peak, non-torch memory, CUDA graphs and the CUDA
context are estimates (see :mod:`ridgeline.vram.estimates`) and are labelled as such everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import estimates
from .config import ModelSpec, load_model
from .errors import DoesNotFitError, InputError
from .gpus import GpuSpec, resolve_gpu
from .kv import (
    KV_DTYPES,
    GroupLayout,
    KVLayerType,
    blocks_per_request,
    group_layout,
    kv_layer_types,
    largest_length,
    needed_bytes,
    window_capped_bytes,
)
from .weights import VOCAB_PADDING, WEIGHT_DTYPES, WeightComponent, cdiv, check_tp, weight_components

GiB = 1 << 30


def gib(n: int | float) -> float:
    """Bytes to GiB (2**30 bytes)."""
    return n / GiB


def fmt_gib(n: int | float, digits: int = 2) -> str:
    return f"{n / GiB:,.{digits}f} GiB"


@dataclass(frozen=True)
class Term:
    """One line of the memory account, per GPU rank."""

    key: str
    label: str
    bytes: int
    kind: str  # "exact" (from the architecture), "engine" (vLLM layout), "estimate", "input"
    note: str = ""

    @property
    def estimate(self) -> bool:
        return self.kind == "estimate"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "bytes": self.bytes, "gib": round(gib(self.bytes), 4), "kind": self.kind,
                "estimate": self.estimate, "note": self.note}


def _split(per_rank: int | float, total: int | float, **extra: int | float | None) -> dict[str, Any]:
    return {"per_rank": per_rank, "total": total, **extra}


@dataclass
class Plan:
    """The full memory account. ``to_dict()`` gives the JSON record; all sizes are bytes."""

    inputs: dict[str, Any]
    model: dict[str, Any]
    gpu: GpuSpec
    tp: int
    dp: int
    num_gpus: int
    expert_parallel: bool
    parameters: dict[str, int]
    weight_bytes: dict[str, int]
    weight_components: list[WeightComponent]
    kv_types: list[KVLayerType]
    kv_bytes_per_token: dict[str, int]
    layout: GroupLayout
    max_model_len: int
    kv_bytes_per_request: dict[str, int]
    budget_terms: list[Term]
    outside_terms: list[Term]
    engine_budget_bytes: int
    kv_pool_bytes: int
    num_blocks: int
    kv_tokens: int
    blocks_per_request: int
    max_concurrency: float
    largest_max_model_len: int | None
    fits: bool
    activation: estimates.ActivationEstimate
    notes: list[str] = field(default_factory=list)

    def term(self, key: str) -> Term:
        """A budget or outside-budget term by key (e.g. ``"weights"``, ``"activation_peak"``)."""
        for t in (*self.budget_terms, *self.outside_terms):
            if t.key == key:
                return t
        raise KeyError(key)

    @property
    def weights_loaded_bytes(self) -> int:
        """Per rank: weights plus rotary caches, i.e. what vLLM logs as 'Model loading took'."""
        return self.weight_bytes["per_rank"] + self.term("rotary_cache").bytes

    @property
    def projected_gpu_bytes(self) -> int:
        """Per rank: what the engine may use (budget) plus what sits outside it (context, graphs)."""
        return self.engine_budget_bytes + sum(t.bytes for t in self.outside_terms)

    def to_dict(self) -> dict[str, Any]:
        n, dp = self.num_gpus, self.dp
        return {
            "schema": "ridgeline.vram.plan/1",
            "units": "bytes, unless a key ends in _gib (GiB = 2**30 bytes); per_rank = one GPU, total = all GPUs",
            "engine_model": "vLLM V1 (0.19-era) memory profile; estimates calibrated on vLLM 0.19.0 logs",
            "inputs": self.inputs,
            "model": self.model,
            "gpu": self.gpu.to_dict(),
            "parallel": {"tp": self.tp, "dp": dp, "num_gpus": n, "expert_parallel": self.expert_parallel},
            "parameters": self.parameters,
            "weight_bytes": self.weight_bytes,
            "weight_components": [
                {"name": c.name, "parameters": c.params, "parameters_per_rank": c.params_per_rank,
                 "bytes_per_rank": c.bytes_per_rank, "quantized": c.quantized, "sharding": c.sharding}
                for c in self.weight_components
            ],
            "kv_layer_types": [
                {"kind": t.kind, "window": t.window, "num_layers": t.num_layers,
                 "bytes_per_token_per_layer": _split(t.bytes_per_token_rank, t.bytes_per_token_rank * self.tp,
                                                     model=t.bytes_per_token_model),
                 "heads_per_rank": t.heads_per_rank, "elements_per_head": t.elems_per_head,
                 "cap_tokens": t.window}
                for t in self.kv_types
            ],
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_request": self.kv_bytes_per_request,
            "terms": {t.key: t.to_dict() for t in self.budget_terms},
            "outside_budget": {t.key: t.to_dict() for t in self.outside_terms},
            "engine_budget_bytes": _split(self.engine_budget_bytes, self.engine_budget_bytes * n),
            "kv_pool_bytes": _split(self.kv_pool_bytes, self.kv_pool_bytes * n),
            "kv_cache_layout": {
                "block_size": self.inputs["block_size"],
                "page_bytes_per_layer": self.layout.page_bytes,
                "group_size": self.layout.group_size,
                "num_groups": self.layout.num_groups,
                "padding_layers": self.layout.padding_layers,
                "block_bytes": self.layout.block_bytes,
            },
            "num_blocks": _split(self.num_blocks, self.num_blocks * dp),
            "kv_tokens": _split(self.kv_tokens, self.kv_tokens * dp),
            "max_model_len": self.max_model_len,
            "blocks_per_request": self.blocks_per_request,
            "max_concurrency": _split(round(self.max_concurrency, 4), round(self.max_concurrency * dp, 4)),
            "largest_max_model_len": self.largest_max_model_len,
            "fits": self.fits,
            "activation_estimate": {
                "forward_bytes": self.activation.forward_bytes,
                "sampler_bytes": self.activation.sampler_bytes,
                "tokens": self.activation.tokens,
                "requests": self.activation.requests,
                "dominant": self.activation.dominant,
            },
            "projected_gpu_bytes": _split(self.projected_gpu_bytes, self.projected_gpu_bytes * n),
            "notes": self.notes,
        }


def _model_dict(spec: ModelSpec) -> dict[str, Any]:
    attention = "MLA" if spec.mla else ("GQA" if 1 < spec.num_kv_heads < spec.num_heads else
                                        "MQA" if spec.num_kv_heads == 1 else "MHA")
    d: dict[str, Any] = {
        "name": spec.name, "source": spec.source, "model_type": spec.model_type, "architecture": spec.architecture,
        "num_layers": spec.num_layers, "hidden_size": spec.hidden_size, "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads, "head_dim": spec.head_dim, "vocab_size": spec.vocab_size,
        "tie_word_embeddings": spec.tie_word_embeddings, "attention": attention,
        "sliding_window_layers": sum(w is not None for w in spec.layer_windows),
        "max_position_embeddings": spec.max_position_embeddings,
        "defaults_applied": list(spec.defaults_applied),
    }
    if spec.mla:
        d["mla"] = dict(spec.mla.__dict__)
    if spec.moe:
        d["moe"] = {"num_experts": spec.moe.num_experts, "top_k": spec.moe.top_k,
                    "expert_intermediate": spec.moe.expert_intermediate,
                    "shared_intermediate": spec.moe.shared_intermediate,
                    "moe_layers": sum(spec.moe.moe_layers), "dense_layers": spec.num_layers - sum(spec.moe.moe_layers)}
    if spec.vision:
        d["vision"] = dict(spec.vision.__dict__)
    return d


def plan(
    model: str | Path | Mapping[str, Any] | ModelSpec,
    *,
    gpu: str | GpuSpec = "auto",
    num_gpus: int | None = None,
    tp: int = 1,
    dtype: str = "bf16",
    kv_dtype: str = "auto",
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9,
    block_size: int = 16,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 1024,
    expert_parallel: bool = False,
    enforce_eager: bool = False,
    cudagraph_in_budget: bool = False,
    int4_zero_point: bool = False,
    disable_sliding_window: bool = False,
    gpu_memory_bytes: int | None = None,
) -> Plan:
    """Plan the KV cache of ``model`` served by vLLM on ``num_gpus`` GPUs of type ``gpu``.

    ``model``: a config.json path, a folder holding one, a shipped config name (see
    :func:`ridgeline.vram.shipped_configs`), a config dict, or a :class:`ModelSpec`.
    ``gpu``: a known GPU name, ``"auto"`` (reads the CUDA device) or a :class:`GpuSpec`;
    ``gpu_memory_bytes`` overrides its total. ``num_gpus`` defaults to ``tp``; GPUs beyond one TP
    group are data-parallel replicas. ``dtype`` is the weight format (``bf16``, ``fp16``, ``fp8``,
    ``int4-g128``); ``kv_dtype`` ``auto`` means the 16-bit activation dtype.

    Raises :class:`ConfigError`, :class:`InputError`, :class:`GpuError`, or
    :class:`DoesNotFitError` (with ``largest_max_model_len`` and the computed ``plan``) when a
    single request of ``max_model_len`` tokens does not fit.
    """
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    if dtype not in WEIGHT_DTYPES:
        raise InputError(f"dtype must be one of {', '.join(WEIGHT_DTYPES)}, got {dtype!r}")
    if kv_dtype not in ("auto", *KV_DTYPES):
        raise InputError(f"kv_dtype must be one of auto, {', '.join(KV_DTYPES)}, got {kv_dtype!r}")
    if not 0 < gpu_memory_utilization <= 1:
        raise InputError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    for name, val in (("block_size", block_size), ("max_num_batched_tokens", max_num_batched_tokens),
                      ("max_num_seqs", max_num_seqs), ("tp", tp)):
        if val < 1:
            raise InputError(f"{name} must be >= 1, got {val}")
    n_gpus = tp if num_gpus is None else num_gpus
    if n_gpus < tp or n_gpus % tp:
        raise InputError(f"num_gpus ({n_gpus}) must be a multiple of tp ({tp}); pipeline parallelism is not modelled")
    dp = n_gpus // tp
    check_tp(spec, tp, expert_parallel=expert_parallel)
    gpu_spec = resolve_gpu(gpu, memory_bytes=gpu_memory_bytes)

    notes: list[str] = [f"defaulted: {d}" for d in spec.defaults_applied] + list(spec.notes)
    act_bytes = 2
    kvb = act_bytes if kv_dtype == "auto" else KV_DTYPES[kv_dtype]
    length = max_model_len if max_model_len is not None else spec.max_position_embeddings
    if length is None:
        raise InputError("max_model_len was not given and the config has no 'max_position_embeddings'")
    if length < 1:
        raise InputError(f"max_model_len must be >= 1, got {length}")
    if spec.max_position_embeddings and length > spec.max_position_embeddings:
        notes.append(f"max_model_len {length:,} exceeds the config's max_position_embeddings "
                     f"{spec.max_position_embeddings:,} (vLLM refuses this unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)")

    # --- weights (exact) -------------------------------------------------------------------
    comps = weight_components(spec, tp, dtype, expert_parallel=expert_parallel, int4_zero_point=int4_zero_point)
    comps_model = weight_components(spec, 1, dtype, int4_zero_point=int4_zero_point)
    params_rank = sum(c.params_per_rank for c in comps)
    params_model = sum(c.params for c in comps)
    wbytes_rank = sum(c.bytes_per_rank for c in comps)
    wbytes_model = sum(c.bytes_per_rank for c in comps_model)
    rope_bytes = sum(c.rows * c.rotary_dim * act_bytes for c in spec.rope_caches)
    rope_exact = all(c.exact for c in spec.rope_caches)
    if spec.config_quant_method == "fp8" and dtype != "fp8":
        notes.append("the config declares fp8 weights (quantization_config); vLLM loads them as fp8, "
                     "so pass dtype='fp8' to match a real deployment")
    if dtype in ("fp8", "int4-g128"):
        notes.append(f"{dtype}: linear layers quantised; embeddings, LM head, norms, router and vision tower "
                     "stay 16-bit; activations stay 16-bit")
        if kv_dtype == "auto":
            notes.append("kv_dtype=auto keeps the KV cache in the 16-bit activation dtype")

    # --- KV per token (exact) --------------------------------------------------------------
    types = kv_layer_types(spec, tp, kvb, disable_sliding_window=disable_sliding_window)
    if disable_sliding_window and any(w is not None for w in spec.layer_windows):
        notes.append("disable_sliding_window: sliding layers are stored like full attention")
    kv_tok_rank = sum(t.num_layers * t.bytes_per_token_rank for t in types)
    kv_tok_model = sum(t.num_layers * t.bytes_per_token_model for t in types)
    if spec.mla:
        notes.append(f"MLA: one latent of {spec.mla.kv_lora_rank}+{spec.mla.qk_rope_head_dim} elements per token "
                     f"and layer, replicated on each of the {tp} TP rank(s)")
    elif spec.num_kv_heads < tp:
        notes.append(f"tp {tp} > num_key_value_heads {spec.num_kv_heads}: each KV head is replicated on "
                     f"{tp // spec.num_kv_heads} ranks")
    layout = group_layout(types, block_size)
    if layout.padding_layers:
        slots = layout.num_groups * layout.group_size
        notes.append(f"hybrid KV layout: {layout.num_groups} groups of {layout.group_size} layer slots; "
                     f"{layout.padding_layers} of the {slots} slots are padding (vLLM logs 'Add "
                     f"{layout.padding_layers} padding layers'); blocks held by a part-filled group leave "
                     "their padding slots unused")

    # --- budget ----------------------------------------------------------------------------
    total = gpu_spec.total_bytes
    budget = int(total * gpu_memory_utilization)
    act = estimates.activation_peak(spec, tp, max_num_batched_tokens=max_num_batched_tokens,
                                    max_num_seqs=max_num_seqs, act_bytes=act_bytes,
                                    padded_vocab=cdiv(spec.vocab_size, VOCAB_PADDING) * VOCAB_PADDING)
    non_torch = estimates.non_torch_bytes(tp)
    graphs = estimates.cuda_graph_bytes(spec, enforce_eager=enforce_eager)
    terms = [
        Term("gpu_total", f"GPU memory ({gpu_spec.name})", total, "exact" if gpu_spec.detected else "input",
             gpu_spec.source),
        Term("engine_budget", f"engine budget = total x {gpu_memory_utilization:g}", budget, "engine",
             "vLLM reserves total x gpu_memory_utilization per GPU"),
        Term("weights", f"weights ({dtype})", wbytes_rank, "exact", "from the architecture; see weight_components"),
        Term("rotary_cache", "rotary cos/sin caches", rope_bytes, "engine" if rope_exact else "estimate",
             "; ".join(f"{c.label}: {c.rows:,} x {c.rotary_dim}" for c in spec.rope_caches)),
        Term("activation_peak", f"activation peak @ {max_num_batched_tokens:,} tokens", act.peak_bytes, "estimate",
             f"max(forward {gib(act.forward_bytes):.2f} GiB, sampler over {act.requests} requests "
             f"{gib(act.sampler_bytes):.2f} GiB)"),
        Term("non_torch", "non-torch memory (cuBLAS, NCCL)", non_torch, "estimate",
             "vLLM 0.19 H100: ~0.25 GiB at TP=1, ~2.1 GiB per GPU at TP>1"),
    ]
    outside = [Term("cuda_context", "CUDA context (before the engine's first snapshot)", estimates.CUDA_CONTEXT,
                    "estimate", "outside gpu_memory_utilization")]
    graph_term = Term("cuda_graphs", "CUDA graphs" + (" (enforce_eager)" if enforce_eager else ""), graphs,
                      "estimate", "in budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1)" if cudagraph_in_budget
                      else "captured after the KV cache is sized, outside the budget (vLLM <= 0.19 default)")
    (terms if cudagraph_in_budget else outside).append(graph_term)
    kv_pool = budget - sum(t.bytes for t in terms[2:])

    # --- KV pool -> blocks, tokens, concurrency ---------------------------------------------
    pool = max(kv_pool, 0)
    num_blocks = pool // layout.block_bytes
    kv_tokens = num_blocks // layout.num_groups * block_size
    bpr = blocks_per_request(types, layout, length, block_size, max_num_batched_tokens)
    concurrency = num_blocks / bpr if bpr else 0.0
    need = needed_bytes(types, length, block_size, max_num_batched_tokens)
    largest = largest_length(types, kv_pool, block_size, max_num_batched_tokens)
    fits = kv_pool > 0 and need <= kv_pool
    projected = budget + sum(t.bytes for t in outside)
    if projected > total:
        notes.append(f"projected use {fmt_gib(projected)} (budget + context + graphs) exceeds the GPU's "
                     f"{fmt_gib(total)}: lower gpu_memory_utilization")
    if spec.vision:
        notes.append("vision tower weights are counted; its profiling activations (image encoder pass) are not")

    inputs = {
        "model": spec.name, "gpu": gpu_spec.name, "num_gpus": n_gpus, "tp": tp, "dtype": dtype, "kv_dtype": kv_dtype,
        "kv_bytes_per_element": kvb, "max_model_len": length, "gpu_memory_utilization": gpu_memory_utilization,
        "block_size": block_size, "max_num_batched_tokens": max_num_batched_tokens, "max_num_seqs": max_num_seqs,
        "expert_parallel": expert_parallel, "enforce_eager": enforce_eager,
        "cudagraph_in_budget": cudagraph_in_budget, "int4_zero_point": int4_zero_point,
        "disable_sliding_window": disable_sliding_window,
    }
    result = Plan(
        inputs=inputs,
        model=_model_dict(spec),
        gpu=gpu_spec,
        tp=tp,
        dp=dp,
        num_gpus=n_gpus,
        expert_parallel=expert_parallel,
        parameters={"per_rank": params_rank, "total": params_rank * n_gpus, "model": params_model},
        weight_bytes={"per_rank": wbytes_rank, "total": wbytes_rank * n_gpus, "model": wbytes_model},
        weight_components=comps,
        kv_types=types,
        kv_bytes_per_token={"per_rank": kv_tok_rank, "total": kv_tok_rank * tp, "model": kv_tok_model},
        layout=layout,
        max_model_len=length,
        kv_bytes_per_request={"engine_reservation": need, "window_capped": window_capped_bytes(types, length),
                              "max_model_len": length},
        budget_terms=terms,
        outside_terms=outside,
        engine_budget_bytes=budget,
        kv_pool_bytes=kv_pool,
        num_blocks=num_blocks,
        kv_tokens=kv_tokens,
        blocks_per_request=bpr,
        max_concurrency=concurrency,
        largest_max_model_len=largest,
        fits=fits,
        activation=act,
        notes=notes,
    )
    if kv_pool <= 0:
        raise DoesNotFitError(
            f"{spec.name} does not fit: weights, rotary caches, activations and non-torch memory need "
            f"{fmt_gib(budget - kv_pool)} per GPU but the engine budget is {fmt_gib(budget)} "
            f"({gpu_spec.name}, tp={tp}, utilization {gpu_memory_utilization:g}); no KV cache is left, "
            "so the largest max_model_len that fits is 0",
            largest_max_model_len=0, plan=result)
    if not fits:
        longest = "unbounded" if largest is None else f"{largest:,}"
        raise DoesNotFitError(
            f"one request of max_model_len {length:,} needs {fmt_gib(need)} of KV cache per GPU, but only "
            f"{fmt_gib(kv_pool)} is left after weights and activations; the largest max_model_len that fits "
            f"one request is {longest}",
            largest_max_model_len=largest, plan=result)
    return result
