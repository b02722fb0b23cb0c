"""The sweep: plan the cases, start one process per GPU (or join torchrun's), gather results into one record.

Spawned: the parent plans, starts `nprocs` ranks (torch.multiprocessing, spawn), receives rank 0's events on a
queue and writes the record as they come. When the ranks die or go silent past `timeout` seconds, the case in
flight is recorded as failed with the reason and fresh ranks resume after it. Under torchrun each process is a
rank; rank 0 writes the record (no restarts there: torchrun owns the processes).
"""

from __future__ import annotations

import math
import os
import queue as queue_mod
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ridgeline.comm import collectives as C
from ridgeline.comm.env import apply_no_multicast, backend_for, free_port, torchrun_env
from ridgeline.records.record import RunRecord

KIND = "comm"
REGIMES = ("eager", "graph")
RIDGELINE_IMPLS = ("ridgeline-oneshot", "ridgeline-twoshot")
STARTUP_S = 180.0  # allowance for starting the ranks


@dataclass
class CommRecord(RunRecord):
    """A run record (ridgeline.records) with the cases that were not run and why."""

    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["skipped"] = self.skipped
        return d


def sizes_between(lo: int, hi: int) -> list[int]:
    """Powers of two from lo to hi bytes (both rounded to powers of two, lo up and hi down)."""
    if lo < 1 or hi < lo:
        raise ValueError(f"--min/--max: expected 1 <= min <= max bytes, got {lo} and {hi}")
    first = 1 << (lo - 1).bit_length()
    out = []
    s = first
    while s <= hi:
        out.append(s)
        s <<= 1
    if not out:
        raise ValueError(f"--min/--max: no power of two between {lo} and {hi} bytes")
    return out


def parse_bytes(text: str, name: str = "size") -> int:
    """'8', '64K', '4MiB', '8G' -> bytes (powers of 1024); `name` is the option an error names."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    digits = t[:-1] if mult != 1 else t
    try:
        value = float(digits)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):  # ('inf' parses as a float, then int() of it raised OverflowError)
        raise ValueError(f"{name}: expected bytes like 8, 64K, 4M, 8G; got {text!r}")
    return int(value * mult)


def make_settings(*, ops: list[str] | None, impls: list[str] | None, dtypes: list[str] | None, min_bytes: int,
                  max_bytes: int, placements: list[str] | None, regimes: list[str] | None, nprocs: int | None,
                  budget: float, warmup: int, min_iters: int, max_iters: int, graph_calls: int,
                  timeout: float, device_type: str | None = None) -> dict[str, Any]:
    """Validated settings (plain JSON); every refusal is one ValueError line naming the option."""
    device_type = device_type or ("cuda" if torch.cuda.is_available() else "cpu")
    backend = backend_for(device_type)
    ops = [C.parse_op(o) for o in (ops or C.OPS)]
    dts = [C.parse_dtype(d) for d in (dtypes or ["bf16" if device_type == "cuda" else "fp32"])]
    impl_list = []
    for name in impls or [backend]:
        if name in ("nccl", "gloo"):
            if name != backend:
                raise ValueError(f"--impl {name}: this run's backend is {backend} ({device_type}); "
                                 f"use --impl {backend}")
        elif name not in RIDGELINE_IMPLS and not (":" in name and name.rpartition(":")[0].endswith(".py")):
            raise ValueError(f"--impl: unknown {name!r}; expected {backend}, {', '.join(RIDGELINE_IMPLS)} "
                             "or FILE.py:FUNCTION")
        elif ":" in name and not Path(name.rpartition(":")[0]).is_file():
            raise ValueError(f"--impl {name}: no such file {name.rpartition(':')[0]!r}")
        if ":" in name:
            name = f"{Path(name.rpartition(':')[0]).resolve()}:{name.rpartition(':')[2]}"
        impl_list.append(name)
    for p in placements or []:
        if p not in C.PLACEMENTS:
            raise ValueError(f"--placement: expected in-place or out-of-place, got {p!r}")
    for r in regimes or []:
        if r not in REGIMES:
            raise ValueError(f"--mode: expected eager or graph, got {r!r}")
    tr = torchrun_env()
    if tr is not None:
        if nprocs is not None and nprocs != tr[1]:
            raise ValueError(f"--nprocs {nprocs}: running under torchrun with WORLD_SIZE={tr[1]}")
        world = tr[1]
    else:
        world = nprocs if nprocs is not None else (max(torch.cuda.device_count(), 1) if device_type == "cuda" else 2)
    if world < 1:
        raise ValueError(f"--nprocs: expected >= 1, got {world}")
    if device_type == "cuda" and tr is None and world > torch.cuda.device_count():
        raise ValueError(f"--nprocs {world}: only {torch.cuda.device_count()} GPUs are visible (one rank per GPU)")
    for name, v, lo in (("--budget", budget, 0.0), ("--timeout", timeout, 0.0)):
        if not v > lo:
            raise ValueError(f"{name}: expected seconds > 0, got {v}")
    if not (1 <= min_iters <= max_iters):
        raise ValueError(f"--min-iters/--max-iters: expected 1 <= min <= max, got {min_iters} and {max_iters}")
    return {
        "ops": ops, "impls": impl_list, "dtypes": dts, "sizes": sizes_between(min_bytes, max_bytes),
        "placements": list(placements or C.PLACEMENTS), "regimes": list(regimes or REGIMES),
        "world_size": world, "device_type": device_type, "backend": backend, "launcher": "torchrun" if tr else "spawn",
        "budget": budget, "warmup": max(1, warmup), "min_iters": min_iters, "max_iters": max_iters,
        "graph_calls": max(1, graph_calls), "timeout": timeout,
        "timing": ("CUDA events around each call (eager) or each graph replay of calls_per_sample calls (graph); "
                   "sample = max over ranks of the same iteration" if device_type == "cuda" else
                   "host clock (time.perf_counter) around each blocking gloo call; sample = max over ranks of the "
                   "same iteration; CPU figures say nothing about GPU links"),
    }


def plan_cases(s: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cases to run, skipped with reasons) in report order: op, dtype, impl, placement, regime, then size."""
    from ridgeline.comm.allreduce import DTYPES as RL_DTYPES
    from ridgeline.comm.allreduce import MAX_BYTES as RL_MAX

    cases, skipped = [], []
    n = s["world_size"]
    for op in s["ops"]:
        for dt in s["dtypes"]:
            dtype = C.DTYPES[dt]
            elem = torch.empty((), dtype=dtype).element_size()
            for impl in s["impls"]:
                ours = impl in RIDGELINE_IMPLS
                for placement in s["placements"]:
                    for regime in s["regimes"]:
                        series = {"op": op, "impl": impl, "dtype": dt, "variant": placement, "regime": regime}
                        why = None
                        if regime == "graph" and s["device_type"] != "cuda":
                            why = "CUDA graphs need a CUDA device (on CPU only eager runs)"
                        elif ours and op != "all_reduce":
                            why = f"{impl} implements all_reduce only"
                        elif ours and dtype not in RL_DTYPES:
                            why = f"{impl} takes bf16, fp16 or fp32"
                        elif impl in ("nccl", "gloo") and placement not in C.NATIVE_PLACEMENTS[op]:
                            why = f"torch.distributed offers {op} {' and '.join(C.NATIVE_PLACEMENTS[op])} only"
                        if why:
                            skipped.append({**series, "size": None, "reason": why})
                            continue
                        for size in s["sizes"]:
                            count = C.element_count(op, size, elem, n)
                            case = {**series, "size": size, "count": count, "bytes": count * elem}
                            if count == 0:
                                skipped.append({**case, "reason": f"{size} B is less than one element per rank"})
                            elif ours and count * elem > RL_MAX:
                                skipped.append({**case, "reason": f"above {impl}'s limit of {RL_MAX} bytes (4 MiB)"})
                            else:
                                cases.append(case)
    return cases, skipped


def measurement(case: dict[str, Any], result: dict[str, Any], n: int, link_gbps: float | None) -> dict[str, Any]:
    from ridgeline.comm.worker import summarize

    stats = summarize(result["samples_us"])
    med = stats["median_us"]
    algbw = case["bytes"] / med / 1e3 if med > 0 else None  # bytes/us -> GB/s
    factor = C.bus_factor(case["op"], n)
    busbw = algbw * factor if algbw is not None else None
    return {
        "op": case["op"], "impl": case["impl"], "shape": [case["count"]], "dtype": case["dtype"],
        "variant": case["variant"], "regime": case["regime"], "size": case["size"], "bytes": case["bytes"],
        "count": case["count"], "world_size": n, **stats, "samples_us": result["samples_us"],
        "n_samples": len(result["samples_us"]), "calls_per_sample": result["calls_per_sample"],
        "algbw_gbps": algbw, "bus_factor": factor, "busbw_gbps": busbw,
        "pct_of_link": (100 * busbw / link_gbps) if (busbw is not None and link_gbps and n > 1) else None,
        "wrong": result["wrong"], "checked": result["checked"],
    }


def _key(case: dict[str, Any]) -> dict[str, Any]:
    return {k: case[k] for k in ("op", "impl", "dtype", "variant", "regime", "size", "count", "bytes")}


class Sweep:
    """Turns rank 0's events into the record; `on_event(kind, payload)` for progress."""

    def __init__(self, record: CommRecord, cases: list[dict[str, Any]], on_event: Callable[..., None] | None):
        self.record, self.cases, self.on_event = record, cases, on_event or (lambda *a: None)
        self.in_flight: int | None = None
        self.finished: set[int] = set()
        self.link = record.device.get("link", {}).get("gbps")

    def handle(self, kind: str, *payload: Any) -> None:
        if kind == "ranks":
            self.record.device["ranks"] = payload[0]
            self.record._autosave()
        elif kind == "start":
            self.in_flight = payload[0]
            self.on_event("start", self.cases[payload[0]])
        elif kind == "result":
            i, result = payload
            self.finish(i, result)

    def finish(self, i: int, result: dict[str, Any]) -> None:
        case = self.cases[i]
        self.finished.add(i)
        self.in_flight = None
        check = {**_key(case), "shape": [case["count"]], "passed": result["status"] == "ok",
                 "wrong": result.get("wrong"), "checked": result.get("checked")}
        self.record.checks.append(check)
        if result["status"] == "ok":
            m = measurement(case, result, self.record.settings["world_size"], self.link)
            self.record.add_measurement(m)
            self.on_event("result", m)
        else:
            f = {**_key(case), "shape": [case["count"]], "stage": result.get("stage"), "reason": result.get("reason"),
                 "wrong": result.get("wrong"), "checked": result.get("checked")}
            self.record.add_failure(f)
            self.on_event("failure", f)


def new_record(settings: dict[str, Any], argv: list[str], skipped: list[dict[str, Any]],
               json_path: Path | None) -> CommRecord:
    from ridgeline.comm.link import link_info
    from ridgeline.records.env import capture_env, command_line

    env = capture_env(argv)
    env["no_multicast"] = {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                          "NVSHMEM_DISABLE_NVLS")}
    device = {"link": link_info(settings["device_type"], settings["world_size"])}
    rec = CommRecord(kind=KIND, command=command_line(argv), env=env, device=device, settings=settings,
                     skipped=skipped)
    if json_path is not None:
        rec.save(json_path)
    return rec


def run(settings: dict[str, Any], *, json_path: Path | None = None, argv: list[str] | None = None,
        on_event: Callable[..., None] | None = None) -> CommRecord | None:
    """Run the sweep; the record (on rank 0 / the parent), None on other torchrun ranks."""
    apply_no_multicast()
    if settings["device_type"] == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # (before any rank imports the kernels)
    cases, skipped = plan_cases(settings)
    argv = list(sys.argv if argv is None else argv)
    if settings["launcher"] == "torchrun":
        return _run_torchrun(settings, cases, skipped, json_path, argv, on_event)
    record = new_record(settings, argv, skipped, json_path)
    sweep = Sweep(record, cases, on_event)
    start = 0
    while start < len(cases):
        before = len(sweep.finished)
        failure = _spawn_and_follow(settings, cases, start, sweep)
        if failure is None:
            break
        i = sweep.in_flight
        if i is None:  # the ranks stopped outside a case: go on after the last one, unless none ran at all
            if len(sweep.finished) == before:
                record.add_failure({"op": "*", "impl": "*", "shape": [], "dtype": "*", "stage": "start",
                                    "reason": f"the ranks stopped before running a case: {failure}"})
                break
            start = max(sweep.finished) + 1
            continue
        sweep.finish(i, {"status": "failed", "stage": failure.split(":")[0], "reason": failure})
        start = i + 1
    record.finish()
    if json_path is not None:
        record.save()
    return record


def _spawn_and_follow(settings: dict[str, Any], cases: list[dict[str, Any]], start: int, sweep: Sweep) -> str | None:
    """Start the ranks at cases[start]; None when they finished, else why they stopped ("crash: ..." or
    "timeout: ...")."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = f"tcp://127.0.0.1:{free_port()}"
    procs = mp.start_processes(_spawned_rank, args=(settings, cases, start, q, init), nprocs=settings["world_size"],
                               join=False, start_method="spawn")
    last = time.monotonic()
    done = ready = False
    try:
        while True:
            try:
                msg = q.get(timeout=0.2)
            except queue_mod.Empty:
                msg = None
            if msg is not None:
                last = time.monotonic()
                ready = ready or msg[0] == "ranks"
                if msg[0] == "done":
                    done = True
                else:
                    sweep.handle(*msg)
                continue
            try:
                if procs.join(timeout=0.01):
                    return None if done else "crash: the ranks exited before the sweep ended"
            except Exception as e:  # noqa: BLE001 - a rank raised or was killed: recorded, restarted after
                return f"crash: {_short(e)}"
            # Starting the ranks (imports, group setup) is not a case: it gets its own, longer allowance.
            limit = settings["timeout"] if ready else max(settings["timeout"], STARTUP_S)
            if time.monotonic() - last > limit:
                return f"timeout: no progress for {limit:.0f} s"
    finally:
        for p in procs.processes:
            if p.is_alive():
                p.kill()
        for p in procs.processes:
            p.join(5)


def _short(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    tail = [ln for ln in lines if "Error" in ln or "error" in ln]
    return (tail[-1] if tail else (lines[0] if lines else type(e).__name__)).strip()[:300]


def _spawned_rank(index: int, settings: dict[str, Any], cases: list[dict[str, Any]], start: int, q, init: str) -> None:
    from ridgeline.comm.env import init as init_group
    from ridgeline.comm.worker import rank_loop

    os.environ["LOCAL_RANK"] = str(index)
    # The group's own timeout is longer than the parent's watchdog: a hang is the parent's to see (and kill).
    device, control = init_group(index, settings["world_size"], settings["device_type"], 2 * settings["timeout"],
                                 init_method=init)
    send = (lambda *m: q.put(m)) if index == 0 else None
    try:
        rank_loop(settings, cases, start, device, control, send)
    finally:
        _teardown()


def _teardown() -> None:
    import torch.distributed as dist

    from ridgeline.comm.allreduce import release_workspaces

    release_workspaces()
    if dist.is_initialized():
        dist.destroy_process_group()


def _run_torchrun(settings, cases, skipped, json_path, argv, on_event) -> CommRecord | None:
    from ridgeline.comm.env import init as init_group
    from ridgeline.comm.worker import rank_loop

    rank, world, _local = torchrun_env()  # type: ignore[misc]
    device, control = init_group(rank, world, settings["device_type"], settings["timeout"])
    record = sweep = None
    if rank == 0:
        record = new_record(settings, argv, skipped, json_path)
        sweep = Sweep(record, cases, on_event)
    send = (lambda kind, *p: kind != "done" and sweep.handle(kind, *p)) if sweep is not None else None
    try:
        rank_loop(settings, cases, 0, device, control, send)
    finally:
        _teardown()
    if record is not None:
        record.finish()
    return record
