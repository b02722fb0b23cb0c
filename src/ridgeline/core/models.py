"""Layer dimensions of real models, for the shape sets ops build from them (a norm's hidden size, a GEMM's (N, K),
attention's heads). One table, read from the Hugging Face configs ridgeline ships for VRAM budgeting
(src/ridgeline/vram/configs/*.json), so the two never disagree."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class ModelDims:
    name: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    layers: int


@cache
def model_dims() -> dict[str, ModelDims]:
    """Every shipped model's layer dimensions, by the config's file name (e.g. 'Llama-3.1-8B')."""
    out: dict[str, ModelDims] = {}
    folder = resources.files("ridgeline.vram") / "configs"
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".json"):
            continue
        raw = json.loads(entry.read_text())
        c = raw.get("text_config", raw)
        heads = int(c["num_attention_heads"])
        out[entry.name[:-5]] = ModelDims(
            name=entry.name[:-5], hidden=int(c["hidden_size"]), intermediate=int(c["intermediate_size"]),
            heads=heads, kv_heads=int(c.get("num_key_value_heads") or heads),
            head_dim=int(c.get("head_dim") or c["hidden_size"] // heads), vocab=int(c["vocab_size"]),
            layers=int(c["num_hidden_layers"]))
    return out


def hidden_sizes() -> list[int]:
    """The distinct hidden sizes of the shipped models, ascending."""
    return sorted({m.hidden for m in model_dims().values()})
