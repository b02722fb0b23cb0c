"""`bench` end to end on the CPU: records, the store, user implementations, wrong ones, resume after a kill."""

import json
import textwrap

import pytest
import torch

from ridgeline.core.spec import Case
from ridgeline.harness.bench import annotate_speedups, bench, make_plan, place_on_roofline, regimes_for
from ridgeline.records.record import load_record
from ridgeline.records.store import Store

SHAPES = [(4, 256), (3, 100)]
MEASUREMENT_KEYS = {"op", "impl", "shape", "dtype", "regime", "samples_us", "median_us", "gbps", "tflops",
                    "pct_of_roof", "pct_of_sol"}


@pytest.fixture
def user_impls(tmp_path):
    path = tmp_path / "user_kernels.py"
    path.write_text(textwrap.dedent("""
        import torch
        def mine(x, weight, eps):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
        def wrong(x, weight, eps):
            return (x.float() * weight.float()).to(x.dtype)
    """))
    return f"{path}:mine", f"{path}:wrong"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU path (the GPU path is in test_gpu.py)")
def test_bench_records_checks_times_and_stores(tmp_path, user_impls):
    mine, wrong = user_impls
    out = tmp_path / "run.json"
    db = tmp_path / "runs.sqlite"
    record = bench("rmsnorm", ["ridgeline", "torch-eager", mine, wrong], SHAPES, [torch.float32],
                   budget_s=0.05, json_path=out, db=db, argv=["ridgeline", "bench", "rmsnorm"])
    d = json.loads(out.read_text())
    assert {"env", "device", "measurements", "checks", "failures"} <= d.keys()
    assert d["complete"] and d["command"] == "ridgeline bench rmsnorm"
    impls_timed = {m["impl"] for m in d["measurements"]}
    assert impls_timed == {"ridgeline", "torch-eager", mine}, "the wrong implementation must never be timed"
    assert any(f["impl"] == wrong and f["stage"] == "check" for f in d["failures"])
    for m in d["measurements"]:
        assert MEASUREMENT_KEYS <= m.keys()
        assert m["regime"] == "cpu" and "GPU speed" in m["note"]
        assert m["median_us"] > 0 and len(m["samples_us"]) == m["n"] >= 5
        assert m["pct_of_roof"] is None  # no ceilings on a CPU
    with Store(db) as store:
        assert store.list_runs()[0]["run_id"] == record.run_id
        again = store.get(record.run_id[:10])
        assert len(again.measurements) == len(d["measurements"])


def test_resume_after_a_kill_loses_nothing(tmp_path):
    out = tmp_path / "run.json"
    ticks = {"n": 0}

    def killer(desc):
        ticks["n"] += 1
        if ticks["n"] == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bench("fused_add_rmsnorm", ["ridgeline", "torch-eager"], SHAPES, [torch.float32], budget_s=0.05,
              json_path=out, db=tmp_path / "db.sqlite", progress=killer)
    partial = load_record(out)
    assert not partial.complete and partial.measurements
    with Store(tmp_path / "db.sqlite") as store:
        (row,) = store.list_runs()
        assert row["run_id"] == partial.run_id and not row["complete"], "a killed run is stored, as partial"
    before = {(m["impl"], tuple(m["shape"])): m["samples_us"] for m in partial.measurements}
    done = bench(resume=out, db=tmp_path / "db.sqlite")
    assert done.complete and len(done.measurements) == 4
    after = {(m["impl"], tuple(m["shape"])): m["samples_us"] for m in done.measurements}
    assert all(after[k] == v for k, v in before.items()), "resume must keep finished measurements as they were"


def test_a_time_limit_stops_between_cases_and_a_resume_finishes(tmp_path, monkeypatch):
    """A sweep given a time limit starts no new case once it is spent: the record is saved unfinished and says how
    many cases are left; a resume (no limit) runs exactly those and keeps the rest."""
    from ridgeline.harness import bench as bench_module

    clock = {"t": 0.0}
    monkeypatch.setattr(bench_module.time, "monotonic", lambda: clock["t"])

    def tick(desc):  # each step of the run advances the fake clock by a second
        clock["t"] += 1.0

    out = tmp_path / "run.json"
    first = bench("fused_add_rmsnorm", ["ridgeline", "torch-eager"], SHAPES, [torch.float32], budget_s=0.05,
                  json_path=out, db=tmp_path / "db.sqlite", progress=tick, time_limit_s=0.5)
    assert not first.complete and first.stopped and "1 of 2 cases not run" in first.stopped
    saved = load_record(out)
    assert saved.stopped == first.stopped and {tuple(m["shape"]) for m in saved.measurements} == {tuple(SHAPES[0])}
    with pytest.raises(ValueError, match="time_limit_s: expected seconds > 0"):
        bench("fused_add_rmsnorm", ["ridgeline"], SHAPES, [torch.float32], time_limit_s=0, json_path=out)
    done = bench(resume=out, db=tmp_path / "db.sqlite")
    assert done.complete and done.stopped is None and len(done.measurements) == 4
    assert "stopped" not in load_record(out).to_dict()


def test_plan_rejects_typos_before_any_work():
    with pytest.raises(ValueError, match="no implementation 'ridgelin'"):
        make_plan("rmsnorm", ["ridgelin"])
    with pytest.raises(ValueError, match="unknown op"):
        make_plan("rmsnrm")
    with pytest.raises(ValueError, match="shape sets"):
        make_plan("rmsnorm", shapes="swep")


def test_regimes_on_gpu_and_cpu():
    from ridgeline.core import registry

    spec = registry.get_spec("rmsnorm")
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert regimes_for(["auto"], Case((1, 4096), torch.bfloat16), cuda, spec) == ["graph-hot"]
    assert regimes_for(["auto"], Case((65536, 4096), torch.bfloat16), cuda, spec) == ["cold-eager"]
    assert regimes_for(["graph-cold", "cold-eager"], Case((1, 4096), torch.bfloat16), cpu, spec) == ["cpu"]
    with pytest.raises(ValueError, match="regime"):
        regimes_for(["warm"], Case((1, 4096), torch.bfloat16), cuda, spec)


def test_roofline_placement_and_speedups():
    from ridgeline.core import registry

    spec = registry.get_spec("rmsnorm")
    profile = {"copy_gbps": 4000.0, "tflops": {"fp32": 60.0}, "floors_us": {"graph": 0.5}}
    case = Case((1024, 4096), torch.bfloat16)
    m = {"op": "rmsnorm", "impl": "a", "source": "ours", "shape": [1024, 4096], "dtype": "bf16", "variant": "",
         "regime": "graph-cold", "median_us": 10.0}
    place_on_roofline(m, spec, case, profile)
    nbytes = 2 * 1024 * 4096 * 2 + 4096 * 2
    assert m["bytes"] == nbytes and m["gbps"] == pytest.approx(nbytes / 10e-6 / 1e9)
    assert m["sol_us"] == pytest.approx(0.5 + nbytes / 4000e3)
    assert m["pct_of_sol"] == pytest.approx(m["sol_us"] / 10.0)
    assert m["pct_of_roof"] == pytest.approx(m["gbps"] / 4000.0)

    class R:
        measurements = [dict(m), {**m, "impl": "p1", "source": "peer", "median_us": 20.0},
                        {**m, "impl": "p2", "source": "peer", "median_us": 15.0}]

    annotate_speedups(R, "p1")
    a, p1, p2 = R.measurements
    assert a["speedup_vs_baseline"] == 2.0 and a["speedup_vs_best_peer"] == 1.5 and a["best_peer"] == "p2"
    assert p2["best_peer"] == "p1" and p2["speedup_vs_best_peer"] == pytest.approx(20 / 15)


def test_options_are_validated_before_work():
    with pytest.raises(ValueError, match="regime"):
        make_plan("rmsnorm", ["ridgeline"], [(2, 64)], regimes=["bogus"])
    with pytest.raises(ValueError, match="variant: rmsnorm knows"):
        make_plan("rmsnorm", ["ridgeline"], [(2, 64)], variants=["stride"])
    assert make_plan("rmsnorm", ["ridgeline"], [(2, 64)], variants=["strided+w-fp32"]).variants == ["strided+w-fp32"]
    with pytest.raises(ValueError, match="baseline: 'nope'"):
        make_plan("rmsnorm", ["ridgeline", "torch-F"], [(2, 64)], baseline="nope")
    assert make_plan("rmsnorm", ["ridgeline", "torch-F"], [(2, 64)]).baseline == "torch-F"
    assert make_plan("rmsnorm", ["torch-F", "torch-eager"], [(2, 64)]).baseline == "torch-eager"


def test_resume_refuses_new_settings(tmp_path):
    from typer.testing import CliRunner

    from ridgeline.cli import app

    out = tmp_path / "r.json"
    bench("rmsnorm", ["torch-F"], [(2, 64)], [torch.float32], budget_s=0.02, json_path=out, db=tmp_path / "d")
    r = CliRunner().invoke(app, ["bench", "rmsnorm", "--resume", str(out), "--budget", "1"])
    assert r.exit_code == 2 and "keeps its own settings" in r.output


def test_git_sha_given_by_the_caller_wins(monkeypatch):
    """A tree copied to a GPU machine may carry a stale .git: the commit named in the run command is recorded."""
    from ridgeline.records.env import git_state

    monkeypatch.setenv("RIDGELINE_GIT_SHA", "abc1234")
    monkeypatch.setenv("RIDGELINE_GIT_DIRTY", "0")
    state = git_state()
    assert state["git_sha"] == "abc1234" and state["git_dirty"] is False
    assert state.get("git_sha_checkout") != "abc1234"  # the checkout's own HEAD, kept when it disagrees
    monkeypatch.delenv("RIDGELINE_GIT_SHA")
    monkeypatch.delenv("RIDGELINE_GIT_DIRTY")
    assert git_state()["git_sha"] != "abc1234"


# An RMSNorm stand-in whose values are right but whose bits follow the batch (a row alone differs) or the call
# (another summation order each time, as FlashAttention's atomic dQ): timed with the caveat, never struck out as
# wrong, never counted as clean.
_ORDER_VARIANT = {
    "batch_dependent": ("if x.shape[0] > 1:\n        y = y * (1 + 2.0 ** -22)", "not batch invariant",
                        "not batch invariant (values checked)"),
    "jittery": ("y = y * (1 + torch.rand_like(y) * 2.0 ** -22)", "not deterministic",
                "not batch invariant; not deterministic (values checked)"),  # (rows alone differ too)
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU path")
@pytest.mark.parametrize("name", sorted(_ORDER_VARIANT))
def test_right_values_in_another_summation_order_are_timed_and_flagged(tmp_path, name):
    body, lacks, caveat = _ORDER_VARIANT[name]
    path = tmp_path / "variant_kernels.py"
    path.write_text(f"""import torch
def {name}(x, weight, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    {body}
    return y.to(x.dtype)
""")
    impl = f"{path}:{name}"
    out = tmp_path / "run.json"
    bench("rmsnorm", ["ridgeline", impl], [(4, 256)], [torch.float32], budget_s=0.05, json_path=out,
          db=tmp_path / "runs.sqlite")
    d = json.loads(out.read_text())
    check = next(c for c in d["checks"] if c["impl"] == impl)
    reasons = check["reasons"]
    assert not check["passed"] and any(r.startswith(lacks) for r in reasons), reasons
    assert all(r.startswith(("not batch invariant", "not deterministic")) for r in reasons), reasons
    timed = [m for m in d["measurements"] if m["impl"] == impl]
    assert timed and all(m["caveat"] == caveat for m in timed)
    assert all("caveat" not in m for m in d["measurements"] if m["impl"] == "ridgeline")

    from ridgeline.report.rules import evaluate

    notes = evaluate(d)
    assert any(n.rule == "not-invariant" and n.impl == impl and lacks in n.detail for n in notes)
    assert not any(n.rule == "wrong" for n in notes), "right values are not reported as wrong"


def test_the_first_graph_timings_in_a_process_are_discarded(monkeypatch):
    """The first graph timings of a process ran ~10% faster on the H200 (one row, graph-hot): `time_graph` runs
    SETTLE_GRAPH_TIMINGS discarded ones first (short budget, the same calls), then never again."""
    from ridgeline.harness import timing

    calls = []

    def fake_once(fns, budget_s, regime, target_replay_ms, max_calls, verify=None):
        calls.append(budget_s)
        return timing.Timing(regime, [float(len(calls))], float(len(calls)), 0.0, 1, True)

    monkeypatch.setattr(timing, "_time_graph_once", fake_once)
    monkeypatch.setattr(timing, "_graph_timings_run", 0)
    first = timing.time_graph([lambda: None], 0.3, regime="graph-hot")
    assert calls == [timing.SETTLE_BUDGET_S] * timing.SETTLE_GRAPH_TIMINGS + [0.3]
    assert first.median_us == timing.SETTLE_GRAPH_TIMINGS + 1  # (the kept timing is the last one run)
    timing.time_graph([lambda: None], 0.05, regime="graph-cold")
    assert calls[-1] == 0.05 and len(calls) == timing.SETTLE_GRAPH_TIMINGS + 2
    assert timing.SETTLE_GRAPH_TIMINGS >= 2  # (the H200 measured two fast timings before the steady ones)


def test_a_settle_timing_that_fails_is_not_counted(monkeypatch):
    """A discarded timing that raises (capture failure, OOM: the bench records it and goes on) leaves the process
    unsettled, so the next call settles in full before its kept timing."""
    from ridgeline.harness import timing

    calls = []

    def fake_once(fns, budget_s, regime, target_replay_ms, max_calls, verify=None):
        calls.append(budget_s)
        if len(calls) == 1:
            raise RuntimeError("capture failed")
        return timing.Timing(regime, [1.0], 1.0, 0.0, 1, True)

    monkeypatch.setattr(timing, "_time_graph_once", fake_once)
    monkeypatch.setattr(timing, "_graph_timings_run", 0)
    with pytest.raises(RuntimeError, match="capture failed"):
        timing.time_graph([lambda: None], 0.3, regime="graph-hot")
    timing.time_graph([lambda: None], 0.3, regime="graph-hot")
    assert calls == [timing.SETTLE_BUDGET_S] * (1 + timing.SETTLE_GRAPH_TIMINGS) + [0.3]


def test_a_slow_call_is_timed_over_at_least_two_rounds():
    """A call slower than the whole budget (an interpreted kernel on a busy CI machine) still gets two rounds: one
    round of three samples gives no median to compare and failed the bench's own sample floor."""
    import time

    from ridgeline.harness.timing import time_cpu

    calls = []
    t = time_cpu(lambda: (calls.append(1), time.sleep(0.02)), budget_s=0.001)
    assert t.n == 6 and len(t.samples_us) == 6 and len(calls) == 7  # (one warm-up call)
    assert min(t.samples_us) >= 0.02e6


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU path")
def test_a_timed_implementation_carries_its_checks_notes(tmp_path):
    path = tmp_path / "picky.py"
    path.write_text(textwrap.dedent("""
        import torch
        def picky(x, weight, eps):
            if x.shape[0] == 1:
                raise RuntimeError("needs more rows")
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    """))
    out = tmp_path / "run.json"
    bench("rmsnorm", ["ridgeline", f"{path}:picky"], [(4, 256)], [torch.float32], budget_s=0.02, json_path=out)
    d = json.loads(out.read_text())
    by_impl = {m["impl"]: m for m in d["measurements"]}
    assert "check_notes" not in by_impl["ridgeline"]
    assert by_impl[f"{path}:picky"]["check_notes"][0].startswith("batch invariance not checked")
    assert next(c for c in d["checks"] if c["impl"] == f"{path}:picky")["notes"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU path")
def test_a_failed_timing_frees_what_its_frames_held(tmp_path):
    """The traceback of an implementation that fails while timed holds its frames (and on a GPU a failed capture's
    graph pool): the bench must let go of them before the next case (on the H200 they piled up to an OOM)."""
    import sys
    import types

    state = types.ModuleType("flaky_state")  # shared by every load of the user's file (the bench loads it anew)
    state.calls, state.held = 0, []
    sys.modules["flaky_state"] = state
    path = tmp_path / "flaky.py"
    path.write_text(textwrap.dedent("""
        import weakref
        import torch
        import flaky_state
        def flaky(x, weight, eps):
            flaky_state.calls += 1
            big = torch.empty(1 << 20)  # what a failing call's frame holds
            if flaky_state.calls > 10:  # passes the check's few calls, fails while timed
                flaky_state.held.append(weakref.ref(big))
                err = RuntimeError("fails under timing")  # a local naming its own exception: a reference cycle
                raise err
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    """))
    try:
        record = bench("rmsnorm", ["torch-eager", f"{path}:flaky"], [(4, 256)], [torch.float32], budget_s=0.02,
                       json_path=tmp_path / "run.json")
        assert any(f["stage"] == "time" and "fails under timing" in f["reason"] for f in record.failures), \
            record.failures
        assert state.held and all(ref() is None for ref in state.held), "a failed call's frame still holds tensors"
    finally:
        del sys.modules["flaky_state"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU path")
def test_a_peer_just_past_the_tolerance_is_timed_with_a_caveat_but_a_wrong_one_is_not(tmp_path):
    """Leaving out a production peer whose arithmetic is a little less precise would flatter us: it is timed and
    flagged. A peer far off, or a user's implementation just past the tolerance, is never timed."""
    from ridgeline.core import registry

    def rms(x, weight, eps, noise):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        return (y * (1 + noise)).to(x.dtype)

    # fp32 rmsnorm's tolerance is tiny: a relative error of 3e-5 is a few times it, 1e-2 is hundreds of times.
    registry.register_impl("rmsnorm", "test-near-peer", "peer", lambda: lambda x, w, eps: rms(x, w, eps, 3e-5))
    registry.register_impl("rmsnorm", "test-far-peer", "peer", lambda: lambda x, w, eps: rms(x, w, eps, 1e-2))
    path = tmp_path / "near.py"
    path.write_text("import torch\ndef near(x, weight, eps):\n    xf = x.float()\n"
                    "    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()\n"
                    "    return (y * (1 + 3e-5)).to(x.dtype)\n")
    try:
        record = bench("rmsnorm", ["torch-eager", "test-near-peer", "test-far-peer", f"{path}:near"], [(4, 256)],
                       [torch.float32], budget_s=0.02, json_path=tmp_path / "run.json")
    finally:
        for name in ("test-near-peer", "test-far-peer"):
            registry._FACTORIES["rmsnorm"].pop(name, None)
            registry._RESOLVED.pop(("rmsnorm", name), None)
    checks = {c["impl"]: c for c in record.checks}
    assert not checks["test-near-peer"]["passed"] and 1 < checks["test-near-peer"]["worst_value_ratio"] <= 8
    assert checks["test-far-peer"]["worst_value_ratio"] > 8
    timed = {m["impl"]: m for m in record.measurements}
    assert "test-near-peer" in timed and "the tolerance" in timed["test-near-peer"]["caveat"]
    assert "test-far-peer" not in timed and f"{path}:near" not in timed
    # The result-reuse guard holds it to the allowance that admitted it: its imprecision, already recorded by the
    # check, is not "result reuse" (that made it suspect, so never the best peer, and called it a cheat).
    assert not timed["test-near-peer"].get("suspect"), timed["test-near-peer"]["suspect"]
    assert timed["torch-eager"]["best_peer"] == "test-near-peer"
    assert "the tolerance" in timed["torch-eager"]["best_peer_caveat"]
    assert timed["torch-eager"]["baseline"] == "torch-eager" and timed["torch-eager"]["baseline_caveat"] is None
    annotate_speedups(record, "test-near-peer")  # a near-miss baseline: its caveat beside every speedup over it
    assert "the tolerance" in timed["torch-eager"]["baseline_caveat"]
    # The report shows the admitted peer with its caveat, not struck out as WRONG.
    from ridgeline.records.record import load_record as _load
    from ridgeline.report import write_report

    write_report(_load(tmp_path / "run.json"), tmp_path / "rep", fmt="md")
    row = next(line for line in (tmp_path / "rep" / "report.md").read_text().splitlines()
               if "| test-near-peer |" in line)
    assert "the tolerance" in row and "WRONG" not in row, row


def test_releasing_memory_after_a_failure_survives_a_sticky_device_error(monkeypatch):
    """A peer's illegal memory access leaves the CUDA context failing every synchronize: the failure is already
    recorded, so freeing memory after it must not raise out of the sweep."""
    from ridgeline.harness import bench as bench_mod

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", broken)
    bench_mod.release_device_memory(torch.device("cuda"))


def test_an_impl_whose_capture_failed_is_not_captured_again(tmp_path, monkeypatch):
    """A failed CUDA-graph capture's memory pool is never returned, so once an impl's capture fails the sweep
    records its later graph timings as failures saying where the first one failed, and never captures it again;
    its other regimes and the other impls are timed as before."""
    from ridgeline.harness import bench as bench_module
    from ridgeline.harness.timing import Timing

    captured: list[tuple[str, str]] = []

    def fake_time(spec, impl, case, regime, device, plan, profile, slack=1.0):
        captured.append((impl.name, regime))
        if impl.name == "torch-eager" and regime == "graph-cold":
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")
        return Timing(regime=regime, samples_us=[10.0, 11.0, 12.0], median_us=11.0, iqr_us=1.0, n=3, stable=True)

    monkeypatch.setattr(bench_module, "_time", fake_time)
    monkeypatch.setattr(bench_module, "regimes_for", lambda regimes, case, device, spec: ["graph-cold", "cold-eager"])
    # (the timer guard would put the harness's own _time back before each timing: a replaced timer is a cheat)
    monkeypatch.setattr(bench_module.guards, "restore_timers", lambda: {})
    record = bench("fused_add_rmsnorm", ["ridgeline", "torch-eager"], SHAPES, [torch.float32], budget_s=0.05,
                   json_path=tmp_path / "run.json")
    assert captured.count(("torch-eager", "graph-cold")) == 1
    assert captured.count(("ridgeline", "graph-cold")) == len(SHAPES)
    assert captured.count(("torch-eager", "cold-eager")) == len(SHAPES)
    again = [f for f in record.failures if f["impl"] == "torch-eager" and f["regime"] == "graph-cold"]
    assert len(again) == len(SHAPES) and "during capture" in again[0]["reason"]
    assert all(f["reason"].startswith("not captured again: its capture failed at ") for f in again[1:])
    assert bench_module.is_capture_failure("operation not permitted when stream is capturing")
    assert not bench_module.is_capture_failure("OutOfMemoryError: CUDA out of memory")
