"""Load a user's `FILE.py:NAME` (an op contract or an implementation) with one clear line for each way it fails.

A file is imported once per process, whatever names are taken from it: the spec and the functions of one file
share one module (and its globals, compiled kernels and caches).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

_MODULES: dict[Path, ModuleType] = {}
USER_MODULE_PREFIX = "ridgeline_user_"
# Called before a user's file is first imported (the harness snapshots its timer functions there: what a user
# module replaces afterwards is caught and put back).
BEFORE_IMPORT: list[Callable[[], None]] = []


def is_file_ref(text: str) -> bool:
    """True for 'path/to/file.py:NAME'."""
    return isinstance(text, str) and ":" in text and text.rsplit(":", 1)[0].endswith(".py")


def user_error(kind: str, path: Path | str, problem: str) -> ValueError:
    return ValueError(f"{kind}: {path}: {problem}")


def split_ref(ref: str, kind: str) -> tuple[Path, str]:
    path_text, name = ref.rsplit(":", 1)
    if not name.isidentifier():
        raise ValueError(f"{kind}: expected FILE.py:NAME with NAME a Python name, got {ref!r}")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ValueError(f"{kind}: no such file {path_text!r} (expected FILE.py:NAME)")
    return path.resolve(), name


def import_file(path: Path, kind: str) -> ModuleType:
    """Import a user's file as a module (once); every failure is one line naming the file and what went wrong."""
    path = path.resolve()
    if path in _MODULES:
        return _MODULES[path]
    for hook in BEFORE_IMPORT:
        hook()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    mod_name = f"{USER_MODULE_PREFIX}{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{digest}"
    module_spec = importlib.util.spec_from_file_location(mod_name, path)
    if module_spec is None or module_spec.loader is None:
        raise user_error(kind, path, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[mod_name] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(mod_name, None)
        raise user_error(kind, path, f"SyntaxError at line {e.lineno}: {e.msg}") from None
    except BaseException as e:  # anything the user's module raises while importing, SystemExit included
        sys.modules.pop(mod_name, None)
        raise user_error(kind, path, f"import failed: {type(e).__name__}: {_first_line(e)}{_where(e, path)}") \
            from None
    _MODULES[path] = module
    return module


def load_object(ref: str, kind: str) -> tuple[Any, Path, str]:
    """The object NAME of FILE.py, with its resolved path and name."""
    path, name = split_ref(ref, kind)
    module = import_file(path, kind)
    if not hasattr(module, name):
        defined = [k for k, v in vars(module).items() if not k.startswith("_") and not isinstance(v, ModuleType)]
        raise user_error(kind, path, f"defines no {name!r} (it defines: {', '.join(defined[:12]) or 'nothing'})")
    return getattr(module, name), path, name


def signature_params(signature: str) -> list[str]:
    """The parameter names of a contract's signature text: 'fn(x, weight, eps) -> out' -> ['x', 'weight', 'eps']."""
    m = re.search(r"\(([^)]*)\)", signature or "")
    if not m:
        return []
    return [p.strip().split("=")[0].strip() for p in m.group(1).split(",") if p.strip()]


def check_impl_signature(fn: Any, signature: str, path: Path, name: str) -> None:
    """Refuse a function that cannot be called with the contract's positional arguments."""
    params = signature_params(signature)
    if not params:
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C extension: the call itself will tell
        return
    required = [p for p in params if not p.startswith("*")]
    try:
        sig.bind(*required)
    except TypeError as e:
        raise user_error("impl", path, f"{name}{sig} cannot be called as {signature.split('->')[0].strip()}: {e}") \
            from None


def _first_line(e: BaseException) -> str:
    text = str(e)
    return text.splitlines()[0] if text else ""


def _where(e: BaseException, path: Path) -> str:
    """' (file.py line N)' for the innermost frame of the user's file."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == path]
    return f" (line {frames[-1].lineno})" if frames else ""


def user_origin(obj: Any) -> str | None:
    """'FILE.py:NAME' for an object that a user's file imported here binds at module level (None otherwise)."""
    for path, module in _MODULES.items():
        for name, value in vars(module).items():
            if value is obj and not name.startswith("_"):
                return f"{path}:{name}"
    return None
