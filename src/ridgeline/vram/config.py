"""Read a Hugging Face ``config.json`` into a :class:`ModelSpec` the planner can count.

Only architectures whose layer layout is known are accepted; anything else is refused with an
error that names the ``model_type``. Fields the architecture needs are required: a missing one
raises :class:`ConfigError` naming the field. The single exception is a small, explicit table of
defaults that ``transformers`` itself applies when a field is absent from ``config.json`` (for
example ``Gemma3TextConfig.vocab_size = 262208``); every such fill is recorded in
``ModelSpec.defaults_applied`` and shown in the plan, never applied silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

CONFIG_DIR = Path(__file__).with_name("configs")

#: model_type values this module can lay out, mapped to a short family name.
SUPPORTED_MODEL_TYPES: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "llama",
    "qwen3": "llama",
    "mixtral": "llama",
    "qwen3_moe": "llama",
    "gemma2": "gemma",
    "gemma3_text": "gemma",
    "gemma3": "gemma",
    "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek",
}

_MISSING = object()

# Defaults transformers applies when config.json omits the field (class __init__ defaults).
# Only fields that are routinely omitted from real checkpoints are listed. A value of
# "=num_attention_heads" means "same as that field" (the GQA-less default).
_HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"num_key_value_heads": "=num_attention_heads", "tie_word_embeddings": False,
              "attention_bias": False, "mlp_bias": False},
    "mistral": {"num_key_value_heads": 8, "tie_word_embeddings": False, "sliding_window": 4096},
    "qwen2": {"num_key_value_heads": 32, "tie_word_embeddings": False, "use_sliding_window": False,
              "max_window_layers": 28},
    "qwen3": {"tie_word_embeddings": False, "attention_bias": False, "head_dim": 128,
              "use_sliding_window": False, "max_window_layers": 28},
    "mixtral": {"num_key_value_heads": 8, "tie_word_embeddings": False, "sliding_window": None},
    "qwen3_moe": {"tie_word_embeddings": False, "attention_bias": False, "head_dim": 128,
                  "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": False},
    "gemma2": {"tie_word_embeddings": True, "head_dim": 256, "sliding_window": 4096,
               "attention_bias": False},
    "gemma3_text": {"vocab_size": 262208, "max_position_embeddings": 131072, "tie_word_embeddings": True,
                    "attention_bias": False, "rope_scaling": None, "rope_local_base_freq": 10000.0},
    "deepseek_v2": {"tie_word_embeddings": False, "moe_layer_freq": 1, "n_shared_experts": None},
    "deepseek_v3": {"tie_word_embeddings": False, "moe_layer_freq": 1, "n_shared_experts": None},
    "siglip_vision_model": {"num_channels": 3, "vision_use_head": False},
}


@dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention dimensions (DeepSeek-V2/V3)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class MoESpec:
    """Routed (and optionally shared) experts."""

    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int  # total width of the shared expert(s); 0 if none
    has_score_bias: bool  # DeepSeek-V3 e_score_correction_bias
    moe_layers: tuple[bool, ...]  # per decoder layer: MoE MLP (True) or dense MLP (False)


@dataclass(frozen=True)
class VisionSpec:
    """A SigLIP vision tower plus the Gemma-3 multimodal projector."""

    hidden: int
    intermediate: int
    layers: int
    patch: int
    image_size: int
    channels: int
    heads: int
    projector_out: int


@dataclass(frozen=True)
class RopeCache:
    """One cos/sin cache vLLM keeps on every rank: ``rows x rotary_dim`` in the activation dtype."""

    label: str
    rows: int
    rotary_dim: int
    exact: bool  # layout checked against vLLM's loaded-weights figure


@dataclass
class ModelSpec:
    """The architecture as the planner sees it. All sizes are element counts, not bytes."""

    name: str
    source: str
    model_type: str
    family: str
    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    norms_per_layer: int
    layer_windows: tuple[int | None, ...]  # None = full attention, else sliding window size
    max_position_embeddings: int | None
    mla: MLASpec | None = None
    moe: MoESpec | None = None
    vision: VisionSpec | None = None
    rope_caches: tuple[RopeCache, ...] = ()
    quant_block: tuple[int, int] | None = None  # config's fp8 weight_block_size, if any
    config_quant_method: str | None = None
    defaults_applied: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Fields:
    """Field access with required/defaulted bookkeeping for one config dict."""

    def __init__(self, cfg: Mapping[str, Any], model_type: str, where: str, spec_defaults: list[str]):
        self.cfg = cfg
        self.model_type = model_type
        self.where = where
        self.defaults_applied = spec_defaults

    def has(self, key: str) -> bool:
        return key in self.cfg and self.cfg[key] is not None

    def req(self, key: str, why: str = "") -> Any:
        val = self.cfg.get(key, _MISSING)
        if val is _MISSING or val is None:
            table = _HF_DEFAULTS.get(self.model_type, {})
            if key in table and table[key] is not None:
                return self._default(key, table[key])
            reason = f" ({why})" if why else ""
            raise ConfigError(
                f"config field '{key}' is missing from {self.where} (model_type '{self.model_type}'){reason}; "
                "it is required to size this model and will not be guessed",
                field=key,
            )
        return val

    def opt(self, key: str, fallback: Any = None) -> Any:
        """Optional field: value, else the transformers default (recorded), else ``fallback``."""
        val = self.cfg.get(key, _MISSING)
        if val is not _MISSING:
            return val
        table = _HF_DEFAULTS.get(self.model_type, {})
        if key in table:
            return self._default(key, table[key])
        return fallback

    def _default(self, key: str, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("="):
            value = self.req(value[1:])
        self.defaults_applied.append(f"{self.where}.{key}={value!r} (transformers default for {self.model_type})")
        return value


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise ConfigError(f"config field '{key}' must be an integer, got {value!r}", field=key)
    return int(value)


def shipped_configs() -> dict[str, Path]:
    """Shipped configs by name (the file stem)."""
    return {p.stem: p for p in sorted(CONFIG_DIR.glob("*.json"))}


_ALIASES = {
    "meta-llama-3.1-8b": "Llama-3.1-8B",
    "llama-3.1-8b-instruct": "Llama-3.1-8B",
    "meta-llama-3.1-70b": "Llama-3.1-70B",
    "llama-3.1-70b-instruct": "Llama-3.1-70B",
    "qwen2.5-7b-instruct": "Qwen2.5-7B",
    "gemma-3-27b": "gemma-3-27b-it",
    "deepseek-r1": "DeepSeek-V3",
}


def resolve_shipped(name: str) -> Path | None:
    """Find a shipped config by name: case-insensitive, ``org/`` prefix ignored, a few aliases."""
    key = name.strip().rstrip("/").split("/")[-1].lower()
    if key.endswith(".json"):
        key = key[:-5]
    table = {stem.lower(): path for stem, path in shipped_configs().items()}
    if key in table:
        return table[key]
    alias = _ALIASES.get(key)
    return table.get(alias.lower()) if alias else None


def load_config(model: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str, str]:
    """Return ``(config_dict, display_name, source)`` for a path, folder, shipped name or dict."""
    if isinstance(model, Mapping):
        name = str(model.get("_name_or_path") or model.get("model_type") or "config")
        return dict(model), name, "dict"
    text = str(model)
    path = Path(text).expanduser()
    if path.is_dir():
        cfg_path = path / "config.json"
        if not cfg_path.is_file():
            raise ConfigError(f"folder '{path}' has no config.json", field="config.json")
        return _read_json(cfg_path), path.name, str(cfg_path)
    if path.is_file():
        name = path.parent.name if path.name == "config.json" else path.stem
        return _read_json(path), name, str(path)
    shipped = resolve_shipped(text)
    if shipped is not None:
        return _read_json(shipped), shipped.stem, f"shipped:{shipped.name}"
    known = ", ".join(shipped_configs())
    raise ConfigError(
        f"MODEL '{text}' is not a config.json file, not a folder containing one, and not a shipped config "
        f"(shipped: {known})",
        field="MODEL",
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}", field="config.json") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object", field="config.json")
    return data


def load_model(model: str | Path | Mapping[str, Any]) -> ModelSpec:
    """Load and normalise a model config. Raises :class:`ConfigError` on anything it cannot size."""
    raw, name, source = load_config(model)
    model_type = raw.get("model_type")
    if not model_type:
        raise ConfigError(f"config field 'model_type' is missing from {source}", field="model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"model_type '{model_type}' is not supported (supported: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}); "
            "its layer layout is unknown, so its size would be a guess",
            field="model_type",
        )
    archs = raw.get("architectures") or [model_type]
    architecture = str(archs[0])
    defaults: list[str] = []
    vision = None
    text_cfg: Mapping[str, Any] = raw
    where = "config.json"
    text_type = model_type
    if model_type == "gemma3":
        text_cfg = raw.get("text_config") or {}
        if not text_cfg:
            raise ConfigError("config field 'text_config' is missing (gemma3 multimodal config)", field="text_config")
        where = "config.json:text_config"
        text_type = "gemma3_text"
        if raw.get("vision_config"):
            vision = _vision(raw["vision_config"], defaults)
    f = _Fields(text_cfg, text_type, where, defaults)
    spec = _build(f, name=name, source=source, model_type=model_type, architecture=architecture)
    if vision is not None:
        spec.vision = VisionSpec(**{**vision.__dict__, "projector_out": spec.hidden_size})
    qc = raw.get("quantization_config") or {}
    if qc:
        spec.config_quant_method = str(qc.get("quant_method"))
        block = qc.get("weight_block_size")
        if block:
            spec.quant_block = (int(block[0]), int(block[1]))
    return spec


def _vision(cfg: Mapping[str, Any], defaults: list[str]) -> VisionSpec:
    vtype = cfg.get("model_type", "siglip_vision_model")
    if vtype != "siglip_vision_model":
        raise ConfigError(f"vision_config model_type '{vtype}' is not supported (siglip_vision_model is)",
                          field="vision_config.model_type")
    f = _Fields(cfg, "siglip_vision_model", "config.json:vision_config", defaults)
    if f.opt("vision_use_head", False):
        raise ConfigError("vision_config.vision_use_head=true is not supported", field="vision_use_head")
    return VisionSpec(
        hidden=_int(f.req("hidden_size"), "hidden_size"),
        intermediate=_int(f.req("intermediate_size"), "intermediate_size"),
        layers=_int(f.req("num_hidden_layers"), "num_hidden_layers"),
        patch=_int(f.req("patch_size"), "patch_size"),
        image_size=_int(f.req("image_size"), "image_size"),
        channels=_int(f.opt("num_channels", 3), "num_channels"),
        heads=_int(f.req("num_attention_heads"), "num_attention_heads"),
        projector_out=0,
    )


def _rope_type(rope_scaling: Mapping[str, Any] | None) -> str:
    if not rope_scaling:
        return "default"
    return str(rope_scaling.get("rope_type") or rope_scaling.get("type") or "default")


def _rope_cache(label: str, rope_scaling: Mapping[str, Any] | None, max_pos: int | None, rotary_dim: int) -> RopeCache:
    """vLLM's cos/sin cache length for one rope configuration (see docs/vram.md)."""
    kind = _rope_type(rope_scaling)
    rows = max_pos or 0
    exact = kind in ("default", "llama3", "linear")
    if kind in ("linear", "dynamic"):
        rows = int(rows * float(rope_scaling["factor"]))  # type: ignore[index]
    elif kind in ("yarn", "deepseek_yarn"):
        orig = rope_scaling.get("original_max_position_embeddings") or max_pos or 0  # type: ignore[union-attr]
        rows = int(orig * float(rope_scaling["factor"]))  # type: ignore[index]
    return RopeCache(label=f"{label} ({kind})", rows=rows, rotary_dim=rotary_dim, exact=exact)


def _build(f: _Fields, *, name: str, source: str, model_type: str, architecture: str) -> ModelSpec:
    family = SUPPORTED_MODEL_TYPES[model_type]
    mt = f.model_type
    h = _int(f.req("hidden_size"), "hidden_size")
    n_layers = _int(f.req("num_hidden_layers"), "num_hidden_layers")
    n_heads = _int(f.req("num_attention_heads"), "num_attention_heads")
    vocab = _int(f.req("vocab_size"), "vocab_size")
    max_pos_raw = f.opt("max_position_embeddings")
    max_pos = _int(max_pos_raw, "max_position_embeddings") if max_pos_raw is not None else None
    tie = bool(f.opt("tie_word_embeddings", False))
    rope_scaling = f.opt("rope_scaling")
    notes: list[str] = []

    if family == "deepseek":
        return _build_deepseek(f, name=name, source=source, model_type=model_type, architecture=architecture,
                               h=h, n_layers=n_layers, n_heads=n_heads, vocab=vocab, max_pos=max_pos, tie=tie,
                               rope_scaling=rope_scaling)

    n_kv = _int(f.req("num_key_value_heads"), "num_key_value_heads")
    head_dim_raw = f.cfg.get("head_dim")
    if head_dim_raw is None:
        head_dim_raw = f.opt("head_dim") if mt in ("qwen3", "qwen3_moe", "gemma2", "gemma3_text") else None
    if head_dim_raw is None:
        if h % n_heads:
            raise ConfigError(f"config field 'head_dim' is missing and hidden_size {h} is not divisible by "
                              f"num_attention_heads {n_heads}", field="head_dim")
        head_dim = h // n_heads
    else:
        head_dim = _int(head_dim_raw, "head_dim")

    qkv_bias = o_bias = mlp_bias = False
    qk_norm = False
    norms_per_layer = 2
    if mt in ("llama",):
        qkv_bias = o_bias = bool(f.opt("attention_bias", False))
        mlp_bias = bool(f.opt("mlp_bias", False))
    elif mt == "qwen2":
        qkv_bias = True  # Qwen2Attention hard-codes bias on q/k/v (not o)
    elif mt in ("qwen3", "qwen3_moe"):
        qkv_bias = o_bias = bool(f.opt("attention_bias", False))
        qk_norm = True
    elif mt in ("gemma2", "gemma3_text"):
        qkv_bias = o_bias = bool(f.opt("attention_bias", False))
        norms_per_layer = 4
        qk_norm = mt == "gemma3_text"

    windows = _layer_windows(f, mt, n_layers, notes)

    moe = None
    intermediate = 0
    if mt == "mixtral":
        intermediate = _int(f.req("intermediate_size"), "intermediate_size")
        moe = MoESpec(num_experts=_int(f.req("num_local_experts"), "num_local_experts"),
                      top_k=_int(f.req("num_experts_per_tok"), "num_experts_per_tok"),
                      expert_intermediate=intermediate, shared_intermediate=0, has_score_bias=False,
                      moe_layers=(True,) * n_layers)
    elif mt == "qwen3_moe":
        intermediate = _int(f.req("intermediate_size"), "intermediate_size")
        step = _int(f.opt("decoder_sparse_step", 1), "decoder_sparse_step")
        mlp_only = set(f.opt("mlp_only_layers", []) or [])
        n_exp = _int(f.req("num_experts"), "num_experts")
        layers = tuple((i not in mlp_only) and n_exp > 0 and (i + 1) % step == 0 for i in range(n_layers))
        moe = MoESpec(num_experts=n_exp, top_k=_int(f.req("num_experts_per_tok"), "num_experts_per_tok"),
                      expert_intermediate=_int(f.req("moe_intermediate_size"), "moe_intermediate_size"),
                      shared_intermediate=0, has_score_bias=False, moe_layers=layers)
    else:
        intermediate = _int(f.req("intermediate_size"), "intermediate_size")

    rotary_dim = int(head_dim * float(f.cfg.get("partial_rotary_factor", 1.0) or 1.0))
    caches = [_rope_cache("rotary cos/sin cache", rope_scaling, max_pos, rotary_dim)]
    if mt == "gemma3_text":
        caches = [_rope_cache("rotary cache, global layers", rope_scaling, max_pos, rotary_dim),
                  _rope_cache("rotary cache, local layers", None, max_pos, rotary_dim)]
    return ModelSpec(
        name=name, source=source, model_type=model_type, family=family, architecture=architecture,
        hidden_size=h, num_layers=n_layers, num_heads=n_heads, num_kv_heads=n_kv, head_dim=head_dim,
        intermediate_size=intermediate, vocab_size=vocab, tie_word_embeddings=tie, qkv_bias=qkv_bias,
        o_bias=o_bias, mlp_bias=mlp_bias, qk_norm=qk_norm, norms_per_layer=norms_per_layer,
        layer_windows=windows, max_position_embeddings=max_pos, moe=moe, rope_caches=tuple(caches),
        defaults_applied=f.defaults_applied, notes=notes,
    )


def _layer_windows(f: _Fields, mt: str, n_layers: int, notes: list[str]) -> tuple[int | None, ...]:
    """Per-layer attention window: None for full attention, an int for sliding-window layers."""
    layer_types = f.cfg.get("layer_types")
    window = f.cfg.get("sliding_window")
    if layer_types:
        if len(layer_types) != n_layers:
            raise ConfigError(f"config field 'layer_types' has {len(layer_types)} entries for {n_layers} layers",
                              field="layer_types")
        if any(t == "sliding_attention" for t in layer_types):
            window = _int(f.req("sliding_window", "layer_types lists sliding_attention layers"), "sliding_window")
        return tuple(window if t == "sliding_attention" else None for t in layer_types)
    if mt in ("llama", "qwen3_moe"):
        return (None,) * n_layers
    if mt in ("mistral", "mixtral"):
        window = f.opt("sliding_window")
        if window is None:
            return (None,) * n_layers
        notes.append(f"sliding_window={window} on every layer: vLLM keeps only the window per request "
                     "(SlidingWindowSpec); pass disable_sliding_window to treat it as full attention")
        return (_int(window, "sliding_window"),) * n_layers
    if mt in ("qwen2", "qwen3"):
        if not f.opt("use_sliding_window", False):
            return (None,) * n_layers
        window = _int(f.req("sliding_window", "use_sliding_window is true"), "sliding_window")
        first = _int(f.opt("max_window_layers", n_layers), "max_window_layers")
        return tuple(window if i >= first else None for i in range(n_layers))
    if mt == "gemma2":
        window = _int(f.req("sliding_window"), "sliding_window")
        return tuple(window if i % 2 == 0 else None for i in range(n_layers))
    if mt == "gemma3_text":
        window = _int(f.req("sliding_window"), "sliding_window")
        pattern = f.cfg.get("sliding_window_pattern")
        if pattern is None:
            pattern = 6
            f.defaults_applied.append(f"{f.where}.sliding_window_pattern=6 (transformers Gemma3TextConfig default)")
        pattern = _int(pattern, "sliding_window_pattern")
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(n_layers))
    return (None,) * n_layers


def _build_deepseek(f: _Fields, *, name: str, source: str, model_type: str, architecture: str, h: int,
                    n_layers: int, n_heads: int, vocab: int, max_pos: int | None, tie: bool,
                    rope_scaling: Any) -> ModelSpec:
    q_lora = f.cfg.get("q_lora_rank")
    mla = MLASpec(
        q_lora_rank=_int(q_lora, "q_lora_rank") if q_lora is not None else None,
        kv_lora_rank=_int(f.req("kv_lora_rank", "MLA latent width"), "kv_lora_rank"),
        qk_nope_head_dim=_int(f.req("qk_nope_head_dim"), "qk_nope_head_dim"),
        qk_rope_head_dim=_int(f.req("qk_rope_head_dim"), "qk_rope_head_dim"),
        v_head_dim=_int(f.req("v_head_dim"), "v_head_dim"),
    )
    intermediate = _int(f.req("intermediate_size", "dense MLP layers"), "intermediate_size")
    n_routed = f.cfg.get("n_routed_experts")
    moe = None
    if n_routed:
        first_dense = _int(f.req("first_k_dense_replace"), "first_k_dense_replace")
        freq = _int(f.opt("moe_layer_freq", 1), "moe_layer_freq")
        n_shared = f.opt("n_shared_experts") or 0
        moe_inter = _int(f.req("moe_intermediate_size"), "moe_intermediate_size")
        layers = tuple(i >= first_dense and i % freq == 0 for i in range(n_layers))
        moe = MoESpec(num_experts=_int(n_routed, "n_routed_experts"),
                      top_k=_int(f.req("num_experts_per_tok"), "num_experts_per_tok"),
                      expert_intermediate=moe_inter, shared_intermediate=moe_inter * _int(n_shared, "n_shared_experts"),
                      has_score_bias=f.cfg.get("topk_method") == "noaux_tc", moe_layers=layers)
    notes: list[str] = []
    nextn = f.cfg.get("num_nextn_predict_layers") or 0
    if nextn:
        notes.append(f"num_nextn_predict_layers={nextn}: the MTP module(s) in the checkpoint are not counted "
                     "(vLLM loads them only for MTP speculative decoding)")
    cache = _rope_cache("rotary cos/sin cache", rope_scaling, max_pos, mla.qk_rope_head_dim)
    return ModelSpec(
        name=name, source=source, model_type=model_type, family="deepseek", architecture=architecture,
        hidden_size=h, num_layers=n_layers, num_heads=n_heads, num_kv_heads=n_heads,
        head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim, intermediate_size=intermediate, vocab_size=vocab,
        tie_word_embeddings=tie, qkv_bias=False, o_bias=False, mlp_bias=False, qk_norm=False, norms_per_layer=2,
        layer_windows=(None,) * n_layers, max_position_embeddings=max_pos, mla=mla, moe=moe,
        rope_caches=(cache,), defaults_applied=f.defaults_applied, notes=notes,
    )
