"""Rich tables for the terminal: the CLI parses and calls the library; this turns results into tables."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.markup import escape
from rich.table import Table

from ridgeline.core.spec import Impl, OpSpec, shape_label
from ridgeline.harness.correctness import CheckResult


def _fmt(v: Any, spec: str = ".3g", suffix: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and v != v:
        return "nan"
    return f"{v:{spec}}{suffix}"


def ops_table(specs: Iterable[OpSpec], impls: dict[str, list[Impl]]) -> Table:
    t = Table(title="ops", show_lines=True)
    for col in ("op", "contract", "shape sets", "implementations"):
        t.add_column(col)
    for spec in specs:
        sets = "\n".join(f"{k} ({len(v)})" for k, v in spec.shape_sets.items())
        lines = []
        for i in impls[spec.name]:
            state = "[green]available[/]" if i.available else f"[red]unavailable[/]: {i.reason}"
            lines.append(f"{i.name} [{i.source}] {state}")
        t.add_row(spec.name, f"{spec.summary}\n[dim]{spec.signature}[/]", sets, "\n".join(lines))
    return t


def check_table(results: list[CheckResult], title: str) -> Table:
    t = Table(title=title)
    for col in ("impl", "case", "output", "max |err|", "worst err/tol", "result"):
        t.add_column(col, justify="right" if col in ("max |err|", "worst err/tol") else "left")
    for r in results:
        outs = r.outputs or [None]
        for j, o in enumerate(outs):
            verdict = "[green]pass[/]" if r.passed else "[red]FAIL[/] " + escape("; ".join(r.reasons))
            if r.notes:  # what the check could not check (a peer refusing a smaller batch): said, not hidden
                verdict += "\n[yellow]note[/]: " + escape("; ".join(r.notes))
            t.add_row(
                r.impl if j == 0 else "", r.label if j == 0 else "", o.name if o else "-",
                _fmt(o.max_abs_err) if o else "-", _fmt(o.worst_ratio, ".2f") if o else "-",
                verdict if j == 0 else "",
            )
    return t


def bench_table(record: dict[str, Any]) -> Table:
    ms = record["measurements"]
    cpu = record["env"].get("device_type") != "cuda"
    title = f"{record['settings']['op']} on {record['env'].get('gpu') or 'CPU'}"
    if cpu:
        title += " — CPU figures: they say nothing about GPU speed"
    t = Table(title=title)
    cols = ["shape", "dtype", "regime", "impl", "us", "GB/s", "TFLOP/s", "% roof", "% SOL", "vs base", "vs best peer",
            "verdict"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("shape", "dtype", "regime", "impl") else "right")
    ms = sorted(ms, key=lambda m: (m["shape"][-1], m["shape"], m["dtype"], m["regime"], m["median_us"]))
    prev = None
    for m in ms:
        key = (tuple(m["shape"]), m["dtype"], m["regime"])
        first = key != prev
        prev = key
        name = f"[bold]{m['impl']}[/]" if m.get("source") == "ours" else m["impl"]
        t.add_row(
            shape_label(m["shape"]) + (f" {m['variant']}" if m.get("variant") else "") if first else "",
            m["dtype"] if first else "", m["regime"] if first else "", name,
            _fmt(m["median_us"], ".2f"), _fmt(m.get("gbps"), ".0f"), _fmt(m.get("tflops"), ".2f"),
            _fmt(_pct(m.get("pct_of_roof")), ".1f"), _fmt(_pct(m.get("pct_of_sol")), ".1f"),
            _fmt(m.get("speedup_vs_baseline"), ".2f", "x"), _fmt(m.get("speedup_vs_best_peer"), ".2f", "x"),
            _verdict(m), end_section=False,
        )
    return t


def _verdict(m: dict[str, Any]) -> str:
    if m.get("suspect"):
        kinds = sorted({str(r).split(":")[0] for r in m["suspect"]})
        return "[red]SUSPECT[/]: " + escape(", ".join(kinds))
    if m.get("caveat"):
        return "[yellow]caveat[/]"
    return "[yellow]note[/]: " + escape("; ".join(map(str, m["check_notes"]))) if m.get("check_notes") else ""


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * v


def result_line(r: dict[str, Any]) -> str:
    """One plain line per finished measurement or failure (for logs and pipes, where no progress bar shows)."""
    case = " ".join(p for p in (shape_label(r["shape"]), r["dtype"], r.get("variant", "")) if p)
    if "median_us" in r:
        rate = f", {r['gbps']:.0f} GB/s" if r.get("gbps") else ""
        sol = f", {100 * r['pct_of_sol']:.1f}% of SOL" if r.get("pct_of_sol") else ""
        return f"measured {r['impl']} {case} {r['regime']}: {r['median_us']:.2f} us{rate}{sol}"
    return f"failed {r['impl']} {case} {r.get('stage', '')} {r.get('regime', '')}: {r['reason'][:200]}"


def failures_table(record: dict[str, Any]) -> Table | None:
    """Failures grouped by (impl, stage, regime, reason): one row per distinct reason, with its cases and count."""
    caught = [{**m, "stage": "guard", "reason": "suspect: " + "; ".join(m["suspect"])}
              for m in record.get("measurements", []) if m.get("suspect")]
    if not record["failures"] and not caught:
        return None
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for f in record["failures"] + caught:
        case = " ".join(p for p in (shape_label(f["shape"]), f["dtype"], f.get("variant", "")) if p)
        key = (f["impl"], f["stage"], f.get("regime", ""), f["reason"][:160])
        groups.setdefault(key, []).append(case)
    t = Table(title="failures (recorded; the sweep went on)")
    for c in ("impl", "cases", "stage", "regime", "reason"):
        t.add_column(c)
    for (impl, stage, regime, reason), cases in groups.items():
        shown = ", ".join(cases[:3]) + (f" … ({len(cases)} cases)" if len(cases) > 3 else "")
        t.add_row(impl, shown, stage, regime, reason)
    return t


def probe_table(p: dict[str, Any]) -> Table:
    t = Table(title=f"{p['name']} — measured ceilings (datasheet for contrast, never the roof)")
    for c in ("ceiling", "measured", "datasheet", "ridge (FLOP/byte)"):
        t.add_column(c, justify="left" if c == "ceiling" else "right")
    sheet = p.get("datasheet") or {}
    t.add_row("DRAM copy (read+write)", _fmt(p.get("copy_gbps"), ".0f", " GB/s"),
              _fmt(sheet.get("dram_gbps"), ".0f", " GB/s"), "")
    t.add_row("DRAM read", _fmt(p.get("read_gbps"), ".0f", " GB/s"), "", "")
    t.add_row("DRAM write", _fmt(p.get("write_gbps"), ".0f", " GB/s"), "", "")
    t.add_row("L2 copy (resident)", _fmt(p.get("l2_gbps"), ".0f", " GB/s"), "", "")
    for unit, v in (p.get("tflops") or {}).items():
        label = {"fp32": "fp32 FMA (CUDA cores)"}.get(unit, f"{unit} matmul (tensor cores)")
        t.add_row(label, _fmt(v, ".1f", " TFLOP/s"), _fmt((sheet.get("tflops") or {}).get(unit), ".0f", " TFLOP/s"),
                  _fmt((p.get("ridge_flop_per_byte") or {}).get(unit), ".1f"))
    for regime, v in (p.get("floors_us") or {}).items():
        t.add_row(f"launch floor, {regime}", _fmt(v, ".2f", " us"), "", "")
    t.add_row("SMs / L2", f"{p.get('sm_count')} / {_fmt((p.get('l2_bytes') or 0) / 2**20, '.0f', ' MiB')}", "", "")
    clocks = p.get("clocks") or {}
    t.add_row("SM clock (now / max)", f"{clocks.get('sm_clock_mhz')} / {clocks.get('sm_clock_max_mhz')} MHz", "", "")
    return t


def runs_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="runs")
    for c in ("run id", "kind", "created", "complete", "gpu", "measurements", "command"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["run_id"], r["kind"], r["created"], "yes" if r["complete"] else "[yellow]partial[/]",
                  r["gpu"] or "CPU", str(r["measurements"]), (r["command"] or "")[:80])
    return t
