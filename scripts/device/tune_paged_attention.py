"""Time every candidate launch config of paged decode attention per shape on the GPU; print the best per shape last.

Usage (on the GPU machine, from the repo root): python3 scripts/device/tune_paged_attention.py [--json P] [--budget-s S]
[--variant fp8kv] (every shape with that cache variant instead of its own; the rules can key on the KV itemsize)
[--f16-only] (an fp8 cache: time only the fp16-dot candidates, the form the fp8 rules launch)
Each shape (B, L, Hq, Hkv, D, BS[, Q]) is timed for every config of rules.candidate_configs() with
triton.testing.do_bench_cudagraph (graph replay, median); a config that fails to compile or run is recorded with
its error and skipped, as is a shape that does not fit. Shapes come in pairs at batch 1 and a large batch with the
same context: the rules may not look at B (batch invariance, rules.py), so the table shows what the best single
choice per context costs at each end. GB/s = the KV bytes read / time. JSON: every timing, the rule's pick, the best.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from ridgeline.core.spec import Case  # noqa: E402
from ridgeline.ops.paged_attention.launch import paged_decode_attention, plan_for  # noqa: E402
from ridgeline.ops.paged_attention.rules import candidate_configs  # noqa: E402
from ridgeline.ops.paged_attention.spec import PagedDecodeAttentionSpec  # noqa: E402

SHAPES = [
    ((1, 4096, 32, 8, 128, 16), ""), ((64, 4096, 32, 8, 128, 16), ""),
    ((1, 32768, 32, 8, 128, 64), ""), ((32, 32768, 32, 8, 128, 64), ""),
    ((1, 131072, 64, 8, 128, 16), ""), ((8, 131072, 64, 8, 128, 16), ""),
    ((256, 1024, 32, 8, 128, 16), ""), ((8, 4096, 32, 8, 128, 16, 4), ""),
    ((32, 4096, 32, 8, 128, 16), "fp8kv"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "tune-paged_attention.json"))
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--rep-ms", type=int, default=15)
    ap.add_argument("--variant", default=None, help="the cache variant of every shape (e.g. fp8kv)")
    ap.add_argument("--f16-only", action="store_true",
                    help="an fp8 cache: only the fp16-dot candidates (the fp8 rules' form), the rule's pick kept")
    a = ap.parse_args()
    spec = PagedDecodeAttentionSpec()
    t0 = time.monotonic()
    rows = []
    for shape, variant in SHAPES:
        variant = variant if a.variant is None else a.variant
        label = "x".join(map(str, shape)) + (f" {variant}" if variant else "")
        if time.monotonic() - t0 > a.budget_s:
            rows.append({"shape": label, "skipped": "time budget spent"})
            continue
        try:
            case = Case(shape, torch.bfloat16, variant)
            inp = spec.make_inputs(case, "cuda", 0)
            args = [inp[k] for k in ("q", "k_cache", "v_cache", "block_table", "seq_lens", "scale", "k_scale",
                                     "v_scale")]
            kv_bytes = spec.cost_of(case).bytes
            rule = plan_for(*args).config
        except Exception as e:  # (out of memory, ...): recorded, never a crash
            rows.append({"shape": label, "error": f"{type(e).__name__}: {e}"[:300]})
            torch.cuda.empty_cache()
            continue
        timings = []
        configs = candidate_configs(args[1].element_size())
        if a.f16_only and args[1].element_size() == 1:
            configs = [c for c in configs if c.f16_dots or c == rule]
        for cfg in configs:
            entry = {"config": cfg.describe()}
            try:
                plan = plan_for(*args, config=cfg)
                entry.update(split_tokens=plan.split_tokens, n_splits=plan.n_splits)
                call = functools.partial(paged_decode_attention, *args, config=cfg)
                call()
                torch.cuda.synchronize()
                us = triton.testing.do_bench_cudagraph(call, rep=a.rep_ms) * 1e3
                entry.update(us=round(us, 3), gbps=round(kv_bytes / (us * 1e3), 1))
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            timings.append(entry)
        ok = [x for x in timings if "us" in x]
        best = min(ok, key=lambda x: x["us"]) if ok else None
        picked = next((x for x in ok if x["config"] == rule.describe()), None)
        row = {"shape": label, "bytes": kv_bytes, "rule": rule.describe(), "timings": timings,
               "best": best["config"] if best else None, "best_us": best["us"] if best else None,
               "rule_us": picked["us"] if picked else None}
        rows.append(row)
        print(f"{label:32s} best {row['best']} {row['best_us']} us; rule {row['rule']} {row['rule_us']} us", flush=True)
        inp = args = None  # (free the cache before the next shape)
        torch.cuda.empty_cache()
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "dtype": "bf16", "rows": rows},
                                       indent=1))
    print(f"\nbest config per shape (bf16, do_bench_cudagraph median; {time.monotonic() - t0:.0f} s; {a.json})")
    print(f"{'shape':32s} {'best':28s} {'us':>9s} {'GB/s':>7s}  {'rule':28s} {'rule/best':>9s}")
    for r in rows:
        if r.get("best") is None:
            print(f"{r['shape']:32s} {r.get('skipped') or r.get('error') or 'every config failed'}")
            continue
        gbps = r["bytes"] / (r["best_us"] * 1e3)
        ratio = f"{r['rule_us'] / r['best_us']:.2f}" if r["rule_us"] else "-"
        print(f"{r['shape']:32s} {r['best']:28s} {r['best_us']:9.2f} {gbps:7.0f}  {r['rule']:28s} {ratio:>9s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
