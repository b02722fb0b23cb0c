"""Nsight Compute's source page (`ridgeline profile --source`): parsing the two CSV exports (trimmed from a real
capture: the FP8 block-scaled Gluon GEMM at 4096^3 on an H100, ncu 2025.3.1), the summary, the stand-in run and
the tables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ridgeline.profile as P
from ridgeline.profile.ncu_source import parse_source_lines, parse_source_sass, summarize_source
from ridgeline.report.profile_tables import hot_instructions_table, profile_tables, source_lines_table

DATA = Path(__file__).resolve().parents[1] / "data"
SASS = (DATA / "ncu_source_sass.csv").read_text()  # --page source --print-source sass
LINES = (DATA / "ncu_source_lines.csv").read_text()  # --page source --print-source cuda,sass


def test_parse_the_instruction_page():
    (name, insts), = parse_source_sass(SASS).items()
    assert name == "_scaled_mm_ws_kernel" and len(insts) == 33
    assert insts[0]["offset"] == 0 and insts[0]["sass"] == "LDC R1, c[0x0][0x28]"
    assert all(b["offset"] > a["offset"] for a, b in zip(insts, insts[1:]))
    # the ready-barrier wait of an MMA warpgroup: a branch on the try-wait's predicate, long scoreboard
    (ready,) = [x for x in insts if x["offset"] == 0x1980]
    assert ready["sass"].startswith("@!P1") and ready["samples"] == 792 and ready["executed"] == 65536
    assert list(ready["reasons"])[0] == "long_scoreboard" and ready["reasons"]["long_scoreboard"] == 776
    assert all(" (Not Issued)" not in r for x in insts for r in x["reasons"])


def test_parse_the_line_page():
    lines = parse_source_lines(LINES)["_scaled_mm_ws_kernel"]
    files = {Path(ln["file"]).name for ln in lines}
    assert files == {"standard.py", "kernel_ws.py"}  # Triton's library lines and the kernel's own
    (wait,) = [ln for ln in lines if ln["line"] == 271]
    assert wait["source"] == "mbarrier.wait(ready.index(s), (count // STAGES) & 1)"
    assert wait["samples"] == 1411 and wait["reasons"]["long_scoreboard"] == 882
    assert 0x7FBE677E3A80 in wait["addresses"]  # its instructions follow it


def test_summary_ranks_lines_and_instructions():
    (k,) = summarize_source(SASS, LINES, top=4)
    assert k["name"] == "_scaled_mm_ws_kernel" and k["samples"] == 8912 and k["not_issued"] == 6335
    assert list(k["by_reason"])[:2] == ["barrier", "long_scoreboard"]
    top = k["top_instructions"]
    assert len(top) == 4 and [x["samples"] for x in top] == sorted((x["samples"] for x in top), reverse=True)
    assert top[0]["sass"] == "NOP" and top[0]["pct"] == pytest.approx(100 * 2048 / 8912)
    assert top[0]["line"] == "kernel_ws.py:312" and "address" not in top[0]
    assert [x["line"] for x in k["top_lines"]] == [312, 276, 271, 283]
    assert all(len(x["reasons"]) <= 3 for x in top + k["top_lines"])
    # without the line page: instructions alone, no line names
    (bare,) = summarize_source(SASS)
    assert bare["top_lines"] == [] and "line" not in bare["top_instructions"][0]
    assert summarize_source("") == [] and summarize_source("==PROF== nothing\n") == []


FAKE_NCU = """#!/bin/sh
# Stands in for Nsight Compute: each --import page prints its captured CSV; a profiling run writes a report.
case "$*" in
  "--import "*"--print-source cuda,sass"*) cat "$FAKE_LINES"; exit 0 ;;
  "--import "*"--print-source sass"*) cat "$FAKE_SASS"; exit 0 ;;
  "--import "*) cat "$FAKE_RAW"; exit 0 ;;
esac
echo "$*" > "$FAKE_ARGS"
prev=""; for a in "$@"; do [ "$prev" = "--export" ] && : > "$a.ncu-rep"; prev="$a"; done
"""


def _stand_in(tmp_path: Path, monkeypatch, lines: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ncu").write_text(FAKE_NCU)
    (bin_dir / "ncu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    for name, path in (("FAKE_RAW", DATA / "ncu_raw.csv"), ("FAKE_SASS", DATA / "ncu_source_sass.csv"),
                       ("FAKE_LINES", lines), ("FAKE_ARGS", tmp_path / "args")):
        monkeypatch.setenv(name, str(path))


def test_run_ncu_collects_the_source_page(tmp_path, monkeypatch):
    _stand_in(tmp_path, monkeypatch, DATA / "ncu_source_lines.csv")
    res = P.run_ncu("rmsnorm", "ridgeline", (64, 64), "bf16", "", tmp_path / "o", ideal_bytes=1, source=True)
    assert res["available"] and res["source"][0]["name"] == "_scaled_mm_ws_kernel"
    assert "--section SourceCounters --import-source yes" in (tmp_path / "args").read_text()
    assert (tmp_path / "o" / "ncu-source-sass.csv").read_text() == SASS
    assert (tmp_path / "o" / "ncu-source-lines.csv").is_file()
    # without --source none of it: no section, no pages
    res = P.run_ncu("rmsnorm", "ridgeline", (64, 64), "bf16", "", tmp_path / "p", ideal_bytes=1)
    assert "source" not in res and "SourceCounters" not in (tmp_path / "args").read_text()
    assert not (tmp_path / "p" / "ncu-source-sass.csv").exists()


def test_an_empty_source_page_says_why(tmp_path, monkeypatch):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _stand_in(tmp_path, monkeypatch, empty)
    monkeypatch.setenv("FAKE_SASS", str(empty))
    res = P.run_ncu("rmsnorm", "ridgeline", (64, 64), "bf16", "", tmp_path / "o", ideal_bytes=1, source=True)
    assert res["available"] and "source" not in res and "no warp samples" in res["source_note"]


def test_source_tables():
    prof = {"ncu": {"available": True, "kernels": [], "source": summarize_source(SASS, LINES, top=5)}}
    lines = source_lines_table(prof, top=3)
    assert len(lines.rows) == 3
    kernel, where, source, share, reasons = (c.text for c in lines.rows[2])
    assert where == "kernel_ws.py:271" and source.startswith("mbarrier.wait(ready")
    assert share == "16%" and reasons.startswith("long_scoreboard 63%, barrier 22%")
    insts = hot_instructions_table(prof, top=5)
    assert [r[1].text for r in insts.rows][:2] == ["+0x3660", "+0x36f0"]
    assert insts.rows[0][3].text == "kernel_ws.py:312" and insts.rows[0][5].text == "264"
    assert source_lines_table({}).rows == [] and hot_instructions_table({"ncu": {}}).rows == []
    # every renderer shows them after the stall breakdown
    titles = [t.title for t in profile_tables(prof) if t.rows]
    assert titles == [lines.title, insts.title]


def test_source_implies_ncu_and_says_why_not_here(tmp_path):
    """On a machine without a GPU --source is recorded in the command and refused with the reason, as --ncu is."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this checks the CPU-only path")
    prof = P.profile("rmsnorm", "ridgeline", (8, 64), "bf16", out_dir=tmp_path, ncu_source=True, kineto=False)
    assert prof["command"].endswith("--ncu --source --no-kineto")
    (why,) = [x["why"] for x in prof["not_collected"] if x["what"] == "Nsight Compute"]
    assert why.startswith("needs a CUDA GPU")
