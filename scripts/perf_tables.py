"""Markdown tables for docs/perf from committed run records: ours beside every peer, per shape, regime and variant.

Usage: python scripts/perf_tables.py docs/results/h200-bench-rmsnorm-sweep.json [...]
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict


def tables(path: str) -> str:
    d = json.load(open(path))
    copy = d["device"]["copy_gbps"]
    rows: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for m in d["measurements"]:
        rows[((m["regime"], m.get("variant") or "", m.get("dtype", "bf16")), tuple(m["shape"]))][m["impl"]] = m
    # Every peer the run asked for: one that failed its check at every shape still gets its column ("wrong").
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
                txt = "wrong" if m is None else f"{m['median_us']:.2f}" + ("†" if m.get("caveat") else "")
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
                out += ["† right values, not batch invariant: timed, and counted as a peer.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(tables(p) for p in sys.argv[1:]))
