"""What keeps a timing honest: each guard runs once per measurement (never per sample) and names what it caught.

- result reuse: after timing, the timed inputs are refilled in place with fresh values (same pointers) and the
  timed path runs once more (an eager call, or one replay of the timed CUDA graph); its outputs must match the
  float64 reference of the new values. A cache keyed by input identity, or a graph that replays no work, fails.
- work outside the timed stream (GPU): one verification call under the torch profiler lists every kernel it
  launched and the stream each ran on; kernels on a stream other than the caller's are named. The event time of
  a few calls is also compared with their device-synchronised wall time.
- the timer tampered with: torch.cuda.Event, synchronize, time.perf_counter, triton's do_bench and the harness's
  own timing functions are snapshotted when ridgeline loads; an implementation module that replaced any of them
  is named, the originals are put back, and its measurements are marked.
- faster than the speed of light: a median below the regime's SOL (graph-hot: the L2 roof, since replayed data
  stays partly in the L2) beyond a noise margin is marked suspect with the reason.
A suspect measurement keeps its numbers (for the record) but never counts as a speedup or a win.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.spec import Case, Impl, Inputs, OpSpec

# The host clock, bound when ridgeline loads: an implementation that replaces time.perf_counter cannot
# stretch or shrink the harness's budgets (the guards name it and put the original back).
_clock = time.perf_counter

RESULT_REUSE = "result reuse"
SIDE_STREAM = "work outside the timed stream"
TIMER_TAMPERED = "timer tampered"
FASTER_THAN_LIGHT = "faster than the speed of light"
# Beyond noise: a median this far under the speed of light is not a measurement of the work.
SOL_MARGIN = 0.10
# Hot data (graph-hot) may beat DRAM: it is held against the probed L2 copy rate times this headroom (an L2-
# resident 16 MiB copy ran at ~5.8 TB/s on the H200 against a probed L2 figure of ~5.0 TB/s).
L2_HEADROOM = 1.5
# Event time that undercounts the synchronised wall time by more than this factor (plus a fixed slack for host
# overhead) means work finished after the end event.
WALL_OVER_EVENT = 3.0
WALL_SLACK_US = 50.0
SIDE_STREAM_CALLS = 5


def _timer_functions() -> dict[str, tuple[Any, str, Any]]:
    import triton.testing

    from ridgeline.harness import bench, timing

    slots: dict[str, tuple[Any, str, Any]] = {
        "torch.cuda.Event": (torch.cuda, "Event", torch.cuda.Event),
        "torch.cuda.synchronize": (torch.cuda, "synchronize", torch.cuda.synchronize),
        "torch.cuda.Event.record": (torch.cuda.Event, "record", torch.cuda.Event.record),
        "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time", torch.cuda.Event.elapsed_time),
        "time.perf_counter": (time, "perf_counter", time.perf_counter),
        "triton.testing.do_bench": (triton.testing, "do_bench", triton.testing.do_bench),
    }
    for module in (timing, bench):
        for name, value in vars(module).items():
            if callable(value) and getattr(value, "__module__", "").startswith("ridgeline.harness"):
                slots[f"{module.__name__}.{name}"] = (module, name, value)
    return slots


_ORIGINAL: dict[str, tuple[Any, str, Any]] = {}


def snapshot_timers() -> None:
    """Remember the timer functions as ridgeline loaded them (called once, before any user file is imported)."""
    if not _ORIGINAL:
        _ORIGINAL.update(_timer_functions())


def restore_timers() -> dict[str, str]:
    """Put back every timer function replaced since the snapshot; return {name: module of the replacement}."""
    snapshot_timers()
    replaced = {}
    for name, (owner, attr, original) in _ORIGINAL.items():
        current = getattr(owner, attr, None)
        if current is not original:
            replaced[name] = str(getattr(current, "__module__", "") or type(current).__module__)
            setattr(owner, attr, original)
    return replaced


def tampered_by(impl: Impl, replaced: dict[str, str], during: bool) -> list[str]:
    """The timer functions `impl` replaced: those whose replacement lives in its module, or any replaced while it
    ran (`during`)."""
    module = getattr(impl.fn, "__module__", None)
    names = [n for n, m in replaced.items() if during or (module and m == module)]
    return [f"{TIMER_TAMPERED}: {', '.join(sorted(names))} replaced"] if names else []


def refill(spec: OpSpec, case: Case, inputs: Inputs, device: torch.device, seed: int) -> None:
    """Fresh values into the same tensors (same pointers, same strides), from the contract's own inputs; the
    contract's static inputs (model weights) keep theirs."""
    fresh = spec.make_inputs(case, device, seed)
    for k, v in inputs.items():
        if k in spec.static_inputs:
            continue
        if isinstance(v, torch.Tensor) and isinstance(fresh.get(k), torch.Tensor) and v.shape == fresh[k].shape:
            with torch.no_grad():
                v.data.copy_(fresh[k])  # through .data: the tensor's version counter does not move either


def outputs_match(spec: OpSpec, case: Case, reference_inputs: Inputs, outs: Any, slack: float = 1.0) -> list[str]:
    """Reasons the outputs differ from the float64 reference of `reference_inputs` (empty: they match); `slack`
    widens the tolerance (a peer timed as a near miss is held to the allowance that admitted it, not flagged as
    reusing results for the imprecision its check already recorded)."""
    from ridgeline.harness.correctness import CheckResult, _check_values

    result = CheckResult(spec.name, "", list(case.shape), "", case.variant, False)
    outs = (outs,) if isinstance(outs, torch.Tensor) else tuple(outs) if isinstance(outs, (list, tuple)) else outs
    _check_values(spec, case, reference_inputs, outs, result, "after timing", slack)
    return result.reasons


def clone_inputs(inputs: Inputs) -> Inputs:
    from ridgeline.harness.correctness import _clone_inputs

    return _clone_inputs(inputs)


def verify_eager(spec: OpSpec, impl: Impl, case: Case, inputs: Inputs, device: torch.device, seed: int,
                 slack: float = 1.0) -> list[str]:
    """Refill the timed inputs in place, call once more, compare with the reference of the new values (within the
    tolerance times `slack`: see outputs_match)."""
    refill(spec, case, inputs, device, seed)
    pristine = clone_inputs(inputs)
    outs = spec.call(impl.fn, inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    reasons = outputs_match(spec, case, pristine, outs, slack)
    return [f"{RESULT_REUSE}: {r}" for r in reasons]


def verify_graph(spec: OpSpec, impl: Impl, case: Case, sets: list[Inputs], device: torch.device, seed: int,
                 replay: Callable[[], None], outputs: list[Any], slack: float = 1.0) -> list[str]:
    """Refill every timed input set in place, replay the timed graph once, and check what it wrote.

    Out-of-place implementations: the output the graph wrote in its last call (on the last set; `outputs` holds it)
    must match the reference of that set's new values. In-place ones (their outputs depend on how many calls the
    graph chains): the buffers they write must change on replay, and one eager call on fresh values must be right."""
    checked = sorted({0, len(sets) - 1})
    for i, s in enumerate(sets):
        refill(spec, case, s, device, seed + 104729 * (i + 1))
    pristine = {i: clone_inputs(sets[i]) for i in checked}
    replay()
    if device.type == "cuda":
        torch.cuda.synchronize()
    reasons: list[str] = []
    if impl.mutates:
        for i in checked:
            for name in impl.mutates:
                before, after = pristine[i].get(name), sets[i].get(name)
                if isinstance(after, torch.Tensor) and after.numel() and torch.equal(before, after):
                    reasons.append(f"{RESULT_REUSE}: a replay of the timed graph left {name} of set {i} unchanged")
        return reasons + verify_eager(spec, impl, case, sets[0], device, seed + 7, slack)
    last = len(sets) - 1
    mismatches = outputs_match(spec, case, pristine[last], outputs[-1], slack)
    reasons += [f"{RESULT_REUSE}: set {last}: {r}" for r in mismatches]
    return reasons


def side_streams(call: Callable[[], Any]) -> list[str]:
    """Kernels a few calls launched on streams other than the caller's (torch profiler, GPU only). A marker kernel
    launched first on the caller's stream tells which stream id the profiler gives it."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    marker = torch.zeros(1, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        marker.add_(1)
        torch.cuda.synchronize()
        for _ in range(SIDE_STREAM_CALLS):
            call()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
                      and _stream_of(e) is not None), key=lambda e: e.time_range.start)
    if not kernels:
        return []
    here = _stream_of(kernels[0])  # the marker
    others: dict[int, list[str]] = {}
    for e in kernels[1:]:
        if _stream_of(e) != here:
            others.setdefault(_stream_of(e), []).append(e.name)
    return [f"{SIDE_STREAM}: {len(names)} kernel(s) on another stream ({names[0][:60]})" for names in others.values()]


def _stream_of(event: Any) -> int | None:
    v = getattr(event, "device_resource_id", None)
    return v if isinstance(v, int) and v >= 0 else None


def wall_vs_events(call: Callable[[], Any], calls: int = 10) -> list[str]:
    """Event time of `calls` calls on the current stream against their device-synchronised wall time."""
    call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = _clock()
    start.record()
    for _ in range(calls):
        call()
    end.record()
    torch.cuda.synchronize()
    wall_us = (_clock() - t0) * 1e6
    event_us = start.elapsed_time(end) * 1e3
    if wall_us > WALL_OVER_EVENT * event_us + WALL_SLACK_US * calls:
        return [f"{SIDE_STREAM}: {calls} calls took {wall_us:.0f} us to finish on the device but {event_us:.0f} us "
                "between the timing events"]
    return []


def faster_than_light(m: dict[str, Any], profile: dict[str, Any]) -> list[str]:
    """The measurement's median against its speed of light (the L2 roof for hot data that fits the L2)."""
    sol, med = m.get("sol_us"), m.get("median_us")
    if not sol or not med or m.get("regime") in ("host", "cpu"):
        return []
    bound = sol
    nbytes = m.get("bytes") or 0
    l2_gbps = profile.get("l2_gbps") or profile.get("copy_gbps")
    # Replayed on one input set, part of the data stays in the L2 whatever its size (an in-place call's 64 MiB of
    # traffic touches 32 MiB), so graph-hot is held against the L2 roof.
    if m.get("regime") == "graph-hot" and l2_gbps:
        peak = (profile.get("tflops") or {}).get(m.get("compute_unit") or "fp32")
        flop_us = (m.get("flops") or 0) / (peak * 1e6) if peak else 0.0
        bound = (m.get("floor_us") or 0.0) + max(nbytes / (l2_gbps * L2_HEADROOM * 1e3), flop_us)
    if med < (1.0 - SOL_MARGIN) * bound:
        return [f"{FASTER_THAN_LIGHT}: {med:.3g} us against a speed of light of {bound:.3g} us "
                f"({100 * bound / med:.0f}% of it)"]
    return []
