"""Which ops exist and which implementations each one has.

Ops are found, never listed here: every package under `ridgeline.ops` is imported on first use (importing it
registers its specs and implementations), then every module named by a `ridgeline.ops` entry point of an
installed distribution (a third-party op package), and a user's `FILE.py:NAME` whenever one is asked for.
Implementations are registered as factories, resolved lazily, so an optional peer that is not installed costs
nothing until asked for and then says why it is unavailable.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable
from typing import Any

from ridgeline.core.spec import Impl, OpSpec
from ridgeline.core.userfile import (
    USER_MODULE_PREFIX,
    check_impl_signature,
    is_file_ref,
    load_object,
    user_error,
    user_origin,
)

ENTRY_POINT_GROUP = "ridgeline.ops"
OPS_PACKAGE = "ridgeline.ops"


class Unavailable(Exception):
    """Raised by an implementation factory: the message says why (e.g. 'liger-kernel not installed')."""


ImplFactory = Callable[[], Callable[..., Any]]

_SPECS: dict[str, OpSpec] = {}
_ORIGIN: dict[str, str] = {}  # op name -> the FILE.py:NAME it was loaded from (user ops only)
_FACTORIES: dict[str, dict[str, tuple[str, ImplFactory, tuple[str, ...], str]]] = {}
_RESOLVED: dict[tuple[str, str], Impl] = {}
_LOAD_ERRORS: list[str] = []
_loaded = False


def register_spec(spec: OpSpec) -> OpSpec:
    if not isinstance(spec, OpSpec):
        raise TypeError(f"register_spec: expected an OpSpec, got {type(spec).__name__}")
    _SPECS[spec.name] = spec
    return spec


def register_impl(
    op: str, name: str, source: str, factory: ImplFactory, *, mutates: tuple[str, ...] = (), description: str = ""
) -> None:
    """Register an implementation of `op`; `factory()` returns the callable or raises Unavailable."""
    _FACTORIES.setdefault(op, {})[name] = (source, factory, mutates, description)
    _RESOLVED.pop((op, name), None)


def _load() -> None:
    """Import every op package once: ours (ridgeline.ops.*), then third-party ones (entry points)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    package = importlib.import_module(OPS_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{OPS_PACKAGE}.{info.name}")
    for ep in _entry_points():
        try:
            ep.load()
        except Exception as e:  # a broken third-party op must not take the tool down: `ridgeline ops` says so
            _LOAD_ERRORS.append(f"entry point {ep.name} ({ep.value}): {type(e).__name__}: {e}")


def _entry_points() -> list[Any]:
    try:
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # a broken distribution's metadata
        return []


def load_errors() -> list[str]:
    """Third-party op packages that failed to import (named by `ridgeline ops`)."""
    _load()
    return list(_LOAD_ERRORS)


def specs() -> dict[str, OpSpec]:
    _load()
    return dict(_SPECS)


def get_spec(op: str | OpSpec) -> OpSpec:
    """An op by name, a user's `FILE.py:NAME` (an OpSpec instance or class in their file), or an OpSpec."""
    if isinstance(op, OpSpec):
        if _SPECS.get(op.name) is not op:
            if op.name in _SPECS and _is_ours(_SPECS[op.name]):
                raise ValueError(f"op: {op.name!r} is already one of ridgeline's ops; give yours a name of its own")
            register_spec(op)
            where = user_origin(op)
            if where:  # an object from a user's file: its records can name the file, so resume finds it
                _ORIGIN[op.name] = where
        return op
    _load()
    if is_file_ref(op):
        return _load_user_spec(op)
    if op not in _SPECS:
        raise ValueError(f"op: unknown op {op!r}; known ops: {', '.join(sorted(_SPECS))}; or pass file.py:SPEC")
    return _SPECS[op]


def _is_ours(spec: OpSpec) -> bool:
    """A spec of ridgeline's own packages (or a registered third-party one), not a user's file."""
    return _ORIGIN.get(spec.name) is None and not type(spec).__module__.startswith(USER_MODULE_PREFIX)


def origin(op: str) -> str | None:
    """Where a user op came from (its FILE.py:NAME with an absolute path), None for a registered op."""
    return _ORIGIN.get(op)


def _load_user_spec(ref: str) -> OpSpec:
    obj, path, name = load_object(ref, "op")
    if isinstance(obj, type) and issubclass(obj, OpSpec):
        try:
            obj = obj()
        except Exception as e:
            raise user_error("op", path, f"{name}() failed: {type(e).__name__}: {e}") from None
    if not isinstance(obj, OpSpec):
        raise user_error("op", path, f"{name} is of type {type(obj).__name__}, not an OpSpec "
                                     "(from ridgeline import OpSpec; subclass it and make an instance)")
    if obj.name in _SPECS and _SPECS[obj.name] is not obj and _is_ours(_SPECS[obj.name]):
        raise user_error("op", path, f"{name} is named {obj.name!r}, which is already one of ridgeline's ops; "
                                     "give it a name of its own")
    register_spec(obj)
    _ORIGIN[obj.name] = f"{path}:{name}"
    return obj


def implementations(op: str | OpSpec) -> list[Impl]:
    """Every registered implementation of `op`, each resolved (available, or unavailable with a reason)."""
    spec = get_spec(op)
    return [resolve(spec.name, name) for name in _FACTORIES.get(spec.name, {})]


def resolve(op: str | OpSpec, name: str) -> Impl:
    """An implementation by registered name, or a user's `path/to/file.py:function`."""
    spec = get_spec(op)
    key = spec.name
    if (key, name) in _RESOLVED:
        return _RESOLVED[(key, name)]
    if name not in _FACTORIES.get(key, {}):
        if is_file_ref(name):
            impl = load_user_impl(spec, name)  # imported once per process: check and bench reuse it
            _RESOLVED[(key, name)] = impl
            return impl
        known = ", ".join(_FACTORIES.get(key, {})) or "none"
        raise ValueError(f"impl: {key} has no implementation {name!r}; registered: {known}; or pass file.py:fn")
    source, factory, mutates, description = _FACTORIES[key][name]
    try:
        fn, reason = factory(), ""
    except Unavailable as e:
        fn, reason = None, str(e)
    except Exception as e:  # a broken optional install must not take the tool down
        fn, reason = None, f"failed to load: {type(e).__name__}: {e}"
    impl = Impl(key, name, source, fn, reason, mutates, description)
    _RESOLVED[(key, name)] = impl
    return impl


def load_user_impl(spec: OpSpec | str, ref: str) -> Impl:
    """Load `file.py:fn` as an implementation called exactly like the op's public function."""
    spec = get_spec(spec)
    fn, path, name = load_object(ref, "impl")
    if isinstance(fn, type) or not callable(fn):
        raise user_error("impl", path, f"{name} is of type {type(fn).__name__}, not a function")
    check_impl_signature(fn, spec.signature, path, name)
    mutates = tuple(getattr(fn, "ridgeline_mutates", ()))
    return Impl(spec.name, ref, "user", fn, "", mutates, f"user function {name} from {path}")
