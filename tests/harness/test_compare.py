"""`ridgeline compare`: bootstrap intervals and verdicts on synthetic sample sets, run matching, exit codes."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from ridgeline.harness.compare import (
    FASTER,
    SAME,
    SLOWER,
    UNCLEAR,
    bootstrap_ratio,
    compare_runs,
    parse_threshold,
    verdict,
)
from ridgeline.report.cli import compare_command

DATA = Path(__file__).resolve().parents[1] / "data"
H200 = DATA / "run_h200_rmsnorm.json"


def samples(median: float, rel_noise: float, n: int = 40, seed: int = 0) -> np.ndarray:
    return median * np.exp(np.random.default_rng(seed).normal(0.0, rel_noise, size=n))


def judge(base: np.ndarray, new: np.ndarray, threshold: float = 0.02) -> tuple[str, float, float, float]:
    ratio, lo, hi = bootstrap_ratio(base, new)
    return verdict(lo, hi, threshold), ratio, lo, hi


def test_same():
    v, ratio, lo, hi = judge(samples(10.0, 0.005, seed=1), samples(10.0, 0.005, seed=2))
    assert v == SAME and lo <= ratio <= hi and 0.98 <= lo and hi <= 1.02


def test_faster():
    v, ratio, lo, hi = judge(samples(10.0, 0.01, seed=1), samples(9.0, 0.01, seed=2))
    assert v == FASTER and hi < 0.98 and ratio == pytest.approx(0.9, abs=0.01)


def test_slower():
    v, ratio, lo, hi = judge(samples(10.0, 0.01, seed=1), samples(11.0, 0.01, seed=2))
    assert v == SLOWER and lo > 1.02 and ratio == pytest.approx(1.1, abs=0.01)


def test_noisy_is_unclear():
    # A real 5% slowdown buried in 30% noise: the interval straddles the threshold.
    v, ratio, lo, hi = judge(samples(10.0, 0.3, n=15, seed=1), samples(10.5, 0.3, n=15, seed=2))
    assert v == UNCLEAR and lo < 1.02 < hi


def test_small_change_within_threshold_is_same_not_faster():
    v, *_ = judge(samples(10.0, 0.002, n=200, seed=1), samples(9.9, 0.002, n=200, seed=2))
    assert v == SAME  # 1% faster, but within ±2%


def test_bootstrap_is_deterministic_and_seeded():
    b, n = samples(10.0, 0.05, seed=3), samples(10.2, 0.05, seed=4)
    assert bootstrap_ratio(b, n) == bootstrap_ratio(b, n)
    assert bootstrap_ratio(b, n, seed=1) != bootstrap_ratio(b, n, seed=2)
    _, lo90, hi90 = bootstrap_ratio(b, n, confidence=0.90)
    _, lo99, hi99 = bootstrap_ratio(b, n, confidence=0.99)
    assert lo99 <= lo90 and hi90 <= hi99
    with pytest.raises(ValueError):
        bootstrap_ratio([], n)


def test_verdict_edges():
    assert verdict(None, None, 0.02) == UNCLEAR
    assert verdict(0.98, 1.02, 0.02) == SAME
    assert verdict(0.90, 0.97, 0.02) == FASTER
    assert verdict(1.03, 1.10, 0.02) == SLOWER
    assert verdict(0.97, 1.00, 0.02) == UNCLEAR


def test_parse_threshold():
    assert parse_threshold("2%") == pytest.approx(0.02)
    assert parse_threshold("0.02") == pytest.approx(0.02)
    assert parse_threshold("5") == pytest.approx(0.05)
    assert parse_threshold(0.1) == pytest.approx(0.1)
    for bad in ("abc", "-1%", "150%"):
        with pytest.raises(ValueError):
            parse_threshold(bad)


def scaled(record: dict, factor: float, impl: str | None = None) -> dict:
    """A copy of the record with every (or one impl's) samples and median times multiplied by factor."""
    out = copy.deepcopy(record)
    out["run_id"] = f"{record['run_id']}-x{factor}"
    for m in out["measurements"]:
        if impl is None or m["impl"] == impl:
            m["samples_us"] = [s * factor for s in m["samples_us"]]
            m["median_us"] *= factor
    return out


@pytest.fixture(scope="module")
def base() -> dict:
    return json.loads(H200.read_text())


def test_compare_runs_matches_and_judges(base):
    new = scaled(base, 1.10, impl="ridgeline")
    new["measurements"] = [m for m in new["measurements"]
                           if not (m["impl"] == "liger" and m["shape"] == [1, 4096] and m["regime"] == "graph-cold")]
    new["measurements"].append({**copy.deepcopy(new["measurements"][0]), "impl": "quack"})
    cmp = compare_runs(base, new, threshold=0.02, resamples=500)
    by = {(r.impl, tuple(r.shape), r.regime): r for r in cmp.rows}
    assert len(cmp.rows) == len(base["measurements"]) - 1
    assert all(r.verdict == SLOWER for r in cmp.rows if r.impl == "ridgeline")
    assert by[("ridgeline", (4096, 4096), "cold-eager")].ratio == pytest.approx(1.10, rel=1e-6)
    assert by[("torch-compile", (4096, 4096), "cold-eager")].verdict == SAME
    assert by[("torch-eager", (1, 4096), "cold-eager")].verdict == UNCLEAR  # the noisy case of the fixture
    assert "NEW fails its check" in by[("liger", (4096, 4100), "cold-eager")].note
    assert [k[1] for k in cmp.only_base] == ["liger"] and [k[1] for k in cmp.only_new] == ["quack"]
    assert cmp.any_slower
    ours = [r.ratio for r in cmp.rows if r.impl == "ridgeline"]
    assert cmp.geomean() == pytest.approx(math.exp(np.mean(np.log([r.ratio for r in cmp.rows]))))
    assert max(ours) > cmp.geomean() > 1.0
    d = cmp.to_dict()
    assert d["counts"][SLOWER] == len(ours) and set(d["geomean_ratio_by_regime"]) == {"cold-eager", "graph-cold"}
    json.dumps(d)


def test_compare_without_samples_is_unclear(base):
    new = copy.deepcopy(base)
    for m in new["measurements"]:
        m["samples_us"] = m["samples_us"][:2]
    cmp = compare_runs(base, new, resamples=200)
    assert {r.verdict for r in cmp.rows} == {UNCLEAR}
    assert all(r.ratio is not None and "too few raw samples" in r.note for r in cmp.rows)


def test_compare_warns_on_different_environments(base):
    new = copy.deepcopy(base)
    new["env"]["gpu"] = "NVIDIA H100 80GB HBM3"
    cmp = compare_runs(base, new, resamples=200)
    assert any(w.startswith("gpu differs") for w in cmp.warnings)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("compare")(compare_command)
    app.command("noop")(lambda: None)
    return app


def test_compare_command_exit_codes(base, tmp_path):
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(scaled(base, 1.2, impl="ridgeline")))
    faster = tmp_path / "faster.json"
    faster.write_text(json.dumps(scaled(base, 0.8)))
    runner = CliRunner()
    res = runner.invoke(_app(), ["compare", str(H200), str(slower), "--resamples", "300"])
    assert res.exit_code == 0 and "SLOWER" in res.output and "geometric mean NEW/BASE" in res.output
    res = runner.invoke(_app(), ["compare", str(H200), str(slower), "--fail-on-slower", "--resamples", "300",
                                 "--json", str(tmp_path / "cmp.json")])
    assert res.exit_code == 1
    assert json.loads((tmp_path / "cmp.json").read_text())["counts"][SLOWER] > 0
    res = runner.invoke(_app(), ["compare", str(H200), str(faster), "--fail-on-slower", "--threshold", "5%",
                                 "--resamples", "300"])
    assert res.exit_code == 0 and "FASTER" in res.output
    res = runner.invoke(_app(), ["compare", str(H200), str(faster), "--threshold", "lots"])
    assert res.exit_code == 2
