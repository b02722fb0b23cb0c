"""The bench cannot be fooled: an adversarial implementation of each class is caught in each regime it applies to,
and honest implementations (ours, the peers) are never flagged. GPU-only classes and regimes are marked gpu."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

import ridgeline
from ridgeline.cli import app
from ridgeline.core.spec import Case
from ridgeline.harness import guards
from ridgeline.harness.correctness import check_case

runner = CliRunner()
HAS_CUDA = torch.cuda.is_available()
DEV = "cuda" if HAS_CUDA else "cpu"

ADVERSARIES = '''
import weakref
import torch

def _ref(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)

_memo = {}
def memo(x, weight, eps):  # remembers its output by input identity (and version): right once, then stale
    hit = _memo.get(id(x))
    if hit is None or hit[0]() is not x or hit[1] != x._version:
        hit = _memo[id(x)] = (weakref.ref(x), x._version, _ref(x, weight, eps))
    return hit[2]

def zeroes_its_input(x, weight, eps):  # writes the input so that a reference taken afterwards agrees
    y = _ref(x, weight, eps) * 0
    x.zero_()
    return y

def aliases(x, weight, eps):  # returns its (rewritten) input as the output
    x.copy_(_ref(x, weight, eps))
    return x

_stream = None
def side_stream(x, weight, eps):  # does its work on a private stream and returns at once
    global _stream
    if not x.is_cuda:
        return _ref(x, weight, eps)
    _stream = _stream or torch.cuda.Stream()
    _stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_stream):
        for _ in range(20):
            y = _ref(x, weight, eps)
    return y

def honest(x, weight, eps):
    return _ref(x, weight, eps)
'''

TAMPER = '''
import time
import torch
_real = time.perf_counter
time.perf_counter = lambda: _real() / 1000.0   # every interval looks 1000x shorter

def fast(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
'''


@pytest.fixture
def adversaries(tmp_path):
    """A fresh module per test: a memo that an earlier test filled would be caught by the check instead."""
    path = tmp_path / "adversaries.py"
    path.write_text(ADVERSARIES)
    return path


def _bench(path, fn, regimes, shapes=((4, 256),)):
    return ridgeline.bench("rmsnorm", [f"{path}:{fn}", "torch-eager"], shapes=list(shapes), dtypes=[torch.float32],
                           regimes=regimes, budget_s=0.05)


def _suspects(record, impl_suffix):
    return [m.get("suspect") for m in record.measurements if m["impl"].endswith(impl_suffix)]


CPU_REGIMES = ["auto"] if not HAS_CUDA else ["cold-eager", "graph-cold", "graph-hot", "host"]


def test_result_reuse_is_caught_and_never_counts(adversaries):
    record = _bench(adversaries, "memo", CPU_REGIMES)
    memo = [m for m in record.measurements if m["impl"].endswith(":memo")]
    assert memo and all(m.get("suspect") for m in memo), [m.get("suspect") for m in memo]
    assert all(any(guards.RESULT_REUSE in r for r in m["suspect"]) for m in memo)
    assert all(m["speedup_vs_baseline"] is None and m["speedup_vs_best_peer"] is None for m in memo)
    honest = [m for m in record.measurements if m["impl"] == "torch-eager"]
    assert honest and not any(m.get("suspect") for m in honest)
    assert all(m.get("best_peer") in (None, "torch-eager") for m in record.measurements)


def test_a_caught_implementation_is_named_in_the_cli_table_and_compare(adversaries, tmp_path):
    out = tmp_path / "run.json"
    r = runner.invoke(app, ["bench", "rmsnorm", "--impl", f"{adversaries}:memo", "--impl", "torch-eager",
                            "--shapes", "4x256", "--dtype", "fp32", "--budget", "0.05", "--json", str(out)],
                      env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "SUSPECT" in r.output and "result reuse" in r.output
    r = runner.invoke(app, ["compare", str(out), str(out)], env={"COLUMNS": "250"})
    assert r.exit_code == 0 and "SUSPECT" in r.output, r.output
    r = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "rep")])
    assert r.exit_code == 0 and "SUSPECT: result reuse" in (tmp_path / "rep" / "report.md").read_text()
    assert any(m.get("suspect") for m in json.loads(out.read_text())["measurements"])


def test_inputs_rewritten_to_fool_the_reference_fail_the_check(adversaries):
    from ridgeline.core import registry

    spec = registry.get_spec("rmsnorm")
    for fn, expected in (("zeroes_its_input", "max error"), ("aliases", "aliases input x")):
        r = check_case(spec, registry.resolve("rmsnorm", f"{adversaries}:{fn}"), Case((4, 64), torch.float32), DEV)
        assert not r.passed and any(expected in reason for reason in r.reasons), r.reasons
        assert any("input x was modified" in reason for reason in r.reasons), r.reasons


def test_a_tampered_timer_is_caught_put_back_and_marked(tmp_path):
    path = tmp_path / "tamper.py"
    path.write_text(TAMPER)
    import time

    real = time.perf_counter
    try:
        record = _bench(path, "fast", CPU_REGIMES)
        assert time.perf_counter is real  # put back
        fast = [m for m in record.measurements if m["impl"].endswith(":fast")]
        assert fast and all(any(guards.TIMER_TAMPERED in r for r in (m.get("suspect") or [])) for m in fast)
        assert all(m["median_us"] > 1.0 for m in fast)  # timed with the real clock
    finally:
        time.perf_counter = real


def test_faster_than_light_is_marked_and_near_light_is_not():
    profile = {"copy_gbps": 4000.0, "l2_gbps": 5000.0, "l2_bytes": 60 * 2**20, "tflops": {"fp32": 50.0}}
    m = {"regime": "cold-eager", "median_us": 5.0, "sol_us": 10.0, "bytes": 10**7, "flops": 0, "floor_us": 2.0}
    assert guards.faster_than_light(m, profile)
    assert not guards.faster_than_light({**m, "median_us": 9.5}, profile)
    # Hot data in L2 may beat DRAM, not the L2 roof with headroom.
    hot = {**m, "regime": "graph-hot", "bytes": 16 * 2**20, "floor_us": 0.7, "sol_us": 0.7 + 16 * 2**20 / 4e6}
    assert not guards.faster_than_light({**hot, "median_us": 0.7 + 16 * 2**20 / 5.8e6}, profile)
    assert guards.faster_than_light({**hot, "median_us": 0.7}, profile)
    # An in-place call's traffic (64 MiB) is twice what it touches: graph-hot is held against the L2 roof at any
    # size (1024x8192 fused in place ran at 12 us against a DRAM bound of 16.4 us on the H200).
    inplace = {**m, "regime": "graph-hot", "bytes": 4 * 1024 * 8192 * 2, "floor_us": 0.7, "sol_us": 16.4}
    assert not guards.faster_than_light({**inplace, "median_us": 12.0}, profile)


@pytest.mark.parametrize("impl", ["ridgeline", "torch-eager", "torch-F"])
def test_honest_implementations_are_not_flagged(impl):
    record = ridgeline.bench("rmsnorm", [impl], shapes=[(4, 256)], dtypes=[torch.float32], regimes=CPU_REGIMES,
                             budget_s=0.05)
    assert record.measurements and not any(m.get("suspect") for m in record.measurements), \
        [m.get("suspect") for m in record.measurements]


@pytest.mark.gpu
def test_side_stream_work_is_caught_in_eager_regimes(adversaries):
    record = _bench(adversaries, "side_stream", ["cold-eager", "host"], shapes=[(4096, 4096)])
    caught = [m for m in record.measurements if m["impl"].endswith(":side_stream")]
    assert caught and all(any(guards.SIDE_STREAM in r for r in (m.get("suspect") or [])) for m in caught), \
        [m.get("suspect") for m in caught]


@pytest.mark.gpu
@pytest.mark.parametrize("op, impls", [
    ("rmsnorm", ["ridgeline", "torch-eager", "torch-F", "torch-compile", "liger"]),
    ("fused_add_rmsnorm", ["ridgeline", "ridgeline-inplace", "torch-compile", "liger"]),
])
def test_ours_and_the_peers_are_clean_in_every_gpu_regime(op, impls):
    from ridgeline.core import registry

    available = [i for i in impls if registry.resolve(op, i).available]
    record = ridgeline.bench(op, available, shapes=[(1, 4096), (4096, 4096)], dtypes=[torch.bfloat16],
                             regimes=["cold-eager", "graph-cold", "graph-hot", "host"], budget_s=0.2)
    flagged = [(m["impl"], m["shape"], m["regime"], m["suspect"]) for m in record.measurements if m.get("suspect")]
    assert record.measurements and not flagged, flagged


def test_a_weight_transform_cache_passes_but_a_result_cache_is_caught():
    """int4_matmul's packed weight is a static input (prepared once, as serving does): a peer that caches its
    dequantized weight passes the result-reuse guard; one that caches its output keyed by the weight does not."""
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Impl
    from ridgeline.ops.int4_matmul.pack import unpack_int4

    spec = get_spec("int4_matmul")
    assert spec.static_inputs == ("w_packed", "scales")
    case = Case((5, 64, 256), torch.float32)
    dequantized: dict[int, torch.Tensor] = {}
    results: dict[int, torch.Tensor] = {}

    def weight_cache(x, w_packed, scales, group_size):
        w = dequantized.setdefault(w_packed.data_ptr(), unpack_int4(w_packed, scales, group_size, dtype=torch.float32))
        return (x.float() @ w.t()).to(x.dtype)

    def result_cache(x, w_packed, scales, group_size):
        return results.setdefault(w_packed.data_ptr(), weight_cache(x, w_packed, scales, group_size))

    dev = torch.device("cpu")
    for fn, caught in ((weight_cache, False), (result_cache, True)):
        impl = Impl(op="int4_matmul", name=fn.__name__, source="user", fn=fn)
        inputs = spec.make_inputs(case, dev, 0)
        spec.call(fn, inputs)  # the timed calls fill the cache
        reasons = guards.verify_eager(spec, impl, case, inputs, dev, 99)
        assert bool(reasons) == caught, (fn.__name__, reasons)


def test_a_near_miss_slack_forgives_imprecision_but_not_result_reuse():
    """The bench times a peer just past the tolerance (PEER_NEAR_MISS) and its guard widens the tolerance by that
    factor: a few times the tolerance passes, a stale result (another input set's output) is still caught."""
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Impl
    from ridgeline.harness.bench import PEER_NEAR_MISS

    spec = get_spec("rmsnorm")
    case = Case((4, 256), torch.float32)
    stale: dict[int, torch.Tensor] = {}

    def ref(x, weight, eps):
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()

    def imprecise(x, weight, eps):  # ~3x the fp32 tolerance
        return ref(x, weight, eps) * (1 + 3e-5)

    def reuses(x, weight, eps):
        return stale.setdefault(x.data_ptr(), imprecise(x, weight, eps))

    dev = torch.device("cpu")
    for fn, slack, caught in ((imprecise, 1.0, True), (imprecise, PEER_NEAR_MISS, False),
                              (reuses, PEER_NEAR_MISS, True)):
        impl = Impl(op="rmsnorm", name=fn.__name__, source="peer", fn=fn)
        inputs = spec.make_inputs(case, dev, 0)
        spec.call(fn, inputs)
        reasons = guards.verify_eager(spec, impl, case, inputs, dev, 99, slack)
        assert bool(reasons) == caught, (fn.__name__, slack, reasons)


def test_only_the_checks_own_value_misses_count_as_a_near_miss():
    from ridgeline.harness.correctness import value_near_miss

    miss = "run: out max error 0.000165 exceeds atol 1e-05 + rtol 1e-05*|ref|"
    fresh = miss.replace("run", "fresh inputs")
    assert value_near_miss([miss, fresh], 2.6, 8.0)
    assert value_near_miss([miss, "not batch invariant: rows 0:1 alone differ bitwise"], 2.6, 8.0)
    assert not value_near_miss([miss], 9.0, 8.0) and not value_near_miss([], 0.0, 8.0)
    # A raised error (here on the fresh inputs, after a passing first run) whose message mimics a value miss.
    assert not value_near_miss([f"raised ValueError: {miss} (peer.py:3)"], 0.5, 8.0)
    assert not value_near_miss(["raised ValueError: out max error 1 exceeds atol 1 + rtol 1*|ref|"], 0.5, 8.0)
    # Nondeterminism is an order property (the second call's values are checked too, under their own tag).
    again = miss.replace("run", "second run")
    assert value_near_miss([miss, "not deterministic: two calls on the same inputs differ bitwise", again], 2.6, 8.0)
    assert not value_near_miss([miss, "input x was modified"], 2.6, 8.0)
