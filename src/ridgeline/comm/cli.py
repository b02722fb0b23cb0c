"""``ridgeline comm``: the Typer command. Register with ``app.command("comm")(comm_command)``.

Exit codes: 0 every case ran and was right; 1 some case failed (wrong result, OOM, timeout, crash); 2 bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


def _size(b: int) -> str:
    from ridgeline.comm.report import _size_text

    return _size_text(b)


def comm_command(
    ops: Annotated[list[str] | None, typer.Option("--ops", help="all_reduce, all_gather, reduce_scatter, "
                                                  "all_to_all, broadcast, sendrecv; repeat (default: all)")] = None,
    impl: Annotated[list[str] | None, typer.Option("--impl", help="nccl (gloo on CPU), ridgeline-oneshot, "
                                                   "ridgeline-twoshot, or FILE.py:FN; repeat")] = None,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", help="bf16 (GPU default), fp16, fp32 (CPU "
                                                    "default), fp64, int8, uint8, int32, int64; repeat")] = None,
    min_size: Annotated[str, typer.Option("--min", help="smallest message, bytes (8, 64K, 1M)")] = "8",
    max_size: Annotated[str, typer.Option("--max", help="largest message, bytes (default 8G)")] = "8G",
    placement: Annotated[list[str] | None, typer.Option("--placement", help="in-place, out-of-place; repeat "
                                                        "(default: both where the API has them)")] = None,
    mode: Annotated[list[str] | None, typer.Option("--mode", help="eager, graph (CUDA graph replay); repeat "
                                                   "(default: both; graph needs CUDA)")] = None,
    nprocs: Annotated[int | None, typer.Option("--nprocs", help="ranks to start, one per GPU (default: every "
                                               "visible GPU; 2 on CPU); ignored under torchrun")] = None,
    budget: Annotated[float, typer.Option("--budget", help="seconds of timed calls per size")] = 0.02,
    warmup: Annotated[int, typer.Option("--warmup", help="untimed calls first")] = 3,
    min_iters: Annotated[int, typer.Option("--min-iters")] = 5,
    max_iters: Annotated[int, typer.Option("--max-iters")] = 200,
    graph_calls: Annotated[int, typer.Option("--graph-calls", help="calls per graph replay at most")] = 20,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds without progress before a case counts as "
                                           "hung (its ranks are restarted after it)")] = 120.0,
    json_path: Annotated[Path | None, typer.Option("--json", help="write the run record here (as it goes)")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="write comm.md and the plots into this "
                                                "folder")] = None,
) -> None:
    """Time torch.distributed collectives (and ridgeline's all-reduce) from 8 B to 8 GiB: median, p99, algbw,
    busbw against the link, every size verified exactly."""
    from ridgeline.comm.runner import make_settings, parse_bytes, run

    console = Console() if sys.stdout.isatty() else Console(width=160)
    try:
        settings = make_settings(ops=ops, impls=impl, dtypes=dtype, min_bytes=parse_bytes(min_size, "--min"),
                                 max_bytes=parse_bytes(max_size, "--max"), placements=placement, regimes=mode,
                                 nprocs=nprocs,
                                 budget=budget, warmup=warmup, min_iters=min_iters, max_iters=max_iters,
                                 graph_calls=graph_calls, timeout=timeout)
        for option, path in (("--json", json_path),):
            if path is not None and not path.expanduser().resolve().parent.is_dir():
                raise ValueError(f"{option}: the folder of {str(path)!r} does not exist; create it first")
    except ValueError as e:
        console.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    from ridgeline.comm.runner import plan_cases

    cases, _ = plan_cases(settings)
    if settings["device_type"] != "cuda":
        console.print("[yellow]No CUDA device: gloo over local processes, host clocks; these figures say nothing "
                      "about GPU links.[/]")
    live = sys.stdout.isatty()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(f"comm: {settings['world_size']} ranks", total=len(cases))

        def on_event(kind: str, item: dict[str, Any]) -> None:
            if kind == "start":
                progress.update(task, description=f"{item['op']} {item['impl']} {item['variant']} {item['regime']} "
                                                  f"{_size(item['size'])}")
                return
            progress.update(task, advance=1)
            if not live:
                console.print(_line(kind, item), soft_wrap=True, highlight=False, markup=False)

        record = run(settings, json_path=json_path, on_event=on_event)
    if record is None:  # a torchrun rank other than 0
        return
    d = record.to_dict()
    console.print(summary_table(d))
    if report is not None:
        from ridgeline.comm.report import write_report

        console.print(f"report: {write_report(d, report)}")
    console.print(f"run {record.run_id}: {len(d['measurements'])} measured, {len(d['failures'])} failed, "
                  f"{len(d['skipped'])} not run" + (f"; record {record.path}" if record.path else ""))
    if d["failures"]:
        raise typer.Exit(1)


def _line(kind: str, item: dict[str, Any]) -> str:
    head = f"{item['op']} {item['impl']} {item['dtype']} {item['variant']} {item['regime']} {_size(item['size'])}"
    if kind == "failure":
        return f"FAILED {head}: {item.get('reason')}"
    bus = item.get("busbw_gbps")
    return (f"{head}: {item['median_us']:.2f} us (p99 {item['p99_us']:.2f}), algbw {item['algbw_gbps']:.4g} GB/s, "
            f"busbw {bus:.4g} GB/s, #wrong {item['wrong']}")


def summary_table(d: dict[str, Any]) -> Table:
    """Per series: the smallest and largest size measured, with time and busbw."""
    from ridgeline.comm.report import series_of

    t = Table(title=f"ridgeline comm, {d['settings']['world_size']} ranks ({d['settings']['backend']})")
    for c in ("op", "impl", "dtype", "placement", "mode", "sizes", "smallest: us", "largest: us", "largest: busbw",
              "#wrong"):
        t.add_column(c, justify="right" if ":" in c or c == "#wrong" else "left")
    for (op, impl, dt, variant, regime), ms in series_of(d).items():
        lo, hi = ms[0], ms[-1]
        t.add_row(op, impl, dt, variant, regime, f"{_size(lo['size'])}..{_size(hi['size'])}",
                  f"{lo['median_us']:.2f}", f"{hi['median_us']:.2f}",
                  f"{hi['busbw_gbps']:.4g}" if hi.get("busbw_gbps") is not None else "-",
                  str(sum(m["wrong"] for m in ms)))
    return t
