"""ridgeline: a kernel engineer's workbench for NVIDIA GPUs, and a library of Triton kernels.

Kernels (each op package's EXPORTS): rms_norm, fused_add_rms_norm, rms_norm_dynamic_quant and their backward;
layer_norm; softmax; silu_and_mul, gelu_and_mul, silu_mul, gelu_mul; rotary_embedding, apply_rotary;
cross_entropy; matmul, scaled_mm (FP8, quantize_fp8_per_token / _per_group), int4_matmul (pack_int4, unpack_int4);
attention (prefill, forward and backward), paged_decode_attention.
Layers and `patch(model)` for Hugging Face models: ridgeline.nn.
The contract API for an op of your own: OpSpec, Case, Cost, Tolerance (see ridgeline.core.spec).
Tools: check, bench, probe, profile (also as the `ridgeline` command).
Kernel modules are imported on first use, so the CLI can choose Triton's CPU interpreter before they load.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ridgeline.core.spec import Case, Cost, Impl, OpSpec, Tolerance

__version__ = "0.1.0"


def _snapshot_timers() -> None:
    importlib.import_module("ridgeline.harness.guards").snapshot_timers()


from ridgeline.core import userfile as _userfile  # noqa: E402

_userfile.BEFORE_IMPORT.append(_snapshot_timers)


def _exports() -> dict[str, str]:
    """Public kernel functions of every op package: name -> module (the packages are light to import)."""
    import ridgeline.ops as ops

    out: dict[str, str] = {}
    for info in pkgutil.iter_modules(ops.__path__):
        out.update(getattr(importlib.import_module(f"ridgeline.ops.{info.name}"), "EXPORTS", {}))
    return out


def __getattr__(name: str) -> Any:
    if not name.startswith("_"):
        module = _exports().get(name)
        if module is not None:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'ridgeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_exports()))


def check(op: str | OpSpec, impls: Iterable[str] | None = None, dtypes: Iterable[Any] | None = None,
          device: Any = None, cases: Iterable[Case] | None = None, seed: int = 0, on_result: Any = None) -> list:
    """Prove implementations of `op` (a name, `FILE.py:SPEC` or an OpSpec) right on its edge cases (or `cases`):
    float64 reference, NaN-poisoned outputs, inputs untouched, determinism, batch invariance, fresh inputs.
    Returns one CheckResult per (implementation, case); `impls` defaults to ours."""
    from ridgeline.harness.correctness import check as _check

    return _check(op, impls, dtypes, device, cases, seed, on_result)


def bench(op: str | OpSpec | None = None, impls: Iterable[str] | None = None, shapes: Any = None,
          dtypes: Iterable[Any] | None = None, regimes: Iterable[str] = ("auto",), variants: Iterable[str] = ("",),
          budget_s: float | None = None, baseline: str | None = None, json_path: Path | str | None = None,
          resume: Path | str | None = None, **kwargs: Any):
    """Check, then time implementations of `op` one honest way on the measured roofline; returns the run record
    (also written to JSON and the SQLite store). `shapes` is a shape-set name or a list of shapes; `resume`
    continues a killed run from its record. More options: ridgeline.harness.bench.bench."""
    from ridgeline.harness.bench import bench as _bench

    return _bench(op, impls, shapes, dtypes, regimes, variants, budget_s, baseline, json_path, resume, **kwargs)


def probe(refresh: bool = False, quick: bool = False) -> dict[str, Any]:
    """This GPU's measured ceilings (cached per GPU and driver; see ridgeline.harness.probe.device_profile)."""
    from ridgeline.harness.probe import device_profile

    return device_profile(refresh=refresh, quick=quick)


def patch(model: Any, **kwargs: Any) -> Any:
    """Swap a Hugging Face Llama / Mistral / Qwen2 / Qwen3 model's RMSNorm, MLP activation, rotary embedding and
    loss for ridgeline's kernels, in place; returns a handle whose `undo()` restores it (ridgeline.nn.patch)."""
    from ridgeline.nn.patch import patch as _patch

    return _patch(model, **kwargs)


KERNELS = ["rms_norm", "fused_add_rms_norm", "rms_norm_dynamic_quant", "rms_norm_backward",
           "fused_add_rms_norm_backward", "layer_norm", "layer_norm_forward", "layer_norm_backward", "softmax",
           "softmax_backward", "silu_and_mul", "gelu_and_mul", "silu_mul", "gelu_mul", "silu_and_mul_backward",
           "gelu_and_mul_backward", "rotary_embedding", "apply_rotary", "apply_rotary_backward", "cross_entropy",
           "cross_entropy_fwd_bwd", "matmul", "int4_matmul", "pack_int4", "unpack_int4",
           "paged_decode_attention", "attention", "attention_backward", "scaled_mm",
           "quantize_fp8_per_token", "quantize_fp8_per_group"]
__all__ = ["OpSpec", "Case", "Cost", "Tolerance", "Impl", "check", "bench", "probe", "patch", *KERNELS,
           "__version__"]
