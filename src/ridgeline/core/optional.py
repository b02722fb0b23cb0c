"""What every optional peer adapter needs: import a package lazily and turn each way it can fail into
`Unavailable` with a reason a user can act on (not installed, wrong version, broken build, wrong signature)."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from types import ModuleType
from typing import Any

import torch

from ridgeline.core.registry import Unavailable


class OptionalPackage:
    """A pip distribution that may be absent; `pip` is its install name, used in every message."""

    def __init__(self, pip: str) -> None:
        self.pip = pip

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.pip)
        except importlib.metadata.PackageNotFoundError:
            return "(version unknown)"

    def broken(self, module: str, e: BaseException) -> str:
        detail = (str(e).splitlines() or [""])[0][:200]
        hint = "" if torch.cuda.is_available() else " (this machine has no CUDA, which it may need)"
        return f"{self.pip} is installed but `import {module}` failed: {type(e).__name__}: {detail}{hint}"

    def import_module(self, module: str) -> ModuleType:
        """Import `module`, turning every failure into Unavailable with the reason."""
        top = module.partition(".")[0]
        for name in (top, module):
            try:
                loaded = importlib.import_module(name)
            except ModuleNotFoundError as e:
                if e.name == top:
                    raise Unavailable(f"{self.pip} not installed") from None
                if e.name and (name == e.name or name.startswith(e.name + ".")):
                    raise Unavailable(f"{self.pip} {self.version()} has no module {e.name}") from None
                raise Unavailable(self.broken(name, e)) from None
            except Exception as e:  # a build for another platform fails in its own ways (OSError, RuntimeError)
                raise Unavailable(self.broken(name, e)) from None
        return loaded

    def function(self, module: ModuleType, name: str, n_positional: int, keywords: tuple[str, ...] = ()) -> Any:
        """`module.name`, checked (where Python can tell) to take n_positional arguments and `keywords`."""
        fn = getattr(module, name, None)
        if not callable(fn):
            raise Unavailable(f"{self.pip} {self.version()}: {module.__name__} has no {name}")
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
            raise Unavailable(f"{self.pip} {self.version()}: {module.__name__}.{name}{sig} does not take {wanted}")
        return fn
