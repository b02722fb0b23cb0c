"""Triton's CPU interpreter, without re-patching triton.language on every device-function call.

Under TRITON_INTERPRET=1 a kernel launch patches triton.language (every builtin of tl, tl.tensor, tl.math, ...:
`inspect.getmembers` over each) and restores it when the grid is done. Each call of a nested @triton.jit helper
patches the same modules again, into a scope it drops: the second patching finds nothing left to patch and
installs the same tensor and dtype hooks once more. Our kernels call a dozen helpers per row (and per piece), so
about half of an interpreted launch went into that repetition (Triton 3.7).

`install()` skips a nested call's patching only while a launch's patches are in place and they already cover
the modules the helper sees; every other call (the launch itself, a helper seeing another triton.language module,
a jit function called outside a launch) patches exactly as before. The kernels' arithmetic is untouched:
tests/ops/rmsnorm/test_kernels.py::test_interpreter_speedup_changes_no_bit compares launches with and without it.
"""

from __future__ import annotations

import inspect

_LAUNCHES: list[dict] = []  # per launch in progress: the modules patched in it so far, and whether it has patched
_LANGS: dict[object, frozenset[int]] = {}


def _langs(fn) -> frozenset[int]:
    """The triton.language modules `_patch_lang(fn)` patches (those in fn's globals)."""
    langs = _LANGS.get(fn)
    if langs is None:
        import triton.language as tl

        langs = _LANGS[fn] = frozenset(id(v) for v in fn.__globals__.values()
                                       if inspect.ismodule(v) and v in (tl, tl.core))
    return langs


def install() -> bool:
    """Wrap the interpreter's `_patch_lang` and launch (once); False where this Triton has neither."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - a Triton without the interpreter
        return False
    original = getattr(interpreter, "_patch_lang", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if original is None or executor is None or not hasattr(interpreter, "_LangPatchScope"):
        return False
    if getattr(original, "ridgeline_once_per_launch", False):
        return True
    launch = executor.__call__

    def patch_lang(fn):
        top = _LAUNCHES[-1] if _LAUNCHES else None
        langs = _langs(fn)
        if top is not None and top["patched"] and langs <= top["langs"]:
            return interpreter._LangPatchScope()  # (patched earlier in this launch, and still: nothing to do)
        scope = original(fn)
        if top is not None:
            # The launch's own patching (the first in it, before its grid runs; restored when the grid is done) or
            # a helper's that sees other modules (never restored, by Triton: in place for the rest of the launch).
            top["patched"] = True
            top["langs"] = top["langs"] | langs
        return scope

    def launch_once_patched(self, *args, **kwargs):
        _LAUNCHES.append({"langs": frozenset(), "patched": False})
        try:
            return launch(self, *args, **kwargs)
        finally:
            _LAUNCHES.pop()

    patch_lang.ridgeline_once_per_launch = True
    patch_lang.originals = (original, launch)
    interpreter._patch_lang = patch_lang
    executor.__call__ = launch_once_patched
    return True


def installed() -> bool:
    from triton.runtime import interpreter

    return getattr(interpreter._patch_lang, "ridgeline_once_per_launch", False)


def uninstall() -> None:
    from triton.runtime import interpreter

    current = interpreter._patch_lang
    if getattr(current, "ridgeline_once_per_launch", False):
        interpreter._patch_lang, interpreter.GridExecutor.__call__ = current.originals
