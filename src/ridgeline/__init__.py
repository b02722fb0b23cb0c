"""ridgeline: a kernel engineer's workbench for NVIDIA GPUs, and a library of Triton kernels.

Public kernels: rms_norm, fused_add_rms_norm. Tools: check, bench, probe (also as the `ridgeline` command).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from ridgeline.kernels.rmsnorm import fused_add_rms_norm, rms_norm  # noqa: E402


def check(*args: Any, **kwargs: Any):
    """Run the correctness harness (see ridgeline.harness.correctness.check)."""
    from ridgeline.harness.correctness import check as _check

    return _check(*args, **kwargs)


__all__ = ["rms_norm", "fused_add_rms_norm", "check", "__version__"]
