"""Roofline and per-shape bandwidth plots (matplotlib, Agg, no pyplot state), byte-for-byte reproducible.

Determinism: no timestamps in the files (SVG Date and PNG Software metadata dropped), a fixed SVG hash salt so
clip-path ids do not depend on the process, the bundled DejaVu font, and a stable order of everything drawn.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ridgeline.report.data import (
    Group,
    case_key,
    groups,
    impl_order,
    items,
    mapping,
    num,
    shape_of,
    shape_text,
    wrong_checks,
)

RC = {
    "svg.hashsalt": "ridgeline",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "figure.dpi": 100,
    "savefig.dpi": 110,
}
SVG_META = {"Date": None}
PNG_META = {"Software": None}
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]
MARKERS = {"bf16": "o", "fp16": "s", "fp32": "^", "fp8e4m3": "D"}


@dataclass
class Plot:
    name: str  # file stem, e.g. "roofline-graph-cold"
    title: str
    figure: Figure
    rendered: dict[str, bytes] = field(default_factory=dict)  # by format: markdown and HTML share one render


def _pos(v: Any) -> float | None:
    """A positive number a log axis can take (absurd magnitudes from a broken record are dropped)."""
    f = num(v)
    return f if f is not None and 1e-12 < f < 1e12 else None


def _colors(record: dict[str, Any]) -> dict[str, str]:
    return {impl: PALETTE[i % len(PALETTE)] for i, impl in enumerate(impl_order(record))}


def _new_figure(width: float, height: float, bottom: float = 0.1, left: float = 0.09) -> Figure:
    # Fixed margins: a layout engine re-solves on every save and costs more than the drawing.
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left, right=0.98, top=0.93, bottom=bottom)
    FigureCanvasAgg(fig)
    return fig


# --- roofline ----------------------------------------------------------------------------------------------
def roofline(record: dict[str, Any], regime: str) -> Plot | None:
    """Achieved TFLOP/s against arithmetic intensity for every measurement of a regime, with the probed roofs."""
    pts = []
    for m in items(record.get("measurements")):
        if m.get("regime") != regime:
            continue
        b, f, med = _pos(m.get("bytes")), _pos(m.get("flops")), _pos(m.get("median_us"))
        tf = _pos(m.get("tflops"))
        if tf is None and f and med:
            tf = _pos(f / med / 1e6)
        if not b or not f or not tf:
            continue
        pts.append((f / b, tf, m))
    if not pts:
        return None
    dev = mapping(record.get("device"))
    colors, wrong = _colors(record), wrong_checks(record)
    with matplotlib.rc_context(RC):
        fig = _new_figure(7.5, 5.0)
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        peaks = {str(k): p for k, v in sorted(mapping(dev.get("tflops")).items(), key=lambda kv: str(kv[0]))
                 if (p := _pos(v))}
        dram, l2 = _pos(dev.get("copy_gbps")), _pos(dev.get("l2_gbps"))
        top = max([*ys, *peaks.values()]) * 3
        x_lo = min(xs) / 4
        ridges = [v * 1e3 / dram for v in peaks.values()] if dram else []
        x_hi = max([*xs, *ridges]) * 4
        y_lo = min(ys) / 4
        if dram:
            _memory_roof(ax, dram, x_lo, x_hi, top, f"DRAM roof (copy) {dram:,.0f} GB/s", "#333333", "-")
        if l2:
            _memory_roof(ax, l2, x_lo, x_hi, top, f"L2 roof {l2:,.0f} GB/s", "#888888", "--")
        last_label = None
        for i, (name, peak) in enumerate(sorted(peaks.items(), key=lambda kv: kv[1])):
            start = peak * 1e3 / dram if dram else x_lo
            ax.plot([start, x_hi], [peak, peak], color="#555555", lw=1, ls=":" if i % 2 else "-.")
            # Peaks within 25% of each other would print on top of each other: move every other one left.
            crowded = last_label is not None and peak / last_label[0] < 1.25 and last_label[1] == 0
            ax.text(x_hi / (1.1 if not crowded else 12), peak * 1.04, f"{name} {peak:,.0f} TFLOP/s", ha="right",
                    va="bottom", fontsize=7, color="#333333")
            last_label = (peak, 1 if crowded else 0)
        order = {name: i for i, name in enumerate(impl_order(record))}
        pts.sort(key=lambda p: (order.get(str(p[2].get("impl")), 99), p[0], p[1]))
        seen_impl: set[str] = set()
        for x, y, m in pts:
            impl = str(m.get("impl", "?"))
            is_wrong = case_key(m) in wrong
            ax.scatter([x], [y], s=30, marker=MARKERS.get(str(m.get("dtype")), "o"), zorder=3,
                       facecolors="none" if is_wrong else colors.get(impl, "#000000"),
                       edgecolors=colors.get(impl, "#000000"), linewidths=1.2,
                       label=impl if impl not in seen_impl else None)
            seen_impl.add(impl)
        _label_points(ax, pts, colors, math.log10(top) - math.log10(min(ys) / 4))
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, top)
        ax.set_xlabel("arithmetic intensity (FLOP / byte, from the op's ideal bytes and FLOPs)")
        ax.set_ylabel("achieved TFLOP/s")
        note = "" if dram else " (no probed roofs in this record)"
        ax.set_title(f"Roofline, {regime}{note}")
        ax.grid(True, which="major", lw=0.4, alpha=0.5)
        ax.legend(loc="lower right", fontsize=7, title="hollow marker = failed check" if wrong else None,
                  title_fontsize=7, framealpha=0.9)
    return Plot(f"roofline-{_safe(regime)}", f"Roofline, {regime}", fig)


def _memory_roof(ax: Any, gbps: float, x_lo: float, x_hi: float, top: float, label: str, color: str,
                 ls: str) -> None:
    # TFLOP/s = GB/s * FLOP/byte / 1000; stop where the line leaves the plot. Named in the legend.
    x_end = min(x_hi, top * 1e3 / gbps)
    ax.plot([x_lo, x_end], [x_lo * gbps / 1e3, x_end * gbps / 1e3], color=color, lw=1.2, ls=ls, label=label)


MAX_LABELS_PER_COLUMN = 18


def _label_points(ax: Any, pts: list[tuple[float, float, dict[str, Any]]], colors: dict[str, str],
                  decades: float) -> None:
    """Shape labels beside their points, spread apart vertically where points share an intensity."""
    gap = 0.032 * decades  # about one line of 6-pt text on this figure, in decades of y
    columns: dict[int, list[tuple[float, float, dict[str, Any]]]] = {}
    for p in pts:
        columns.setdefault(round(math.log10(p[0]) * 20), []).append(p)
    for col in sorted(columns):
        members_all = columns[col]
        if len(members_all) > MAX_LABELS_PER_COLUMN:
            # A memory-bound sweep puts every point at one intensity: label ours only (the bars show the rest).
            members_all = [p for p in members_all if p[2].get("source") == "ours"][:MAX_LABELS_PER_COLUMN]
        ordered = sorted(members_all, key=lambda p: (p[1], str(p[2].get("impl"))))
        # Alternate sides so each side needs half the room, then push labels up until none overlap.
        for side, members in ((1, ordered[0::2]), (-1, ordered[1::2])):
            last = -math.inf
            for x, y, m in members:
                ly = max(math.log10(y), last + gap)
                last = ly
                ax.annotate(shape_text(shape_of(m)), (x, y), xytext=(x * (1.12 if side > 0 else 1 / 1.12), 10**ly),
                            textcoords="data", fontsize=6, color=colors.get(str(m.get("impl")), "#000000"),
                            ha="left" if side > 0 else "right", va="center",
                            arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "#999999"}
                            if abs(ly - math.log10(y)) > gap / 2 else None)


# --- rate bars ---------------------------------------------------------------------------------------------
def compute_bound(record: dict[str, Any], group: Group) -> bool:
    """True when most of the group's measurements are held by FLOPs, not bytes (FLOPs / the probed peak of their
    unit exceed bytes / the probed copy bandwidth): their plot then speaks TFLOP/s, else GB/s."""
    dev = mapping(record.get("device"))
    copy, peaks = _pos(dev.get("copy_gbps")), mapping(dev.get("tflops"))
    votes = 0
    for m in group.items:
        peak = _pos(peaks.get(str(m.get("compute_unit") or "fp32")))
        flops, nbytes = _pos(m.get("flops")), _pos(m.get("bytes"))
        if peak and flops and copy:
            votes += 1 if flops / (peak * 1e3) > (nbytes or 0) / copy else -1
    return votes > 0


def rate_bars(record: dict[str, Any], group: Group) -> Plot | None:
    """GB/s (memory-bound) or TFLOP/s (compute-bound) per implementation, grouped by shape, for one
    op/dtype/variant/regime, with the probed roof of that ceiling."""
    flops_bound = compute_bound(record, group)
    key = "tflops" if flops_bound else "gbps"
    shapes = group.shapes()
    impls = [i for i in impl_order(record) if any(m.get("impl") == i for m in group.items)]
    vals = {(shape_of(m), m.get("impl")): _pos(m.get(key)) for m in group.items}
    if not shapes or not impls or not any(v for v in vals.values()):
        return None
    colors, wrong = _colors(record), wrong_checks(record)
    wrong_cases = {(k[2], k[1]) for k in wrong if k[0] == group.op and k[3] == group.dtype
                   and k[4] == group.variant}
    dev = mapping(record.get("device"))
    if flops_bound:
        unit = next((str(m.get("compute_unit")) for m in group.items if m.get("compute_unit")), "fp32")
        roof, roof_text = _pos(mapping(dev.get("tflops")).get(unit)), f"{unit} peak {{:,.0f}} TFLOP/s"
        ylabel, what = "TFLOP/s (contract FLOPs / median time)", "Compute rate"
    else:
        roof, roof_text = _pos(dev.get("copy_gbps")), "copy {:,.0f} GB/s"
        ylabel, what = "GB/s (ideal bytes / median time)", "Bandwidth"
    with matplotlib.rc_context(RC):
        fig = _new_figure(max(6.0, 0.9 + 0.28 * len(shapes) * len(impls)), 4.2, bottom=0.2,
                          left=0.7 / max(6.0, 0.9 + 0.28 * len(shapes) * len(impls)))
        ax = fig.add_subplot()
        width = 0.8 / len(impls)
        for j, impl in enumerate(impls):
            xs, hs, hatches = [], [], []
            for i, s in enumerate(shapes):
                v = vals.get((s, impl))
                if v is None:
                    continue
                xs.append(i - 0.4 + width * (j + 0.5))
                hs.append(v)
                hatches.append("////" if (s, impl) in wrong_cases else "")
            bars = ax.bar(xs, hs, width=width * 0.95, color=colors.get(impl, "#000000"), label=impl)
            for bar, hatch in zip(bars, hatches):
                if hatch:
                    bar.set_hatch(hatch)
                    bar.set_facecolor("white")
        if roof:
            ax.axhline(roof, color="#333333", lw=1, ls="--")
            ax.text(len(shapes) - 0.5, roof, roof_text.format(roof), ha="right", va="bottom", fontsize=7)
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels([shape_text(s) for s in shapes], rotation=30, ha="right", fontsize=7)
        ax.set_xlim(-0.6, len(shapes) - 0.4)
        tallest = max([v for v in vals.values() if v] + ([roof] if roof else []))
        ax.set_ylim(0, tallest * 1.3)  # headroom for the legend above the roof line
        ax.set_ylabel(ylabel)
        ax.set_title(f"{what} per shape: {group.title}")
        ax.grid(True, axis="y", lw=0.4, alpha=0.5)
        ax.legend(fontsize=7, ncols=min(4, len(impls)), loc="upper left", title_fontsize=7,
                  title="hatched = failed check" if wrong_cases else None)
    return Plot(f"{key}-{group.slug}", f"{'TFLOP/s' if flops_bound else 'GB/s'} per shape, {group.title}", fig)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def make_plots(record: dict[str, Any]) -> list[Plot]:
    regimes = sorted({str(m.get("regime", "?")) for m in items(record.get("measurements"))})
    plots = [p for p in (roofline(record, r) for r in regimes) if p]
    plots += [p for p in (rate_bars(record, g) for g in groups(record)) if p]
    return plots


# --- output ------------------------------------------------------------------------------------------------
def render(plot: Plot, fmt: str) -> bytes:
    """The plot as PNG or SVG bytes; identical bytes for an identical record."""
    if fmt not in plot.rendered:
        buf = io.BytesIO()
        with matplotlib.rc_context(RC):
            plot.figure.savefig(buf, format=fmt, metadata=SVG_META if fmt == "svg" else PNG_META)
        plot.rendered[fmt] = buf.getvalue()
    return plot.rendered[fmt]


def save(plot: Plot, out_dir: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out_dir / f"{plot.name}.{fmt}"
        path.write_bytes(render(plot, fmt))
        written.append(path)
    return written
