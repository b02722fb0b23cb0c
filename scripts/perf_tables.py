"""Markdown tables for docs/perf from committed run records: ours beside every peer, per shape, regime and variant.

Usage:
  python scripts/perf_tables.py docs/results/h200-bench-rmsnorm-sweep-s12.json [...]     one full table per regime
  python scripts/perf_tables.py --compact REC [REC ...]     one table per record: its first regime in full (ours µs,
      GB/s, % of SOL, each peer's µs, speedup), later regimes as ours µs / best peer µs / speedup columns
  python scripts/perf_tables.py --ops [--regime=R] LABEL=REC[,REC] [...]   several ops side by side, one regime:
      per op MB, ours µs, GB/s, % of SOL, best peer, speedup; a label's records merge, later shapes win
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

from ridgeline.records.reasons import ORDER_VARIANCE


def tables(path: str) -> str:
    d = json.load(open(path))
    copy = d["device"]["copy_gbps"]
    rows: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for m in d["measurements"]:
        rows[((m["regime"], m.get("variant") or "", m.get("dtype", "bf16")), tuple(m["shape"]))][m["impl"]] = m
    # Every peer the run asked for: one that failed its check at every shape still gets its column (its cells say
    # why: _why_missing).
    # Our other variants (e.g. ridgeline-inplace) are not peers.
    ours = {m["impl"] for m in d["measurements"] + d.get("failures", []) if m.get("source") == "ours"}
    peers = sorted({m["impl"] for m in d["measurements"] if m.get("source") == "peer"}
                   | {i for i in d["settings"].get("impls", []) if i != "ridgeline" and i not in ours
                      and not i.startswith("ridgeline")})
    out = [f"Record: `{path}` (run {d['run_id']}, {d['env']['gpu']}, copy bandwidth C = {copy:.0f} GB/s, "
           f"floors {d['device']['floors_us']})", ""]
    for regime, variant, dtype in sorted({k[0] for k in rows}):
        title = f"{regime}, variant {variant}" if variant else regime
        out += [f"**{d['settings']['op']}, {dtype}, {title}** — ours: µs, GB/s, % of C, % of SOL; peers: µs "
                "(best peer in bold); speedup = best peer / ours", ""]
        out.append("| shape | MB moved | ours µs | GB/s | % of C | % SOL | " + " | ".join(peers) + " | speedup |")
        out.append("|---|---:|---:|---:|---:|---:|" + "---:|" * len(peers) + "---:|")
        speedups = []
        for (reg, shape), impls in sorted(rows.items(), key=lambda kv: (kv[0][1][-1], kv[0][1])):
            if reg != (regime, variant, dtype) or "ridgeline" not in impls:
                continue
            ours = impls["ridgeline"]
            present = [impls[p] for p in peers if p in impls]
            best = min(present, key=lambda m: m["median_us"]) if present else None
            cells = []
            for p in peers:
                m = impls.get(p)
                txt = (_why_missing(d, p, shape + ((variant,) if variant else ()), regime) if m is None
                       else f"{m['median_us']:.2f}" + ("†" if m.get("caveat") else ""))
                cells.append(f"**{txt}**" if m is not None and m is best else txt)
            sp = best["median_us"] / ours["median_us"] if best else float("nan")
            speedups.append(sp)
            gbps = ours.get("gbps") or 0.0
            out.append(f"| {'x'.join(map(str, shape))} | {ours['bytes'] / 1e6:.1f} | {ours['median_us']:.2f} | "
                       f"{gbps:.0f} | {100 * gbps / copy:.0f}% | {100 * (ours.get('pct_of_sol') or 0):.0f}% | "
                       + " | ".join(cells) + (f" | {sp:.2f}x |" if best else " | — |"))
        good = [s for s in speedups if s == s]
        if good:
            geo = math.exp(sum(map(math.log, good)) / len(good))
            out += ["", f"Geometric-mean speedup over the best peer: {geo:.2f}x (min {min(good):.2f}x, "
                    f"{sum(s >= 1 for s in good)}/{len(good)} shapes at least as fast)", ""]
            if any(m.get("caveat") for m in d["measurements"]
                   if (m["regime"], m.get("variant") or "") == (regime, variant)):
                out += ["† timed with a caveat, and counted as a peer: right values in another summation order "
                        "(not batch invariant or not deterministic), or values just past the tolerance (the "
                        "record's `caveat` says which).", ""]
    return "\n".join(out)


PEER_NAMES = {"liger": "Liger", "torch-F": "F.rms_norm", "torch-compile": "compile", "torch-eager": "HF eager"}
SHOWN_PEERS = ("liger", "torch-F", "torch-compile")  # HF eager is in every record, 8-15x slower, never the best


def _why_missing(d: dict, impl: str, shape: tuple, regime: str) -> str:
    """A peer's empty cell, by the record's failures: 'failed' / 'OOM' (its timing raised: a capture, memory),
    'wrong' (failed its check on values), 'refuses' (raised on that input: one it does not take), 'n/a' (its
    package is not installed there), 'nondet.' (left out for order variance alone, as records before s17 did with
    nondeterminism), '-' (not run)."""
    dims = [x for x in shape if isinstance(x, int)]
    variant = next((x for x in shape if isinstance(x, str)), "")
    mine = [f for f in d.get("failures", []) if f["impl"] == impl and list(f["shape"]) == dims
            and (f.get("variant") or "") == variant]
    for f in mine:
        if f["stage"] == "time" and f.get("regime") in ("", regime):
            return "OOM" if "out of memory" in str(f.get("reason", "")) else "failed"
    for f in mine:
        if f["stage"] == "check":
            parts = [p.strip() for p in str(f.get("reason", "")).split(";")]
            if all(p.startswith(ORDER_VARIANCE) for p in parts):
                return "nondet."
            if any("out of memory" in p for p in parts):
                return "OOM"
            if parts[0].startswith("unavailable"):
                return "n/a"
            return "refuses" if parts[0].startswith("raised") else "wrong"
    return "-"


def _index(d: dict) -> dict:
    rows: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for m in d["measurements"]:  # a variant (causal, tanh, row) is part of the row's label
        v = m.get("variant") or ""
        rows[(m["regime"], tuple(m["shape"]) + ((v,) if v else ()))][m["impl"]] = m
    return rows


def _best(impls: dict) -> dict | None:
    peers = [m for m in impls.values() if m.get("source") == "peer"]
    return min(peers, key=lambda m: m["median_us"]) if peers else None


def _geo(xs: list[float]) -> str:
    xs = [x for x in xs if x == x]
    if not xs:
        return "no peer"
    geo = math.exp(sum(map(math.log, xs)) / len(xs))
    return f"{geo:.2f}x (min {min(xs):.2f}x, {sum(x >= 1 for x in xs)}/{len(xs)} at least as fast)"


def _shape(s: tuple) -> str:
    dims = [str(x) for x in s if isinstance(x, int)]
    return " ".join(["x".join(dims), *(x for x in s if isinstance(x, str))])


def _order(s: tuple) -> tuple:
    return tuple(str(x).zfill(12) for x in (s[-1], *s))


def compact(path: str) -> str:
    d = json.load(open(path))
    rows = _index(d)
    regimes = [r for r in ("graph-cold", "graph-hot", "cold-eager", "host") if any(k[0] == r for k in rows)]
    first, rest = regimes[0], regimes[1:]
    asked = [i for i in d["settings"].get("impls", []) if not i.startswith("ridgeline") and ":" not in i]
    present = {m["impl"] for m in d["measurements"] if m.get("source") == "peer"}
    others = sorted((present | set(asked)) - set(SHOWN_PEERS) - {"torch-eager"})
    peers = [p for p in (*SHOWN_PEERS, *others) if p in present or p in asked]
    # A peer whose package was not installed at any shape gets no column (the record keeps the failures).
    peers = [p for p in peers if p in present or not all(
        str(f.get("reason", "")).startswith("unavailable") for f in d.get("failures", []) if f["impl"] == p)]
    if not peers and ("torch-eager" in present or "torch-eager" in asked):
        peers = ["torch-eager"]
    head = ["shape", "MB", f"{first} µs", "GB/s", "% SOL"] + [PEER_NAMES.get(p, p) for p in peers] + ["x"]
    for r in rest:
        head += [f"{r} µs", "best peer", "x"]
    out = [f"`{path.split('/')[-1]}` ({d['settings']['op']}, C = {d['device']['copy_gbps']:.0f} GB/s; "
           "µs = median; x = best peer / ours)", "", "| " + " | ".join(head) + " |",
           "|---|" + "---:|" * (len(head) - 1)]
    speedups: dict[str, list[float]] = defaultdict(list)
    for shape in sorted({k[1] for k in rows}, key=_order):
        impls = rows.get((first, shape), {})
        ours = impls.get("ridgeline")
        if ours is None:
            continue
        best = _best(impls)
        sp = best["median_us"] / ours["median_us"] if best else float("nan")
        speedups[first].append(sp)
        cells = [_shape(shape), f"{ours['bytes'] / 1e6:.1f}", f"{ours['median_us']:.2f}",
                 f"{ours.get('gbps') or 0:.0f}" if ours.get("gbps") else "-",
                 f"{100 * (ours.get('pct_of_sol') or 0):.0f}%"]
        for p in peers:
            m = impls.get(p)
            txt = _why_missing(d, p, shape, first) if m is None else f"{m['median_us']:.2f}" + (
                "†" if m.get("caveat") else "")
            cells.append(f"**{txt}**" if m is not None and m is best else txt)
        cells.append(f"{sp:.2f}x" if best else "-")
        for r in rest:
            ri = rows.get((r, shape), {})
            o, b = ri.get("ridgeline"), _best(ri)
            if o is None:
                cells += ["-", "-", "-"]
                continue
            rs = b["median_us"] / o["median_us"] if b else float("nan")
            speedups[r].append(rs)
            cells += [f"{o['median_us']:.2f}", f"{b['median_us']:.2f} {PEER_NAMES.get(b['impl'], b['impl'])}"
                      if b else "-", f"{rs:.2f}x" if b else "-"]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Geomean over the best peer: " + "; ".join(f"{r} {_geo(v)}" for r, v in speedups.items())]
    if any(m.get("caveat") for m in d["measurements"]):
        out += ["", "† timed with a caveat (right values in another summation order, or just past the tolerance: "
                "the record's `caveat` says which). Empty peer cells: wrong (failed its check on values), refuses "
                "(raised on that input), failed (its timing raised), OOM, nondet. (left out for order variance "
                "alone, before s17), - (not run)."]
    return "\n".join(out)


def side_by_side(pairs: list[tuple[str, str]], regime: str | None = None) -> str:
    """LABEL=REC[,REC...] per op: records of one label are merged, a later one's shape replacing an earlier one's."""
    ops = []
    for label, paths in pairs:
        merged: dict[tuple, dict] = {}
        for path in paths.split(","):
            for (reg, shape), impls in _index(json.load(open(path))).items():
                if regime is None or reg == regime:
                    merged[shape] = impls
        ops.append((label, merged, paths))
    head = ["shape"]
    for label, _, _ in ops:
        head += [f"{label} MB", "µs", "GB/s", "% SOL", "best peer µs", "x"]
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    speedups: dict[str, list[float]] = defaultdict(list)
    for shape in sorted({s for _, m, _ in ops for s in m}, key=lambda s: (s[-1], s)):
        cells = [_shape(shape)]
        for label, merged, _ in ops:
            impls = merged.get(shape, {})
            o, b = impls.get("ridgeline"), _best(impls)
            if o is None:
                cells += ["-"] * 6
                continue
            sp = b["median_us"] / o["median_us"] if b else float("nan")
            speedups[label].append(sp)
            cells += [f"{o['bytes'] / 1e6:.1f}", f"{o['median_us']:.2f}", f"{o.get('gbps') or 0:.0f}",
                      f"{100 * (o.get('pct_of_sol') or 0):.0f}%",
                      f"{b['median_us']:.2f} {PEER_NAMES.get(b['impl'], b['impl'])}" if b else "-",
                      f"{sp:.2f}x" if b else "-"]
        out.append("| " + " | ".join(cells) + " |")
    names = ", ".join(f"{label} " + " + ".join(f"`{p.split('/')[-1]}`" for p in paths.split(","))
                      for label, _, paths in ops)
    out += ["", f"Records: {names}. Geomean over the best peer: "
            + "; ".join(f"{k} {_geo(v)}" for k, v in speedups.items())]
    return "\n".join(out)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--compact":
        print("\n\n".join(compact(p) for p in args[1:]))
    elif args and args[0] == "--ops":
        regime = args[1].split("=", 1)[1] if len(args) > 1 and args[1].startswith("--regime=") else None
        print(side_by_side([tuple(a.split("=", 1)) for a in args[1 + (regime is not None):]], regime))
    else:
        print("\n\n".join(tables(p) for p in args))
