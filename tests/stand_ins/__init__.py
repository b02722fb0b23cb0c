"""Plain-torch stand-ins for the optional peer libraries (Liger, vLLM, FlashInfer, QuACK).

Each submodule's `build(...)` returns in-memory modules, keyed by their import name, that implement the
documented API of one library in plain torch: its names, signatures, and in-place / out= conventions. The
tests put them in sys.modules with `install`, so the adapters run on the CPU without the real libraries.
Keyword arguments of `build` give broken variants (a missing function, an older signature).
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest


def module(name: str, *, package: bool = False, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    if package:
        mod.__path__ = []  # a package with nothing on disk: a submodule not given here is not found
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def install(monkeypatch: pytest.MonkeyPatch, modules: dict[str, types.ModuleType]) -> None:
    """Make `modules` the only importable modules of their top-level packages, for one test."""
    tops = {name.partition(".")[0] for name in modules}
    # Drop anything of the real library already imported, so the stand-in is all there is.
    for name in list(sys.modules):
        if name.partition(".")[0] in tops:
            monkeypatch.delitem(sys.modules, name)
    for name, mod in modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
