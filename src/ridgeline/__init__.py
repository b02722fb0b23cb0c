"""ridgeline: a kernel engineer's workbench for NVIDIA GPUs, and a library of Triton kernels.

Kernels: rms_norm, fused_add_rms_norm. Tools: check, bench, probe (also as the `ridgeline` command).
Kernel modules are imported on first use, so the CLI can choose Triton's CPU interpreter before they load.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_KERNELS = {name: "ridgeline.kernels.rmsnorm" for name in ("rms_norm", "fused_add_rms_norm", "rms_norm_dynamic_quant")}


def __getattr__(name: str) -> Any:
    if name in _KERNELS:
        import importlib

        return getattr(importlib.import_module(_KERNELS[name]), name)
    raise AttributeError(f"module 'ridgeline' has no attribute {name!r}")


def check(*args: Any, **kwargs: Any):
    """Run the correctness harness (see ridgeline.harness.correctness.check)."""
    from ridgeline.harness.correctness import check as _check

    return _check(*args, **kwargs)


def bench(*args: Any, **kwargs: Any):
    """Check, then time implementations of an op (see ridgeline.harness.bench.bench); returns the run record."""
    from ridgeline.harness.bench import bench as _bench

    return _bench(*args, **kwargs)


def probe(refresh: bool = False, quick: bool = False) -> dict[str, Any]:
    """This GPU's measured ceilings (cached per GPU and driver; see ridgeline.harness.probe.device_profile)."""
    from ridgeline.harness.probe import device_profile

    return device_profile(refresh=refresh, quick=quick)


__all__ = ["probe", "rms_norm", "fused_add_rms_norm", "rms_norm_dynamic_quant", "check", "bench", "__version__"]
