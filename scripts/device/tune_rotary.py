"""Time every candidate launch config of the rotary kernels per shape on the GPU; print the best per shape last.

Usage (on the GPU machine, from the repo root): python3 scripts/device/tune_rotary.py [--json PATH] [--budget-s S]
For each shape (serving: in place; training: forward and backward) every config of rules.candidate_configs() is
timed with triton.testing.do_bench_cudagraph (graph replay, median); a config that fails to compile or run is
recorded with its error and skipped. Shapes run in the order below until the time budget is spent (the rest are
recorded as skipped). The JSON (default $OUT/tune-rotary.json) holds every timing, the rule's own pick, and the best.
No config changes a bit of the result (tests check it), so the lead may set rules.py from speed alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from ridgeline.ops.rotary.launch import rotary_embedding, serving_config  # noqa: E402
from ridgeline.ops.rotary.launch_train import apply_rotary, apply_rotary_backward, train_config  # noqa: E402
from ridgeline.ops.rotary.rules import candidate_configs, resolve  # noqa: E402
from ridgeline.ops.rotary.spec import cos_sin_cache  # noqa: E402
from ridgeline.ops.rotary.spec_train import hf_cos_sin  # noqa: E402

# (kind, shape, neox): serving shapes are (T, Hq, Hk, D[, R]); training ones (B, S, Hq, Hk, D).
SHAPES = [
    ("serving", (1, 32, 8, 128), True), ("serving", (32, 32, 8, 128), True), ("serving", (256, 32, 8, 128), True),
    ("serving", (4096, 32, 8, 128), True), ("serving", (16384, 64, 8, 128), True),
    ("serving", (4096, 28, 4, 128), True), ("serving", (4096, 32, 8, 128, 64), True),
    ("serving", (4096, 32, 8, 128), False),
    ("train", (4, 2048, 32, 8, 128), True), ("train-bwd", (4, 2048, 32, 8, 128), True),
    ("train", (1, 4096, 28, 4, 128), True),
]


def _serving(shape, neox, dtype):
    t, hq, hk, d = shape[:4]
    r = shape[4] if len(shape) > 4 else d
    qkv = torch.randn(t, (hq + 2 * hk) * d, device="cuda", dtype=dtype)  # vLLM's fused projection
    q, k = qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]
    pos = torch.randint(0, 4096, (t,), device="cuda")
    cache = cos_sin_cache(4096, r, dtype, "cuda")
    nbytes = 2 * t * (hq + hk) * r * dtype.itemsize + t * (r * dtype.itemsize + 8)
    rule = serving_config(t, hq, hk, r, dtype, "cuda")
    return (lambda cfg: (lambda: rotary_embedding(pos, q, k, d, cache, neox, config=cfg))), nbytes, rule, (hq, hk,
                                                                                                          r // 2)


def _train(shape, backward, dtype):
    b, s, hq, hk, d = shape
    q = torch.randn(b, s, hq, d, device="cuda", dtype=dtype).transpose(1, 2)
    k = torch.randn(b, s, hk, d, device="cuda", dtype=dtype).transpose(1, 2)
    pos = torch.arange(s, device="cuda")[None].expand(b, -1)
    cos, sin = hf_cos_sin(pos, d, dtype)
    fn = apply_rotary_backward if backward else apply_rotary
    nbytes = 2 * b * s * (hq + hk) * d * dtype.itemsize + 2 * b * s * d * dtype.itemsize
    rule = train_config(b * s, hq, hk, d, dtype, "cuda")
    return (lambda cfg: (lambda: fn(q, k, cos, sin, config=cfg))), nbytes, rule, (hq, hk, d // 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "tune-rotary.json"))
    ap.add_argument("--budget-s", type=float, default=75.0)
    ap.add_argument("--rep-ms", type=int, default=20)
    a = ap.parse_args()
    dtype = torch.bfloat16
    t0 = time.monotonic()
    rows, best_rows = [], []
    for kind, shape, neox in SHAPES:
        label = f"{kind} {'x'.join(map(str, shape))}{'' if neox else ' gptj'}"
        if time.monotonic() - t0 > a.budget_s:
            rows.append({"shape": label, "skipped": "time budget spent"})
            continue
        try:
            make, nbytes, rule, heads = (_serving(shape, neox, dtype) if kind == "serving"
                                         else _train(shape, kind == "train-bwd", dtype))
        except Exception as e:  # (out of memory, ...): recorded, never a crash
            rows.append({"shape": label, "error": f"{type(e).__name__}: {e}"[:300]})
            continue
        timings = []
        for cfg in candidate_configs():
            entry = {"config": cfg.describe(), "plan": repr(resolve(cfg, *heads))}
            try:
                call = make(cfg)
                call()
                torch.cuda.synchronize()
                us = triton.testing.do_bench_cudagraph(call, rep=a.rep_ms) * 1e3
                entry.update(us=round(us, 3), gbps=round(nbytes / (us * 1e3), 1))
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            timings.append(entry)
        ok = [x for x in timings if "us" in x]
        best = min(ok, key=lambda x: x["us"]) if ok else None
        picked = next((x for x in ok if x["config"] == rule.describe()), None)
        row = {"shape": label, "bytes": nbytes, "rule": rule.describe(), "timings": timings,
               "best": best["config"] if best else None, "best_us": best["us"] if best else None,
               "rule_us": picked["us"] if picked else None}
        rows.append(row)
        best_rows.append(row)
        print(f"{label:36s} best {row['best']} {row['best_us']} us; rule {row['rule']} {row['rule_us']} us",
              flush=True)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "dtype": "bf16", "rows": rows},
                                       indent=1))
    print(f"\nbest config per shape (bf16, do_bench_cudagraph median; {time.monotonic() - t0:.0f} s; {a.json})")
    print(f"{'shape':36s} {'best':24s} {'us':>9s} {'GB/s':>7s}  {'rule':24s} {'rule/best':>9s}")
    for r in best_rows:
        if r["best"] is None:
            print(f"{r['shape']:36s} every config failed")
            continue
        gbps = r["bytes"] / (r["best_us"] * 1e3)
        ratio = f"{r['rule_us'] / r['best_us']:.2f}" if r["rule_us"] else "-"
        print(f"{r['shape']:36s} {r['best']:24s} {r['best_us']:9.2f} {gbps:7.0f}  {r['rule']:24s} {ratio:>9s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
