"""A profile's tables in the order every renderer shows them, and the two of Nsight Compute's source page
(profile --source): where a kernel's warps were sampled, by source line and by SASS instruction, each with its
largest stall reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ridgeline.report import tables as T
from ridgeline.report.data import DASH, fmt_int, fmt_pct, mapping, num
from ridgeline.report.tables import Cell, Table, _dicts

CAPTION = ("Share of the kernel's warp samples (every warp's program counter, sampled at a fixed interval; "
           "`selected` is a warp that issued). Warps parked at a barrier all kernel long, such as a "
           "warp-specialized kernel's spare load warps, are sampled too.")


def _kernels(p: dict[str, Any]) -> list[dict[str, Any]]:
    return _dicts(mapping(p.get("ncu")).get("source"))


def _reasons(x: dict[str, Any], samples: float | None) -> Cell:
    parts = []
    for reason, v in mapping(x.get("reasons")).items():
        n = num(v)
        if n is not None and samples:
            parts.append(f"{reason} {fmt_pct(n / samples)}")
    return Cell(", ".join(parts) or DASH)


def _share(x: dict[str, Any]) -> Cell:
    pct = num(x.get("pct"))
    return Cell.number(pct, fmt_pct(pct / 100) if pct is not None else DASH)


def source_lines_table(p: dict[str, Any], top: int = 10) -> Table:
    rows = []
    for k in _kernels(p):
        for x in _dicts(k.get("top_lines"))[:top]:
            where = f"{Path(str(x.get('file', '?'))).name}:{x.get('line', '?')}"
            rows.append([Cell(str(k.get("name", "?"))), Cell(where), Cell(str(x.get("source", ""))[:80]), _share(x),
                         _reasons(x, num(x.get("samples")))])
    return Table("Where warps were sampled, by source line (Nsight Compute source counters)",
                 ["kernel", "line", "source", "samples", "largest reasons (share of the line's samples)"], rows,
                 {3}, CAPTION)


def hot_instructions_table(p: dict[str, Any], top: int = 10) -> Table:
    rows = []
    for k in _kernels(p):
        for x in _dicts(k.get("top_instructions"))[:top]:
            off = num(x.get("offset"))
            rows.append([Cell(str(k.get("name", "?"))), Cell(f"+0x{int(off):x}" if off is not None else DASH),
                         Cell(str(x.get("sass", ""))[:60]), Cell(str(x.get("line", DASH))), _share(x),
                         Cell.number(x.get("executed"), fmt_int(x.get("executed"))),
                         _reasons(x, num(x.get("samples")))])
    return Table("Where warps were sampled, by SASS instruction (Nsight Compute source counters)",
                 ["kernel", "offset", "instruction", "line", "samples", "executed (warp instructions)",
                  "largest reasons"], rows, {4, 5}, CAPTION)


def profile_tables(p: dict[str, Any]) -> list[Table]:
    """Every table of one profile, in the order the CLI, markdown and HTML show them."""
    return [T.compile_table(p), T.sass_table(p), T.loops_table(p), T.ncu_table(p), T.stalls_table(p),
            source_lines_table(p), hot_instructions_table(p), T.kineto_table(p)]
