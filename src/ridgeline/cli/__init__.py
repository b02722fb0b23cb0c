"""The `ridgeline` command: thin — parse, call the library, render with Rich."""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Annotated

import torch
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# Without a GPU the kernels run under Triton's CPU interpreter; it must be chosen before any kernel is decorated.
if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
# Notices that mean nothing to a user of the tool: numpy's overflow warnings inside Triton's interpreter (it
# evaluates masked-off lanes too), and torch's "No CUDA runtime is found, using CUDA_HOME" when an extension loads.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)

from ridgeline.cli import render  # noqa: E402

app = typer.Typer(
    help="ridgeline: probe the GPU's ceilings, check and bench kernels on the measured roofline, report.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()


def _version(value: bool) -> None:
    if value:
        from ridgeline import __version__

        print(f"ridgeline {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    """ridgeline: probe the GPU's ceilings, check and bench kernels on the measured roofline, report."""


if not sys.stdout.isatty():  # logs and pipes get full-width tables
    console = Console(width=160)


def _fail(message: str) -> None:
    from rich.markup import escape

    console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(2)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


@app.command()
def ops(
    user_ops: Annotated[list[str] | None, typer.Argument(
        help="also list these ops of yours (FILE.py:SPEC)", show_default=False)] = None,
) -> None:
    """List every op, its shape sets, and every registered implementation with its availability."""
    from ridgeline.core import registry

    try:
        for ref in user_ops or []:
            registry.get_spec(ref)
    except (ValueError, TypeError) as e:
        _fail(str(e))
    specs = registry.specs()
    console.print(render.ops_table(specs.values(), {name: registry.implementations(name) for name in specs}))
    for err in registry.load_errors():
        console.print(f"[yellow]not loaded:[/] {err}")


def _check_out_path(option: str, path: Path | None) -> None:
    """Refuse, before any work, an output path whose folder does not exist (a sweep must not die at its end)."""
    if path is not None and not path.expanduser().resolve().parent.is_dir():
        _fail(f"{option}: the folder of {str(path)!r} does not exist; create it first")
    if path is not None and path.expanduser().is_dir():
        _fail(f"{option}: {str(path)!r} is a folder; name a file in it, such as {str(path / 'run.json')!r}")


def _parse_dtypes(dtypes: list[str] | None):
    from ridgeline.core.spec import parse_dtype

    return [parse_dtype(d) for d in dtypes] if dtypes else None


def _parse_shapes(spec, shapes: str | None):
    """'sweep' | 'decode' | 'edge' | '4096x4100,1x4096' -> a shape-set name or a list of shapes."""
    from ridgeline.core.spec import parse_shape

    if shapes is None:
        return None
    if shapes in spec.shape_sets:
        return shapes
    return [parse_shape(s) for s in shapes.split(",") if s.strip()]


@app.command()
def check(
    op: Annotated[str, typer.Argument(help="op name (see `ridgeline ops`) or your own FILE.py:SPEC")],
    impl: Annotated[list[str] | None, typer.Option("--impl", help="registered name or file.py:fn; repeat")] = None,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", help="bf16, fp16, fp32; repeat")] = None,
    shapes: Annotated[str | None, typer.Option(help="'edge' (default: every edge case) or shapes 7x769,...")] = None,
    seed: Annotated[int, typer.Option(help="random seed of the inputs")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the results as JSON")] = None,
) -> None:
    """Prove implementations right: fp64 reference, edge cases, NaN/inf, determinism, batch invariance."""

    from ridgeline.core import registry
    from ridgeline.core.spec import Case
    from ridgeline.harness.correctness import check as run_check
    from ridgeline.harness.correctness import plan_check

    _check_out_path("--json", json_out)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        spec = registry.get_spec(op)
        dtypes = _parse_dtypes(dtype) or list(spec.dtypes)
        parsed = _parse_shapes(spec, shapes)
        cases = None
        if isinstance(parsed, list):
            cases = [Case(s, d) for d in dtypes for s in parsed]
        elif isinstance(parsed, str) and parsed != "edge":
            cases = [Case(s, d) for d in dtypes for s in spec.shapes(parsed)]
        impls = impl or None
        plan_check(op, impls, dtypes, device, cases)  # every refusal before the progress bar
    except (ValueError, TypeError) as e:
        _fail(str(e))
    results = []
    with _progress() as progress:
        task = progress.add_task(f"check {op} on {device}", total=None)

        def on_result(r):
            results.append(r)
            progress.update(task, advance=1, description=f"{r.impl} {r.label}")

        run_check(op, impls, dtypes, device, cases, seed, on_result=on_result)
    console.print(render.check_table(results, f"check {op} on {device}"))
    failed = [r for r in results if not r.passed]
    noted = sum(bool(r.notes) for r in results if r.passed)
    console.print(f"{len(results) - len(failed)} passed{f' ({noted} with notes)' if noted else ''}, "
                  f"{len(failed)} failed")
    if json_out:
        json_out.write_text(json.dumps([r.to_dict() for r in results], indent=1))
    if failed:
        raise typer.Exit(1)


@app.command()
def bench(
    op: Annotated[str | None, typer.Argument(
        help="op name (see `ridgeline ops`) or your own FILE.py:SPEC; omit with --resume")] = None,
    impl: Annotated[list[str] | None, typer.Option("--impl", help="registered name or file.py:fn; repeat")] = None,
    shapes: Annotated[str | None, typer.Option(help="sweep | decode | edge | cpu | 4096x4100,...")] = None,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", help="bf16 (default), fp16, fp32; repeat")] = None,
    regime: Annotated[list[str] | None, typer.Option(
        "--regime", help="auto | cold-eager | graph-cold | graph-hot | host; repeat")] = None,
    variant: Annotated[list[str] | None, typer.Option("--variant", help="e.g. w-fp32, strided; repeat")] = None,
    budget: Annotated[float | None, typer.Option(help="seconds of sampling per measurement")] = None,
    baseline: Annotated[str | None, typer.Option(
        help="implementation the speedups are over (default: torch-eager when benched, else the first peer)")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="write the run record here")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue a killed run from its record")] = None,
    db: Annotated[Path | None, typer.Option(help="SQLite store (default: user data dir)")] = None,
    refresh_probe: Annotated[bool, typer.Option(help="re-measure the device ceilings first")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="run a plan the CPU would take minutes over")] = False,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", help="seconds: start no new case after this (the record says what is left; --resume "
                             "finishes it)")] = None,
) -> None:
    """Check, then time every implementation one honest way, on the measured roofline."""

    from ridgeline.harness.bench import BenchPlan, count_tasks, make_plan, validate_plan
    from ridgeline.harness.bench import bench as run_bench_api
    from ridgeline.records.record import load_record

    if op is None and resume is None:
        _fail("op: name an op, or pass --resume RUN.json")
    if resume is not None:
        given = [name for name, v in (("OP", op), ("--impl", impl), ("--shapes", shapes), ("--dtype", dtype),
                                      ("--regime", regime), ("--variant", variant), ("--budget", budget),
                                      ("--baseline", baseline)) if v]
        if given or refresh_probe:
            _fail(f"resume: a resumed run keeps its own settings; drop {', '.join(given or ['--refresh-probe'])}")
    _check_out_path("--json", json_path)
    if budget is not None and not budget > 0:
        _fail(f"--budget: expected seconds > 0, got {budget}")
    if time_limit is not None and not time_limit > 0:
        _fail(f"--time-limit: expected seconds > 0, got {time_limit}")
    from ridgeline.core import registry

    try:
        if resume is not None:
            try:
                plan = BenchPlan.from_settings(load_record(resume).settings)
                validate_plan(plan, torch.device("cuda" if torch.cuda.is_available() else "cpu"))
            except (TypeError, KeyError, ValueError) as e:  # (a user's op is loaded from the file its record names)
                raise ValueError(str(e) if isinstance(e, ValueError) and str(e).startswith(("run record", "resume"))
                                 else f"resume: {resume}: {e if not isinstance(e, KeyError) else f'no {e}'}") \
                    from None
        else:
            parsed = _parse_shapes(registry.get_spec(op), shapes)
            plan = make_plan(op, impl, parsed, _parse_dtypes(dtype), regime or ["auto"], variant or [""], budget,
                             baseline)
    except (ValueError, TypeError) as e:
        _fail(str(e))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda":
        _cpu_plan_or_fail(plan, yes)
    live = sys.stdout.isatty()
    with _progress() as progress:
        task = progress.add_task("bench", total=count_tasks(plan, device))
        record = run_bench_api(
            json_path=json_path, resume=resume, db=db, argv=sys.argv, plan=plan, refresh_probe=refresh_probe,
            time_limit_s=time_limit,
            progress=lambda desc: progress.update(task, advance=1, description=desc),
            on_result=None if live else lambda r: console.print(render.result_line(r), soft_wrap=True,
                                                                   highlight=False, markup=False),
        )
    d = record.to_dict()
    console.print(render.bench_table(d))
    fails = render.failures_table(d)
    if fails is not None:
        console.print(fails)
    console.print(f"run {record.run_id}: {len(d['measurements'])} measurements, {len(d['failures'])} failures; "
                  f"record {record.path}")
    if record.stopped:
        console.print(f"stopped at the {record.stopped}", highlight=False, markup=False)
    if d["failures"] and not d["measurements"]:  # a script must not read "nothing timed" as success
        console.print("nothing was timed: every implementation failed its check or its timing (failures above)")
        raise typer.Exit(1)


# A CPU plan longer than this needs --yes (Triton's interpreter costs ~1 ms per program instance).
CPU_PLAN_LIMIT_S = 180.0


def _cpu_plan_or_fail(plan, yes: bool) -> None:
    from ridgeline.core import registry
    from ridgeline.harness.bench import estimate_cpu_seconds

    console.print("[yellow]No CUDA device: timing on the CPU (Triton interpreter / torch CPU). "
                  "These figures say nothing about GPU speed.[/]")
    gpu_regimes = [r for r in plan.regimes if r != "auto"]
    if gpu_regimes:
        console.print(f"[yellow]The GPU regimes {', '.join(gpu_regimes)} become the one regime 'cpu' here.[/]")
    try:
        seconds = estimate_cpu_seconds(plan)
    except ValueError as e:
        _fail(str(e))
    if seconds > CPU_PLAN_LIMIT_S and not yes:
        spec = registry.get_spec(plan.op)
        hint = (f"--shapes cpu ({len(spec.shape_sets['cpu'])} shapes, made for the interpreter)"
                if "cpu" in spec.shape_sets else "fewer or smaller shapes")
        _fail(f"bench: on the CPU this plan would take about {seconds / 60:.0f} minutes (Triton's interpreter "
              f"runs each program instance in Python); use {hint}, or pass --yes to run it anyway")
    console.print(f"[dim]estimated CPU time: about {max(seconds, 1):.0f} s[/]")


@app.command()
def probe(
    refresh: Annotated[bool, typer.Option(help="measure again instead of using the cached profile")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the device profile as JSON")] = False,
    quick: Annotated[bool, typer.Option(help="smaller problems (faster, slightly lower ceilings)")] = False,
) -> None:
    """Measure this GPU's ceilings: bandwidth, FLOP/s per dtype, launch floors, ridge points."""

    from ridgeline.harness.probe import device_profile

    if not torch.cuda.is_available():
        _fail("probe: no CUDA device here; ceilings can only be measured on a GPU")
    if json_out:
        print(json.dumps(device_profile(refresh=refresh, quick=quick), indent=1))
        return
    with console.status("probing") as status:
        p = device_profile(refresh=refresh, quick=quick, log=lambda s: status.update(f"probing: {s}"))
    console.print(render.probe_table(p))
    console.print(f"[dim]profile cached at {p.get('cache_path')} (measured {p.get('measured_at')}, "
                  f"{p.get('probe_seconds')} s)[/]")


@app.command()
def runs(
    run_id: Annotated[str | None, typer.Argument(help="show this run (id or unique prefix)")] = None,
    db: Annotated[Path | None, typer.Option(help="SQLite store (default: user data dir)")] = None,
    limit: Annotated[int, typer.Option(help="how many runs to list")] = 50,
) -> None:
    """List the stored runs, or show one."""
    from ridgeline.records.paths import default_db
    from ridgeline.records.store import Store

    with Store(db or default_db()) as store:
        if run_id is None:
            console.print(render.runs_table(store.list_runs(limit)))
            return
        try:
            record = store.get(run_id)
        except ValueError as e:
            _fail(str(e))
    d = record.to_dict()
    console.print(f"run {record.run_id} ({record.kind}), {record.created}, command: {record.command}")
    if d["measurements"]:
        console.print(render.bench_table(d))
    fails = render.failures_table(d)
    if fails is not None:
        console.print(fails)


@app.command()
def audit(
    op: Annotated[str, typer.Argument(help="op name (see `ridgeline ops`) or your own FILE.py:SPEC")],
    impl: Annotated[str, typer.Option("--impl", help="the implementation audited (registered name or file.py:fn)")],
    shapes: Annotated[str | None, typer.Option(help="base shapes: a shape set or 4096x4096x4096,...")] = None,
    dim: Annotated[str | None, typer.Option(help="the dim varied (a name of the op's dims, e.g. M)")] = None,
    start: Annotated[int | None, typer.Option("--from", help="first value of the dim")] = None,
    stop: Annotated[int | None, typer.Option("--to", help="last value of the dim")] = None,
    step_rule: Annotated[str, typer.Option(
        help="on-and-off-tiles | pow2 | every:N | values:A,B,...")] = "on-and-off-tiles",
    dtype: Annotated[str, typer.Option(help="bf16 (default), fp16, ...")] = "bf16",
    variant: Annotated[str, typer.Option(help="input variant the spec knows")] = "",
    regime: Annotated[str, typer.Option(help="auto | cold-eager | graph-cold | graph-hot")] = "auto",
    budget: Annotated[float | None, typer.Option(help="seconds of sampling per point")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="write the run record here")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="folder for the plot and the markdown table")] = None,
) -> None:
    """Time one implementation over a dense shape grid; flag cliffs in time / speed of light, with the configs."""
    from ridgeline.core import registry
    from ridgeline.harness.audit import audit as run_audit

    _check_out_path("--json", json_path)
    try:
        spec = registry.get_spec(op)
        parsed = _parse_shapes(spec, shapes)
        if parsed is None:
            parsed = "cpu" if not torch.cuda.is_available() and "cpu" in spec.shape_sets else \
                next((k for k in spec.shape_sets if k != "edge"), None)
        base = spec.shapes(parsed) if isinstance(parsed, str) else parsed
        with _progress() as progress:
            task = progress.add_task("audit", total=None)
            record = run_audit(op, impl, base, dim, start, stop, step_rule, dtype, variant, regime, budget,
                               json_path, out, sys.argv,
                               progress=lambda desc: progress.update(task, advance=1, description=desc))
    except (ValueError, TypeError) as e:
        _fail(str(e))
    from ridgeline.report.audit import audit_markdown

    console.print(audit_markdown(record), markup=False, highlight=False)
    cliffs = record.settings["audit"]["cliffs"]
    console.print(f"audit {record.run_id}: {len(record.settings['audit']['points'])} points, {len(cliffs)} cliffs; "
                  f"record {record.path}" + (f"; report in {out}" if out else ""))


def _register_optional_commands() -> None:
    """Commands that live beside their library code (each module keeps its own options)."""
    from ridgeline.comm.cli import comm_command
    from ridgeline.report.cli import compare_command, profile_command, report_command
    from ridgeline.vram.cli import vram_command

    app.command("report")(report_command)
    app.command("compare")(compare_command)
    app.command("profile")(profile_command)
    app.command("vram", help="VRAM budget for LLM serving: weights, KV cache, tokens that fit.")(vram_command)
    app.command("comm", help="Collectives on N GPUs: time, busbw vs the link; ridgeline's all-reduce.")(comm_command)


_register_optional_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
