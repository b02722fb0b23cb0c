"""VRAM budgeting for LLM serving: how many KV-cache tokens fit, and why.

>>> from ridgeline.vram import plan
>>> p = plan("Llama-3.1-8B", gpu="H100", max_model_len=16384)   # doctest: +SKIP
>>> p.kv_tokens, p.max_concurrency                                # doctest: +SKIP

See docs/vram.md for the model, the estimates, and their sources. The Typer command lives in
:mod:`ridgeline.vram.cli` (``vram_command``).
"""

from __future__ import annotations

from .config import ModelSpec, load_config, load_model, shipped_configs
from .errors import ConfigError, DoesNotFitError, GpuError, InputError, MeasureError, VramError
from .gpus import KNOWN_GPUS, GpuSpec, detect_gpu, lookup_gpu
from .planner import GiB, Plan, Term, fmt_gib, gib, plan

__all__ = [
    "GiB",
    "KNOWN_GPUS",
    "ConfigError",
    "DoesNotFitError",
    "GpuError",
    "GpuSpec",
    "InputError",
    "MeasureError",
    "ModelSpec",
    "Plan",
    "Term",
    "VramError",
    "detect_gpu",
    "fmt_gib",
    "gib",
    "load_config",
    "load_model",
    "lookup_gpu",
    "plan",
    "shipped_configs",
]
