"""Optional per-op profile hooks: what an op may tell the profiler that its launches alone do not.

Where a hook is found (first match):

1. ``spec.profile_hooks``: an attribute of the spec (a module or any object), for a user's spec in a file;
2. the module ``profile`` of the package that defines the spec's class: for a spec class defined in
   ``ridgeline.ops.<pkg>.spec`` that is ``ridgeline.ops.<pkg>.profile`` (a third-party op package likewise).
   A spec defined in a top-level module (a user's file) has no package and so no such hook.

Every function of a hook is optional:

``meta_inputs(spec, case) -> Inputs | None``
    Inputs on the meta device (shapes and strides only), so a launch can be recorded at any size without memory;
    None for cases it does not cover.
``gpu_rules(spec, sm_count) -> context manager``
    While active, the op's launch rules pick what a CUDA GPU with ``sm_count`` SMs would, even under Triton's
    CPU interpreter and on meta or CPU tensors (it is entered for record-only captures).
``describe_launch(spec, case, inputs, launch) -> dict``
    Overrides of fields of one recorded TritonLaunch, e.g. ``"config"``: the op's own description of its launch
    configuration (by default the kernel's constexprs and warps), or ``"grid"``. Called inside ``gpu_rules``
    where the capture entered them; a launch of another package's kernel (a peer's) should get ``{}``.
``gpu_notes(spec, case, sm_count) -> list[str]``
    What the op runs on a GPU that a record-only capture on the CPU cannot see (a kernel the rules take only on a
    real device, e.g. a Gluon kernel on sm_90): one line each, added to the profile's notes so its recorded launch
    is not taken for the one that runs.

Without a hook the profiler calls the implementation on ``spec.make_inputs(case, "cpu", 0)`` (fine for small
shapes) and records the launches with their real arguments.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from typing import Any

HOOK_MODULE = "profile"
_CACHE: dict[str, Any] = {}


def hooks_for(spec: Any) -> Any | None:
    """The profile hook of a spec (see the module docstring), or None."""
    explicit = getattr(spec, "profile_hooks", None)
    if explicit is not None:
        return explicit
    module = type(spec).__module__ or ""
    package = module.rpartition(".")[0]
    if not package:
        return None
    if package not in _CACHE:
        name = f"{package}.{HOOK_MODULE}"
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        _CACHE[package] = importlib.import_module(name) if found else None
    return _CACHE[package]


def meta_inputs(spec: Any, case: Any) -> dict[str, Any] | None:
    hook = getattr(hooks_for(spec), "meta_inputs", None)
    return hook(spec, case) if hook is not None else None


def gpu_rules(spec: Any, sm_count: int) -> contextlib.AbstractContextManager:
    hook = getattr(hooks_for(spec), "gpu_rules", None)
    return hook(spec, sm_count) if hook is not None else contextlib.nullcontext()


def describe_launch(spec: Any, case: Any, inputs: dict[str, Any], launch: Any) -> dict[str, Any]:
    hook = getattr(hooks_for(spec), "describe_launch", None)
    return dict(hook(spec, case, inputs, launch) or {}) if hook is not None else {}


def gpu_notes(spec: Any, case: Any, sm_count: int) -> list[str]:
    hook = getattr(hooks_for(spec), "gpu_notes", None)
    return [str(n) for n in (hook(spec, case, sm_count) or [])] if hook is not None else []
