"""`ridgeline bench`: check every implementation, then time each one the same way, and keep every result.

A wrong implementation is recorded as wrong and never timed (one whose values are right but whose rows are not
batch invariant is timed and flagged, unless it is ours). Each measurement is placed on the probed roofline:
GB/s and TFLOP/s come from the spec's cost model, % of roof uses the probed ceilings, and the speed of light of
a launch is regime-aware: SOL = floor(regime) + max(ideal bytes / copy bandwidth, FLOPs / peak).
"""

from __future__ import annotations

import functools
import gc
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case, Impl, OpSpec, Shape, as_dtype, as_list, dtype_name, parse_dtype
from ridgeline.core.userfile import is_file_ref
from ridgeline.harness import guards
from ridgeline.harness.correctness import check_case, only_order_variance, order_caveat, value_near_miss
from ridgeline.harness.timing import REGIMES, Timing, time_cold_eager, time_cpu, time_graph, time_host
from ridgeline.records.env import THROTTLE_MASK, capture_env, nvml_state, throttle_names
from ridgeline.records.reasons import order_lacks
from ridgeline.records.record import RunRecord, load_record, measurement_key

# The host clock, bound when ridgeline loads: an implementation that replaces time.perf_counter cannot
# stretch or shrink the harness's budgets (the guards name it and put the original back).
_clock = time.perf_counter

# graph-cold rotates input sets until they hold this multiple of the L2 (so every call starts cold).
ROTATE_L2_MULTIPLE = 3
# A peer whose values miss the tolerance by at most this factor (and fail nothing else) is still timed, flagged.
PEER_NEAR_MISS = 8.0
FLOOR_OF_REGIME = {"cold-eager": "cold-eager", "graph-cold": "graph", "graph-hot": "graph", "host": "host"}
DEFAULT_BASELINE = "torch-eager"


@dataclass
class BenchPlan:
    op: str
    impls: list[str]
    shapes: list[Shape]
    dtypes: list[torch.dtype]
    regimes: list[str]
    variants: list[str]
    budget_s: float
    baseline: str
    seed: int = 0

    def settings(self) -> dict[str, Any]:
        spec = registry.get_spec(self.op)
        out = {"op": spec.name, "impls": self.impls, "shapes": [list(s) for s in self.shapes],
                "dtypes": [dtype_name(d) for d in self.dtypes], "regimes": self.regimes,
                "variants": self.variants, "budget_s": self.budget_s, "baseline": self.baseline, "seed": self.seed}
        where = registry.origin(spec.name)
        if where:  # a user's op: resume, report and compare load it from here
            out["spec_file"] = where
        return out

    @classmethod
    def from_settings(cls, s: dict[str, Any]) -> BenchPlan:
        return cls(s.get("spec_file") or s["op"], list(s["impls"]), [tuple(x) for x in s["shapes"]],
                   [parse_dtype(d) for d in s["dtypes"]],
                   list(s["regimes"]), list(s.get("variants", [""])), float(s["budget_s"]), s["baseline"],
                   int(s.get("seed", 0)))

    def cases(self) -> list[Case]:
        return [Case(tuple(s), d, v) for s in self.shapes for d in self.dtypes for v in self.variants]


def regimes_for(requested: Sequence[str], case: Case, device: torch.device, spec: OpSpec | None = None) -> list[str]:
    """The regimes a case is timed in: `auto` is the op's own rule (OpSpec.auto_regime); no GPU means `cpu`."""
    for r in requested:
        if r != "auto" and (r not in REGIMES or r == "cpu"):
            raise ValueError(f"regime: expected auto or one of {', '.join(REGIMES[:-1])}, got {r!r}")
    if device.type != "cuda":
        return ["cpu"]
    out: list[str] = []
    for r in requested:
        if r == "auto":
            if spec is None:
                raise ValueError("regime: 'auto' needs the op's contract to choose")
            r = spec.auto_regime(case)
        if r not in REGIMES or r == "cpu":
            raise ValueError(f"regime: expected auto or one of {', '.join(REGIMES[:-1])} on a GPU, got {r!r}")
        if r not in out:
            out.append(r)
    return out


def default_impls(op: str) -> list[str]:
    """Ours first, then every peer that is available here."""
    impls = registry.implementations(op)
    return [i.name for i in impls if i.source == "ours"] + [i.name for i in impls if i.source != "ours"
                                                             and i.available]


def _bound(fn: Callable[..., Any], spec: OpSpec, inputs: dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument call of the implementation (no per-call harness work in the timed path)."""
    return functools.partial(spec.call, fn, inputs)


def _time(spec: OpSpec, impl: Impl, case: Case, regime: str, device: torch.device, plan: BenchPlan,
          profile: dict[str, Any], slack: float = 1.0) -> Timing:
    """Time one implementation in one regime, then run the guards on what was timed (once, not per sample).
    `slack`: the result-reuse guard's tolerance factor (PEER_NEAR_MISS for a peer timed as a near miss)."""
    inputs = spec.make_inputs(case, device, plan.seed)
    call = _bound(impl.fn, spec, inputs)
    verify_seed = plan.seed + 65537
    if regime in ("cpu", "cold-eager", "host"):
        timer = {"cpu": time_cpu, "cold-eager": time_cold_eager, "host": time_host}[regime]
        t = timer(call, plan.budget_s)
        g0 = _clock()
        if device.type == "cuda":
            t.suspect += guards.wall_vs_events(call) + guards.side_streams(call)
        t.suspect += guards.verify_eager(spec, impl, case, inputs, device, verify_seed, slack)
        t.extra["guard_s"] = round(_clock() - g0, 4)  # what the guards cost, once per measurement
        return t
    sets = [inputs]
    if regime == "graph-cold":
        cost = spec.cost_of(case)
        l2 = profile.get("l2_bytes") or 64 * 2**20
        if cost.bytes < 4 * l2:
            want = min(4096, math.ceil(ROTATE_L2_MULTIPLE * l2 / max(cost.bytes, 1)))
            sets += [spec.make_inputs(case, device, plan.seed + i) for i in range(1, want)]

    spent: list[float] = []

    def verify(replay: Callable[[], None], outputs: list[Any]) -> list[str]:
        g0 = _clock()
        reasons = guards.verify_graph(spec, impl, case, sets, device, verify_seed, replay, outputs, slack)
        spent.append(_clock() - g0)
        return reasons

    t = time_graph([_bound(impl.fn, spec, s) for s in sets], plan.budget_s, regime=regime, verify=verify)
    t.extra["guard_s"] = round(sum(spent), 4)
    return t


def is_capture_failure(reason: str) -> bool:
    """Whether a timing's failure is CUDA-graph capture refusing the call (a host sync, a forbidden API), from
    the error text CUDA and torch give it."""
    text = reason.lower()
    return "capture" in text or "capturing" in text


def release_device_memory(device: torch.device) -> None:
    """Return what dead objects hold (reference cycles through frames included) to the device."""
    gc.collect()
    if device.type == "cuda":
        try:
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
        except RuntimeError:  # a sticky CUDA error of the failed call: its failure is recorded, the sweep goes on
            pass


def place_on_roofline(m: dict[str, Any], spec: OpSpec, case: Case, profile: dict[str, Any]) -> None:
    """Fill bytes, flops, GB/s, TFLOP/s, % of roof, SOL and % of SOL from the spec's cost and the probe."""
    cost = spec.cost_of(case)
    med = m["median_us"]
    m.update(bytes=cost.bytes, flops=cost.flops, compute_unit=cost.unit)
    device_time = m["regime"] not in ("host",)
    m["gbps"] = cost.bytes / med / 1e3 if device_time and med > 0 else None
    m["tflops"] = cost.flops / med / 1e6 if device_time and med > 0 else None
    copy = profile.get("copy_gbps")
    peak = (profile.get("tflops") or {}).get(cost.unit)
    floor = (profile.get("floors_us") or {}).get(FLOOR_OF_REGIME.get(m["regime"], ""), None)
    m["floor_us"] = floor
    if copy and device_time:
        ideal = max(cost.bytes / (copy * 1e3), cost.flops / (peak * 1e6) if peak else 0.0)
        m["pct_of_roof"] = max(m["gbps"] / copy, (m["tflops"] / peak) if peak else 0.0)
        m["sol_us"] = (floor or 0.0) + ideal
        m["pct_of_sol"] = m["sol_us"] / med
    elif m["regime"] == "host" and floor:
        m["pct_of_roof"], m["sol_us"], m["pct_of_sol"] = None, floor, floor / med
    else:
        m["pct_of_roof"] = m["sol_us"] = m["pct_of_sol"] = None


def annotate_speedups(record: RunRecord, baseline: str) -> None:
    """Speedup of each measurement over the named baseline and over the fastest peer at the same point."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for m in record.measurements:
        groups.setdefault((m["op"], tuple(m["shape"]), m["dtype"], m.get("variant", ""), m["regime"]), []).append(m)
    for ms in groups.values():
        base = next((m for m in ms if m["impl"] == baseline and not m.get("suspect")), None)
        for m in ms:
            m["baseline"] = baseline if base else None
            m["baseline_caveat"] = base.get("caveat") if base else None  # e.g. a near-miss torch eager
            if m.get("suspect"):  # a caught implementation never counts as faster (or as the best peer)
                m["speedup_vs_baseline"] = m["speedup_vs_best_peer"] = m["best_peer"] = None
                m["best_peer_caveat"] = None
                continue
            m["speedup_vs_baseline"] = base["median_us"] / m["median_us"] if base and m["median_us"] else None
            peers = [p for p in ms if p.get("source") == "peer" and p["impl"] != m["impl"] and not p.get("suspect")]
            best = min(peers, key=lambda p: p["median_us"], default=None)
            m["best_peer"] = best["impl"] if best else None
            m["best_peer_caveat"] = best.get("caveat") if best else None
            m["speedup_vs_best_peer"] = best["median_us"] / m["median_us"] if best and m["median_us"] else None


def count_tasks(plan: BenchPlan, device: torch.device) -> int:
    spec = registry.get_spec(plan.op)
    return sum(len(plan.impls) * (1 + len(regimes_for(plan.regimes, c, device, spec))) for c in plan.cases())


def run_bench(
    plan: BenchPlan,
    record: RunRecord,
    profile: dict[str, Any],
    device: torch.device,
    progress: Callable[[str], None] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    deadline: float | None = None,
) -> RunRecord:
    """Execute (or continue) a bench plan into `record`, saving after every result. `on_result` sees each new
    measurement or failure (a dict) as soon as it is recorded. Past `deadline` (time.monotonic()) no new case
    starts: the record is saved unfinished, with `stopped` saying how many cases are left (resume finishes it)."""
    spec = registry.get_spec(plan.op)
    impls = [registry.resolve(plan.op, n) for n in plan.impls]
    tick = progress or (lambda desc: None)
    told = on_result or (lambda result: None)
    cases = plan.cases()
    uncapturable: dict[str, str] = {}  # impl -> where and why its first graph capture failed in this run
    for done_cases, case in enumerate(cases):
        if deadline is not None and time.monotonic() > deadline:
            record.stopped = (f"time limit: {len(cases) - done_cases} of {len(cases)} cases not run "
                              "(`ridgeline bench --resume` this record to finish them)")
            if record.path is not None:
                record.save()
            return record
        regimes = regimes_for(plan.regimes, case, device, spec)
        passing: list[Impl] = []
        caveats: dict[str, str] = {}
        slacks: dict[str, float] = {}  # near-miss peers: the guard holds them to the allowance that admitted them
        notes: dict[str, list[str]] = {}
        for impl in impls:
            tick(f"check {impl.name} {case.label()}")
            key = (spec.name, impl.name, tuple(case.shape), dtype_name(case.dtype), case.variant)
            done = record.find_check(key)
            if done is None:
                result = check_case(spec, impl, case, device, plan.seed).to_dict()
                if not result["passed"]:  # the failure first: a kill between the two saves loses nothing
                    failure = {**_failure_base(spec.name, impl, case), "regime": "", "stage": "check",
                               "reason": "; ".join(result["reasons"])}
                    record.add_failure(failure)
                    told(failure)
                record.add_check(result)
                done = result
            if done["passed"]:
                passing.append(impl)
                if done.get("notes"):  # what the check could not check: said beside each of its timings
                    notes[impl.name] = list(done["notes"])
            elif impl.source != "ours" and only_order_variance(done.get("reasons") or []):
                # Right values on every call, but a different summation order per call or per batch size
                # (atomics in FlashAttention's dQ, say): timed and flagged (a peer's speed still matters; ours
                # must pass everything).
                passing.append(impl)
                caveats[impl.name] = order_caveat(done["reasons"])
            elif impl.source == "peer" and value_near_miss(done.get("reasons") or [],
                                                           done.get("worst_value_ratio") or 0.0, PEER_NEAR_MISS):
                # A production peer just past the tolerance (less precise arithmetic, e.g. torch eager's softmax
                # backward at 2.4x in bf16): leaving it out would flatter us, so it is timed, with the caveat.
                passing.append(impl)
                slacks[impl.name] = PEER_NEAR_MISS
                caveats[impl.name] = "; ".join([f"values up to {done['worst_value_ratio']:.1f}x the tolerance",
                                                *order_lacks(done["reasons"])])
        for regime in regimes:
            for impl in impls:
                tick(f"time {impl.name} {case.label()} {regime}")
                if impl not in passing:
                    continue
                key = measurement_key({**_failure_base(spec.name, impl, case), "regime": regime})
                if record.has_measurement(key) or record.has_failure(key, "time"):
                    continue
                if regime.startswith("graph") and impl.name in uncapturable:
                    # A failed capture's private memory pool is never handed back (torch frees it only for a graph
                    # whose capture ended): a capture failing at every shape held ~130 GB by the sweep's 7th
                    # shape and every later case ran out of memory (s16 and s19, Liger's cross-entropy).
                    failure = {**_failure_base(spec.name, impl, case), "regime": regime, "stage": "time",
                               "reason": f"not captured again: {uncapturable[impl.name]}"}
                    record.add_failure(failure)
                    told(failure)
                    continue
                before = guards.tampered_by(impl, guards.restore_timers(), during=False)
                reason = None
                try:
                    timing = _time(spec, impl, case, regime, device, plan, profile, slacks.get(impl.name, 1.0))
                    timing.suspect += before + guards.tampered_by(impl, guards.restore_timers(), during=True)
                except (Exception, SystemExit) as e:  # OOM, capture failure, a peer crashing: record it, go on
                    reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                if reason is not None:
                    if regime.startswith("graph") and is_capture_failure(reason):
                        uncapturable[impl.name] = f"its capture failed at {case.label()} ({reason})"
                    failure = {**_failure_base(spec.name, impl, case), "regime": regime, "stage": "time",
                               "reason": reason}
                    record.add_failure(failure)
                    told(failure)
                    # Only now, with the exception and its traceback gone: their frames hold the inputs and a failed
                    # capture's graph (its private pool). Collected inside `except`, they leaked: six failed Liger
                    # captures held ~130 GB and every later case ran out of memory (s16, cross_entropy_fwd_bwd).
                    release_device_memory(device)
                    continue
                m = {**_failure_base(spec.name, impl, case), "source": impl.source, **timing.to_dict()}
                if impl.name in caveats:
                    m["caveat"] = caveats[impl.name]
                if impl.name in notes:
                    m["check_notes"] = notes[impl.name]
                place_on_roofline(m, spec, case, profile)
                suspect = timing.suspect + guards.faster_than_light(m, profile)
                if suspect:  # kept for the record, never counted as a speedup or a win
                    m["suspect"] = sorted(set(suspect))
                if device.type == "cuda":
                    nv = nvml_state(device.index if device.index is not None else torch.cuda.current_device())
                    m["sm_clock_mhz"] = nv.get("sm_clock_mhz")
                    m["throttled"] = bool(nv.get("throttle_reasons", 0) & THROTTLE_MASK) if nv else None
                    if m["throttled"]:
                        m["throttle_reasons"] = throttle_names(nv["throttle_reasons"])
                    torch.cuda.empty_cache()
                launch = spec.launch_info(case, device) if impl.source == "ours" else None
                if launch:
                    m["launch"] = launch
                if regime == "cpu":
                    m["note"] = "CPU timing (Triton interpreter or torch CPU): says nothing about GPU speed"
                record.add_measurement(m)
                told(m)
        annotate_speedups(record, plan.baseline)
    record.finish()
    return record


def _failure_base(op: str, impl: Impl, case: Case) -> dict[str, Any]:
    return {"op": op, "impl": impl.name, "shape": list(case.shape), "dtype": dtype_name(case.dtype),
            "variant": case.variant}


def make_plan(
    op: str | OpSpec,
    impls: Iterable[str] | str | None = None,
    shapes: str | Iterable[Shape] | None = None,
    dtypes: Iterable[torch.dtype | str] | None = None,
    regimes: Iterable[str] | str = ("auto",),
    variants: Iterable[str] | str = ("",),
    budget_s: float | None = None,
    baseline: str | None = None,
    device: torch.device | None = None,
) -> BenchPlan:
    """Resolve defaults (shape set, dtypes, implementations) and fail fast on a typo, before minutes of work."""
    device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    spec = registry.get_spec(op)
    if shapes is None:  # the op's sweep on a GPU, its cpu set without one; else its first set that is not edge
        preferred = "sweep" if device.type == "cuda" else "cpu"
        named = [k for k in spec.shape_sets if k != "edge"] or list(spec.shape_sets)
        if preferred not in spec.shape_sets and not named:
            raise ValueError(f"shapes: {spec.name} has no shape sets; pass shapes such as 4096x4096")
        shapes = preferred if preferred in spec.shape_sets else named[0]
    shape_list = spec.shapes(shapes) if isinstance(shapes, str) else [tuple(s) for s in shapes]
    names = [absolute_ref(n) for n in as_list(impls, "impls")]
    plan = BenchPlan(
        op=registry.origin(spec.name) or (spec.name if isinstance(op, OpSpec) else op),
        impls=names or default_impls(spec.name),
        shapes=shape_list,
        dtypes=[as_dtype(d) for d in as_list(dtypes, "dtypes")]
        or [torch.bfloat16 if torch.bfloat16 in spec.dtypes else spec.dtypes[0]],
        regimes=as_list(regimes, "regimes") or ["auto"],
        variants=as_list(variants, "variants") or [""],
        budget_s=budget_s if budget_s is not None else (1.5 if device.type == "cuda" else 0.3),
        baseline=absolute_ref(baseline) if baseline else "",
    )
    if not plan.baseline:  # torch-eager when benched, else the first peer, else the first implementation
        peers = [n for n in plan.impls if registry.resolve(spec, n).source == "peer"]
        plan.baseline = DEFAULT_BASELINE if DEFAULT_BASELINE in plan.impls else (peers or plan.impls)[0]
    validate_plan(plan, device)
    if baseline is not None and plan.baseline not in plan.impls:
        raise ValueError(f"baseline: {baseline!r} is not among the implementations benched "
                         f"({', '.join(plan.impls)}); add it with --impl or pick one of them")
    return plan


def validate_plan(plan: BenchPlan, device: torch.device) -> None:
    """Everything a plan names must exist and fit the op's contract (a new plan, or one read back to resume)."""
    spec = registry.get_spec(plan.op)
    for name in plan.impls:
        registry.resolve(spec, name)
    spec.check_dtypes(plan.dtypes)
    if not plan.shapes:
        raise ValueError(f"shapes: the plan has no shapes; name a set ({', '.join(spec.shape_sets)}) or MxN,...")
    for shape in plan.shapes:
        spec.check_shape(tuple(shape))
    if not plan.budget_s > 0:
        raise ValueError(f"budget: expected seconds > 0, got {plan.budget_s}")
    for v in plan.variants:
        parts = v.split("+") if v else [""]
        known = [k for k in spec.variants if k]
        if (v and not all(parts)) or any(part and part not in spec.variants for part in parts):
            takes = f"knows {', '.join(map(repr, known))} (join several with '+')" if known else "takes no variants"
            raise ValueError(f"variant: {spec.name} {takes}; got {v!r}")
    for case in plan.cases():
        regimes_for(plan.regimes, case, device, spec)
        try:  # a broken cost model fails here, not minutes into the run
            spec.cost_of(case)
        except Exception as e:
            raise ValueError(f"op: {spec.name}: cost({case.label()}) failed: {type(e).__name__}: {e}") from None


def absolute_ref(name: str) -> str:
    """A user's FILE.py:fn with the file's absolute path (a record resumed from another folder still finds it)."""
    if not is_file_ref(name):
        return name
    path, fn = name.rsplit(":", 1)
    return f"{Path(path).expanduser().resolve()}:{fn}"


def bench(
    op: str | None = None,
    impls: Iterable[str] | None = None,
    shapes: str | Iterable[Shape] | None = None,
    dtypes: Iterable[torch.dtype] | None = None,
    regimes: Iterable[str] = ("auto",),
    variants: Iterable[str] = ("",),
    budget_s: float | None = None,
    baseline: str | None = None,
    json_path: Path | str | None = None,
    resume: Path | str | None = None,
    db: Path | str | None = None,
    argv: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    refresh_probe: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    plan: BenchPlan | None = None,
    time_limit_s: float | None = None,
) -> RunRecord:
    """Python API of `ridgeline bench`; returns the run record (also written to JSON and the SQLite store).

    `resume` continues a killed run from its record: finished checks and measurements are kept, not redone.
    `time_limit_s`: start no new case after this many seconds (the case under way finishes); the record is then
    unfinished, `stopped` says what is left, and a resume finishes it.
    """
    if time_limit_s is not None and not time_limit_s > 0:
        raise ValueError(f"time_limit_s: expected seconds > 0, got {time_limit_s}")
    start = time.monotonic()
    from ridgeline.harness.probe import device_profile
    from ridgeline.records.paths import default_db, default_run_path
    from ridgeline.records.store import Store

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if resume is not None:
        record = load_record(resume)
        plan = BenchPlan.from_settings(record.settings)
        here = torch.cuda.get_device_name() if device.type == "cuda" else None
        if here != record.env.get("gpu"):
            raise ValueError(f"resume: the run was measured on {record.env.get('gpu') or 'the CPU'}, this machine "
                             f"has {here or 'no GPU'}: its numbers would not be comparable; start a new run")
        if json_path is not None and Path(json_path) != Path(resume):
            record.path = Path(json_path)
        record.complete = False
        record.stopped = None
    else:
        if plan is None:
            if op is None:
                raise ValueError("op: name an op, or pass resume=RUN.json")
            plan = make_plan(op, impls, shapes, dtypes, regimes, variants, budget_s, baseline, device)
        env = capture_env(argv)
        record = RunRecord(kind="bench", command=env["command"], env=env,
                           device=device_profile(refresh=refresh_probe), settings=plan.settings())
        record.path = Path(json_path) if json_path else default_run_path(record.run_id)
    record.save()
    try:
        run_bench(plan, record, record.device, device, progress, on_result,
                  None if time_limit_s is None else start + time_limit_s)
    finally:  # a killed or failed run is stored too (as partial): `ridgeline runs` lists it
        with Store(db or default_db()) as store:
            store.put(record)
    return record


# Calls of one implementation per case and regime: check (run, again, three row subsets, fresh inputs), then a
# warm-up and at least two rounds of three timed calls on the CPU.
CPU_CALLS_PER_CHECK = 6
CPU_CALLS_PER_TIMING = 7


# The estimate times a call on this many rows of the smallest case and scales by bytes (seconds, not minutes).
ESTIMATE_ROWS = 4


def estimate_cpu_seconds(plan: BenchPlan) -> float:
    """About how long a plan takes on the CPU (Triton's interpreter costs ~1 ms per program instance): each
    implementation is called on a few rows of the plan's smallest case, once to warm up (compiles; paid again per
    shape, as torch.compile recompiles for each) and once timed; the timed call is scaled by each case's bytes."""
    spec = registry.get_spec(plan.op)
    cases = sorted(plan.cases(), key=lambda c: spec.cost_of(c).bytes)
    if not cases:
        return 0.0
    small = cases[0]
    device = torch.device("cpu")
    try:
        inputs = spec.make_inputs(small, device, plan.seed)
    except Exception as e:
        raise ValueError(f"op: {spec.name}: make_inputs({small.label()}) failed: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}") from None
    rows = spec.rows(small.shape)
    part = spec.batch_subset(inputs, slice(0, ESTIMATE_ROWS)) if rows > ESTIMATE_ROWS else inputs
    part_bytes = max(1.0, spec.cost_of(small).bytes * min(1.0, ESTIMATE_ROWS / max(rows, 1)))
    total = 0.0
    for name in plan.impls:
        impl = registry.resolve(plan.op, name)
        if not impl.available:
            continue
        try:
            t0 = _clock()
            spec.call(impl.fn, part)
            t1 = _clock()
            spec.call(impl.fn, part)
            t2 = _clock()
        except (Exception, SystemExit):  # the check will say what is wrong with it
            continue
        per_call, warm_up = t2 - t1, max(0.0, (t1 - t0) - (t2 - t1))
        for case in cases:
            scale = max(1.0, spec.cost_of(case).bytes / part_bytes)
            total += warm_up + per_call * scale * (CPU_CALLS_PER_CHECK + CPU_CALLS_PER_TIMING) + plan.budget_s
    return total


guards.snapshot_timers()  # (again, in case no user file was imported through the package facade)
