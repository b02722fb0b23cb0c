"""A self-contained HTML page: inline CSS and JS, plots as base64 SVG data URIs, nothing fetched from anywhere."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape
from importlib import resources
from typing import Any

from ridgeline.report import tables as T
from ridgeline.report.data import DASH, items, join_limited, regimes, retypeable
from ridgeline.report.markdown import SEVERITY_WORD, title
from ridgeline.report.plots import Plot, render
from ridgeline.report.profile_tables import profile_tables
from ridgeline.report.rules import evaluate, grouped


def _asset(name: str) -> str:
    return resources.files("ridgeline.report").joinpath(name).read_text(encoding="utf-8")


def table_html(table: T.Table, heading: str = "h3", numeric_probe: int | None = None) -> str:
    if not table.rows:
        return ""
    attrs = ' class="sortable"'
    if numeric_probe is not None:
        attrs += f' data-numeric="{numeric_probe}"'
    out = [f"<{heading}>{escape(table.title)}</{heading}>", f"<table{attrs}>", "<thead><tr>"]
    out += [f"<th scope=\"col\">{escape(h)}</th>" for h in table.headers]
    out.append("</tr></thead><tbody>")
    for row in table.rows:
        cells = []
        for i, c in enumerate(row):
            cls = " ".join(x for x in ("num" if i in table.numeric else "", c.style) if x)
            sort = "" if c.sort is None else (repr(float(c.sort)) if isinstance(c.sort, (int, float)) else c.sort)
            attr = f' class="{cls}"' if cls else ""
            attr += f' data-sort="{escape(str(sort), quote=True)}"'
            cells.append(f"<td{attr}>{escape(c.text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    if table.caption:
        out.append(f'<p class="caption">{escape(table.caption)}</p>')
    return "\n".join(out)


def findings_html(record: dict[str, Any]) -> str:
    gs = grouped(evaluate(record))
    if not gs:
        return "<p>No automatic findings.</p>"
    items, explained = [], set()
    for g in gs:
        cases = [f"{w} ({d})" if w and d else (w or d) for w, d in g.cases]
        who = f"<b>{escape(g.impl)}</b>: " if g.impl else ""
        why = "" if g.rule in explained else f'<span class="why">Why: {escape(g.why)}.</span>'
        explained.add(g.rule)
        items.append(f'<li><span class="sev sev-{escape(g.severity)}">{escape(SEVERITY_WORD.get(g.severity, ""))}'
                     f"</span><b>{escape(g.title)}</b> — {who}{escape(join_limited(cases, 6))}. {why}</li>")
    return '<ul class="findings">' + "\n".join(items) + "</ul>"


def profiles_html(record: dict[str, Any]) -> str:
    out = []
    for p in items(record.get("profiles")):
        out.append(f"<h3>Profile: {escape(T.profile_title(p))}</h3>")
        if p.get("command"):
            out.append(f"<pre>{escape(str(p['command']))}</pre>")
        out.append(f'<p class="caption">{escape(T.profile_summary(p))}</p>')
        for t in profile_tables(p):
            out.append(table_html(t, "h4"))
        missing = [f"{x.get('what')}: {x.get('why')}" for x in items(p.get("not_collected"))]
        if missing:
            out.append("<h4>Not collected</h4><ul>" + "".join(f"<li>{escape(m)}</li>" for m in missing) + "</ul>")
        for note in (p.get("notes") if isinstance(p.get("notes"), list) else []):
            out.append(f'<p class="caption">{escape(str(note))}</p>')
    return "\n".join(x for x in out if x)


def plot_html(plot: Plot) -> str:
    data = base64.b64encode(render(plot, "svg")).decode("ascii")
    return (f'<figure><img alt="{escape(plot.title, quote=True)}" src="data:image/svg+xml;base64,{data}">'
            f"<figcaption>{escape(plot.title)}</figcaption></figure>")


def render_html(record: dict[str, Any], plots: Sequence[Plot] = ()) -> str:
    """The whole report as one HTML document that works offline."""
    head = title(record)
    body = [f"<h1>{escape(head)}</h1>",
            f'<p class="sub">run {escape(str(record.get("run_id", "?")))} · started '
            f'{escape(str(record.get("created", "?")))} · finished {escape(str(record.get("finished") or DASH))}'
            "</p>"]
    if not record.get("complete"):
        body.append('<p class="banner"><b>Incomplete run</b>: interrupted or still running; the tables show '
                    "what was recorded.</p>")
    body.append("<h2>Reproduce</h2>")
    body.append(f"<pre>{escape(retypeable(record.get('command')) or DASH)}</pre>")
    body.append("<h2>Findings</h2>" + findings_html(record))
    if record.get("kind") == "audit":  # the audit's own table: every point, its jump, cliff and launch config
        from ridgeline.report.audit import audit_points_table

        body.append("<h2>Audit</h2>" + table_html(audit_points_table(record)))
    body.append("<h2>Setup</h2>")
    body.append(table_html(T.environment_table(record)))
    body.append(table_html(T.regime_table(record)))
    if len(regimes(record)) > 1:
        body.append('<p class="caption">Compare implementations within one regime only; the regimes measure '
                    "different things.</p>")
    body.append("<h2>Results</h2>")
    for _, t in T.measurement_tables(record):
        body.append(table_html(t, numeric_probe=2))
    if plots:
        body.append("<h2>Plots</h2>" + "\n".join(plot_html(p) for p in plots))
    body.append("<h2>Correctness</h2>")
    body.append(table_html(T.check_summary_table(record)) or "<p>No checks recorded.</p>")
    body.append(table_html(T.failed_check_table(record), "h4"))
    body.append(table_html(T.failures_table(record), "h4"))
    prof = profiles_html(record)
    if prof:
        body.append("<h2>Profiles</h2>" + prof)
    body.append(f'<p class="caption">Generated by ridgeline report from run {escape(str(record.get("run_id")))} '
                f"(schema {escape(str(record.get('schema', '?')))}).</p>")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(head)}</title>",
        f"<style>\n{_asset('page.css')}</style>",
        "</head><body>",
        *[b for b in body if b],
        f"<script>\n{_asset('page.js')}</script>",
        "</body></html>",
        "",
    ])
