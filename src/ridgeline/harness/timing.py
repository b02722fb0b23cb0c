"""One honest way to time a callable, per regime.

Regimes (every implementation at a shape is timed in the same one, and the record says which):
- cold-eager: one eager call at a time, L2 flushed before each (triton.testing.do_bench), device events;
- graph-cold: CUDA-graph replay over rotating input sets whose total exceeds the L2 (launch gaps hidden,
  data cold): how serving engines run small kernels;
- graph-hot:  CUDA-graph replay on one input set (hot L2: the previous layer just wrote it);
- host:       host time of one eager call from Python (what an engine running without graphs pays per call);
- cpu:        wall time of a call on the CPU (interpreter or torch CPU): says nothing about GPU speed.
Sampling is adaptive: rounds of samples until the median moves by less than 1% between rounds, or the
budget ends. Raw samples are kept.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# The host clock, bound when ridgeline loads: an implementation that replaces time.perf_counter cannot
# stretch or shrink the harness's budgets (the guards name it and put the original back).
_clock = time.perf_counter

REGIMES = ("cold-eager", "graph-cold", "graph-hot", "host", "cpu")
STABLE_REL = 0.01
# A median that settled is still not "stable" when the samples spread this much (IQR / median): the figure would
# move with the next run (a CPU timing with an IQR of 29% of its median was once called stable).
STABLE_MAX_IQR_REL = 0.2


@dataclass
class Timing:
    regime: str
    samples_us: list[float]
    median_us: float
    iqr_us: float
    n: int
    stable: bool
    extra: dict[str, Any] = field(default_factory=dict)
    suspect: list[str] = field(default_factory=list)  # what the guards caught (the bench records it)

    def to_dict(self) -> dict[str, Any]:
        return {"regime": self.regime, "samples_us": [round(s, 5) for s in self.samples_us],
                "median_us": self.median_us, "iqr_us": self.iqr_us, "n": self.n, "stable": self.stable, **self.extra}


def median_iqr(samples: Sequence[float]) -> tuple[float, float]:
    if not samples:
        return float("nan"), float("nan")
    if len(samples) < 4:
        return statistics.median(samples), 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    return q[1], q[2] - q[0]


def _adaptive(regime: str, round_fn: Callable[[], list[float]], budget_s: float, min_samples: int) -> Timing:
    """Collect rounds of samples until the median is stable to STABLE_REL or the budget is spent, at least two
    rounds (a slow call, e.g. an interpreted kernel on the CPU, would otherwise leave one round of a few samples)."""
    samples: list[float] = []
    prev = None
    stable = False
    t_end = _clock() + budget_s
    while True:
        samples += round_fn()
        med, _ = median_iqr(samples)
        if prev is not None and len(samples) >= min_samples and abs(med - prev) <= STABLE_REL * prev:
            stable = True
            break
        if prev is not None and _clock() > t_end:
            break
        prev = med
    med, iqr = median_iqr(samples)
    stable = stable and med > 0 and iqr <= STABLE_MAX_IQR_REL * med
    return Timing(regime, samples, med, iqr, len(samples), stable)


def time_cold_eager(fn: Callable[[], Any], budget_s: float = 2.0) -> Timing:
    """L2 flushed before every call (do_bench zeroes a 256 MB buffer), device events around each call."""
    import triton.testing

    fn()
    torch.cuda.synchronize()

    def one_round() -> list[float]:
        ms = triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="all")
        return [m * 1e3 for m in ms]

    t = _adaptive("cold-eager", one_round, budget_s, min_samples=50)
    # When a call's host work outlasts the flush queued before it, the GPU idles inside the timed region and
    # the sample measures the host. Measure both, and say so in the record.
    host = _host_us_per_call(fn, 20)
    flush = _flush_us()
    t.extra.update(host_us=host, flush_us=flush, host_bound=host > 0.8 * flush)
    return t


_FLUSH_US: list[float] = []


def _flush_us() -> float:
    """GPU time of do_bench's L2 flush (zeroing its 256 MB buffer), measured once per process."""
    if not _FLUSH_US:
        import triton

        cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cache.zero_()
        start.record()
        for _ in range(10):
            cache.zero_()
        end.record()
        end.synchronize()
        _FLUSH_US.append(start.elapsed_time(end) * 1e3 / 10)
    return _FLUSH_US[0]


def _host_us_per_call(fn: Callable[[], Any], calls: int) -> float:
    torch.cuda.synchronize()
    t0 = _clock()
    for _ in range(calls):
        fn()
    t1 = _clock()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / calls


def _capture(fns: Sequence[Callable[[], Any]], repeats: int, stream: torch.cuda.Stream,
             keep: list[Any] | None = None) -> torch.cuda.CUDAGraph:
    """One graph of `repeats` passes over the calls; `keep` receives the output of the very last call (the graph
    rewrites it on every replay, so a guard can read what a replay computed). Every other output is dropped at
    once, as before: the pool then hands each call the same output buffer, as a serving graph's buffers are, and
    holding more outputs alive would change the addresses, and the timing, of out-of-place calls."""
    g = torch.cuda.CUDAGraph()
    last = repeats * len(fns) - 1
    with torch.cuda.graph(g, stream=stream):
        for r in range(repeats):
            for i, f in enumerate(fns):
                if keep is not None and r * len(fns) + i == last:
                    keep.append(f())
                else:
                    f()
    return g


# The first graph timings in a process ran faster than every later one on the H200: a one-row norm, graph-hot,
# 1.378 and 1.359 us, then 1.526-1.543 from the third timing on, also after 3 s idle, at the same clocks
# (h200-first-timing-bias-s9.json, in git at 723c45c:docs/results/; the cause was not isolated). The bench times
# ours first, so its first shape flattered us by ~10%. Until this many graph timings have run in the process,
# `time_graph` first runs discarded ones on the same calls (the probe's graph floors too, so they read a little
# higher than before).
SETTLE_GRAPH_TIMINGS = 2
SETTLE_BUDGET_S = 0.1
_graph_timings_run = 0


GraphVerify = Callable[[Callable[[], None], list[Any]], list[str]]


def time_graph(
    fns: Sequence[Callable[[], Any]], budget_s: float = 2.0, *, regime: str = "graph-cold",
    target_replay_ms: float = 1.0, max_calls: int = 20000, verify: GraphVerify | None = None,
) -> Timing:
    """Capture calls over each input set (repeated) into one graph; a sample is one replay / calls in it. The
    first call in a process settles first (SETTLE_GRAPH_TIMINGS discarded timings)."""
    global _graph_timings_run
    while _graph_timings_run < SETTLE_GRAPH_TIMINGS:  # (a settle run that raises is not counted: the next call retries)
        _time_graph_once(fns, min(budget_s, SETTLE_BUDGET_S), regime, target_replay_ms, max_calls)
        _graph_timings_run += 1
    t = _time_graph_once(fns, budget_s, regime, target_replay_ms, max_calls, verify)
    _graph_timings_run += 1
    return t


def _time_graph_once(fns: Sequence[Callable[[], Any]], budget_s: float, regime: str, target_replay_ms: float,
                     max_calls: int, verify: GraphVerify | None = None) -> Timing:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in fns:  # warm-up outside capture: compilation, autotuning, allocator pools
            f()
    torch.cuda.synchronize()
    probe_graph = _capture(fns, 1, stream)
    probe_graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    probe_graph.replay()
    end.record()
    end.synchronize()
    per_pass_ms = max(start.elapsed_time(end), 1e-3)
    del probe_graph
    repeats = max(1, min(int(target_replay_ms / per_pass_ms), max_calls // max(1, len(fns))))
    outputs: list[Any] = []
    graph = _capture(fns, repeats, stream, outputs)
    calls = repeats * len(fns)
    graph.replay()
    torch.cuda.synchronize()

    def one_round() -> list[float]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(10)]
        for s, e in events:
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 / calls for s, e in events]

    t = _adaptive(regime, one_round, budget_s, min_samples=30)
    t.extra.update(calls_per_replay=calls, input_sets=len(fns))
    if verify is not None:  # once, after the samples: the graph that was timed, replayed on refilled inputs
        t.suspect += verify(graph.replay, outputs)
    return t


def time_host(fn: Callable[[], Any], budget_s: float = 1.0, calls_per_round: int = 100) -> Timing:
    """Host time per eager call: enqueue a burst without synchronizing (the GPU queue never fills)."""
    for _ in range(calls_per_round):  # warm the interpreter's caches and the CPU clock before counting
        fn()
    torch.cuda.synchronize()

    def one_round() -> list[float]:
        out = []
        for _ in range(5):
            t0 = _clock()
            for _ in range(calls_per_round):
                fn()
            t1 = _clock()
            torch.cuda.synchronize()
            out.append((t1 - t0) * 1e6 / calls_per_round)
        return out

    return _adaptive("host", one_round, budget_s, min_samples=20)


def time_cpu(fn: Callable[[], Any], budget_s: float = 0.5) -> Timing:
    fn()

    def one_round() -> list[float]:
        out = []
        for _ in range(3):
            t0 = _clock()
            fn()
            out.append((_clock() - t0) * 1e6)
        return out

    return _adaptive("cpu", one_round, budget_s, min_samples=5)
