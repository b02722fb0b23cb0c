"""`ridgeline report`: markdown content, deterministic plots, a self-contained HTML page, RUN resolution, CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ridgeline.records import paths
from ridgeline.records.record import load_record
from ridgeline.records.store import Store
from ridgeline.report.build import write_report
from ridgeline.report.cli import report_command
from ridgeline.report.data import resolve_run
from ridgeline.report.html import render_html
from ridgeline.report.markdown import render_markdown
from ridgeline.report.plots import make_plots

DATA = Path(__file__).resolve().parents[1] / "data"
H200 = DATA / "run_h200_rmsnorm.json"
CPU = DATA / "run_cpu_rmsnorm.json"


@pytest.fixture(scope="module")
def h200() -> dict:
    return json.loads(H200.read_text())


@pytest.fixture(scope="module")
def h200_md(h200) -> str:
    return render_markdown(h200, [("Roofline, graph-cold", "plots/roofline-graph-cold.png")])


def test_markdown_has_environment_and_reproduction(h200_md):
    for text in ("NVIDIA H200 (cuda)", "| compute capability | 9.0 |", "| SMs | 132 |", "| driver | 580.95.05 |",
                 "| CUDA | 13.0 |", "| triton | 3.6.0 |", "0.1.0 @ 9f98cd6e0c1d", "copy 4,273 GB/s"):
        assert text in h200_md, text
    assert "```sh\nridgeline bench rmsnorm --impl ridgeline,torch-eager,torch-compile,liger" in h200_md


def test_markdown_has_regimes_and_sample_counts(h200_md):
    regimes = h200_md.split("### Timing regimes")[1].split("###")[0]
    assert "| cold-eager |" in regimes and "| graph-cold |" in regimes
    assert "L2 flushed" in regimes
    assert re.search(r"\| cold-eager \|[^\n]*\| 20 \| \d+–\d+ \| [\d,]+ \| 1 \| 2.77 \|", regimes)


def test_markdown_per_shape_tables(h200_md):
    header = ("| shape | impl | µs | GB/s | TFLOP/s | % of roof | % of SOL | speedup vs torch-eager | noise | n "
              "| launch | check |")
    assert h200_md.count(header) == 2
    assert "### Results: rmsnorm bf16, cold-eager" in h200_md and "### Results: rmsnorm bf16, graph-cold" in h200_md
    row = next(ln for ln in h200_md.splitlines() if ln.startswith("| 16384x4096 | ridgeline (ours) |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "3,824" and cells[5] == "89%" and cells[6] == "93%" and cells[7] == "12.11x"
    assert cells[10] == "grid 1056 1-pass BLOCK_N=4096 warps=8" and cells[11] == "ok"
    wrong = next(ln for ln in h200_md.splitlines() if ln.startswith("| 4096x4100 | liger |"))
    assert "**WRONG**" in wrong and "~~97.2~~" in wrong  # a wrong implementation's time is struck out
    assert "| 1x4096 | ridgeline (ours) | **3.03** |" in h200_md  # fastest correct at the shape is bold


def test_markdown_correctness_and_failures(h200_md):
    assert "| liger | 4 | **1** |" in h200_md
    assert "out: 3 of 16793600 elements beyond tolerance (worst 4.2x of atol + rtol*\\|ref\\|)" in h200_md
    assert "| torch-compile | rmsnorm 16384x4096 bf16 | graph-cold | time | RuntimeError: CUDA graph capture" in h200_md


def test_markdown_notes(h200_md):
    findings = h200_md.split("### Findings")[1].split("### Environment")[0]
    for title in ("**wrong results** (problem) — liger", "**latency-bound** (warning) — ridgeline",
                  "**unstable timing** (warning) — torch-eager", "**extra DRAM traffic** (warning) — ridgeline",
                  "**launch floor dominates**", "**narrow global loads**", "**clocks throttled**",
                  "**slower than a peer** (warning) — ridgeline"):
        assert title in findings, title
    assert "**register spills**" not in findings  # (the profiled kernel spills nothing)
    assert "_Why:" in findings


def test_markdown_profiles_and_plots(h200_md):
    assert "### Profile: rmsnorm / ridgeline at 4096x4100 bf16" in h200_md
    assert "| _rms_norm_kernel | cuda:90 | jit-cache | 85 | 0 / 0 | 64 | 16 | 3 | 1 | 25% | registers |" in h200_md
    assert "16-bit x32" in h200_md and "128-bit x4" in h200_md
    assert "Total DRAM traffic 88.1 MB against 67.2 MB the op must move (1.31x)" in h200_md
    assert "![Roofline, graph-cold](plots/roofline-graph-cold.png)" in h200_md


def test_cpu_record_with_nulls_renders():
    rec = json.loads(CPU.read_text())
    md = render_markdown(rec)
    assert "Incomplete run" in md and "**CPU run**" in md
    assert "None" not in md and "nan" not in md.lower().replace("nanosecond", "")
    assert "| 1x4096 | ridgeline (ours) |" in md
    assert "<!DOCTYPE html>" in render_html(rec, make_plots(rec))


def test_empty_record_renders():
    rec = {"schema": "ridgeline.run/1", "run_id": "r", "kind": "bench", "command": None, "env": None,
           "device": None, "settings": None, "checks": None, "measurements": None, "failures": None}
    assert "ridgeline bench" in render_markdown(rec)
    assert make_plots(rec) == []
    assert "<table" in render_html(rec)  # the environment table at least


@pytest.fixture(scope="module")
def h200_report(tmp_path_factory) -> tuple[Path, list[Path]]:
    """The H200 record's full report (markdown, HTML, plots), written once for the tests that compare with it."""
    out = tmp_path_factory.mktemp("h200-report")
    return out, write_report(resolve_run(str(H200)), out)


def test_plots_are_deterministic(h200_report, tmp_path):
    a_dir, a = h200_report  # (from the loaded RunRecord; b from the plain JSON dict: the same bytes)
    b = write_report(json.loads(H200.read_text()), tmp_path / "b")
    names = sorted(p.relative_to(a_dir).as_posix() for p in a)
    assert names == sorted(p.relative_to(tmp_path / "b").as_posix() for p in b)
    assert {"plots/roofline-cold-eager.png", "plots/roofline-graph-cold.svg", "plots/gbps-rmsnorm-bf16-cold_eager.png",
            "plots/gbps-rmsnorm-bf16-graph_cold.svg", "report.md", "report.html"} <= set(names)
    for name in names:
        assert (a_dir / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    svg = (a_dir / "plots" / "roofline-graph-cold.svg").read_text()
    assert "<dc:date>" not in svg and "2026" not in svg
    assert (a_dir / "plots" / "roofline-graph-cold.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_contents(h200):
    plots = {p.name: p for p in make_plots(h200)}
    assert set(plots) == {"roofline-cold-eager", "roofline-graph-cold", "gbps-rmsnorm-bf16-cold_eager",
                          "gbps-rmsnorm-bf16-graph_cold"}
    ax = plots["roofline-graph-cold"].figure.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["DRAM roof (copy) 4,273 GB/s", "L2 roof 5,800 GB/s"]
    assert {"ridgeline", "torch-eager", "torch-compile", "liger"} <= set(legend)
    texts = [t.get_text() for t in ax.texts]
    assert any("bf16 720 TFLOP/s" in t for t in texts)
    assert sum(t == "4096x4100" for t in texts) == 4  # every point labelled by its shape
    bars = plots["gbps-rmsnorm-bf16-graph_cold"].figure.axes[0]
    assert len(bars.patches) == 19  # 5 shapes x 4 impls, less the case that failed to time


def test_html_is_self_contained(h200):
    page = render_html(h200, make_plots(h200))
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://", page)  # nothing to fetch, not even a namespace URL
    assert not re.search(r"<(link|iframe)\b|<script[^>]*\bsrc=|@import|url\(", page)
    assert page.count('src="data:image/svg+xml;base64,') == 4
    assert page.count("<table") >= 8 and page.count('class="sortable"') >= 8
    assert 'data-numeric="2"' in page and "<style>" in page and "<script>" in page
    assert "ridgeline bench rmsnorm --impl" in page


def test_resolve_run_by_path_and_store_id(tmp_path):
    rec = load_record(H200)
    assert resolve_run(str(H200)).run_id == rec.run_id
    with pytest.raises(ValueError, match="no run store"):
        resolve_run("20261129-18")
    with Store(paths.default_db()) as store:  # conftest points the data dir at tmp_path
        store.put(rec)
    assert resolve_run("20261129-18").run_id == rec.run_id
    with pytest.raises(ValueError, match="no run"):
        resolve_run("19990101")
    with pytest.raises(ValueError, match="no such file"):
        resolve_run(str(tmp_path / "missing.json"))


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("report")(report_command)
    app.command("noop")(lambda: None)  # two commands keep Typer from collapsing to a single-command app
    return app


def test_report_command(tmp_path):
    runner = CliRunner()
    res = runner.invoke(_app(), ["report", str(H200), "-o", str(tmp_path / "one")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "one" / "report.md").is_file() and (tmp_path / "one" / "report.html").is_file()
    res = runner.invoke(_app(), ["report", str(H200), str(CPU), "--format", "md", "-o", str(tmp_path / "two")])
    assert res.exit_code == 0, res.output
    for run_id in ("20261129-180000-a1b2c3", "20261129-120000-cpu001"):
        assert (tmp_path / "two" / run_id / "report.md").is_file()
        assert not (tmp_path / "two" / run_id / "report.html").exists()
    res = runner.invoke(_app(), ["report", str(CPU), "-o", "-"])
    assert res.exit_code == 0 and res.output.startswith("## ridgeline bench: rmsnorm on cpu")
    res = runner.invoke(_app(), ["report", str(H200), "--format", "pdf"])
    assert res.exit_code == 2
    res = runner.invoke(_app(), ["report", "no-such-run"])
    assert res.exit_code == 2


def test_report_of_a_copied_record_is_identical(h200_report, tmp_path):
    # The same JSON anywhere (a committed docs/results file) regenerates the same report bytes.
    copy = tmp_path / "copy.json"
    shutil.copy(H200, copy)
    a = (h200_report[0] / "report.html").read_bytes()
    b = write_report(resolve_run(str(copy)), tmp_path / "b", "html")[0].read_bytes()
    assert a == b


# --- robustness: whatever a partial or foreign run wrote, the report renders -------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_value = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**9), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=8), st.lists(st.integers(0, 4096), max_size=3))
_fields = ["median_us", "iqr_us", "n", "stable", "bytes", "flops", "gbps", "tflops", "pct_of_roof", "sol_us",
           "pct_of_sol", "floor_us", "speedup_vs_baseline", "speedup_vs_best_peer", "throttled", "launch",
           "samples_us", "source", "variant"]
_measurement = st.fixed_dictionaries(
    {"op": st.sampled_from(["rmsnorm", "x"]), "impl": st.sampled_from(["ridgeline", "liger"]),
     "shape": st.lists(st.integers(0, 70000), min_size=1, max_size=3), "dtype": st.sampled_from(["bf16", "fp32"]),
     "regime": st.sampled_from(["graph-cold", "cpu", "odd regime"])},
    optional={f: _value for f in _fields})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ms=st.lists(_measurement, max_size=6), device=st.dictionaries(
    st.sampled_from(["copy_gbps", "l2_gbps", "measured", "tflops", "floors_us"]), _value, max_size=5),
    profile=st.dictionaries(st.sampled_from(["kernels", "ncu", "kineto", "shape", "not_collected"]), _value,
                            max_size=4))
def test_report_renders_any_values(ms, device, profile):
    rec = {"schema": "ridgeline.run/1", "run_id": "fuzz", "kind": "bench", "command": "x", "env": {"sm_count": 132},
           "device": device, "settings": {}, "checks": [{**ms[0], "passed": False}] if ms else [],
           "measurements": ms, "failures": [], "profiles": [profile]}
    md = render_markdown(rec)
    assert md.startswith("## ridgeline bench")
    assert "<!DOCTYPE html>" in render_html(rec, make_plots(rec))


def test_a_checks_note_shows_beside_ok(h200):
    rec = json.loads(json.dumps(h200))
    m = next(x for x in rec["measurements"] if x["impl"] == "ridgeline" and x["shape"] == [16384, 4096])
    m["check_notes"] = ["batch invariance not checked: rows 0:1 alone raised RuntimeError: refused"]
    md = render_markdown(rec, [])
    row = next(ln for ln in md.splitlines() if ln.startswith("| 16384x4096 | ridgeline (ours) |"))
    assert row.rstrip(" |").endswith("ok (batch invariance not checked: rows 0:1 alone raised RuntimeError: refused)")
