"""FlashInfer peers (pip `flashinfer-python`): the CUDA RMSNorm kernels in flashinfer.norm.

    rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None) -> out
    fused_add_rmsnorm(input, residual, weight, eps=1e-6, enable_pdl=None) -> None
                                                     residual <- input + residual, input <- normed

The fused one works in place, so it is registered with mutates=("x", "residual") and returns those two
tensors as (out, residual_out). Nothing from FlashInfer is imported until an implementation is asked for.
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

PIP = "flashinfer-python"
NORM_MODULE = "flashinfer.norm"


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


def _rms() -> Callable[..., Any]:
    rmsnorm = _function(_import(NORM_MODULE), "rmsnorm", 2, ("eps",))

    def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return rmsnorm(x, weight, eps=eps)

    return rms


def _fused() -> Callable[..., Any]:
    fused_add_rmsnorm = _function(_import(NORM_MODULE), "fused_add_rmsnorm", 3, ("eps",))

    def fused(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        fused_add_rmsnorm(x, residual, weight, eps=eps)
        return x, residual

    return fused


register_impl("rmsnorm", "flashinfer", "peer", _rms,
              description="FlashInfer CUDA RMSNorm (flashinfer.norm.rmsnorm, out allocated by FlashInfer)")
register_impl("fused_add_rmsnorm", "flashinfer", "peer", _fused, mutates=("x", "residual"),
              description="FlashInfer CUDA fused add + RMSNorm (flashinfer.norm.fused_add_rmsnorm), "
                          "in place: residual <- x + residual, x <- out")
