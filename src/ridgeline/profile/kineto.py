"""torch profiler (Kineto): a chrome trace of a few calls on a GPU, summarized per kernel name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def summarize_trace(path: Path) -> list[dict[str, Any]]:
    """GPU kernels in a chrome trace from the torch profiler: calls and device time per kernel name."""
    data = json.loads(Path(path).read_text())
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    per: dict[str, list[float]] = {}
    for ev in events:
        if isinstance(ev, dict) and str(ev.get("cat", "")).lower() == "kernel" and "dur" in ev:
            per.setdefault(str(ev.get("name", "?")), []).append(float(ev["dur"]))
    rows = [{"name": n, "calls": len(d), "device_us_total": sum(d), "device_us_avg": sum(d) / len(d)}
            for n, d in per.items()]
    return sorted(rows, key=lambda r: (-r["device_us_total"], r["name"]))


def run_kineto(spec: Any, fn: Any, inputs: dict[str, Any], out_dir: Path, calls: int = 5) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    spec.call(fn, inputs)
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            spec.call(fn, inputs)
        torch.cuda.synchronize()
    path = out_dir / "kineto-trace.json"
    prof.export_chrome_trace(str(path))
    return {"trace": path.name, "calls": calls, "kernels": summarize_trace(path)}

