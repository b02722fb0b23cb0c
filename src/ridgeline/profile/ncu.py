"""Nsight Compute: the command (never touching clocks), the raw CSV it exports, and a summary against the spec's
ideal bytes. ncu runs one call of the implementation in a child process (ridgeline.profile.child)."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ridgeline.profile.child import CHILD_CODE, child_env
from ridgeline.profile.sass import run_tool

NCU_METRICS = {
    "dram__bytes_read.sum": "dram_bytes_read",
    "dram__bytes_write.sum": "dram_bytes_write",
    "gpu__time_duration.sum": "time_us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "launch__registers_per_thread": "registers",
}
# Where the compute went (asked for too; a name this ncu does not know is dropped and the run repeated without it,
# since metric names drift between ncu versions). The tensor pipe's busy share is the issue's "tensor-pipe
# utilisation"; on sm_90 the `hmma` pipe's count holds every tensor-core warp instruction, wgmma included (s29:
# equal to the `gmma` count on wgmma kernels, the mma.sync count alone on int4's), `gmma` the wgmmas alone (the
# ops-path counters miss wgmma).
NCU_COMPUTE_METRICS = {
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": "tensor_pct",
    "sm__inst_executed_pipe_tensor_op_gmma.sum": "wgmma_insts",
    "sm__inst_executed_pipe_tensor_op_hmma.sum": "tensor_insts",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active": "xu_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
}
# Why warps did not issue: the WarpStateStats section's breakdown of the cycles between two issued instructions
# of one warp, by stall reason (ncu's Profiling Guide names each). Optional like the compute metrics; a reason this
# ncu lacks is dropped. `cycles_per_issue` is the sum the reasons split, `issue_active_pct` how often a scheduler
# issued at all: only where it is well under 100 % do the stalls explain the time.
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
    "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
    "short_scoreboard", "sleeping", "tex_throttle", "wait",
)
NCU_STALL_METRICS = {
    "smsp__average_warps_active_per_issue_active.ratio": "cycles_per_issue",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue_active_pct",
} | {f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": f"stall_{r}" for r in STALL_REASONS}
_OPTIONAL = NCU_COMPUTE_METRICS | NCU_STALL_METRICS
_COUNTS = ("registers", "wgmma_insts", "tensor_insts")
_UNIT_SCALE = {
    "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 1024.0, "mibyte": 1024.0**2, "gibyte": 1024.0**3,
    "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3,
    # times in microseconds; ncu 2025.3 writes "ms" / "us" / "ns" where older ones wrote "msecond" (s29: an
    # attention kernel's 1.6 ms was read as 1.6 us before these)
    "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
    "ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6,
}


# The source page's counters: PC sampling of every warp, attributed to SASS instructions and source lines
# (ncu_source.py); the report keeps the source files so it opens elsewhere.
SOURCE_ARGS = ("--section", "SourceCounters", "--import-source", "yes")


def ncu_command(ncu: str, report_base: Path, child_argv: Sequence[str],
                metrics: Sequence[str] | None = None, source: bool = False) -> list[str]:
    names = list(NCU_METRICS) + list(_OPTIONAL) if metrics is None else list(metrics)
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--metrics", ",".join(names), *(SOURCE_ARGS if source else ()), "--export", str(report_base),
            "--force-overwrite", sys.executable, "-c", CHILD_CODE, *child_argv]


def unknown_metrics(output: str, asked: Sequence[str]) -> list[str]:
    """The optional metrics to drop after a failed ncu run: those its metric error names, all of them where it names
    none; nothing where the failure is not about a metric (no permission, a crash: one run reports that)."""
    if "metric" not in output.lower():
        return []
    optional = [m for m in asked if m in _OPTIONAL]
    named = [m for m in optional if m.split(".")[0] in output]
    return named or optional


def _number(text: str, unit: str) -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v * _UNIT_SCALE.get(unit.strip().lower(), 1.0)


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of `ncu --import R --csv --page raw`: one dict per kernel launch, metrics in bytes / µs / %."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header, data = rows[0], rows[1:]
    units = [""] * len(header)
    if data and data[0] and data[0][0] == "":  # the units row under the header
        units = data.pop(0) + [""] * len(header)
    col = {h: i for i, h in enumerate(header)}
    out = []
    for row in data:
        def get(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i] if i is not None and i < len(row) else ""

        k: dict[str, Any] = {"name": get("Kernel Name") or get("Function Name") or "?"}
        stalls: dict[str, float] = {}
        for metric, key in (NCU_METRICS | _OPTIONAL).items():
            if metric not in col:
                continue
            raw = get(metric)
            if key in ("grid", "block"):
                k[key] = raw or None
                continue
            v = _number(raw, units[col[metric]])
            if key.startswith("stall_"):
                if v is not None:
                    stalls[key.removeprefix("stall_")] = v
            else:
                k[key] = int(v) if key in _COUNTS and v is not None else v
        if stalls:  # largest first: the table and a reader want the top reasons
            k["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
        out.append(k)
    return out


def run_ncu(op: str, impl: str, shape: tuple[int, ...], dtype_name: str, variant: str, out_dir: Path,
            ideal_bytes: int, timeout: float = 600, source: bool = False) -> dict[str, Any]:
    """Nsight Compute on one call in a child process; with `source`, also the source page's stall samples by
    instruction and source line (`source`: ncu_source.summarize_source's list)."""
    ncu = shutil.which("ncu")
    if not ncu:
        return {"available": False, "reason": "ncu is not on the PATH"}
    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / "ncu"
    child = ["ncu", op, impl, "x".join(map(str, shape)), dtype_name, variant]
    asked = list(NCU_METRICS) + list(_OPTIONAL)
    dropped: list[str] = []
    log = ""
    rep = Path(f"{base}.ncu-rep")
    while True:
        cmd = ncu_command(ncu, base, child, asked, source)
        try:
            res = run_tool(cmd, timeout=timeout, env=child_env(True))
        except subprocess.TimeoutExpired:
            return {"available": False, "command": " ".join(cmd), "reason": f"ncu took longer than {timeout:.0f} s"}
        log += " ".join(cmd) + "\n\n" + res.stdout + "\n" + res.stderr + "\n"
        (out_dir / "ncu.log").write_text(log)
        failed = res.returncode != 0 or not rep.is_file()
        drop = unknown_metrics(res.stdout + res.stderr, asked) if failed else []
        if not drop:
            break
        dropped += drop
        asked = [m for m in asked if m not in drop]
    if res.returncode != 0 or not rep.is_file():
        tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-4:])
        return {"available": False, "command": " ".join(cmd),
                "reason": f"ncu exited with {res.returncode} (see ncu.log): {tail}"}
    imp = run_tool([ncu, "--import", str(rep), "--csv", "--page", "raw"], timeout=timeout)
    (out_dir / "ncu-raw.csv").write_text(imp.stdout)
    kernels = parse_ncu_csv(imp.stdout)
    if not kernels:
        return {"available": False, "command": " ".join(cmd), "report": rep.name,
                "reason": "ncu profiled no kernel in the range (see ncu.log)"}
    extra: dict[str, Any] = {"metrics_dropped": dropped} if dropped else {}
    if source:
        extra |= _source_page(ncu, rep, out_dir, timeout)
    return summarize_ncu(kernels, ideal_bytes) | {"command": " ".join(cmd), "report": rep.name} | extra


def _source_page(ncu: str, rep: Path, out_dir: Path, timeout: float) -> dict[str, Any]:
    """The report's source page as CSV, by instruction and by source line, summarized (or why not)."""
    from ridgeline.profile.ncu_source import summarize_source

    texts = []
    for what, name in (("sass", "ncu-source-sass.csv"), ("cuda,sass", "ncu-source-lines.csv")):
        res = run_tool([ncu, "--import", str(rep), "--csv", "--page", "source", "--print-source", what],
                       timeout=timeout)
        (out_dir / name).write_text(res.stdout)
        texts.append(res.stdout if res.returncode == 0 else "")
    summary = summarize_source(*texts)
    if not summary:
        return {"source_note": "the source page held no warp samples (ncu.log; `ncu --import "
                               f"{rep.name} --page source` shows it)"}
    return {"source": summary}


def summarize_ncu(kernels: list[dict[str, Any]], ideal_bytes: int | None) -> dict[str, Any]:
    total_bytes = sum((k.get("dram_bytes_read") or 0) + (k.get("dram_bytes_write") or 0) for k in kernels)
    total_time = sum(k.get("time_us") or 0 for k in kernels)
    out: dict[str, Any] = {
        "available": True, "kernels": kernels, "ideal_bytes": ideal_bytes,
        "total": {"dram_bytes": total_bytes, "time_us": total_time},
        "cache_control": "caches flushed before each kernel (ncu default)",
    }
    if ideal_bytes:
        out["dram_vs_ideal"] = total_bytes / ideal_bytes
    return out


