"""Time candidate launch configs of the gated-activation kernels per shape on the GPU; print the best per shape last.

Usage (on the GPU machine, from the repo root, src/ on PYTHONPATH):
  python3 scripts/device/tune_act_and_mul.py --json $OUT/h200-tune-act_and_mul.json [--max-seconds 60]

For each shape (x = (M, 2d), bf16, silu) and direction (forward, backward) every config of
`rules.candidate_configs` is launched through the op's own launch functions with that config and timed by CUDA-graph
replay over rotating inputs (enough copies to exceed the L2, so the data comes from DRAM as in a real layer; decode
sizes stay L2-resident, as in a serving loop). A config that fails to compile or launch is recorded and skipped.
The JSON holds every timing, the config the current rules pick, and the best; the table printed last says how far
the rule's pick is from the best (ratio > 1: the rules should change there).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from ridgeline.ops.act_and_mul.launch import launch_backward, launch_forward  # noqa: E402
from ridgeline.ops.act_and_mul.rules import ActConfig, Call, candidate_configs, config_for, first_rule  # noqa: E402

SHAPES = [(1, 28672), (16, 28672), (64, 28672), (1024, 28672), (4096, 22016), (4096, 28672), (16384, 28672),
          (4096, 57344)]
L2_BYTES = 60 * 2**20
COPY_GBPS = 4270.0


def _sets(shape: tuple[int, int], backward: bool) -> list[dict[str, torch.Tensor]]:
    m, two_d = shape
    d = two_d // 2
    per_call = m * d * 2 * (5 if backward else 3)
    n = max(1, min(16, math.ceil(3 * L2_BYTES / per_call)))
    out = []
    for _ in range(n):
        x = torch.randn(m, two_d, device="cuda", dtype=torch.bfloat16)
        s = {"x": x}
        if backward:
            s["dy"] = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
            s["dx"] = torch.empty_like(x)
        else:
            s["out"] = torch.empty(m, d, device="cuda", dtype=torch.bfloat16)
        out.append(s)
    return out


def _launcher(shape, backward: bool, cfg: ActConfig | None):
    m, two_d = shape
    d = two_d // 2

    def run(s):
        x = s["x"]
        if backward:
            launch_backward(s["dy"], d, x, two_d, x, two_d, s["dx"], two_d, s["dx"], two_d, m, d, 0, True, cfg)
        else:
            launch_forward(x, two_d, x, two_d, s["out"], d, m, d, 0, True, cfg)

    return run


def time_config(shape, backward: bool, cfg: ActConfig | None, sets, replays: int = 20) -> float:
    """Median microseconds per call over a few timed replays of a graph with one call per input set."""
    run = _launcher(shape, backward, cfg)
    for s in sets:  # compile and warm up outside the capture
        run(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for s in sets:
            run(s)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / (replays * len(sets)))
    return sorted(times)[len(times) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--max-seconds", type=float, default=90.0, help="stop starting new shapes after this long")
    ap.add_argument("--no-evict", action="store_true", help="skip the evict_first candidates (halves the time)")
    ap.add_argument("--shapes", help="comma-separated MxTWO_D (x's shape) instead of the built-in list")
    ap.add_argument("--only", choices=("fwd", "bwd"), help="one direction")
    args = ap.parse_args()
    t0 = time.time()
    record: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "results": [], "failures": []}
    summary = []
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    for backward in [b for b in (False, True) if args.only is None or b == (args.only == "bwd")]:
        for shape in shapes:
            if time.time() - t0 > args.max_seconds:
                record["failures"].append({"shape": list(shape), "backward": backward, "reason": "time budget spent"})
                continue
            m, two_d = shape
            d = two_d // 2
            nbytes = m * d * 2 * (5 if backward else 3)
            sets = _sets(shape, backward)
            rule = first_rule(Call(d, 2, m, backward))
            chosen = config_for(d, 2, m, backward)
            timings = []
            for cfg in candidate_configs(d, 2, m):
                if args.no_evict and cfg.evict_first:
                    continue
                try:
                    us = time_config(shape, backward, cfg, sets)
                except Exception as e:  # a config that does not compile or launch: recorded, skipped
                    record["failures"].append({"shape": list(shape), "backward": backward, "config": cfg.describe(),
                                               "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
                    torch.cuda.synchronize()
                    continue
                timings.append({"config": cfg.describe(), "block_m": cfg.block_m, "block_n": cfg.block_n,
                                "num_warps": cfg.num_warps, "evict_first": cfg.evict_first, "us": us,
                                "gbps": nbytes / us / 1e3})
            try:
                rule_us = time_config(shape, backward, None, sets)
            except Exception as e:
                rule_us = float("nan")
                record["failures"].append({"shape": list(shape), "backward": backward, "config": "rules",
                                           "reason": f"{type(e).__name__}: {e}"})
            best = min(timings, key=lambda t: t["us"]) if timings else None
            record["results"].append({"shape": list(shape), "backward": backward, "bytes": nbytes,
                                      "rule": rule.name, "rule_config": chosen.describe(), "rule_us": rule_us,
                                      "best": best, "timings": timings})
            summary.append((shape, backward, rule.name, chosen.describe(), rule_us, best))
            del sets
            torch.cuda.empty_cache()
            args.json.write_text(json.dumps(record, indent=1))  # as it goes: a killed run keeps what it had
    record["seconds"] = time.time() - t0
    args.json.write_text(json.dumps(record, indent=1))
    print(f"\n{len(record['failures'])} failures; {record['seconds']:.0f} s")
    print(f"{'shape':>13} {'dir':>4} {'rule':>14} {'rule config':>22} {'rule us':>9} {'best config':>24} "
          f"{'best us':>9} {'GB/s':>6} {'%copy':>6} {'rule/best':>9}")
    for shape, backward, rule, cfg, rule_us, best in summary:
        if best is None:
            print(f"{shape[0]:>6}x{shape[1]:<6} {'bwd' if backward else 'fwd':>4} {rule:>14} (no config ran)")
            continue
        print(f"{shape[0]:>6}x{shape[1]:<6} {'bwd' if backward else 'fwd':>4} {rule:>14} {cfg:>22} {rule_us:9.2f} "
              f"{best['config']:>24} {best['us']:9.2f} {best['gbps']:6.0f} {100 * best['gbps'] / COPY_GBPS:5.1f}% "
              f"{rule_us / best['us']:9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
