"""Which ops exist and which implementations each one has.

Op specs register themselves when their module is imported (listed in `SPEC_MODULES`); implementations are
registered as factories, resolved lazily, so an optional peer that is not installed costs nothing until asked
for and then says why it is unavailable.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ridgeline.specs.base import Impl, OpSpec

# Importing these modules registers the ops and their implementations (ours and the peers').
SPEC_MODULES = ("ridgeline.specs.rmsnorm", "ridgeline.specs.rmsnorm_quant")
PEER_MODULES = (
    "ridgeline.peers.torch_native",
    "ridgeline.peers.liger",
    "ridgeline.peers.vllm",
    "ridgeline.peers.flashinfer",
    "ridgeline.peers.quack",
)


class Unavailable(Exception):
    """Raised by an implementation factory: the message says why (e.g. 'liger-kernel not installed')."""


ImplFactory = Callable[[], Callable[..., Any]]

_SPECS: dict[str, OpSpec] = {}
_FACTORIES: dict[str, dict[str, tuple[str, ImplFactory, tuple[str, ...], str]]] = {}
_RESOLVED: dict[tuple[str, str], Impl] = {}
_loaded = False


def register_spec(spec: OpSpec) -> OpSpec:
    _SPECS[spec.name] = spec
    return spec


def register_impl(
    op: str, name: str, source: str, factory: ImplFactory, *, mutates: tuple[str, ...] = (), description: str = ""
) -> None:
    """Register an implementation of `op`; `factory()` returns the callable or raises Unavailable."""
    _FACTORIES.setdefault(op, {})[name] = (source, factory, mutates, description)
    _RESOLVED.pop((op, name), None)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in SPEC_MODULES + PEER_MODULES:
        importlib.import_module(mod)


def specs() -> dict[str, OpSpec]:
    _load()
    return dict(_SPECS)


def get_spec(op: str) -> OpSpec:
    _load()
    if op not in _SPECS:
        raise ValueError(f"op: unknown op {op!r}; known ops: {', '.join(sorted(_SPECS))}")
    return _SPECS[op]


def implementations(op: str) -> list[Impl]:
    """Every registered implementation of `op`, each resolved (available, or unavailable with a reason)."""
    get_spec(op)
    return [resolve(op, name) for name in _FACTORIES.get(op, {})]


def resolve(op: str, name: str) -> Impl:
    """An implementation by registered name, or a user's `path/to/file.py:function`."""
    get_spec(op)
    if (op, name) in _RESOLVED:
        return _RESOLVED[(op, name)]
    if name not in _FACTORIES.get(op, {}):
        if ":" in name and name.rsplit(":", 1)[0].endswith(".py"):
            impl = load_user_impl(op, name)  # imported once per process: check and bench reuse it
            _RESOLVED[(op, name)] = impl
            return impl
        known = ", ".join(_FACTORIES.get(op, {}))
        raise ValueError(f"impl: {op} has no implementation {name!r}; registered: {known}; or pass file.py:fn")
    source, factory, mutates, description = _FACTORIES[op][name]
    try:
        fn, reason = factory(), ""
    except Unavailable as e:
        fn, reason = None, str(e)
    except Exception as e:  # a broken optional install must not take the tool down
        fn, reason = None, f"failed to load: {type(e).__name__}: {e}"
    impl = Impl(op, name, source, fn, reason, mutates, description)
    _RESOLVED[(op, name)] = impl
    return impl


def load_user_impl(op: str, spec_text: str) -> Impl:
    """Load `file.py:fn` as an implementation called exactly like the op's public function."""
    path_text, fn_name = spec_text.rsplit(":", 1)
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ValueError(f"impl: no such file {path_text!r} (expected file.py:function)")
    mod_name = f"ridgeline_user_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(mod_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"impl: cannot import {path_text!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[mod_name] = module
    module_spec.loader.exec_module(module)
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ValueError(f"impl: {path_text!r} defines no callable {fn_name!r}")
    mutates = tuple(getattr(fn, "ridgeline_mutates", ()))
    return Impl(op, spec_text, "user", fn, "", mutates, f"user function {fn_name} from {path}")
