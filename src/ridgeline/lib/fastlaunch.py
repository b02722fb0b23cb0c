"""Launch a compiled Triton kernel without Triton's per-call Python binding work.

Triton's `kernel[grid](...)` re-derives the specialization of every argument, looks up the compiled kernel and
builds launch metadata on every call: several microseconds of host time that an eager serving loop pays per
layer. After the first (normal) launch we keep the compiled kernel under a key that determines Triton's own
specialization (dtypes, 16-byte alignment of pointers, integer divisibility by 16, value 1, 32/64-bit range), and
later calls go straight to its compiled launcher. Anything unusual (a launch hook installed by a profiler, the CPU
interpreter, an older/newer Triton without the same internals) takes Triton's normal path.
"""

from __future__ import annotations

import os
from typing import Any

import torch

try:  # Triton >= 3.4 keeps runtime hooks in knobs
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older Triton
    _knobs = None


def _raw_stream(index: int | None) -> int:
    if index is None:
        index = torch.cuda.current_device()
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return get(index) if get is not None else torch.cuda.current_stream(index).cuda_stream


_ENABLED = _knobs is not None


def _active(hook: Any) -> Any:
    """A hook to call, or None; Triton 3.6 installs an empty HookChain by default (nothing to call)."""
    if hook is None or getattr(hook, "calls", True) == []:
        return None
    return hook


_TENSOR = torch.Tensor
_I32_MIN, _I32_MAX = -(2**31), 2**31


def _arg_key(a: Any) -> Any:
    """What Triton specializes an argument on. Runs once per argument per launch, so exact types are tested
    first and an int's key is a small int code (1: the value 1; else 2 | divisible-by-16 << 2 | fits-int32 << 3),
    not a tuple: ~35% less host time per launch on the CPU than isinstance chains and tuples."""
    t = type(a)
    if t is int:
        return 1 if a == 1 else 2 | ((a & 15) == 0) << 2 | (_I32_MIN <= a < _I32_MAX) << 3
    if t is _TENSOR or isinstance(a, _TENSOR):
        return (a.dtype, a.data_ptr() & 15 == 0)
    if t is float:
        return "f"
    if isinstance(a, bool):
        return ("b", bool(a))
    if isinstance(a, int):  # an int subclass
        return _arg_key(int(a))
    if isinstance(a, float):  # e.g. numpy's float64
        return "f"
    return ("?", a)


class CachedLauncher:
    """`launch(grid, args, constexprs, num_warps)` == `fn[(grid,)](*args, **constexprs, num_warps=num_warps)`.

    `args` are the kernel's runtime parameters in order; `constexprs` the compile-time ones, in signature order,
    all after the runtime ones (checked at the first launch).

    A caller that can name a launch more cheaply than by its arguments passes `fast_key` (anything hashable that
    determines the compiled kernel and `extra`, e.g. the raw sizes, dtypes and pointer alignments) with `extra`
    (what it needs to rebuild the arguments); later `cached(fast_key)` returns `(kernel, extra)` and `run` launches
    it with no per-argument work at all.
    """

    MAX_FAST_KEYS = 4096

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self._compiled: dict[tuple, Any] = {}
        self._by_fast_key: dict[Any, tuple[Any, Any]] = {}
        self.fast_launches = 0
        self.fallback_reason = "" if _ENABLED else "this Triton has no triton.knobs"

    @staticmethod
    def enabled() -> bool:
        return _ENABLED and os.environ.get("RIDGELINE_FAST_LAUNCH", "1") != "0"

    def cached(self, fast_key: Any) -> tuple[Any, Any] | None:
        return self._by_fast_key.get(fast_key)

    def run(self, kernel: Any, grid: int, args: tuple, constexpr_values: tuple, device_index: int) -> None:
        """Launch a kernel this launcher compiled earlier (from `cached`) on the current stream."""
        stream = _raw_stream(device_index)
        runtime = _knobs.runtime
        enter, leave = _active(runtime.launch_enter_hook), _active(runtime.launch_exit_hook)
        # With a profiler's hook installed, hand it the same metadata Triton would.
        meta = kernel.launch_metadata((grid, 1, 1), stream, *args, *constexpr_values) if enter else None
        kernel.run(grid, 1, 1, stream, kernel.function, kernel.packed_metadata, meta, enter, leave,
                   *args, *constexpr_values)
        self.fast_launches += 1

    def launch(self, grid: int, args: tuple, constexprs: dict[str, Any], num_warps: int,
               fast_key: Any = None, extra: Any = None, options: dict[str, Any] | None = None) -> None:
        """`options`: further compile options (e.g. maxnreg), part of the key."""
        options = options or {}
        fast = args[0].is_cuda and self.enabled()
        if fast:
            # Triton keeps one compiled module per device: the device is part of the key.
            key = (args[0].device.index, *constexprs.values(), num_warps, *sorted(options.items()),
                   *map(_arg_key, args))
            kernel = self._compiled.get(key)
            if kernel is not None:
                self.run(kernel, grid, args, tuple(constexprs.values()), args[0].device.index)
                self._remember(fast_key, kernel, extra)
                return
        kernel = self.fn[(grid,)](*args, **constexprs, num_warps=num_warps, **options)
        if hasattr(kernel, "result"):  # an asynchronous compile hands back a future
            kernel = kernel.result()
        if fast:
            if self._usable(kernel, len(args) + len(constexprs)):
                self._compiled[key] = kernel
                self._remember(fast_key, kernel, extra)
            else:
                self.fallback_reason = f"compiled kernel {type(kernel).__name__} lacks the expected internals"

    def _remember(self, fast_key: Any, kernel: Any, extra: Any) -> None:
        if fast_key is None:
            return
        if len(self._by_fast_key) >= self.MAX_FAST_KEYS:  # many distinct sizes: start over, stay bounded
            self._by_fast_key.clear()
        self._by_fast_key[fast_key] = (kernel, extra)

    def _usable(self, kernel: Any, n_params: int) -> bool:
        """Only keep kernels whose internals look like the ones this fast path was written against."""
        names = getattr(self.fn, "arg_names", None)
        return (
            names is not None and len(names) == n_params
            and all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata"))
        )
