"""`ridgeline comm` on the CPU: gloo over 2 and 4 local processes, every collective, exact verification, the
record, the report; a wrong collective is caught, a failing or hung size is recorded and the sweep goes on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.comm import collectives as C
from ridgeline.comm.runner import make_settings, run
from ridgeline.records.record import load_record

HERE = Path(__file__).resolve().parent
FAST = ["--warmup", "1", "--min-iters", "2", "--max-iters", "2", "--budget", "0.001"]
NATIVE = {op: C.NATIVE_PLACEMENTS[op] for op in C.OPS}


def _settings(**kw):
    base = dict(ops=None, impls=None, dtypes=None, min_bytes=8, max_bytes=16, placements=None, regimes=None,
                nprocs=2, budget=0.001, warmup=1, min_iters=2, max_iters=2, graph_calls=1, timeout=60.0,
                device_type="cpu")
    base.update(kw)
    return make_settings(**base)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One CLI sweep over 2 ranks: every collective at 8 and 16 B, gloo and both of our all-reduce algorithms."""
    out = tmp_path_factory.mktemp("comm2")
    args = ["comm", "--nprocs", "2", "--min", "8", "--max", "16", "--dtype", "fp32", "--impl", "gloo",
            "--impl", "ridgeline-oneshot", "--impl", "ridgeline-twoshot", *FAST, "--json", str(out / "run.json"),
            "--report", str(out / "report")]
    saved = sys.argv  # the record keeps the command line (sys.argv): make it the one a user would type
    sys.argv = ["ridgeline", *args]
    try:
        r = CliRunner().invoke(app, args)
    finally:
        sys.argv = saved
    return r, out


def _series(d, **want):
    return [m for m in d["measurements"] if all(m.get(k) == v for k, v in want.items())]


def test_every_collective_on_two_ranks_is_measured_and_right(two_ranks):
    r, out = two_ranks
    assert r.exit_code == 0, r.output
    d = json.loads((out / "run.json").read_text())
    load_record(out / "run.json")  # a valid ridgeline run record
    assert d["kind"] == "comm" and d["complete"] and d["failures"] == []
    for op, placements in NATIVE.items():
        for placement in placements:
            ms = _series(d, op=op, impl="gloo", variant=placement, regime="eager")
            assert [m["size"] for m in ms] == [8, 16], (op, placement)
            for m in ms:
                assert m["wrong"] == 0 and m["checked"] > 0
                assert m["busbw_gbps"] == pytest.approx(m["algbw_gbps"] * C.bus_factor(op, 2))
                assert m["algbw_gbps"] == pytest.approx(m["bytes"] / m["median_us"] / 1e3)
                assert len(m["samples_us"]) == 2 and m["p99_us"] >= m["median_us"]
    for impl in ("ridgeline-oneshot", "ridgeline-twoshot"):
        for placement in C.PLACEMENTS:
            assert len(_series(d, op="all_reduce", impl=impl, variant=placement)) == 2, (impl, placement)
    reasons = {(k["op"], k["impl"], k["regime"]): k["reason"] for k in d["skipped"]}
    assert "CUDA graphs need a CUDA device" in reasons[("all_reduce", "gloo", "graph")]
    assert reasons[("broadcast", "ridgeline-oneshot", "eager")] == "ridgeline-oneshot implements all_reduce only"
    assert all(rk["no_multicast"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                      "NVSHMEM_DISABLE_NVLS": "1"} for rk in d["device"]["ranks"])
    assert len(d["device"]["ranks"]) == 2
    assert d["env"]["command"].startswith("ridgeline comm --nprocs 2"), d["env"]["command"]
    assert "host clock" in d["settings"]["timing"] and d["device"]["link"]["gbps"] is None


def test_report_says_there_is_no_link_figure_on_cpu(two_ranks):
    _, out = two_ranks
    md = (out / "report" / "comm.md").read_text()
    assert "no figure" in md and "no link figure" in md
    assert "## all_gather / gloo / fp32 / in-place / eager" in md
    assert "| 16 B | 4 |" in md  # all_gather of 16 B: 4 fp32 elements in all
    for png in ("comm-busbw.png", "comm-latency.png"):
        assert (out / "report" / png).read_bytes()[:4] == b"\x89PNG"


def test_every_collective_on_four_ranks():
    d = run(_settings(nprocs=4, min_bytes=16, max_bytes=16,
                      impls=["gloo", "ridgeline-oneshot", "ridgeline-twoshot"])).to_dict()
    assert d["failures"] == []
    for op, placements in NATIVE.items():
        for placement in placements:
            (m,) = _series(d, op=op, impl="gloo", variant=placement)
            assert m["wrong"] == 0 and m["world_size"] == 4 and m["count"] == 4
            factor = {"all_reduce": 1.5, "broadcast": 1.0, "sendrecv": 1.0}.get(op, 0.75)
            assert m["bus_factor"] == pytest.approx(factor)
    assert len(_series(d, op="all_reduce", impl="ridgeline-twoshot")) == 2


def test_wrong_collective_is_caught_and_failures_do_not_stop_the_sweep(tmp_path):
    """A deliberately wrong all_reduce is caught by the verification (#wrong > 0) and never timed; an error at
    one size and a hang at another are recorded with their reasons and the later sizes still run."""
    doubles = HERE / "comm_doubles.py"
    path = tmp_path / "run.json"
    rec = run(_settings(ops=["all_reduce"], min_bytes=16, max_bytes=128, timeout=4.0, placements=["in-place"],
                        impls=[f"{doubles}:flaky", f"{doubles}:off_by_one"]), json_path=path)
    d = json.loads(path.read_text())
    assert d == json.loads(json.dumps(rec.to_dict()))  # the record on disk is the record
    wrong = [f for f in d["failures"] if f["impl"].endswith(":off_by_one")]
    assert [f["size"] for f in wrong] == [16, 32, 64, 128]
    assert all(f["stage"] == "verify" and f["wrong"] == 2 and "wrong result: 2 of" in f["reason"] for f in wrong)
    assert not _series(d, impl=f"{doubles}:off_by_one")  # not reported as a speed
    flaky = {f["size"]: f for f in d["failures"] if f["impl"].endswith(":flaky")}
    assert "OutOfMemoryError" in flaky[32]["reason"]
    assert flaky[64]["stage"] == "timeout" and "no progress for 4 s" in flaky[64]["reason"]
    assert [m["size"] for m in _series(d, impl=f"{doubles}:flaky")] == [16, 128]  # after the hang: fresh ranks


def test_settings_refuse_bad_input_in_one_line():
    cases = [(dict(ops=["allgatherv"]), "--ops: unknown collective 'allgatherv'"),
             (dict(dtypes=["fp8"]), "--dtype: unknown dtype 'fp8'"),
             (dict(impls=["nccl"]), "--impl nccl: this run's backend is gloo (cpu); use --impl gloo"),
             (dict(impls=["mpi"]), "--impl: unknown 'mpi'"),
             (dict(impls=["nofile.py:fn"]), "--impl nofile.py:fn: no such file"),
             (dict(min_bytes=64, max_bytes=8), "--min/--max: expected 1 <= min <= max"),
             (dict(placements=["both"]), "--placement: expected in-place or out-of-place"),
             (dict(regimes=["hot"]), "--mode: expected eager or graph"),
             (dict(budget=0), "--budget: expected seconds > 0"),
             (dict(min_iters=5, max_iters=2), "--min-iters/--max-iters: expected 1 <= min <= max")]
    for kw, message in cases:
        with pytest.raises(ValueError) as e:
            _settings(**kw)
        assert message in str(e.value) and "\n" not in str(e.value), kw


def test_cli_refusal_exits_2():
    r = CliRunner().invoke(app, ["comm", "--ops", "gather"])
    assert r.exit_code == 2 and "--ops: unknown collective 'gather'" in r.output
    # 'inf' parses as a float: it raised OverflowError (a traceback) before; the option is named
    for option, value in (("--max", "inf"), ("--min", "nanK"), ("--max", "lots")):
        r = CliRunner().invoke(app, ["comm", option, value])
        assert r.exit_code == 2 and f"{option}: expected bytes like 8, 64K" in r.output, r.output


@pytest.mark.slow
def test_under_torchrun_each_process_is_a_rank(tmp_path):
    import os
    import subprocess
    import sys

    path = tmp_path / "tr.json"
    src = str(HERE.parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "ridgeline",
                        "--", "comm", "--ops", "all_reduce", "--max", "16", "--impl", "gloo", *FAST,
                        "--json", str(path)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(path.read_text())
    assert d["settings"]["launcher"] == "torchrun" and d["settings"]["world_size"] == 2
    assert [m["size"] for m in d["measurements"]] == [8, 16] and d["failures"] == []
