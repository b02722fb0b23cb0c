"""What the ops' peer adapters share: torch.compile of a reference expression, timed as the field runs it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

# A sweep compiles one graph per shape (dynamic=False, as a serving engine specializes): lift dynamo's recompile
# limit (8 by default) so the later shapes are compiled too, not silently run eagerly.
COMPILE_RECOMPILE_LIMIT = 512


def compiled(fn: Callable[..., Any], **compile_kwargs: Any) -> Callable[..., Any]:
    """torch.compile(fn, dynamic=False, **compile_kwargs) with the recompile limit lifted."""
    dynamo_config = torch._dynamo.config
    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(dynamo_config, knob):
            setattr(dynamo_config, knob, max(getattr(dynamo_config, knob), COMPILE_RECOMPILE_LIMIT))
    return torch.compile(fn, dynamic=False, **compile_kwargs)


def compiled_factory(fn: Callable[..., Any], **compile_kwargs: Any) -> Callable[[], Callable[..., Any]]:
    """A registry factory: compiles on first use, so importing an op package costs no compile."""
    return lambda: compiled(fn, **compile_kwargs)


@contextlib.contextmanager
def module_globals(package: str, values: dict[str, Any], skip: tuple[str, ...] = ()) -> Iterator[None]:
    """Set `values` on every loaded module of `package` that defines them (e.g. `_INTERPRETED = False` so the
    launch rules pick a GPU's configs while the profiler records launches on a CPU), restoring them after."""
    old = []
    try:
        for name, module in sorted(sys.modules.items()):
            if module is None or not name.startswith(package + ".") or name.startswith(skip):
                continue
            for k, v in values.items():
                if k in vars(module):
                    old.append((module, k, vars(module)[k]))
                    setattr(module, k, v)
        yield
    finally:
        for module, k, v in reversed(old):
            setattr(module, k, v)
