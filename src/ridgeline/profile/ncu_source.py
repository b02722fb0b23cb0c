"""Nsight Compute's source page: where in a kernel its warps were sampled waiting, by SASS instruction and by
source line, with the stall reasons of each. ncu's SourceCounters section samples every warp's program counter
at a fixed interval; each sample lands on one instruction with the reason the warp did not issue there (or
`selected`: it issued). Summed per instruction, and per source line where the kernel carries line info (Triton's
do), this says which chain waits: a long-scoreboard pile on the branch after an mbarrier try-wait is a consumer
starved of its TMA data, one on an instruction after an `LDL` a spilled register, `wait` on an FFMA chain a
fixed-latency dependency.

Parsed from two CSV exports of one report: `--page source --print-source sass` (every instruction of every
profiled kernel) and `--print-source cuda,sass` (the source lines, each followed by its instructions)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

# ncu's source-page column suffixes, named as the WarpStateStats metrics are (ncu.STALL_REASONS)
_REASONS = {
    "barrier": "barrier", "branch_resolving": "branch_resolving", "dispatch": "dispatch_stall", "drain": "drain",
    "imc": "imc_miss", "lg": "lg_throttle", "long_sb": "long_scoreboard", "math": "math_pipe_throttle",
    "membar": "membar", "mio": "mio_throttle", "misc": "misc", "no_inst": "no_instruction",
    "not_selected": "not_selected", "selected": "selected", "short_sb": "short_scoreboard", "sleep": "sleeping",
    "tex": "tex_throttle", "wait": "wait",
}
ALL_SAMPLES = "Warp Stall Sampling (All Samples)"
NOT_ISSUED = "Warp Stall Sampling (Not-issued Samples)"
EXECUTED = "Instructions Executed"


def _count(text: str) -> float:
    t = (text or "").strip().replace(",", "")
    try:
        return float(t)
    except ValueError:  # "-", "", "n/a"
        return 0.0


def _reason_columns(header: list[str]) -> dict[int, str]:
    """Column index -> reason name, for the all-samples reason columns (`stall_X`, not `stall_X (Not Issued)`)."""
    out = {}
    for i, h in enumerate(header):
        if h.startswith("stall_") and "(" not in h:
            key = h.removeprefix("stall_")
            out[i] = _REASONS.get(key, key)
    return out


def _reasons(row: list[str], cols: dict[int, str]) -> dict[str, float]:
    got = {name: _count(row[i]) for i, name in cols.items() if i < len(row)}
    return {k: v for k, v in sorted(got.items(), key=lambda kv: -kv[1]) if v > 0}


def parse_source_sass(text: str) -> dict[str, list[dict[str, Any]]]:
    """`--print-source sass`: kernel name -> its instructions in address order, each {address, offset (from the
    kernel's first instruction), sass, samples, not_issued, executed, reasons}."""
    out: dict[str, list[dict[str, Any]]] = {}
    kernel, header, cols, first = None, None, {}, 0
    for row in csv.reader(text.splitlines()):
        if not row:
            continue
        if row[0] == "Kernel Name":
            kernel = row[1] if len(row) > 1 else "?"
            out.setdefault(kernel, [])
            header = None
            continue
        if row[0] == "Address":
            header, cols = row, _reason_columns(row)
            idx = {h: i for i, h in enumerate(header)}
            continue
        if kernel is None or header is None or not row[0].startswith("0x"):
            continue
        addr = int(row[0], 16)
        insts = out[kernel]
        if not insts:
            first = addr
        insts.append({
            "address": addr, "offset": addr - first, "sass": row[1].strip() if len(row) > 1 else "",
            "samples": _count(row[idx[ALL_SAMPLES]]) if ALL_SAMPLES in idx else 0.0,
            "not_issued": _count(row[idx[NOT_ISSUED]]) if NOT_ISSUED in idx else 0.0,
            "executed": _count(row[idx[EXECUTED]]) if EXECUTED in idx else 0.0,
            "reasons": _reasons(row, cols),
        })
    return out


def parse_source_lines(text: str) -> dict[str, list[dict[str, Any]]]:
    """`--print-source cuda,sass`: function name -> its source lines, each {file, line, source, samples,
    not_issued, reasons, addresses (its instructions)}."""
    out: dict[str, list[dict[str, Any]]] = {}
    path = function = None
    idx: dict[str, int] = {}
    cols: dict[int, str] = {}
    line: dict[str, Any] | None = None
    for row in csv.reader(text.splitlines()):
        if not row:
            continue
        head = row[0]
        if head == "File Path":
            path, line = (row[1] if len(row) > 1 else "?"), None
            continue
        if head == "Function Name":
            function = row[1] if len(row) > 1 else "?"
            out.setdefault(function, [])
            continue
        if head == "Line No":
            # the header names "Source" twice (the line's text, then the instruction's); the counts come after
            idx = {h: i for i, h in reversed(list(enumerate(row)))}
            cols = _reason_columns(row)
            continue
        if function is None or ALL_SAMPLES not in idx:
            continue
        if head.strip():  # a source line
            line = {"file": path, "line": int(_count(head)), "source": row[1].strip() if len(row) > 1 else "",
                    "samples": _count(row[idx[ALL_SAMPLES]]), "not_issued": _count(row[idx.get(NOT_ISSUED, 0)]),
                    "reasons": _reasons(row, cols), "addresses": []}
            out[function].append(line)
        elif line is not None and len(row) > 2 and row[2].startswith("0x"):
            line["addresses"].append(int(row[2], 16))
    return out


def _top(items: list[dict[str, Any]], total: float, n: int) -> list[dict[str, Any]]:
    ranked = sorted((x for x in items if x["samples"] > 0), key=lambda x: -x["samples"])[:n]
    return [x | {"pct": 100 * x["samples"] / total, "reasons": dict(list(x["reasons"].items())[:3])} for x in ranked]


def summarize_source(sass_text: str, lines_text: str = "", top: int = 12) -> list[dict[str, Any]]:
    """Per kernel with samples, largest first: its sample total, samples by reason, and the `top` instructions and
    source lines by samples (each with its share, its three largest reasons; an instruction with its source line
    where the line page maps it)."""
    kernels = parse_source_sass(sass_text)
    lines = parse_source_lines(lines_text) if lines_text else {}
    out = []
    for name, insts in kernels.items():
        total = sum(x["samples"] for x in insts)
        if total <= 0:
            continue
        by_reason: dict[str, float] = {}
        for x in insts:
            for r, v in x["reasons"].items():
                by_reason[r] = by_reason.get(r, 0.0) + v
        src = lines.get(name, [])
        where = {a: (Path(str(ln["file"])).name, ln["line"]) for ln in src for a in ln["addresses"]}
        hot = [{k: v for k, v in x.items() if k != "address"}
               | ({"line": f"{where[x['address']][0]}:{where[x['address']][1]}"} if x["address"] in where else {})
               for x in _top(insts, total, top)]
        hot_lines = [{k: v for k, v in x.items() if k != "addresses"} | {"instructions": len(x["addresses"])}
                     for x in _top(src, total, top)]
        out.append({"name": name, "samples": total, "not_issued": sum(x["not_issued"] for x in insts),
                    "instructions": len(insts),
                    "by_reason": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
                    "top_instructions": hot, "top_lines": hot_lines})
    return sorted(out, key=lambda k: -k["samples"])
