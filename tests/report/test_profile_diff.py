"""`ridgeline compare` of two profiles: the main kernels metric by metric, stall reasons by how far they moved."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from ridgeline.report.cli import compare_command
from ridgeline.report.profile_diff import is_profile, main_kernels, profile_diff_table


def _profile(variant: str, time_us: float, stalls: dict[str, float], loop: int, regs: int) -> dict:
    return {
        "schema": "ridgeline.profile/1", "op": "scaled_mm", "impl": "ridgeline", "shape": [4096, 4096, 4096],
        "dtype": "fp8e4m3", "variant": variant,
        "kernels": [
            {"name": "_quantize_helper", "registers": 32},
            {"name": "_scaled_mm_ws_kernel", "registers": regs, "spill_stores_bytes": 0, "shared_bytes": 180432,
             "sass": {"loops": [{"instructions": 12}, {"instructions": loop}]}},
        ],
        "ncu": {"available": True, "kernels": [
            {"name": "_quantize_helper", "time_us": 3.0},
            {"name": "_scaled_mm_ws_kernel", "time_us": time_us, "dram_bytes_read": 57.0e6, "tensor_pct": 76.0,
             "cycles_per_issue": sum(stalls.values()), "issue_active_pct": 30.0,
             "stalls": dict(sorted(stalls.items(), key=lambda kv: -kv[1]))},
        ]},
    }


ROW = _profile("row", 107.8, {"wait": 3.0, "long_scoreboard": 0.5, "barrier": 1.0, "selected": 1.0}, 179, 168)
BLOCK = _profile("block", 129.0, {"wait": 3.1, "long_scoreboard": 2.5, "barrier": 1.0, "selected": 1.0}, 189, 168)


def test_main_kernel_is_the_longest_under_ncu():
    timed, facts = main_kernels(BLOCK)
    assert timed["name"] == facts["name"] == "_scaled_mm_ws_kernel"
    assert main_kernels({"kernels": [{"name": "k"}]}) == ({}, {"name": "k"})  # no ncu: the compiled kernel
    assert is_profile(ROW) and not is_profile({"schema": "ridgeline.run/1"}) and not is_profile([1])


def test_profile_diff_rows():
    t = profile_diff_table(ROW, BLOCK)
    rows = {r[0].text: [c.text for c in r[1:]] for r in t.rows}
    assert rows["kernel time under ncu (µs)"] == ["107.80", "129.00", f"{129.0 / 107.8:.3f}x"]
    assert rows["tensor pipe busy %"][2] == "+0.0 points"
    assert rows["instructions in the longest loop"] == ["179", "189", f"{189 / 179:.3f}x"]
    stall_rows = [name for name in rows if name.startswith("stall:")]
    assert stall_rows[0] == "stall: long_scoreboard (cycles per issue)"  # moved most, listed first
    assert rows[stall_rows[0]] == ["0.50", "2.50", "5.000x"]
    assert "scaled_mm / ridgeline at 4096x4096x4096 fp8e4m3 block (NEW)" in t.title


def _with_lines(p: dict, lines: list[tuple[int, str, float]]) -> dict:
    top = [{"file": "/x/kernel_ws.py", "line": ln, "source": text, "pct": pct, "samples": pct}
           for ln, text, pct in lines]
    return p | {"ncu": p["ncu"] | {"source": [{"name": "_scaled_mm_ws_kernel", "top_lines": top}]}}


def test_profile_diff_source_lines():
    """With --source on both sides: the hottest lines by how far their share moved, matched by text (an edit above
    a line moves its number)."""
    base = _with_lines(ROW, [(276, "part = wait(part)", 30.0), (271, "mbarrier.wait(ready)", 5.0)])
    new = _with_lines(BLOCK, [(280, "part = wait(part)", 28.0), (275, "mbarrier.wait(ready)", 15.0),
                              (290, "n1 = gl.load(sa)", 4.0)])
    rows = [(r[0].text, [c.text for c in r[1:]]) for r in profile_diff_table(base, new).rows
            if r[0].text.startswith("samples at")]
    assert rows[0] == ("samples at kernel_ws.py:275 mbarrier.wait(ready) (%)", ["5.00", "15.00", "+10.0 points"])
    assert rows[1][1] == ["0.00", "4.00", "+4.0 points"] and rows[2][1][2] == "-2.0 points"
    # one side without source lines: no such rows
    assert not [r for r in profile_diff_table(ROW, new).rows if r[0].text.startswith("samples at")]


def test_compare_command_on_profiles(tmp_path):
    app = typer.Typer()
    app.command("compare")(compare_command)
    app.command("unused")(lambda: None)  # two commands: typer keeps the subcommand name
    a, b = tmp_path / "row.json", tmp_path / "block.json"
    a.write_text(json.dumps(ROW))
    b.write_text(json.dumps(BLOCK))
    out = tmp_path / "diff.json"
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "long_scoreboard" in res.output and "5.000x" in res.output
    assert json.loads(out.read_text())["rows"][0]["metric"] == "kernel time under ncu (µs)"
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"schema": "ridgeline.run/1"}))
    res = CliRunner().invoke(app, ["compare", str(a), str(run)])
    assert res.exit_code == 2 and "is not a profile" in res.output
