"""Time candidate tile configs of the FP8 GEMM per shape and scale mode on the GPU, beside torch._scaled_mm; print
the best per shape last.

Usage (on the GPU machine, from the repo root, src/ on PYTHONPATH):
  python3 scripts/device/tune_scaled_mm.py --json $OUT/h200-tune-scaled_mm.json [--max-seconds 80] [--modes row,block]

For each (M, N, K) and mode every config of `rules.candidate_configs` (tile shapes x stages, TMA or pointer loads)
runs through `launch_scaled_mm(..., cfg=)` and is timed with triton.testing.do_bench (median, L2 flushed between
calls: the weight comes from DRAM, as in a real layer). torch._scaled_mm (row-wise / per-tensor) is timed the same
way as the line to beat; block scales are held against our row-wise best (target: >= 0.9x). A config that fails to
compile or launch is recorded with its error and skipped. Compiles dominate the time: configs are shared across
shapes (one compile each per mode), and no new (shape, mode) starts after --max-seconds.
The JSON has every timing, the rules' pick and the best; the table printed last gives TFLOP/s and the rule's pick
over the best (> 1: the table in rules.py should change there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from ridgeline.core.spec import Case  # noqa: E402
from ridgeline.ops.scaled_mm.launch import launch_scaled_mm  # noqa: E402
from ridgeline.ops.scaled_mm.rules import candidate_configs, config_for  # noqa: E402
from ridgeline.ops.scaled_mm.spec import FP8, ScaledMMSpec  # noqa: E402

# Decode, mid and large M over Llama-3-8B / 70B layers (N, K).
SHAPES = [(1, 4096, 4096), (16, 28672, 4096), (64, 8192, 28672), (128, 6144, 4096), (256, 10240, 8192),
          (1024, 28672, 4096), (4096, 4096, 14336), (8192, 8192, 8192)]


def _bench(fn) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=10, rep=40))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--max-seconds", type=float, default=80.0)
    ap.add_argument("--modes", default="row,block,tensor")
    args = ap.parse_args()
    spec = ScaledMMSpec()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    t0 = time.perf_counter()
    records, summary = [], []
    for mode in args.modes.split(","):
        for shape in SHAPES:
            if time.perf_counter() - t0 > args.max_seconds:
                records.append({"mode": mode, "shape": shape, "skipped": "time budget"})
                continue
            m, n, k = shape
            inp = spec.make_inputs(Case(shape, FP8, mode), "cuda", 0)
            a, b, sa, sb = inp["a"], inp["b"], inp["scale_a"], inp["scale_b"]
            flops = 2 * m * n * k
            rule = config_for(m, n, k, mode, sms, interpreted=False)
            rec = {"mode": mode, "shape": shape, "rule": rule.describe(), "configs": []}
            if mode != "block":
                try:
                    ta = sa.reshape(()) if mode == "tensor" else sa.reshape(-1, 1)
                    tb = sb.reshape(()) if mode == "tensor" else sb.reshape(1, -1)
                    rec["torch_scaled_mm_ms"] = _bench(
                        lambda a=a, b=b, ta=ta, tb=tb: torch._scaled_mm(a, b.t(), ta, tb, out_dtype=torch.bfloat16))
                except Exception as e:  # recorded, never fatal
                    rec["torch_scaled_mm_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            cands = candidate_configs(mode, m)
            if rule not in cands:
                cands.append(rule)
            for cfg in cands:
                try:
                    ms = _bench(lambda a=a, b=b, sa=sa, sb=sb, cfg=cfg: launch_scaled_mm(a, b, sa, sb, cfg=cfg))
                    rec["configs"].append({"config": cfg.describe(), "ms": ms, "tflops": flops / ms / 1e9})
                except Exception as e:
                    rec["configs"].append({"config": cfg.describe(), "error": f"{type(e).__name__}: {str(e)[:200]}"})
            timed = [c for c in rec["configs"] if "ms" in c]
            if timed:
                best = min(timed, key=lambda c: c["ms"])
                pick = next((c for c in timed if c["config"] == rule.describe()), None)
                rec["best"] = best
                summary.append((mode, "x".join(map(str, shape)), best["config"], best["tflops"],
                                pick["ms"] / best["ms"] if pick else float("nan"),
                                rec.get("torch_scaled_mm_ms", float("nan")) / best["ms"]))
            records.append(rec)
            args.json.write_text(json.dumps({"records": records, "seconds": time.perf_counter() - t0}, indent=1))
    print(f"\n{'mode':7} {'shape':18} {'best config':40} {'TFLOP/s':>8} {'rule/best':>9} {'vs _scaled_mm':>13}")
    for mode, shape, cfg, tf, ratio, vs in summary:
        print(f"{mode:7} {shape:18} {cfg:40} {tf:8.1f} {ratio:9.2f} {vs:13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
