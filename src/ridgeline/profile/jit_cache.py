"""Compiled kernels found in Triton's JIT caches: what a call compiled (or loaded from Triton's disk cache), for
kernels that were not seen launching (compiled through `warmup`, or launched past JITFunction.run)."""

from __future__ import annotations

import gc
from typing import Any

from ridgeline.profile.facts import meta


def compiled_in(fn: Any) -> list[Any]:
    """Compiled kernels in a JITFunction's caches (device_caches in triton >= 3.2, .cache before)."""
    found: list[Any] = []
    caches = getattr(fn, "device_caches", None)
    if isinstance(caches, dict):
        for entry in list(caches.values()):
            cache = entry[0] if isinstance(entry, tuple) and entry else entry
            if isinstance(cache, dict):
                found += list(cache.values())
    else:
        cache = getattr(fn, "cache", None)
        if isinstance(cache, dict):
            for per_device in cache.values():
                found += list(per_device.values()) if isinstance(per_device, dict) else [per_device]
    return [k for k in found if hasattr(k, "asm")]


def _jit_functions() -> list[Any]:
    """Every live JITFunction. By type(o), never isinstance(o, ...): isinstance falls back to o.__class__, which a
    dead weakref.proxy among the gc's objects answers with ReferenceError (one left by an earlier torch.compile
    or test in the process made every in-process GPU profile fail), and some lazily deprecated torch objects
    answer with a warning."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return []
    return [o for o in gc.get_objects() if issubclass(type(o), JITFunction)]


def jit_snapshot() -> set[int]:
    return {id(k) for fn in _jit_functions() for k in compiled_in(fn)}


def jit_new_kernels(before: set[int]) -> list[Any]:
    """Kernels compiled (or loaded from Triton's disk cache) since `before`, in a stable order."""
    new = [k for fn in _jit_functions() for k in compiled_in(fn) if id(k) not in before]
    return sorted(new, key=lambda k: str(meta(k, "name") or ""))

