"""What every rank runs: for each case, buffers, a checked call, timing, a second check; rank 0 reports.

Timing: CUDA events around each call (eager) or around each replay of a graph of K calls (graph, per call =
replay / K), after warm-up and a barrier; the sample of an iteration is the maximum over ranks of that iteration
(nccl-tests reports the slowest rank). On CPU (gloo) the clock is the host's (time.perf_counter around each
blocking call). Every stage ends with an agreement over the control group, so a stage that fails on one rank is
skipped by all and the sweep goes on.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from ridgeline.comm import collectives as C

NATIVE = ("nccl", "gloo")


def load_user_impl(ref: str) -> Callable[..., None]:
    """'file.py:fn' -> fn(op, inp, out, group): the user's collective, called for every op of --ops."""
    path, _, name = ref.rpartition(":")
    spec = importlib.util.spec_from_file_location(f"ridgeline_comm_user_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"--impl {ref}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"--impl {ref}: {path} has no function {name!r}")
    return fn


class Rank:
    """One rank's view of the run: its group, device, control group and where rank 0 sends events."""

    def __init__(self, settings: dict[str, Any], device: torch.device, control, send: Callable[..., None] | None):
        self.s = settings
        self.device = device
        self.cuda = device.type == "cuda"
        self.control = control
        self.send = send  # rank 0 only
        self.rank = dist.get_rank()
        self.n = dist.get_world_size()
        self.user: dict[str, Callable[..., None]] = {}

    # --- agreement over the control group ----------------------------------------------------------------
    def agree(self, error: str | None) -> str | None:
        """None when no rank failed, else the first failing rank's reason (the same on every rank)."""
        errors: list[Any] = [None] * self.n
        dist.all_gather_object(errors, error, group=self.control)
        bad = [(r, e) for r, e in enumerate(errors) if e]
        return None if not bad else (bad[0][1] if self.n == 1 else f"rank {bad[0][0]}: {bad[0][1]}")

    def total(self, value: int) -> int:
        t = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(t, group=self.control)
        return int(t.item())

    def rank_max(self, values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.control)
        return t.tolist()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        self.sync()
        dist.barrier(group=self.control)

    # --- one case ------------------------------------------------------------------------------------------
    def call_for(self, case: dict[str, Any], b: C.Buffers) -> Callable[[], None]:
        impl = case["impl"]
        if impl in NATIVE:
            return C.native_call(b, None, self.rank, self.n)
        if impl.startswith("ridgeline-"):
            return C.ridgeline_call(b, impl.removeprefix("ridgeline-"), None)
        if impl not in self.user:
            self.user[impl] = load_user_impl(impl)
        fn = self.user[impl]
        return lambda: fn(b.op, b.inp, b.out, None)

    def run_case(self, case: dict[str, Any]) -> dict[str, Any]:
        """A result: {"status": "ok"|"failed", ...}; identical on every rank (agreed)."""
        dtype = C.DTYPES[case["dtype"]]
        b = call = None
        err = None
        try:
            b = C.make_buffers(case["op"], case["variant"], case["count"], dtype, self.device, self.rank, self.n)
            call = self.call_for(case, b)
        except torch.OutOfMemoryError:
            err = "out of memory allocating the buffers"
        except Exception as e:  # noqa: BLE001 - every failure is recorded, the sweep goes on
            err = _reason(e)
        err = self.agree(err)
        if err:
            return {"status": "failed", "stage": "setup", "reason": err}
        assert b is not None and call is not None
        graph_mode = case["regime"] == "graph"
        one = None
        try:
            if graph_mode:
                one = _capture(call, 1, warm=True)  # (the eager warm-up call also creates NCCL's state)
            wrong = self._checked(b, call, one)
            err = None
        except Exception as e:  # noqa: BLE001
            err, wrong = _reason(e), 0
        err = self.agree(err)
        if err:
            return {"status": "failed", "stage": "verify", "reason": err}
        checked = self.total(b.out.numel())
        wrong = self.total(wrong)
        if wrong:
            return {"status": "failed", "stage": "verify", "wrong": wrong, "checked": checked,
                    "reason": f"wrong result: {wrong} of {checked} elements differ from the exact sum"}
        try:
            samples, per_sample, iters = self._time(call, graph_mode)
            err = None
        except Exception as e:  # noqa: BLE001
            err, samples, per_sample, iters = _reason(e), [], 1, 0
        err = self.agree(err)
        if err:
            return {"status": "failed", "stage": "time", "reason": err}
        samples = self.rank_max(samples)
        try:
            wrong_after = self._checked(b, call, one)
            err = None
        except Exception as e:  # noqa: BLE001
            err, wrong_after = _reason(e), 0
        err = self.agree(err)
        wrong_after = self.total(wrong_after) if not err else 0
        if err or wrong_after:
            return {"status": "failed", "stage": "verify-after", "wrong": wrong_after, "checked": checked,
                    "reason": err or f"wrong result after timing: {wrong_after} of {checked} elements differ"}
        return {"status": "ok", "samples_us": samples, "calls_per_sample": per_sample, "iters": iters,
                "wrong": 0, "checked": checked}

    def _checked(self, b: C.Buffers, call: Callable[[], None], graph) -> int:
        b.prepare(self.rank, self.n)
        self.barrier()
        if graph is not None:
            graph.replay()
        else:
            call()
        self.sync()
        return b.wrong(self.rank, self.n)

    def _time(self, call: Callable[[], None], graph_mode: bool) -> tuple[list[float], int, int]:
        s = self.s
        self.barrier()
        t0 = time.perf_counter()
        for _ in range(s["warmup"]):
            call()
        self.sync()
        est_us = (time.perf_counter() - t0) * 1e6 / max(1, s["warmup"])
        est_us = self.rank_max([est_us])[0]
        per_sample = 1
        if graph_mode:
            per_sample = max(1, min(s["graph_calls"], int(2000 / max(est_us, 1e-3))))
        budget_us = s["budget"] * 1e6
        iters = int(min(s["max_iters"], max(s["min_iters"], budget_us / max(est_us * per_sample, 1e-3))))
        if graph_mode:
            g = _capture(call, per_sample, warm=False)
            for _ in range(2):
                g.replay()
            self.barrier()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            for i in range(iters):
                starts[i].record()
                g.replay()
                ends[i].record()
            self.sync()
            samples = [a.elapsed_time(e) * 1e3 / per_sample for a, e in zip(starts, ends)]
            del g
        elif self.cuda:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            self.barrier()
            for i in range(iters):
                starts[i].record()
                call()
                ends[i].record()
            self.sync()
            samples = [a.elapsed_time(e) * 1e3 for a, e in zip(starts, ends)]
        else:
            self.barrier()
            samples = []
            for _ in range(iters):
                t = time.perf_counter()
                call()
                samples.append((time.perf_counter() - t) * 1e6)
        return samples, per_sample, iters


def _capture(call: Callable[[], None], calls: int, warm: bool):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    if warm:
        with torch.cuda.stream(side):
            call()
        torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            call()
    torch.cuda.synchronize()
    return g


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first}"[:300]


def summarize(samples: list[float]) -> dict[str, float]:
    xs = sorted(samples)
    n = len(xs)
    if not n:
        return {}
    mid = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    p99 = xs[max(0, math.ceil(0.99 * n) - 1)]
    return {"median_us": mid, "p99_us": p99, "mean_us": sum(xs) / n, "min_us": xs[0], "max_us": xs[-1]}


def rank_loop(settings: dict[str, Any], cases: list[dict[str, Any]], start: int, device: torch.device, control,
              send: Callable[..., None] | None) -> None:
    """Run cases[start:] on this rank; rank 0 sends ("start", i), ("result", i, result), ("done",)."""
    r = Rank(settings, device, control, send)
    info = [None] * r.n
    dist.all_gather_object(info, _rank_info(r), group=control)
    if send is not None:
        send("ranks", info)
    for i in range(start, len(cases)):
        if send is not None:
            send("start", i)
        try:
            result = r.run_case(cases[i])
        except Exception as e:  # noqa: BLE001 - only reached when the agreement itself failed
            result = {"status": "failed", "stage": "internal", "reason": _reason(e),
                      "traceback": traceback.format_exc(limit=3)}
        if send is not None:
            send("result", i, result)
    if send is not None:
        send("done")


def _rank_info(r: Rank) -> dict[str, Any]:
    from ridgeline.comm.env import NO_MULTICAST

    # What this rank's process saw (the multicast switches are checked per rank, not only in the parent).
    info: dict[str, Any] = {"rank": r.rank, "device": str(r.device),
                            "no_multicast": {k: os.environ.get(k) for k in NO_MULTICAST}}
    if r.cuda:
        props = torch.cuda.get_device_properties(r.device)
        info.update(gpu=props.name, pci_bus_id=getattr(props, "pci_bus_id", None))
    return info
