"""`ridgeline audit OP --impl NAME`: one implementation over a dense shape grid, its time over speed of light at
every point, the cliffs (a point whose time / SOL jumps more than CLIFF_JUMP against a neighbour), and the launch
configuration chosen there: ours from the op's `launch_info`, a Triton autotuner's pick (`@triton.autotune`'s
`best_config`, or the config and template tiles of an Inductor kernel) captured during one call at each point.

The timing is the bench's (`run_bench` into a run record of kind "audit": checks first, same regimes, same guards);
the core knows no op: the grid varies one named dim of the spec's shapes (`spec.dims`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case, Shape, dtype_name, parse_dtype, shape_label
from ridgeline.harness.bench import BenchPlan, run_bench, validate_plan
from ridgeline.records.record import RunRecord

CLIFF_JUMP = 1.25
STEP_RULES = ("on-and-off-tiles", "every:N", "pow2", "values:A,B,...")
MAX_POINTS = 160


def grid_values(start: int, stop: int, rule: str = "on-and-off-tiles", tiles: Sequence[int] = (64, 128)) -> list[int]:
    """The values one dim takes. on-and-off-tiles: every value up to 16, each power of two and its neighbours, and
    every multiple of the tiles with the value one past it (a tile edge and the first point that needs one more
    tile); pow2: powers of two and their neighbours; every:N: start, start + N, ..."""
    if start < 0 or stop < start:
        raise ValueError(f"--from/--to: expected 0 <= from <= to, got {start} and {stop}")
    vals: set[int] = set()
    if rule.startswith("values:"):  # an explicit list (an expensive implementation: one compile per point)
        try:
            vals.update(int(v) for v in rule.split(":", 1)[1].split(",") if v.strip())
        except ValueError:
            raise ValueError(f"--step-rule: values:A,B,... takes integers, got {rule!r}") from None
    elif rule.startswith("every:"):
        try:
            step = int(rule.split(":", 1)[1])
        except ValueError:
            step = 0
        if step <= 0:
            raise ValueError(f"--step-rule: every:N takes a positive N, got {rule!r}")
        vals.update(range(start, stop + 1, step))
    elif rule in ("on-and-off-tiles", "pow2"):
        p = 1
        while p <= 2 * stop:
            vals.update((p - 1, p, p + 1))
            p *= 2
        if rule == "on-and-off-tiles":
            vals.update(range(1, 17))
            for t in tiles:
                for v in range(t, stop + 1, t):
                    vals.update((v, v + 1))
    else:
        raise ValueError(f"--step-rule: expected one of {', '.join(STEP_RULES)}, got {rule!r}")
    out = sorted(v for v in vals if start <= v <= stop)
    if len(out) > MAX_POINTS:  # keep the ends and an even thinning in between
        step = len(out) / MAX_POINTS
        out = sorted({out[int(i * step)] for i in range(MAX_POINTS)} | {out[0], out[-1]})
    return out


def grid_shapes(base: Sequence[Shape], dim: int, values: Sequence[int]) -> list[Shape]:
    return [tuple(v if i == dim else d for i, d in enumerate(s)) for s in base for v in values]


# --- launch configs an autotuner chose ----------------------------------------------------------------------------
_TILE_CONST = re.compile(r"\b(BLOCK_[A-Z]+|GROUP_M|EVEN_K)\s*:\s*tl\.constexpr\s*=\s*(\w+)")


@contextlib.contextmanager
def autotune_choices() -> Iterator[list[str]]:
    """Collect what Triton autotuners launched during the block: `@triton.autotune`'s best_config, and Inductor's
    CachingAutotuner kernels (name, config, and the tile constants a GEMM template bakes into its source)."""
    seen: list[str] = []
    restore: list[tuple[type, str, Any]] = []

    def wrap(cls: type, describe: Callable[[Any], str]) -> None:
        orig = cls.__dict__.get("run")
        if orig is None:
            return

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, *args, **kwargs)
            try:
                text = describe(self)
            except Exception as e:  # a describer for another version's internals: say so, never fail the call
                text = f"{type(self).__name__}: config not readable ({type(e).__name__})"
            if text and text not in seen:
                seen.append(text)
            return out

        restore.append((cls, "run", orig))
        cls.run = run  # type: ignore[method-assign]

    try:
        from triton.runtime.autotuner import Autotuner

        wrap(Autotuner, lambda a: f"{getattr(a.fn, '__name__', 'kernel')}: {a.best_config}"
             if getattr(a, "best_config", None) is not None else "")
    except ImportError:
        pass
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner

        def inductor(a: Any) -> str:
            name = getattr(a.fn, "__name__", "kernel")
            launchers = getattr(a, "launchers", None) or []
            cfg = getattr(launchers[0], "config", None) if launchers else None
            tiles = " ".join(f"{k}={v}" for k, v in _TILE_CONST.findall(getattr(a.fn, "src", "") or ""))
            return f"{name}: {cfg}{' ' + tiles if tiles else ''}"

        wrap(CachingAutotuner, inductor)
    except ImportError:
        pass
    try:
        yield seen
    finally:
        for cls, attr, orig in reversed(restore):
            setattr(cls, attr, orig)


def chosen_config(spec: Any, impl: Any, case: Case, device: torch.device, seed: int) -> str:
    """What an implementation launched at a case (one call): ours' launch_info config, else the autotuners'."""
    if impl.source == "ours":
        info = spec.launch_info(case, device)
        if info:
            return str(info.get("config", info))
    inputs = spec.make_inputs(case, device, seed)
    with autotune_choices() as seen:
        spec.call(impl.fn, inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return "; ".join(seen) if seen else "no Triton autotuner launch seen (a library kernel, e.g. cuBLAS)"


# --- analysis -----------------------------------------------------------------------------------------------------
def analyse(measurements: list[dict[str, Any]], dim: int | None) -> list[dict[str, Any]]:
    """Per point: time over SOL (or, without a probed SOL, time per unit of the dominant cost, relative to the
    grid's best), and the cliff flag: ratio > CLIFF_JUMP x a neighbour's along the dim (same other dims)."""
    pts = []
    for m in measurements:
        sol = m.get("sol_us")
        work = max(m.get("bytes") or 0, m.get("flops") or 0, 1)
        ratio = m["median_us"] / sol if sol else m["median_us"] / work
        pts.append({"shape": list(m["shape"]), "median_us": m["median_us"], "sol_us": sol, "ratio": ratio,
                    "normalized_by": "sol" if sol else "work", "tflops": m.get("tflops"), "gbps": m.get("gbps"),
                    "config": m.get("config", ""), "regime": m["regime"]})
    work = [p for p in pts if p["normalized_by"] == "work"]  # (all of them, or a regime without a probed SOL)
    if work:
        best = min(p["ratio"] for p in work) or 1.0
        for p in work:
            p["ratio"] /= best

    def line_key(p: dict[str, Any]) -> tuple:
        s = p["shape"]
        return (p["regime"], tuple(d for i, d in enumerate(s) if i != dim)) if dim is not None else (p["regime"],)

    lines: dict[tuple, list[dict[str, Any]]] = {}
    for p in pts:
        lines.setdefault(line_key(p), []).append(p)
    for line in lines.values():
        line.sort(key=lambda p: p["shape"][dim] if dim is not None else 0)
        for i, p in enumerate(line):
            near = [line[j]["ratio"] for j in (i - 1, i + 1) if 0 <= j < len(line)]
            jump = p["ratio"] / min(near) if near and min(near) > 0 else 1.0
            p["jump"] = jump
            p["cliff"] = jump > CLIFF_JUMP
    return [p for line in lines.values() for p in line]


def audit(
    op: str, impl: str, shapes: Sequence[Shape], dim: str | int | None = None, start: int | None = None,
    stop: int | None = None, step_rule: str = "on-and-off-tiles", dtype: torch.dtype | str = "bf16",
    variant: str = "", regime: str = "auto", budget_s: float | None = None, json_path: Path | str | None = None,
    out_dir: Path | str | None = None, argv: list[str] | None = None, seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> RunRecord:
    """Python API of `ridgeline audit`: returns the run record (kind "audit"; its settings["audit"] holds the
    points, cliffs and configs); writes the record, and with `out_dir` a plot and a markdown table."""
    from ridgeline.harness.probe import device_profile
    from ridgeline.records.env import capture_env
    from ridgeline.records.paths import default_run_path

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    spec = registry.get_spec(op)
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    dim_index: int | None = None
    if dim is None and (start is not None or stop is not None):
        raise ValueError("--from/--to: they bound the audited dim; name it with --dim")
    if dim is not None:
        if isinstance(dim, bool) or (isinstance(dim, int) and dim < 0):
            raise ValueError(f"--dim: expected a dim name ({', '.join(spec.dims) or 'none'}) or an index >= 0; "
                             f"got {dim!r}")
        if isinstance(dim, int) or str(dim).isdigit():
            dim_index = int(dim)
        elif dim in spec.dims:
            dim_index = spec.dims.index(dim)
        else:
            raise ValueError(f"--dim: {spec.name} names its dims {', '.join(spec.dims) or '(none)'}; got {dim!r}")
    base = [tuple(s) for s in shapes]
    if not base:
        raise ValueError("--shapes: the audit needs at least one shape")
    if dim_index is not None:
        if any(dim_index >= len(s) for s in base):
            raise ValueError(f"--dim: dim {dim_index} is past the rank of a shape in {[shape_label(s) for s in base]}")
        lo = start if start is not None else 1
        hi = stop if stop is not None else max(s[dim_index] for s in base)
        if stop is None and step_rule.startswith("values:"):  # the values a user lists bound the grid themselves
            hi = max([hi, *grid_values(lo, 1 << 62, step_rule)])
        grid = grid_shapes(base, dim_index, grid_values(lo, hi, step_rule))
    else:
        grid = base
    plan = BenchPlan(op=registry.origin(spec.name) or spec.name, impls=[impl], shapes=grid, dtypes=[dt],
                     regimes=[regime], variants=[variant], budget_s=budget_s or (0.1 if device.type == "cuda"
                                                                               else 0.05),
                     baseline=impl, seed=seed)
    validate_plan(plan, device)
    env = capture_env(argv)
    settings = plan.settings()
    settings["audit"] = {"dim": dim_index, "dim_name": spec.dims[dim_index] if dim_index is not None and
                         dim_index < len(spec.dims) else dim_index, "from": start, "to": stop,
                         "step_rule": step_rule, "cliff_jump": CLIFF_JUMP}
    record = RunRecord(kind="audit", command=env["command"], env=env, device=device_profile(), settings=settings)
    record.path = Path(json_path) if json_path else default_run_path(record.run_id)
    record.save()
    run_bench(plan, record, record.device, device, progress)
    resolved = registry.resolve(spec, impl)
    for m in record.measurements:  # the launch configuration at each point
        case = Case(tuple(m["shape"]), dt, variant)
        try:
            m["config"] = chosen_config(spec, resolved, case, device, seed)
        except Exception as e:
            m["config"] = f"not captured: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    points = analyse(record.measurements, dim_index)
    record.settings["audit"].update(points=points, cliffs=[p for p in points if p["cliff"]],
                                    dtype=dtype_name(dt), impl=impl)
    record.save()
    if out_dir is not None:
        from ridgeline.report.audit import write_audit_report

        write_audit_report(record, Path(out_dir))
    return record
