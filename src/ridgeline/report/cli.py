"""`ridgeline report`, `compare` and `profile`: parse, call the library, print with Rich.

Registered on the main app as ``app.command("report")(report_command)`` and likewise for the other two.
Heavy imports (matplotlib, triton, torch) happen inside the commands so that loading the CLI stays fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

if TYPE_CHECKING:
    from ridgeline.report.tables import Table

console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)

VERDICT_STYLE = {"FASTER": "bold green", "SLOWER": "bold red", "SAME": "dim", "UNCLEAR": "yellow",
                 "SUSPECT": "bold magenta"}


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/] {_esc(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def _load(run: str) -> Any:
    from ridgeline.report.data import resolve_run

    try:
        return resolve_run(run)
    except ValueError as e:
        _fail(str(e))


def _profile_file(arg: str) -> dict[str, Any] | None:
    """The profile in a `ridgeline profile --json` file, else None (a run record, a run id, a broken file: those
    are for resolve_run to load or refuse)."""
    from ridgeline.report.profile_diff import is_profile

    p = Path(arg).expanduser()
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if is_profile(data) else None


def _compare_profiles(base: str, new: str, json_out: Path | None) -> bool:
    """Two profiles side by side; False where neither argument is a profile (then the runs are compared)."""
    from ridgeline.report.profile_diff import profile_diff_table

    pb, pn = _profile_file(base), _profile_file(new)
    if pb is None and pn is None:
        return False
    if pb is None or pn is None:
        _fail(f"compare: {new if pb is not None else base} is not a profile (`ridgeline profile --json`) but the "
              "other argument is; compare two profiles or two runs")
    t = profile_diff_table(pb, pn)
    console.print(rich_table(t))
    if json_out is not None:
        rows = [dict(zip(t.headers, (c.text for c in r), strict=True)) for r in t.rows]
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps({"title": t.title, "caption": t.caption, "rows": rows}, indent=1) + "\n")
    return True


def rich_table(t: Table) -> RichTable:
    """A report table (ridgeline.report.tables.Table) as a Rich table."""
    style = {"best": "bold", "bad": "bold red", "warn": "yellow", "good": "green", "struck": "strike dim"}
    rt = RichTable(title=t.title, title_justify="left", caption=t.caption or None, caption_justify="left")
    for i, h in enumerate(t.headers):
        rt.add_column(h, justify="right" if i in t.numeric else "left", overflow="fold")
    for row in t.rows:
        rt.add_row(*[f"[{style[c.style]}]{_esc(c.text)}[/]" if c.style in style else _esc(c.text) for c in row])
    return rt


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# --- report ------------------------------------------------------------------------------------------------
def report_command(
    runs: Annotated[list[str], typer.Argument(help="run JSON files, or run ids (or unique prefixes) in the store")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="md, html or all")] = "all",
    out: Annotated[Path, typer.Option("-o", "--out", help="output folder ('-' prints the markdown to stdout); "
                                      "with several runs, one subfolder per run id")] = Path("ridgeline-report"),
) -> None:
    """Write an issue-ready markdown report with plots and/or a self-contained HTML page for each run."""
    from ridgeline.report.build import FORMATS, write_report

    if fmt not in FORMATS:
        _fail(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    records = [_load(r) for r in runs]
    if str(out) == "-":
        from ridgeline.report.markdown import render_markdown

        for rec in records:
            sys.stdout.write(render_markdown(rec.to_dict()))
        return
    for rec in records:
        target = out if len(records) == 1 else out / rec.run_id
        written = write_report(rec, target, fmt)
        main = [p for p in written if p.suffix in (".md", ".html")]
        plots = len(written) - len(main)
        console.print(f"[bold]{rec.run_id}[/]: " + ", ".join(str(p) for p in main)
                      + (f" (+ {plots} plot files in {target / 'plots'})" if plots else ""))


# --- compare -----------------------------------------------------------------------------------------------
def _ratio_text(r: float | None) -> str:
    return "–" if r is None else f"{r:.3f} ({(r - 1) * 100:+.1f}%)"


def compare_command(
    base: Annotated[str, typer.Argument(help="baseline run: JSON file or run id (or a `profile --json` file)")],
    new: Annotated[str, typer.Argument(help="new run: JSON file or run id (or a `profile --json` file)")],
    threshold: Annotated[str, typer.Option(help="changes within ±threshold count as SAME (2% or 0.02)")] = "2%",
    fail_on_slower: Annotated[bool, typer.Option("--fail-on-slower", help="exit 1 if any case is SLOWER")] = False,
    resamples: Annotated[int, typer.Option(help="bootstrap resamples")] = 2000,
    confidence: Annotated[float, typer.Option(help="confidence of the interval")] = 0.95,
    seed: Annotated[int, typer.Option(help="bootstrap seed (fixed: same inputs, same answer)")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the comparison as JSON")] = None,
) -> None:
    """Compare two runs case by case: NEW/BASE median ratio, bootstrap CI, verdict FASTER/SLOWER/SAME/UNCLEAR.
    Two profiles: their main kernels metric by metric (ncu, registers, loop length, warp stalls)."""
    from ridgeline.harness.compare import compare_runs, parse_threshold

    try:
        t = parse_threshold(threshold)
    except ValueError as e:
        _fail(str(e))
    if not 0 < confidence < 1:
        _fail(f"--confidence: expected a fraction between 0 and 1, got {confidence}")
    if resamples < 100:
        _fail(f"--resamples: expected at least 100, got {resamples}")
    if _compare_profiles(base, new, json_out):
        return
    cmp = compare_runs(_load(base), _load(new), t, resamples, confidence, seed)
    if not cmp.rows:
        _fail(f"compare: {base} and {new} have no measurement in common (same op, impl, shape, dtype, variant and "
              f"regime); {len(cmp.only_base)} only in BASE, {len(cmp.only_new)} only in NEW")
    show_variant = any(r.variant for r in cmp.rows)
    rt = RichTable(title=f"{cmp.new_run} (NEW) / {cmp.base_run} (BASE): ratio of median times, below 1 is faster",
                   title_justify="left")
    cols = ["op", "impl", "shape", "dtype"] + (["variant"] if show_variant else []) + [
        "regime", "base µs", "new µs", "NEW/BASE", f"{confidence:.0%} CI", "n", "verdict", "note"]
    for c in cols:
        rt.add_column(c, justify="right" if c in ("base µs", "new µs", "NEW/BASE", "n") else "left")
    for r in cmp.rows:
        ci = "–" if r.ci_lo is None else f"[{r.ci_lo:.3f}, {r.ci_hi:.3f}]"
        plain = [r.op, r.impl, "x".join(map(str, r.shape)), r.dtype] + ([r.variant] if show_variant else []) + [
            r.regime, _us(r.base_us), _us(r.new_us), _ratio_text(r.ratio), ci, f"{r.n_base}/{r.n_new}"]
        verdict = f"[{VERDICT_STYLE.get(r.verdict, 'default')}]{r.verdict}[/]"
        rt.add_row(*[_esc(c) for c in plain], verdict, _esc(r.note))
    console.print(rt)
    for w in cmp.warnings:
        console.print(f"[yellow]warning:[/] {_esc(w)}")
    for label, keys in (("only in BASE", cmp.only_base), ("only in NEW", cmp.only_new)):
        if keys:
            console.print(f"[dim]{label} ({len(keys)}): " + _esc(", ".join(
                f"{k[1]} {'x'.join(map(str, k[2]))} {k[3]} {k[5]}" for k in keys[:12]))
                + (" …" if len(keys) > 12 else "") + "[/]")
    counts = cmp.counts()
    g = cmp.geomean()
    summary = ", ".join(f"{v} {k.lower()}" for k, v in counts.items())
    console.print(f"[bold]geometric mean NEW/BASE: {_ratio_text(g)}[/] over {len(cmp.rows)} matched cases "
                  f"({summary}); threshold ±{t:.1%}")
    by_regime = {reg: cmp.geomean(reg) for reg in sorted({r.regime for r in cmp.rows})}
    if len(by_regime) > 1:
        console.print("  by regime: " + ", ".join(f"{k} {_ratio_text(v)}" for k, v in by_regime.items()))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(cmp.to_dict(), indent=1) + "\n")
    if fail_on_slower and cmp.any_slower:
        err.print(f"[red]{counts['SLOWER']} case(s) SLOWER beyond ±{t:.1%}[/]")
        raise typer.Exit(1)


def _us(v: float | None) -> str:
    from ridgeline.report.data import fmt_us

    return fmt_us(v)


# --- profile -----------------------------------------------------------------------------------------------
def profile_command(
    op: Annotated[str, typer.Argument(help="op name (see `ridgeline ops`)")],
    impl: Annotated[str, typer.Option("--impl", help="implementation: registered name or file.py:fn")],
    shape: Annotated[str, typer.Option("--shape", help="one shape, e.g. 4096x4100")],
    dtype: Annotated[str, typer.Option(help="bf16, fp16, fp32, or what the op takes (fp8e4m3: scaled_mm)")] = "bf16",
    variant: Annotated[str, typer.Option(help="input variant the spec knows, e.g. strided")] = "",
    ncu: Annotated[bool, typer.Option("--ncu", help="also run Nsight Compute on one call (GPU, ncu on PATH)")] = False,
    source: Annotated[bool, typer.Option("--source", help="with Nsight Compute (implies --ncu): where warps were "
                                         "sampled waiting, by source line and SASS instruction, and why")] = False,
    kineto: Annotated[bool, typer.Option("--kineto/--no-kineto", help="torch profiler trace (GPU)")] = True,
    arch: Annotated[int | None, typer.Option(help="compute capability for ahead-of-time compilation, e.g. 90 "
                                             "(default: the GPU's, or 90 without one)")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="attach to this run record (its `profiles`) or, "
                                                   "if it is not one, write the profile dict there")] = None,
    out: Annotated[Path | None, typer.Option("-o", "--out", help="folder for PTX, SASS, cubin, ncu report, "
                                             "trace (default ./ridgeline-profile-OP-SHAPE)")] = None,
) -> None:
    """Profile one implementation at one shape: compile facts, occupancy, SASS, Nsight Compute, torch trace."""
    from ridgeline.core.spec import parse_shape
    from ridgeline.profile import attach_profile, default_out_dir
    from ridgeline.profile import profile as run_profile
    from ridgeline.report import tables as T
    from ridgeline.report.profile_tables import profile_tables

    try:
        dims = parse_shape(shape)
        out_dir = out if out is not None else default_out_dir(op, dims)
        with console.status(f"profiling {op} / {impl} at {shape} {dtype}"):
            prof = run_profile(op, impl, dims, dtype, variant, out_dir=out_dir, ncu=ncu, kineto=kineto, arch=arch,
                               ncu_source=source)
    except ValueError as e:
        _fail(str(e))
    console.print(f"[bold]{_esc(T.profile_title(prof))}[/]")
    if prof.get("launch"):
        console.print("launch: " + ", ".join(f"{k} {v}" for k, v in prof["launch"].items()))
    for t in profile_tables(prof):
        if t.rows:
            console.print(rich_table(t))
    for c in prof.get("collected") or []:
        console.print(f"[green]collected:[/] {_esc(c)}")
    for x in prof.get("not_collected") or []:
        console.print(f"[yellow]not collected:[/] {_esc(str(x.get('what')))}: {_esc(str(x.get('why')))}")
    for n in prof.get("notes") or []:
        console.print(f"[dim]{_esc(n)}[/]")
    console.print(f"files in {out_dir}/ (profile.json has everything above)")
    if json_path is not None:
        how = attach_profile(prof, json_path)
        console.print(f"profile {how}: {json_path}" + (" (run `ridgeline report` on it to see it rendered)"
                                                       if how == "attached" else ""))
        if how == "attached":
            _update_store(json_path)


def _update_store(path: Path) -> None:
    """Keep the store's copy of the run in step with its file, when the run is in the store."""
    from ridgeline.records import paths
    from ridgeline.records.record import load_record
    from ridgeline.records.store import Store

    db = paths.default_db()
    if not db.is_file():
        return
    rec = load_record(path)
    with Store(db) as store:
        try:
            store.get(rec.run_id)
        except ValueError:
            return
        store.put(rec)
