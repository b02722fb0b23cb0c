"""The audit's report: a plot of time over speed of light along the audited dim (cliffs marked) and a markdown
table of every point with the launch configuration chosen there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ridgeline.core.spec import shape_label
from ridgeline.records.record import RunRecord
from ridgeline.report.data import as_dict
from ridgeline.report.tables import Cell, Table


def audit_table_md(record: RunRecord | dict[str, Any]) -> str:
    """The audit's table (`audit_points_table`) and its failures, as markdown without a title: the body of
    `audit_markdown` and of `ridgeline report` on an audit."""
    from ridgeline.report.markdown import table_md

    rec = as_dict(record)
    a = rec.get("settings", {}).get("audit", {})
    points: list[dict[str, Any]] = a.get("points", [])
    lines = [f"Run {rec.get('run_id')}; dim {a.get('dim_name')} ({a.get('step_rule')}); cliff = "
             f"{_normalized_by(points)} more than {a.get('cliff_jump')}x a neighbour's. {len(a.get('cliffs', []))} "
             f"cliffs in {len(points)} points.", "", table_md(audit_points_table(rec), heading=None)]
    failures = rec.get("failures", [])
    if failures:
        # A peer that fails a non-value check (batch invariance, determinism) is still timed, with the failure as
        # its caveat (the bench's rule); say which failures cost the point and which only qualify it.
        ms = rec.get("measurements", [])
        timed = {(tuple(m["shape"]), m.get("impl")) for m in ms}
        timed_in = {(tuple(m["shape"]), m.get("impl"), m.get("regime")) for m in ms}
        lines += ["", "Failures:", ""]
        for f in failures:
            key = (tuple(f["shape"]), f.get("impl"))
            if f.get("stage") == "time":  # (failed while timing: not timed in that regime, whatever the others did)
                was_timed = False
            elif f.get("regime"):
                was_timed = (*key, f["regime"]) in timed_in
            else:
                was_timed = key in timed
            how = "timed, with this caveat" if was_timed else "not timed"
            lines.append(f"- {shape_label(f['shape'])} {f.get('stage')} ({how}): {f.get('reason')}")
    return "\n".join(lines) + "\n"


def _normalized_by(points: list[dict[str, Any]]) -> str:
    return "time / SOL" if points and points[0].get("normalized_by") == "sol" else "time per unit of work (x best)"


def audit_points_table(record: RunRecord | dict[str, Any]) -> Table:
    """The audit's points as a report table (markdown and the HTML page's sortable table): shape, regime, time,
    SOL, time over SOL, jump, TFLOP/s, cliff and the launch config."""
    a = as_dict(record).get("settings", {}).get("audit", {})
    points = a.get("points", [])
    rows = []
    for p in points:
        cliff = "bad" if p.get("cliff") else ""
        rows.append([Cell(shape_label(p["shape"]), p["shape"][a["dim"]] if a.get("dim") is not None else None),
                     Cell(str(p["regime"])), Cell.number(p["median_us"], f"{p['median_us']:.2f}"),
                     Cell.number(p.get("sol_us"), f"{p['sol_us']:.2f}" if p.get("sol_us") else "-"),
                     Cell.number(p["ratio"], f"{p['ratio']:.2f}"),
                     Cell.number(p.get("jump", 1.0), f"{p.get('jump', 1.0):.2f}"),
                     Cell.number(p.get("tflops"), f"{p['tflops']:.1f}" if p.get("tflops") else "-"),
                     Cell("cliff" if cliff else "", style=cliff), Cell(str(p.get("config", "")))])
    return Table(f"Audit along {a.get('dim_name')}: {len(a.get('cliffs', []))} cliffs in {len(rows)} points",
                 ["shape", "regime", "median us", "SOL us", _normalized_by(points), "jump", "TFLOP/s", "cliff",
                  "config"], rows, numeric={2, 3, 4, 5, 6})


def audit_markdown(record: RunRecord | dict[str, Any]) -> str:
    rec = as_dict(record)
    a = rec.get("settings", {}).get("audit", {})
    op = rec.get("settings", {}).get("op")
    return f"# audit: {op} / {a.get('impl')} ({a.get('dtype')})\n\n" + audit_table_md(rec)


def audit_plot(record: RunRecord | dict[str, Any], path: Path) -> Path | None:
    """A PNG of the ratio along the dim, one line per (other dims, regime); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rec = as_dict(record)
    a = rec.get("settings", {}).get("audit", {})
    dim = a.get("dim")
    points = a.get("points", [])
    fig, ax = plt.subplots(figsize=(10, 4.5))
    lines: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        rest = [d for i, d in enumerate(p["shape"]) if i != dim] if dim is not None else []
        lines.setdefault(f"{'x'.join(map(str, rest))} {p['regime']}", []).append(p)
    for label, pts in lines.items():
        xs = [p["shape"][dim] if dim is not None else i for i, p in enumerate(pts)]
        ax.plot(xs, [p["ratio"] for p in pts], marker=".", label=label)
        cl = [(x, p["ratio"]) for x, p in zip(xs, pts) if p.get("cliff")]
        if cl:
            ax.scatter(*zip(*cl), color="red", zorder=3, s=30, label=f"cliffs ({label})")
    ax.set_xlabel(str(a.get("dim_name", "point")))
    ax.set_ylabel("time / speed of light" if points and points[0].get("normalized_by") == "sol"
                  else "time per unit of work (x best)")
    if dim is not None and points and min(p["shape"][dim] for p in points) > 0:
        ax.set_xscale("log", base=2)
    ax.set_title(f"audit {rec.get('settings', {}).get('op')} / {a.get('impl')} ({a.get('dtype')})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_audit_report(record: RunRecord, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    a = record.settings.get("audit", {})
    stem = f"audit-{record.settings.get('op')}-{a.get('impl')}".replace("/", "_").replace(":", "_")
    md = out_dir / f"{stem}.md"
    md.write_text(audit_markdown(record))
    out = {"markdown": md}
    png = audit_plot(record, out_dir / f"{stem}.png")
    if png is not None:
        out["plot"] = png
    return out
