"""Write a run's report to a directory: report.md (+ plots/*.png, *.svg) and/or a self-contained report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ridgeline.records.record import RunRecord
from ridgeline.report.data import as_dict
from ridgeline.report.html import render_html
from ridgeline.report.markdown import render_markdown
from ridgeline.report.plots import make_plots, save

FORMATS = ("md", "html", "all")


def write_report(record: RunRecord | dict[str, Any], out_dir: Path | str, fmt: str = "all") -> list[Path]:
    """Render the report of one run into `out_dir`; returns the files written. Same record -> same bytes."""
    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    rec = as_dict(record)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = make_plots(rec)
    written: list[Path] = []
    if fmt in ("md", "all"):
        links = []
        for p in plots:
            written += save(p, out / "plots")
            links.append((p.title, f"plots/{p.name}.png"))
        if rec.get("kind") == "audit":  # time over SOL along the audited dim, cliffs marked
            from ridgeline.report.audit import audit_plot

            png = audit_plot(rec, out / "plots" / "audit.png")
            if png is not None:
                written.append(png)
                links.append(("audit: time over speed of light", "plots/audit.png"))
        md = out / "report.md"
        md.write_text(render_markdown(rec, links), encoding="utf-8")
        written.append(md)
    if fmt in ("html", "all"):
        page = out / "report.html"
        page.write_text(render_html(rec, plots), encoding="utf-8")
        written.append(page)
    return written
