"""Markdown report and plots of a `ridgeline comm` record: busbw against the link, latency per size.

    python -m ridgeline.comm.report RUN.json OUT_DIR      # writes OUT_DIR/comm.md, comm-busbw.png, comm-latency.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ridgeline.comm.link import note_for


def _size_text(b: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def _f(v: Any, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _g(v: Any) -> str:
    """Bandwidths span 1e-6 (8 B over gloo) to 1e3 GB/s: four significant digits."""
    return "-" if v is None else f"{v:.4g}"


def series_of(d: dict[str, Any]) -> dict[tuple, list[dict[str, Any]]]:
    out: dict[tuple, list[dict[str, Any]]] = {}
    for m in d.get("measurements", []):
        out.setdefault((m["op"], m["impl"], m["dtype"], m.get("variant", ""), m["regime"]), []).append(m)
    for ms in out.values():
        ms.sort(key=lambda m: m["size"])
    return out


def markdown(d: dict[str, Any], plots: list[str]) -> str:
    s, env, link = d["settings"], d["env"], d["device"].get("link", {})
    n = s["world_size"]
    lines = [f"# ridgeline comm: {n} rank{'s' if n > 1 else ''}, {s['backend']}", ""]
    lines += [f"- command: `{d['command']}`",
              f"- GPU: {env.get('gpu') or 'none (CPU)'}; driver {env.get('driver')}; CUDA {env.get('cuda')}; "
              f"torch {env.get('torch')}; triton {env.get('triton')}",
              f"- ridgeline {env.get('ridgeline')} at {env.get('git_sha')}{' (dirty)' if env.get('git_dirty') else ''}",
              f"- ranks: {', '.join(r.get('gpu') or r['device'] for r in d['device'].get('ranks', [])) or '?'}",
              f"- timing: {s['timing']}",
              f"- link: {_f(link.get('gbps'), 0) + ' GB/s per direction' if link.get('gbps') else 'no figure'} "
              f"({link.get('source')})",
              f"- multicast off: {env.get('no_multicast')}",
              f"- run {d['run_id']}, {d['created']} .. {d.get('finished')}, complete: {d.get('complete')}", ""]
    note = note_for(n)
    if note:
        lines += [f"Note: {note}.", ""]
    lines += ["algbw = bytes / time; busbw = algbw x factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, "
              "all_to_all (n-1)/n; broadcast, sendrecv 1). Every size is verified before and after timing "
              "(exact integer inputs; #wrong counts elements that differ).", ""]
    for p in plots:
        lines += [f"![{p}]({p})", ""]
    for (op, impl, dt, variant, regime), ms in series_of(d).items():
        lines += [f"## {op} / {impl} / {dt} / {variant} / {regime}", "",
                  "| size | count | median us | p99 us | algbw GB/s | busbw GB/s | % of link | #wrong |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m in ms:
            lines.append(f"| {_size_text(m['size'])} | {m['count']} | {_f(m['median_us'])} | {_f(m['p99_us'])} | "
                         f"{_g(m['algbw_gbps'])} | {_g(m['busbw_gbps'])} | {_f(m.get('pct_of_link'), 1)} | "
                         f"{m['wrong']} |")
        lines.append("")
    if d.get("failures"):
        lines += ["## Failures", "", "| op | impl | dtype | placement | mode | size | stage | #wrong | reason |",
                  "|---|---|---|---|---|---:|---|---:|---|"]
        for f in d["failures"]:
            size = _size_text(f["size"]) if isinstance(f.get("size"), int) else "-"
            lines.append(f"| {f['op']} | {f['impl']} | {f['dtype']} | {f.get('variant', '')} | {f.get('regime', '')} "
                         f"| {size} | {f.get('stage')} | {f.get('wrong') if f.get('wrong') is not None else '-'} | "
                         f"{str(f.get('reason')).replace('|', '/')} |")
        lines.append("")
    skipped = d.get("skipped", [])
    if skipped:
        lines += ["## Not run", ""]
        for k in skipped:
            where = _size_text(k["size"]) if k.get("size") else "all sizes"
            lines.append(f"- {k['op']} / {k['impl']} / {k['dtype']} / {k['variant']} / {k['regime']} ({where}): "
                         f"{k['reason']}")
        lines.append("")
    return "\n".join(lines)


def plot(d: dict[str, Any], out_dir: Path) -> list[str]:
    """comm-busbw.png (busbw per op, or algbw at world size 1, with the link as a line) and comm-latency.png."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = series_of(d)
    if not series:
        return []
    n = d["settings"]["world_size"]
    link = d["device"].get("link", {})
    ops = list(dict.fromkeys(k[0] for k in series))
    names = []
    for metric, ylabel, stem in (("busbw_gbps" if n > 1 else "algbw_gbps",
                                  "busbw GB/s" if n > 1 else "algbw GB/s (world size 1)", "comm-busbw"),
                                 ("median_us", "median time per call, us", "comm-latency")):
        cols = min(3, len(ops))
        rows = -(-len(ops) // cols)
        fig = Figure(figsize=(4.6 * cols, 3.4 * rows))
        FigureCanvasAgg(fig)
        for i, op in enumerate(ops):
            ax = fig.add_subplot(rows, cols, i + 1)
            for key, ms in series.items():
                if key[0] != op:
                    continue
                xs = [m["size"] for m in ms if m.get(metric)]
                ys = [m[metric] for m in ms if m.get(metric)]
                if xs:
                    ax.plot(xs, ys, marker="o", markersize=3, label="/".join(key[1:]))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            if metric == "busbw_gbps" and link.get("gbps"):
                ax.axhline(link["gbps"], color="k", linestyle="--", linewidth=1,
                           label=f"link {link['gbps']:.0f} GB/s")
            ax.set_title(op)
            ax.set_xlabel("bytes")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
        if metric != "median_us" and not link.get("gbps"):
            fig.suptitle(f"no link figure: {link.get('source', '')}"[:120], fontsize=8)
        fig.tight_layout()
        name = f"{stem}.png"
        fig.savefig(out_dir / name, metadata={"Software": None})
        names.append(name)
    return names


def write_report(d: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = plot(d, out_dir)
    path = out_dir / "comm.md"
    path.write_text(markdown(d, plots) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - thin entry point
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m ridgeline.comm.report RUN.json OUT_DIR", file=sys.stderr)
        return 2
    print(write_report(json.loads(Path(args[0]).read_text()), Path(args[1])))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
