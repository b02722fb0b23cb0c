"""Issue-ready markdown: environment, the command to reproduce, regimes, per-shape tables, correctness, notes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ridgeline.report import tables as T
from ridgeline.report.data import DASH, dig, items, join_limited, regimes, retypeable
from ridgeline.report.rules import evaluate, grouped

SEVERITY_WORD = {"bad": "problem", "warn": "warning", "info": "note", "good": "good"}


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table_md(table: T.Table, heading: str | None = "###") -> str:
    if not table.rows:
        return ""
    lines = [f"{heading} {table.title}", ""] if heading else []
    lines.append("| " + " | ".join(_cell(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(table.headers))) + "|")
    for row in table.rows:
        cells = []
        for c in row:
            t = _cell(c.text)
            if c.style in ("best", "bad") and t and t != DASH:
                t = f"**{t}**"
            elif c.style == "struck" and t and t != DASH:
                t = f"~~{t}~~"
            cells.append(t)
        lines.append("| " + " | ".join(cells) + " |")
    if table.caption:
        lines += ["", f"<sub>{_cell(table.caption)}</sub>"]
    return "\n".join(lines) + "\n"


def title(record: dict[str, Any]) -> str:
    ops = sorted({str(m.get("op", "?")) for m in items(record.get("measurements"))}) or [
        str(dig(record, "settings", "op") or "?")]
    gpu = dig(record, "env", "gpu") or dig(record, "env", "device_type") or "unknown device"
    return f"ridgeline {record.get('kind', 'run')}: {', '.join(ops)} on {gpu}"


def findings_md(record: dict[str, Any]) -> str:
    groups = grouped(evaluate(record))
    if not groups:
        return "No automatic findings.\n"
    lines, explained = [], set()
    for g in groups:
        who = f"{g.impl}: " if g.impl else ""
        cases = [f"{w} ({d})" if w and d else (w or d) for w, d in g.cases]
        why = "" if g.rule in explained else f" _Why: {g.why}._"  # once per rule, not once per implementation
        explained.add(g.rule)
        lines.append(f"- **{g.title}** ({SEVERITY_WORD.get(g.severity, g.severity)}) — {who}"
                     f"{join_limited(cases, 6)}.{why}")
    return "\n".join(lines) + "\n"


def profiles_md(record: dict[str, Any]) -> str:
    out = []
    for p in items(record.get("profiles")):
        out.append(f"### Profile: {T.profile_title(p)}\n")
        if p.get("command"):
            out.append(f"`{p['command']}`\n")
        out.append(_cell(T.profile_summary(p)) + "\n")
        for t in (T.compile_table(p), T.sass_table(p), T.loops_table(p), T.ncu_table(p), T.stalls_table(p),
                  T.kineto_table(p)):
            md = table_md(t, "####")
            if md:
                out.append(md)
        missing = [f"{x.get('what')}: {x.get('why')}" for x in items(p.get("not_collected"))]
        if missing:
            out.append("Not collected:\n" + "\n".join(f"- {_cell(m)}" for m in missing) + "\n")
        for note in (p.get("notes") if isinstance(p.get("notes"), list) else []):
            out.append(f"> {note}\n")
    return "\n".join(out)


def render_markdown(record: dict[str, Any], plots: Sequence[tuple[str, str]] = ()) -> str:
    """The report as markdown; `plots` are (title, relative path) pairs to link as images."""
    parts = [f"## {title(record)}\n"]
    if not record.get("complete"):
        parts.append(f"> **Incomplete run**: stopped at its {record['stopped']}; the tables show what was recorded.\n"
                     if record.get("stopped") else
                     "> **Incomplete run**: interrupted or still running; the tables show what was recorded.\n")
    parts.append("### Reproduce\n\n```sh\n" + (retypeable(record.get("command")) or DASH) + "\n```\n")
    parts.append("### Findings\n\n" + findings_md(record))
    if record.get("kind") == "audit":  # the audit's own table: every point, its jump, cliff and launch config
        from ridgeline.report.audit import audit_table_md

        parts.append("### Audit\n\n" + audit_table_md(record))
    parts.append(table_md(T.environment_table(record)))
    parts.append(table_md(T.regime_table(record)))
    if len(regimes(record)) > 1:
        parts.append("Compare implementations within one regime only; the regimes measure different things.\n")
    for _, t in T.measurement_tables(record):
        parts.append(table_md(t, "### Results:"))
    corr = table_md(T.check_summary_table(record))
    if corr:
        parts.append(corr)
    parts.append(table_md(T.failed_check_table(record), "####"))
    parts.append(table_md(T.failures_table(record), "####"))
    prof = profiles_md(record)
    if prof:
        parts.append(prof)
    if plots:
        parts.append("### Plots\n\n" + "\n".join(f"![{t}]({path})" for t, path in plots) + "\n")
    parts.append(f"<sub>Generated by `ridgeline report` from run {record.get('run_id', '?')} "
                 f"(schema {record.get('schema', '?')}).</sub>\n")
    return "\n".join(p for p in parts if p)
