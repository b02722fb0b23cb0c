"""The committed H200 (and H100) records are valid run records, and the committed report regenerates from them
exactly."""

import json
import re
from pathlib import Path

import pytest

from ridgeline.records.record import load_record
from ridgeline.report.build import write_report

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
BENCHES = sorted(RESULTS.glob("h200-bench-*.json"))
H100_RUNS = sorted([*RESULTS.glob("h100-bench-*.json"), *RESULTS.glob("h100-audit-*.json")])
# Each committed report and the record it was built from (docs/results/README.md indexes both).
REPORTS = [("report-h200-rmsnorm", "h200-bench-rmsnorm-sweep-s12.json")]


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.name)
def test_committed_bench_records_load(path):
    rec = load_record(path)
    assert rec.env["gpu"] == "NVIDIA H200" and rec.device["measured"]
    assert rec.measurements and all(m["samples_us"] for m in rec.measurements)


@pytest.mark.parametrize("path", H100_RUNS, ids=lambda p: p.name)
def test_committed_h100_records_load(path):
    """The H100 records (sessions the device lent no H200) say so in their own environment."""
    rec = load_record(path)
    assert rec.env["gpu"].startswith("NVIDIA H100") and rec.device["measured"]
    assert rec.measurements and all(m["samples_us"] for m in rec.measurements)


def _without_images(html: str) -> str:
    html = re.sub(r"<svg.*?</svg>", "<svg/>", html, flags=re.S)
    return re.sub(r"data:image/[a-z+]+;base64,[A-Za-z0-9+/=]+", "data:", html)


@pytest.mark.parametrize("report,record", REPORTS)
def test_report_regenerates_identically(tmp_path, report, record):
    committed = RESULTS / report
    write_report(load_record(RESULTS / record), tmp_path, fmt="all")
    assert (tmp_path / "report.md").read_text() == (committed / "report.md").read_text()
    # Plots are embedded; their bytes depend on the matplotlib/FreeType versions, the rest must match exactly.
    assert _without_images((tmp_path / "report.html").read_text()) == _without_images(
        (committed / "report.html").read_text())
    # The committed plots are the PNGs report.md links (their SVG twins are regenerated, not kept).
    assert sorted(p.name for p in (tmp_path / "plots").glob("*.png")) == sorted(
        p.name for p in (committed / "plots").iterdir())


def test_probe_record_has_the_ceilings():
    p = json.loads((RESULTS / "h200-probe.json").read_text())
    assert p["copy_gbps"] > 4000 and p["tflops"]["bf16"] > 650 and p["floors_us"]["graph"] < 1.0


def test_results_hold_only_current_records():
    # docs/results keeps the records behind current claims (older ones are in git history, see its README).
    files = [p for p in RESULTS.rglob("*") if p.is_file()]
    assert len(files) <= 80 and sum(p.stat().st_size for p in files) <= 12 * 2**20
    index = (RESULTS / "README.md").read_text()
    for p in files:
        if p.parent == RESULTS and p.name != "README.md":
            assert f"`{p.name}`" in index, f"{p.name} is not indexed in docs/results/README.md"
