"""The Triton launches one call makes, found from the launches themselves (no table of kernels per op).

For the duration of one call, Triton's launch entry points are patched at class level:

- ``triton.runtime.jit.JITFunction.run(self, *args, grid, warmup, **kwargs)``: every ``kernel[grid](...)`` of a
  ``@triton.jit`` kernel ends there, whoever wrote it (ridgeline, a Triton peer such as Liger, a user's file);
- ``triton.runtime.interpreter.InterpretedFunction.run``: the same under ``TRITON_INTERPRET=1``;
- ``triton.runtime.autotuner.Autotuner.run``: it calls the inner kernel's ``run`` with the chosen config's
  kwargs (num_warps, num_stages, BLOCK_*), so what is recorded is the tuned launch. Without a GPU nothing can be
  benchmarked: recording only, it takes the first config that pruning leaves and says so in the launch. On a GPU
  the benchmark launches (inside ``Autotuner._bench``) are not recorded. ``Heuristics.run`` needs nothing: it
  adds its values to the kwargs and calls the inner ``run``.

Two modes: record-only (``run=False``: nothing is launched or compiled; ahead-of-time compilation on a CPU,
meta-device inputs) and run-and-record (``run=True``, on a GPU: each launch runs and is paired with the
CompiledKernel that ``JITFunction.run`` returns). ``RIDGELINE_FAST_LAUNCH=0`` is set meanwhile: ridgeline's
CachedLauncher (lib/fastlaunch.py) would otherwise launch a cached kernel past ``JITFunction.run``.
The patches are process-wide while active: launches from other threads in that time are recorded too.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

_ACTIVE: list[LaunchCapture] = []


@dataclass(frozen=True)
class TensorArg:
    """Stands in for a tensor argument: its dtype and whether its address is 16-byte aligned."""

    dtype: Any
    aligned: bool = True


@dataclass
class TritonLaunch:
    """One `kernel[grid](*args, **kwargs)` call: every parameter by name, and the compile options."""

    kernel: Any
    args: dict[str, Any]
    num_warps: int
    grid: int
    config: str
    num_stages: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    grid_dims: tuple[int, ...] = ()
    compiled: Any = None  # the CompiledKernel JITFunction.run returned (run-and-record mode)
    note: str = ""  # how an autotuner picked the config

    @property
    def name(self) -> str:
        return str(getattr(self.kernel, "__name__", None) or getattr(getattr(self.kernel, "fn", None), "__name__",
                                                                      "kernel"))

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"grid": self.grid, "block_threads": self.num_warps * 32, "config": self.config}
        if len(self.grid_dims) > 1 and any(d != 1 for d in self.grid_dims[1:]):
            out["grid_dims"] = "x".join(map(str, self.grid_dims))
        if self.note:
            out["autotune"] = self.note
        return out


_JIT_OF: dict[int, Any] = {}


def as_jit(kernel: Any) -> Any:
    """The JITFunction behind a kernel (under TRITON_INTERPRET=1 kernels are InterpretedFunctions)."""
    from triton.runtime.jit import JITFunction

    if isinstance(kernel, JITFunction):
        return kernel
    fn = getattr(kernel, "fn", None)
    if fn is None or not callable(fn):
        raise ValueError(f"profile: {kernel!r} is not a Triton kernel")
    if id(kernel) not in _JIT_OF:  # (the kernel is kept with it, so the id stays its own)
        _JIT_OF[id(kernel)] = (kernel, JITFunction(fn, **dict(getattr(kernel, "kwargs", None) or {})))
    return _JIT_OF[id(kernel)][1]


def record_launch(kernel: Any, grid: Any, args: tuple, kwargs: dict[str, Any]) -> TritonLaunch:
    """A launch from what `run` received: arguments bound to the kernel's parameters (defaults filled in), tensors
    replaced by TensorArg, the grid evaluated as Triton does, the rest of the kwargs kept as compile options."""
    import torch

    jit = as_jit(kernel)
    names = [p.name for p in jit.params]
    bound: dict[str, Any] = dict(zip(names, args))
    options: dict[str, Any] = {}
    for k, v in kwargs.items():
        (bound if k in names else options)[k] = v
    for p in jit.params:
        if p.name not in bound and p.has_default:
            bound[p.name] = p.default
    g = grid(dict(bound)) if callable(grid) else grid
    dims = tuple(int(d) for d in g) if isinstance(g, (tuple, list)) else (int(g),)
    for k, v in list(bound.items()):
        if isinstance(v, torch.Tensor):
            aligned = v.device.type == "meta" or v.data_ptr() % 16 == 0
            bound[k] = TensorArg(v.dtype, aligned)
    num_warps = int(options.pop("num_warps", None) or 4)
    num_stages = options.pop("num_stages", None)
    options = {k: v for k, v in options.items() if v is not None}
    consts = " ".join(f"{p.name}={bound.get(p.name)}" for p in jit.params if p.is_constexpr)
    return TritonLaunch(kernel, bound, num_warps, dims[0] if dims else 1, f"{consts} warps={num_warps}".strip(),
                        num_stages, options, dims)


class LaunchCapture:
    """`with LaunchCapture(run=False) as cap: call()` leaves the Triton launches the call made in `cap.launches`
    (and recording failures in `cap.errors`); see the module docstring for the two modes."""

    def __init__(self, run: bool = False) -> None:
        self.run = run
        self.launches: list[TritonLaunch] = []
        self.errors: list[str] = []
        self._benchmarking = 0
        self._tuning = ""
        self._restore: list[tuple[type, str, Any]] = []
        self._env_old: str | None = None

    def __enter__(self) -> LaunchCapture:
        self._env_old = os.environ.get("RIDGELINE_FAST_LAUNCH")
        os.environ["RIDGELINE_FAST_LAUNCH"] = "0"
        if not _ACTIVE:  # (nested captures share the outer patches; the innermost records)
            for cls, attr, make in _patch_points():
                self._restore.append((cls, attr, cls.__dict__[attr]))
                setattr(cls, attr, make(cls.__dict__[attr]))
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.remove(self)
        for cls, attr, orig in reversed(self._restore):
            setattr(cls, attr, orig)
        self._restore.clear()
        if self._env_old is None:
            os.environ.pop("RIDGELINE_FAST_LAUNCH", None)
        else:
            os.environ["RIDGELINE_FAST_LAUNCH"] = self._env_old

    def _record(self, kernel: Any, grid: Any, args: tuple, kwargs: dict[str, Any]) -> TritonLaunch | None:
        try:
            launch = record_launch(kernel, grid, args, kwargs)
        except Exception as e:  # an argument we cannot describe: the call itself goes on
            self.errors.append(f"launch of {getattr(kernel, '__name__', kernel)} not recorded: "
                               f"{type(e).__name__}: {e}")
            return None
        launch.note = self._tuning
        self.launches.append(launch)
        return launch


def _current() -> LaunchCapture | None:
    return _ACTIVE[-1] if _ACTIVE else None


def _wrap_run(orig: Any) -> Any:
    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        cap = _current()
        if cap is None or cap._benchmarking:
            return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        if warmup:  # a compile without a launch: nothing to record; recording only, nothing to compile
            return orig(self, *args, grid=grid, warmup=warmup, **kwargs) if cap.run else None
        launch = cap._record(self, grid, args, kwargs)
        if not cap.run:
            return None
        ret = orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        if launch is not None and hasattr(ret, "asm"):
            launch.compiled = ret
        return ret

    run.__wrapped__ = orig  # type: ignore[attr-defined]
    return run


def _wrap_autotuner_run(orig: Any) -> Any:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        cap = _current()
        n = len(getattr(self, "configs", ()) or ())
        if cap is None or n <= 1:
            return orig(self, *args, **kwargs)
        outer = cap._tuning
        if cap.run:
            cap._tuning = f"best of {n} autotune configs (benchmarked by triton.autotune)"
            try:
                return orig(self, *args, **kwargs)
            finally:
                cap._tuning = outer
        self.nargs = dict(zip(self.arg_names, args))
        try:
            try:
                configs = self.prune_configs(kwargs) or self.configs
            except Exception:  # a perf model that needs a GPU
                configs = self.configs
            config = configs[0]
            cap._tuning = (f"first of {len(configs)} autotune configs left after pruning ({config}); not "
                           "benchmarked (recorded without running)")
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            cap._tuning = outer
            self.nargs = None

    run.__wrapped__ = orig  # type: ignore[attr-defined]
    return run


def _wrap_bench(orig: Any) -> Any:
    def bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        cap = _current()
        if cap is not None:
            cap._benchmarking += 1
        try:
            return orig(self, *args, **kwargs)
        finally:
            if cap is not None:
                cap._benchmarking -= 1

    bench.__wrapped__ = orig  # type: ignore[attr-defined]
    return bench


def _patch_points() -> list[tuple[type, str, Any]]:
    """(class, attribute, wrapper factory) for every launch entry point this Triton has."""
    points: list[tuple[type, str, Any]] = []
    try:
        from triton.runtime.jit import JITFunction

        points.append((JITFunction, "run", _wrap_run))
    except ImportError:
        return points
    try:
        from triton.runtime.interpreter import InterpretedFunction

        points.append((InterpretedFunction, "run", _wrap_run))
    except ImportError:
        pass
    try:
        from triton.runtime.autotuner import Autotuner

        points.append((Autotuner, "run", _wrap_autotuner_run))
        if "_bench" in Autotuner.__dict__:
            points.append((Autotuner, "_bench", _wrap_bench))
    except ImportError:
        pass
    return [p for p in points if p[1] in p[0].__dict__]


# --- one call of an implementation -------------------------------------------------------------------------
@dataclass
class CallCapture:
    """The launches one call of an implementation made, on which inputs ("given", "meta" or "cpu"), with notes."""

    launches: list[TritonLaunch]
    inputs: str
    notes: list[str] = field(default_factory=list)


def capture_call(op: Any, impl: str, shape: Any, dtype: Any, variant: str = "", inputs: dict[str, Any] | None = None,
                 sm_count: int = 132, run: bool = False, require_launch: bool = True) -> CallCapture:
    """Call an implementation of `op` the way the harness does (``spec.call``) and capture the Triton launches it
    makes: exactly the arguments, constexprs, options and num_warps its wrapper passes. Any implementation whose
    kernels go through ``triton.jit`` works (ours, a peer's, a user's). Recording only (``run=False``), inputs
    default to the op hook's meta-device inputs, else ``spec.make_inputs`` on the CPU, and the hook's
    ``gpu_rules`` make the launch rules pick a CUDA GPU's configuration for ``sm_count`` SMs. A call that
    launches no Triton kernel raises ValueError (unless not `require_launch`); so does one that fails."""
    from ridgeline.core.registry import get_spec, resolve
    from ridgeline.core.spec import Case
    from ridgeline.profile import hooks

    spec = get_spec(op)
    implementation = resolve(spec, impl)
    label = f"{spec.name}/{impl}"
    if not implementation.available:
        raise ValueError(f"profile: {label} is unavailable: {implementation.reason}")
    case = Case(tuple(int(d) for d in shape), dtype, variant)
    shape_text = "x".join(map(str, case.shape))
    notes: list[str] = []
    if inputs is not None:
        tries: list[tuple[str, Any]] = [("given", inputs)]
    else:
        tries = [("meta", lambda: hooks.meta_inputs(spec, case)), ("cpu", lambda: spec.make_inputs(case, "cpu", 0))]
    failure = ""
    for kind, make in tries:
        try:
            ins = make() if callable(make) else make
        except Exception as e:
            failure = f"making {kind} inputs failed: {type(e).__name__}: {e}"
            continue
        if ins is None:
            continue
        rules = contextlib.nullcontext() if run else hooks.gpu_rules(spec, sm_count)
        error: Exception | None = None
        with rules:
            with LaunchCapture(run) as cap:
                try:
                    spec.call(implementation.fn, ins)
                except Exception as e:  # after its launches, a recorded call may trip on outputs never computed
                    error = e
            for launch in cap.launches:  # (inside the rules: the op describes the config it launched)
                try:
                    for k, v in hooks.describe_launch(spec, case, ins, launch).items():
                        setattr(launch, k, v)
                except Exception as e:
                    notes.append(f"The op's describe_launch hook failed: {type(e).__name__}: {e}")
        notes += cap.errors
        if error is not None and not (cap.launches and not run):
            failure = f"calling {label} on {kind} inputs failed: {type(error).__name__}: {error}"
            if kind == "meta":
                notes.append(f"{failure}; retried on CPU inputs")
            continue
        if error is not None:
            notes.append(f"After its launches the call raised {type(error).__name__}: {error} (recorded without "
                         "running: its outputs were never computed)")
        if not cap.launches and require_launch:
            raise ValueError(f"profile: calling {label} at {shape_text} launched no triton.jit kernel: not a Triton "
                             "kernel, or one launched outside JITFunction.run (as torch.compile's Inductor does)")
        if not run and implementation.source == "ours":
            try:
                notes += hooks.gpu_notes(spec, case, sm_count)
            except Exception as e:
                notes.append(f"The op's gpu_notes hook failed: {type(e).__name__}: {e}")
        return CallCapture(cap.launches, kind, notes)
    raise ValueError(f"profile: {failure or f'no inputs for {label} at {shape_text}'}")


def capture_launches(op: Any, impl: str, shape: Any, dtype: Any, variant: str = "",
                     inputs: dict[str, Any] | None = None, sm_count: int = 132,
                     run: bool = False) -> list[TritonLaunch]:
    """The launches of `capture_call`."""
    return capture_call(op, impl, shape, dtype, variant, inputs, sm_count, run).launches
