"""Is the first timing in a process faster than the rest? (Session 9: the first config timed at one row of 4096
columns, graph-hot, was ~10% faster than the same config timed later, in the explore script and in the bench.)

Usage (on the GPU): python scripts/first_timing_bias.py OUT.json [--unsettled]
Times one launch config at 1x4096 (graph-hot, as the bench) several times in a row, then after 3 s idle, then after
0.5 s of busy GPU work, recording the clocks from NVML beside each; writes every figure to OUT.json. `time_graph`
settles a process before its first kept timing since session 9 (harness/timing.py); --unsettled skips that, to
show the bias itself.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from ridgeline.harness import timing
from ridgeline.harness.timing import time_graph
from ridgeline.ops.rmsnorm.launch import rms_norm


def clocks() -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                "pstate": int(pynvml.nvmlDeviceGetPerformanceState(h)),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000}
    except Exception as e:  # (clocks are context; the timings stand without them)
        return {"error": str(e)[:100]}


def main() -> None:
    out = sys.argv[1]
    if "--unsettled" in sys.argv[2:]:
        timing._graph_timings_run = timing.SETTLE_GRAPH_TIMINGS  # (as if settled: the first kept timing is the first)
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    fn = [lambda: rms_norm(x, w, out=y)]
    rows = []

    def measure(label: str) -> None:
        before = clocks()
        t = time_graph(fn, 0.1, regime="graph-hot")
        rows.append({"label": label, "median_us": t.median_us, "iqr_us": t.iqr_us, "n": t.n, "clocks_before": before,
                     "clocks_after": clocks()})
        print(f"{label:>22} {t.median_us:6.3f} us  {rows[-1]['clocks_after']}")

    for i in range(4):
        measure(f"in a row {i}")
    time.sleep(3)
    for i in range(2):
        measure(f"after 3 s idle {i}")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        a @ a
    torch.cuda.synchronize()
    for i in range(2):
        measure(f"after busy 0.5 s {i}")
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
