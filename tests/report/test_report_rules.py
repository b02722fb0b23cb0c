"""Each automatic-note rule: fires on the data it describes, stays quiet otherwise."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ridgeline.report import rules
from ridgeline.report.rules import evaluate, grouped

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def h200() -> dict:
    return json.loads((DATA / "run_h200_rmsnorm.json").read_text())


RECORD = {"env": {"sm_count": 132, "device_type": "cuda"}, "device": {"measured": True, "sm_count": 132}}


def m(**kw) -> dict:
    base = {"op": "rmsnorm", "impl": "ridgeline", "source": "ours", "shape": [4096, 4096], "dtype": "bf16",
            "variant": "", "regime": "graph-cold", "median_us": 20.0, "iqr_us": 0.2, "stable": True}
    base.update(kw)
    return base


def test_latency_bound_needs_low_roof_and_few_waves():
    hit = rules.rule_latency_bound(m(pct_of_roof=0.2, launch={"grid": 128}), RECORD)
    assert [n.rule for n in hit] == ["latency-bound"]
    assert "grid 128" in hit[0].detail and "0.97 waves" in hit[0].detail
    assert rules.rule_latency_bound(m(pct_of_roof=0.2, launch={"grid": 1056}), RECORD) == []  # 8 waves
    assert rules.rule_latency_bound(m(pct_of_roof=0.8, launch={"grid": 128}), RECORD) == []  # fast enough
    assert rules.rule_latency_bound(m(pct_of_roof=0.2), RECORD) == []  # no launch info: no claim
    assert rules.rule_latency_bound(m(pct_of_roof=0.2, launch={"grid": 128}), {"env": {}}) == []  # no SM count


def test_launch_floor_at_small_sizes_only():
    small = m(floor_us=0.69, sol_us=0.70, pct_of_sol=0.45, pct_of_roof=0.004)
    hit = rules.rule_launch_floor(small, RECORD)
    assert [n.rule for n in hit] == ["launch-floor"] and "45%" in hit[0].detail
    big = m(floor_us=0.69, sol_us=63.0, pct_of_sol=0.5, pct_of_roof=0.5)
    assert rules.rule_launch_floor(big, RECORD) == []
    at_sol = m(floor_us=0.69, sol_us=0.70, pct_of_sol=0.95, pct_of_roof=0.9)
    assert rules.rule_launch_floor(at_sol, RECORD) == []
    assert rules.rule_launch_floor(m(floor_us=None, sol_us=None, pct_of_sol=None), RECORD) == []


def test_unstable_on_noise_or_no_convergence():
    assert rules.rule_unstable(m(median_us=10.0, iqr_us=0.8), RECORD)[0].rule == "unstable"
    assert rules.rule_unstable(m(median_us=10.0, iqr_us=0.1, stable=False), RECORD)[0].rule == "unstable"
    assert rules.rule_unstable(m(median_us=10.0, iqr_us=0.3), RECORD) == []
    assert rules.rule_unstable(m(median_us=None, iqr_us=None, stable=None), RECORD) == []


def test_throttled():
    hit = rules.rule_throttled(m(throttled=True, sm_clock_mhz=1755), RECORD)
    assert hit and "1755 MHz" in hit[0].detail
    assert rules.rule_throttled(m(throttled=False), RECORD) == []
    named = rules.rule_throttled(m(throttled=True, sm_clock_mhz=1665, throttle_reasons=["sw-power-cap"]), RECORD)
    assert named[0].detail == "SM clock 1665 MHz (sw-power-cap)"


def test_throttle_reasons_are_named_from_nvml_bits():
    from ridgeline.records.env import THROTTLE_MASK, throttle_names

    assert throttle_names(0x4 | 0x40) == ["sw-power-cap", "hw-thermal"]
    assert throttle_names(0x1 | 0x2) == [] and not (0x1 | 0x2) & THROTTLE_MASK  # idle, app settings: not held
    assert len(throttle_names(THROTTLE_MASK)) == 5


def test_loses_to_peer_only_for_ours():
    hit = rules.rule_loses_to_peer(m(speedup_vs_best_peer=0.7, best_peer="liger"), RECORD)
    assert hit and "liger is 1.43x faster" in hit[0].detail
    assert rules.rule_loses_to_peer(m(speedup_vs_best_peer=1.2), RECORD) == []
    assert rules.rule_loses_to_peer(m(source="peer", speedup_vs_best_peer=0.5), RECORD) == []


def test_near_roof_is_good_news_but_not_for_hot_l2():
    assert rules.rule_near_roof(m(pct_of_roof=0.9), RECORD)[0].severity == "good"
    assert rules.rule_near_roof(m(pct_of_roof=0.9, regime="graph-hot"), RECORD) == []
    assert rules.rule_near_roof(m(pct_of_roof=0.5), RECORD) == []


def test_wrong_names_the_implementation(h200):
    notes = rules.rule_wrong(h200)
    assert len(notes) == 1 and notes[0].impl == "liger" and "4096x4100" in notes[0].where
    assert "beyond tolerance" in notes[0].detail and "timed anyway" in notes[0].detail
    ok = copy.deepcopy(h200)
    for c in ok["checks"]:
        c["passed"] = True
    assert rules.rule_wrong(ok) == []
    crashed = {"failures": [{"op": "rmsnorm", "impl": "x", "shape": [1, 1], "dtype": "bf16", "stage": "check",
                             "reason": "TypeError"}]}
    assert rules.rule_wrong(crashed)[0].detail.startswith("check did not complete")


def test_wrong_cases_get_no_performance_advice(h200):
    notes = [n for n in evaluate(h200) if n.impl == "liger" and "4096x4100" in n.where]
    assert {n.rule for n in notes} == {"wrong"}


def test_not_timed(h200):
    notes = rules.rule_not_timed(h200)
    assert len(notes) == 1 and notes[0].impl == "torch-compile" and "graph capture" in notes[0].detail


def test_unprobed_and_cpu():
    assert rules.rule_unprobed({"device": {"measured": False, "name": "H200 datasheet"}})[0].rule == "unprobed"
    assert rules.rule_unprobed({"env": {"device_type": "cpu"}, "device": {}})[0].rule == "cpu-run"
    assert rules.rule_unprobed(RECORD) == []


def prof(**kernel) -> dict:
    k = {"name": "k", "registers": 40, "num_warps": 8, "spill_stores_bytes": 0, "spill_loads_bytes": 0,
         "sass": {"global_loads": {"128": 4}, "local_loads": 0, "local_stores": 0},
         "occupancy": {"occupancy": 1.0, "limited_by": "warps"}}
    k.update(kernel)
    return {"op": "rmsnorm", "impl": "ridgeline", "shape": [4096, 4096], "dtype": "bf16", "kernels": [k]}


def test_spills_from_ptxas_or_sass():
    assert rules.rule_spills(prof(spill_stores_bytes=64, spill_loads_bytes=64), RECORD)[0].rule == "spills"
    assert rules.rule_spills(prof(sass={"local_loads": 3, "local_stores": 2}), RECORD)[0].severity == "bad"
    assert rules.rule_spills(prof(), RECORD) == []


def test_extra_traffic_over_ideal_bytes():
    p = prof()
    p["ncu"] = {"ideal_bytes": 100_000_000, "total": {"dram_bytes": 131_000_000}}
    hit = rules.rule_extra_traffic(p, RECORD)
    assert hit and "1.31x" in hit[0].detail
    p["ncu"]["total"]["dram_bytes"] = 110_000_000
    assert rules.rule_extra_traffic(p, RECORD) == []
    assert rules.rule_extra_traffic(prof(), RECORD) == []  # no ncu data


def test_narrow_loads():
    hit = rules.rule_narrow_loads(prof(sass={"global_loads": {"16": 32, "128": 2}}), RECORD)
    assert hit and "16-bit x32" in hit[0].detail
    assert rules.rule_narrow_loads(prof(), RECORD) == []


def test_low_occupancy():
    hit = rules.rule_low_occupancy(prof(occupancy={"occupancy": 0.125, "limited_by": "registers"}), RECORD)
    assert hit and "registers" in hit[0].detail
    assert rules.rule_low_occupancy(prof(), RECORD) == []


def test_evaluate_orders_worst_first_and_groups(h200):
    notes = evaluate(h200)
    sev = [rules.SEVERITY_ORDER[n.severity] for n in notes]
    assert sev == sorted(sev)
    expected = {"wrong", "not-timed", "latency-bound", "unstable", "throttled", "loses-to-peer", "extra-traffic",
                "launch-floor", "narrow-loads", "low-occupancy", "near-roof"}
    assert expected <= {n.rule for n in notes}
    groups = grouped(notes)
    assert len(groups) < len(notes)
    assert len({(g.rule, g.impl) for g in groups}) == len(groups)


def test_cpu_timings_get_no_performance_advice():
    rec = {"env": {"device_type": "cpu"}, "device": {"device_type": "cpu"},
           "measurements": [m(regime="cpu", median_us=100.0, iqr_us=30.0, speedup_vs_best_peer=0.01)]}
    assert [n.rule for n in evaluate(rec)] == ["cpu-run"]


def test_rules_survive_nulls():
    rec = {"measurements": [{"op": "x", "impl": "y", "shape": None, "dtype": None, "regime": None}],
           "profiles": [{"kernels": [None, {"sass": None}]}], "checks": [{"passed": False}], "failures": [{}]}
    # The failed check and the failure are still reported, with placeholders for what the record lacks.
    assert [(n.rule, n.impl) for n in evaluate(rec)] == [("wrong", "?"), ("not-timed", "?")]


def test_host_bound_from_recorded_host_time_or_against_graph_cold():
    hit = rules.rule_host_bound(m(regime="cold-eager", host_us=95.0, flush_us=80.0, host_bound=True), RECORD)
    assert [n.rule for n in hit] == ["host-bound"] and "host 95.0" in hit[0].detail
    assert rules.rule_host_bound(m(regime="cold-eager", host_us=20.0, flush_us=80.0, host_bound=False),
                                 RECORD) == []
    assert rules.rule_host_bound(m(regime="graph-cold", host_bound=True, host_us=95.0, flush_us=80.0),
                                 RECORD) == []
    # Older records without host_us: judged against graph-cold of the same case and the floor difference.
    rec = {**RECORD, "device": {"floors_us": {"cold-eager": 3.3, "graph": 0.7}}}
    leaky = m(regime="cold-eager", median_us=40.0)
    rec["measurements"] = [leaky, m(regime="graph-cold", median_us=6.0)]
    assert [n.rule for n in rules.rule_host_bound(leaky, rec)] == ["host-bound"]
    honest = m(regime="cold-eager", median_us=9.0)
    rec["measurements"] = [honest, m(regime="graph-cold", median_us=6.0)]
    assert rules.rule_host_bound(honest, rec) == []


def test_the_report_reads_the_order_reasons_the_check_writes():
    from ridgeline.report.data import invariance_only

    assert invariance_only(["not deterministic: two calls on the same inputs differ bitwise"])
    assert not invariance_only(["not deterministic: x", "second run: out max error 1 exceeds atol 1 + rtol 1*|ref|"])


def test_batch_invariance_is_a_caveat_for_peers_but_an_error_for_ours():
    from ridgeline.report.rules import rule_wrong

    def check(impl, source):
        return {"op": "rmsnorm", "impl": impl, "shape": [4, 8], "dtype": "bf16", "variant": "", "passed": False,
                "source": source, "reasons": ["not batch invariant: rows 0:1 alone differ bitwise"]}

    notes = rule_wrong({"checks": [check("liger", "peer"), check("ridgeline", "ours")], "measurements": []})
    by_impl = {n.impl: n for n in notes}
    assert by_impl["liger"].severity == "warn" and by_impl["liger"].rule == "not-invariant"
    assert by_impl["ridgeline"].severity == "bad" and by_impl["ridgeline"].rule == "wrong"


def test_a_failure_saved_before_a_check_that_passed_on_resume_is_not_reported():
    from ridgeline.report.rules import rule_wrong

    case = {"op": "rmsnorm", "impl": "liger", "shape": [4, 8], "dtype": "bf16", "variant": ""}
    record = {"checks": [{**case, "passed": True, "reasons": []}],
              "failures": [{**case, "stage": "check", "reason": "OutOfMemoryError"}], "measurements": []}
    assert rule_wrong(record) == []
    record["checks"] = []  # a killed run that never re-checked: the saved failure is all there is
    assert [n.detail for n in rule_wrong(record)] == ["check did not complete: OutOfMemoryError"]
