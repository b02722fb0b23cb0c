"""QuACK peers (pip `quack-kernels`, module `quack`): the CuTe-DSL RMSNorm of Dao-AILab/quack.

    quack.rmsnorm.rmsnorm(x, weight=None, bias=None, residual=None, out_dtype=None, residual_dtype=None,
                          eps=1e-6, prenorm=False)
        -> out, or (out, residual_out) when a residual is given with prenorm=True

With a residual the kernel adds x + residual in fp32, stores the sum rounded to the residual's dtype as
residual_out and normalizes the fp32 sum: the fused op, writing fresh tensors (nothing in place). Nothing
from QuACK is imported until an implementation is asked for.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from ridgeline.registry import Unavailable, register_impl

PIP = "quack-kernels"
# Imported by module name: `quack/__init__.py` does `from quack.rmsnorm import rmsnorm`, so the attribute
# `quack.rmsnorm` is the function, not the module, and `import quack.rmsnorm as m` would bind the function.
RMS_MODULE = "quack.rmsnorm"


def _version() -> str:
    try:
        return importlib.metadata.version(PIP)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def _broken(module: str, e: BaseException) -> str:
    detail = (str(e).splitlines() or [""])[0][:200]
    hint = "" if torch.cuda.is_available() else " (this machine has no CUDA, which it may need)"
    return f"{PIP} is installed but `import {module}` failed: {type(e).__name__}: {detail}{hint}"


def _import(module: str) -> ModuleType:
    """Import `module`, turning every failure into Unavailable with the reason."""
    top = module.partition(".")[0]
    for name in (top, module):
        try:
            loaded = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == top:
                raise Unavailable(f"{PIP} not installed") from None
            if e.name and (name == e.name or name.startswith(e.name + ".")):
                raise Unavailable(f"{PIP} {_version()} has no module {e.name}") from None
            raise Unavailable(_broken(name, e)) from None
        except Exception as e:  # a build for another platform fails in its own ways (OSError, RuntimeError)
            raise Unavailable(_broken(name, e)) from None
    return loaded


def _function(module: ModuleType, name: str, n_positional: int, keywords: tuple[str, ...] = ()) -> Any:
    """`module.name`, checked (where Python can tell) to take n_positional arguments and `keywords`."""
    fn = getattr(module, name, None)
    if not callable(fn):
        raise Unavailable(f"{PIP} {_version()}: {module.__name__} has no {name}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a registered custom op may hide it: the call itself will tell
        return fn
    params = list(sig.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return fn
    n_pos = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    missing = [k for k in keywords if k not in sig.parameters]
    if n_pos < n_positional or missing:
        wanted = f"{n_positional} positional arguments" + "".join(f", {k}=" for k in keywords)
        raise Unavailable(f"{PIP} {_version()}: {module.__name__}.{name}{sig} does not take {wanted}")
    return fn


def _rmsnorm(keywords: tuple[str, ...]) -> Any:
    return _function(_import(RMS_MODULE), "rmsnorm", 2, keywords)


def _rms() -> Callable[..., Any]:
    rmsnorm = _rmsnorm(("eps",))

    def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return rmsnorm(x, weight, eps=eps)

    return rms


def _fused() -> Callable[..., Any]:
    # Releases whose rmsnorm takes no residual / prenorm have no fused entry point we can call.
    rmsnorm = _rmsnorm(("residual", "eps", "prenorm"))

    def fused(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out, residual_out = rmsnorm(x, weight, residual=residual, eps=eps, prenorm=True)
        return out, residual_out

    return fused


register_impl("rmsnorm", "quack", "peer", _rms,
              description="QuACK CuTe-DSL RMSNorm (quack.rmsnorm.rmsnorm)")
register_impl("fused_add_rmsnorm", "quack", "peer", _fused,
              description="QuACK CuTe-DSL RMSNorm with residual (quack.rmsnorm.rmsnorm(..., residual=, "
                          "prenorm=True)); writes fresh out and residual_out")
