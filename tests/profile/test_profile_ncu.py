"""Nsight Compute command and CSV parsing (with a stand-in ncu), the torch trace summary, the JIT-cache harvest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ridgeline.profile as P

DATA = Path(__file__).resolve().parents[1] / "data"


# --- ncu and trace parsing ---------------------------------------------------------------------------------
NCU_CSV = (DATA / "ncu_raw.csv").read_text()  # `ncu --import R --csv --page raw`, with a units row


def test_parse_ncu_csv_with_units():
    rows = P.parse_ncu_csv(NCU_CSV.replace("2,100", "2.1"))
    assert [r["name"] for r in rows] == ["_rms_norm_kernel", "void at::native::vectorized_elementwise_kernel<4>(...)"]
    k = rows[0]
    assert k["dram_bytes_read"] == pytest.approx(33.6e6) and k["dram_bytes_write"] == pytest.approx(33.55e6)
    assert k["time_us"] == pytest.approx(17.66) and k["dram_pct"] == pytest.approx(90.12)
    assert k["registers"] == 32 and k["grid"] == "1,056" and k["occupancy_pct"] == pytest.approx(88.1)
    assert k["tensor_insts"] == 1024 and k["wgmma_insts"] == 0 and k["l2_hit_pct"] == pytest.approx(12.5)
    assert k["tensor_pct"] == 0.0 and "xu_pct" not in k  # a metric the export lacks is left out, not zero
    # stall reasons: gathered under `stalls`, largest first; a kernel without readings gets none
    assert list(k["stalls"].items()) == [("long_scoreboard", 5.2), ("wait", 2.0), ("barrier", 0.8)]
    assert k["cycles_per_issue"] == 8.0 and k["issue_active_pct"] == pytest.approx(42.5)
    assert "stalls" not in rows[1] and rows[1]["cycles_per_issue"] is None
    nanos = P.parse_ncu_csv(NCU_CSV.replace('"usecond"', '"nsecond"'))
    assert nanos[1]["time_us"] == pytest.approx(2.1)  # "2,100" ns with a thousands separator
    # ncu 2025.3's short units: "ms" (an attention kernel's 1.6 ms), "MB"
    short = P.parse_ncu_csv(NCU_CSV.replace('"usecond"', '"ms"').replace('"Mbyte"', '"MB"'))
    assert short[0]["time_us"] == pytest.approx(17660.0) and short[0]["dram_bytes_read"] == pytest.approx(33.6e6)
    s = P.summarize_ncu(rows, ideal_bytes=67_117_056)
    assert s["total"]["dram_bytes"] == pytest.approx(33.6e6 + 33.55e6 + 0.5e6)
    assert s["dram_vs_ideal"] == pytest.approx(s["total"]["dram_bytes"] / 67_117_056)
    assert P.parse_ncu_csv("==PROF== nothing profiled\n") == []


FAKE_NCU = """#!/bin/sh
# Stands in for Nsight Compute: --import prints a captured raw CSV, a profiling run writes an empty report.
for a in "$@"; do [ "$a" = "--import" ] && { cat "$FAKE_NCU_CSV"; exit 0; }; done
[ -n "$FAKE_NCU_FAIL" ] && { echo "==ERROR== ERR_NVGPUCTRPERM - no permission to access GPU counters" >&2; exit 1; }
case "$*" in *"$FAKE_NCU_UNKNOWN"*) [ -n "$FAKE_NCU_UNKNOWN" ] && {
  echo "==ERROR== Failed to find metric $FAKE_NCU_UNKNOWN" >&2; exit 1; } ;; esac
prev=""; for a in "$@"; do [ "$prev" = "--export" ] && : > "$a.ncu-rep"; prev="$a"; done
echo "==PROF== Disconnected from process 1"
"""


def test_run_ncu_with_a_stand_in(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text(FAKE_NCU)
    (bin_dir / "ncu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_CSV", str(DATA / "ncu_raw.csv"))
    res = P.run_ncu("rmsnorm", "ridgeline", (4096, 4096), "bf16", "", tmp_path, ideal_bytes=67_117_056)
    assert res["available"] and len(res["kernels"]) == 2 and res["report"] == "ncu.ncu-rep"
    assert res["dram_vs_ideal"] == pytest.approx((33.6e6 + 33.55e6 + 0.5e6) / 67_117_056)
    assert "--clock-control none" in res["command"] and (tmp_path / "ncu-raw.csv").is_file()
    assert "metrics_dropped" not in res and "sm__pipe_tensor_cycles_active" in res["command"]
    # a metric this ncu does not know: dropped, the run repeated without it, the rest kept
    monkeypatch.setenv("FAKE_NCU_UNKNOWN", "sm__inst_executed_pipe_xu")
    res = P.run_ncu("rmsnorm", "ridgeline", (4096, 4096), "bf16", "", tmp_path / "u", ideal_bytes=67_117_056)
    assert res["available"] and res["metrics_dropped"] == ["sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"]
    assert "pipe_xu" not in res["command"] and "sm__pipe_tensor_cycles_active" in res["command"]
    assert (tmp_path / "u" / "ncu.log").read_text().count("Failed to find metric") == 1
    monkeypatch.delenv("FAKE_NCU_UNKNOWN")
    monkeypatch.setenv("FAKE_NCU_FAIL", "1")
    res = P.run_ncu("rmsnorm", "ridgeline", (4096, 4096), "bf16", "", tmp_path / "f", ideal_bytes=1)
    assert not res["available"] and "ERR_NVGPUCTRPERM" in res["reason"]
    assert (tmp_path / "f" / "ncu.log").read_text().count("ERR_NVGPUCTRPERM") == 1  # not a metric: run once


def test_jit_cache_harvest_sees_new_kernels():
    from triton.runtime.jit import JITFunction

    def kernel(X):
        pass

    jf = JITFunction(kernel)
    old = type("CK", (), {"asm": {}, "metadata": {"name": "old"}})()
    jf.device_caches[0] = ({"a": old}, None, None, None, None)  # the triton >= 3.2 layout
    before = P.jit_snapshot()
    new = type("CK", (), {"asm": {}, "metadata": {"name": "new"}})()
    jf.device_caches[0][0]["b"] = new
    assert P.jit_new_kernels(before) == [new]
    legacy = type("F", (), {"cache": {0: {"k": old}}})()  # the triton <= 3.1 layout
    assert P.compiled_in(legacy) == [old]


def test_ncu_command_never_touches_clocks(tmp_path):
    cmd = P.ncu_command("/usr/bin/ncu", tmp_path / "ncu", ["ncu", "rmsnorm", "ridgeline", "8x64", "bf16", ""])
    assert cmd[:3] == ["/usr/bin/ncu", "--clock-control", "none"]
    assert "--profile-from-start" in cmd and cmd[cmd.index("--profile-from-start") + 1] == "off"
    metrics = cmd[cmd.index("--metrics") + 1]
    assert "dram__bytes_read.sum" in metrics
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in metrics


def test_stalls_table_names_the_largest_reasons():
    from ridgeline.report import tables as T

    rows = P.parse_ncu_csv(NCU_CSV.replace("2,100", "2.1"))
    t = T.stalls_table({"ncu": P.summarize_ncu(rows, ideal_bytes=None)}, top=2)
    assert len(t.rows) == 1  # the kernel without stall readings has no row
    name, busy, cycles, reasons = (c.text for c in t.rows[0])
    assert name == "_rms_norm_kernel" and cycles == "8.00" and "42" in busy
    assert reasons == "long_scoreboard 5.20 (65%), wait 2.00 (25%)"
    assert T.stalls_table({}).rows == []


def test_summarize_trace(tmp_path):
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "_rms_norm_kernel", "dur": 10.0},
        {"ph": "X", "cat": "kernel", "name": "_rms_norm_kernel", "dur": 12.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty_like", "dur": 3.0},
        {"ph": "X", "cat": "Kernel", "name": "elementwise", "dur": 1.0},
    ]}
    (tmp_path / "t.json").write_text(json.dumps(trace))
    rows = P.summarize_trace(tmp_path / "t.json")
    assert rows[0] == {"name": "_rms_norm_kernel", "calls": 2, "device_us_total": 22.0, "device_us_avg": 11.0}
    assert [r["name"] for r in rows] == ["_rms_norm_kernel", "elementwise"]


