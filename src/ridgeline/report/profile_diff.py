"""Two profiles side by side (`ridgeline compare A.json B.json` where both are `ridgeline profile --json` files):
the step after "profile before and after". The main kernel of each (the one Nsight Compute timed longest, else the
first compiled one) is set against the other's, metric by metric: time, DRAM traffic, pipes, occupancy, registers,
the K loop's length, the warp-stall reasons that changed most and, where both ran with --source, the source lines
whose share of the warp samples moved most. A profile is one call under ncu with caches
flushed, so its time is a hint for where to look, not a benchmark: `bench` and `compare` of runs decide speed."""

from __future__ import annotations

from typing import Any

from ridgeline.profile.run import PROFILE_SCHEMA
from ridgeline.report.data import mapping, num
from ridgeline.report.tables import DASH, Cell, Table, _dicts, profile_title

# (key in the ncu kernel dict, label, how to show it): "ratio" rows get NEW/BASE, "points" rows a difference
_NCU_ROWS = (
    ("time_us", "kernel time under ncu (µs)", "ratio"),
    ("dram_bytes_read", "DRAM read (MB)", "ratio"),
    ("dram_bytes_write", "DRAM write (MB)", "ratio"),
    ("dram_pct", "DRAM % of peak", "points"),
    ("sm_pct", "SM % of peak", "points"),
    ("tensor_pct", "tensor pipe busy %", "points"),
    ("occupancy_pct", "achieved occupancy %", "points"),
    ("l2_hit_pct", "L2 hit %", "points"),
    ("issue_active_pct", "issue slots busy %", "points"),
    ("cycles_per_issue", "cycles per issue per warp", "ratio"),
    ("wgmma_insts", "wgmma instructions", "ratio"),
)
_COMPILE_ROWS = (
    ("registers", "registers a thread", "ratio"),
    ("spill_stores_bytes", "spill stores (B)", "ratio"),
    ("shared_bytes", "shared memory (B)", "ratio"),
)

_COUNT_KEYS = {"wgmma_insts", "registers", "spill_stores_bytes", "shared_bytes", "loop"}


def is_profile(data: Any) -> bool:
    return isinstance(data, dict) and data.get("schema") == PROFILE_SCHEMA


def main_kernels(p: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The profile's main kernel: its ncu row (the longest) and its compile facts (same name, else the first)."""
    ncu = _dicts(mapping(p.get("ncu")).get("kernels"))
    timed = max(ncu, key=lambda k: num(k.get("time_us")) or 0.0, default={})
    compiled = _dicts(p.get("kernels"))
    name = timed.get("name")
    facts = next((k for k in compiled if name and k.get("name") and str(k["name"]) in str(name)), None)
    return timed, facts or (compiled[0] if compiled else {})


def _loop_instructions(facts: dict[str, Any]) -> float | None:
    # the longest loop body: the K loop of a GEMM or attention kernel
    loops = _dicts(mapping(facts.get("sass")).get("loops"))
    return max((num(lp.get("instructions")) or 0.0 for lp in loops), default=None) or None


def _fmt(key: str, v: float | None) -> str:
    if v is None:
        return DASH
    if key.startswith("dram_bytes"):
        return f"{v / 1e6:,.1f}"
    if key in _COUNT_KEYS or abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.2f}"


def _row(label: str, key: str, base: float | None, new: float | None, how: str) -> list[Cell]:
    if base is None or new is None:
        change = DASH
    elif how == "points":
        change = f"{new - base:+.1f} points"
    else:
        change = f"{new / base:.3f}x" if base else DASH
    return [Cell(label), Cell.number(base, _fmt(key, base)), Cell.number(new, _fmt(key, new)), Cell(change)]


def _stall_reasons(sb: dict[str, Any], sn: dict[str, Any], top: int) -> list[str]:
    # the reasons largest in either profile (each largest first), ordered by how much they moved
    keys = list(dict.fromkeys(list(sb)[:top] + list(sn)[:top]))
    return sorted(keys, key=lambda r: -abs((num(sn.get(r)) or 0.0) - (num(sb.get(r)) or 0.0)))


def _source_lines(p: dict[str, Any], kernel: Any) -> dict[tuple[str, str], dict[str, Any]]:
    # the main kernel's hottest lines (profile --source), keyed by file name and text: line numbers move with edits
    kernels = _dicts(mapping(p.get("ncu")).get("source"))
    k = next((k for k in kernels if kernel and k.get("name") == kernel), kernels[0] if kernels else {})
    return {(str(x.get("file", "?")).rsplit("/", 1)[-1], str(x.get("source", ""))): x
            for x in _dicts(k.get("top_lines"))}


def _line_rows(base: dict[str, Any], new: dict[str, Any], bname: Any, nname: Any, top: int) -> list[list[Cell]]:
    lb, ln = _source_lines(base, bname), _source_lines(new, nname)
    if not lb or not ln:
        return []
    keys = list(dict.fromkeys(list(lb)[:top] + list(ln)[:top]))
    keys.sort(key=lambda k: -abs((num(ln.get(k, {}).get("pct")) or 0.0) - (num(lb.get(k, {}).get("pct")) or 0.0)))
    rows = []
    for k in keys:
        where = ln.get(k) or lb[k]
        label = f"samples at {k[0]}:{where.get('line', '?')} {k[1][:50]} (%)"
        b, n = num(lb.get(k, {}).get("pct")), num(ln.get(k, {}).get("pct"))
        rows.append(_row(label, "pct", b or 0.0, n or 0.0, "points"))
    return rows


def profile_diff_table(base: dict[str, Any], new: dict[str, Any], top_stalls: int = 6) -> Table:
    """One row per metric of the two main kernels: BASE, NEW, and the change."""
    bn, bf = main_kernels(base)
    nn, nf = main_kernels(new)
    rows = [_row(label, key, num(bn.get(key)), num(nn.get(key)), how) for key, label, how in _NCU_ROWS
            if bn.get(key) is not None or nn.get(key) is not None]
    rows += [_row(label, key, num(bf.get(key)), num(nf.get(key)), how) for key, label, how in _COMPILE_ROWS
             if bf.get(key) is not None or nf.get(key) is not None]
    lb, ln = _loop_instructions(bf), _loop_instructions(nf)
    if lb is not None or ln is not None:
        rows.append(_row("instructions in the longest loop", "loop", lb, ln, "ratio"))
    sb, sn = mapping(bn.get("stalls")), mapping(nn.get("stalls"))
    for r in _stall_reasons(sb, sn, top_stalls):
        b, n = num(sb.get(r)), num(sn.get(r))
        rows.append(_row(f"stall: {r} (cycles per issue)", r, b, n, "ratio" if b else "points"))
    rows += _line_rows(base, new, bn.get("name"), nn.get("name"), top_stalls)
    title = f"{profile_title(new)} (NEW) against {profile_title(base)} (BASE)"
    names = f"main kernels: {bn.get('name') or bf.get('name') or '?'} / {nn.get('name') or nf.get('name') or '?'}"
    cap = (f"{names}. ncu times one call with caches flushed: a hint for where time went, not a benchmark "
           "(bench and compare runs for that).")
    return Table(title, ["metric", "BASE", "NEW", "change"], rows, {1, 2}, cap)

