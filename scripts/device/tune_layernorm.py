"""Time the LayerNorm launch candidates per shape on the GPU, to settle the guesses in ops/layernorm/rules.py.

Usage (on the GPU machine, from the repo root, src/ on PYTHONPATH):
  python3 scripts/device/tune_layernorm.py [--shapes 4096x768,4096x4096] [--dtype bf16] [--json OUT.json]
                                           [--max-seconds 100] [--rep-ms 15]

For each shape, every forward candidate (`rules.fwd_candidates`) and backward candidate (`rules.bwd_candidates`) is
checked against the float64 reference once, then timed with triton.testing.do_bench_cudagraph over several input
sets in turn (enough to exceed the L2 three times over: cold-L2 figures, as the graph-cold regime measures). A
config that fails to compile, launch or match is recorded with its reason and skipped, never a crash; when
--max-seconds runs out the shapes left are skipped and said so. The table of the best config per shape and
direction (beside the rule's choice) is printed last; everything measured goes to --json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
import traceback
from pathlib import Path

import torch

DEFAULT_SHAPES = "4096x768,4096x4096,16384x4096,4096x4100,4096x5120,4096x8192"
L2_BYTES = 60 * 2**20
COPY_GBPS = 4270.0
DEVICE = "cuda"  # (a test runs the driver on the CPU interpreter with "cpu")


def _parse_shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        m, n = (int(v) for v in part.lower().split("x"))
        out.append((m, n))
    return out


def _sets(bytes_per_call: int) -> int:
    return max(1, min(16, math.ceil(3 * L2_BYTES / max(1, bytes_per_call))))


def _time(fn_sets, rep_ms: float) -> float:
    """Microseconds per call: one graph replays a call on each input set in turn."""
    import triton.testing

    def run():
        for fn in fn_sets:
            fn()

    return triton.testing.do_bench_cudagraph(run, rep=rep_ms) * 1000.0 / len(fn_sets)


def tune_shape(m: int, n: int, dtype: torch.dtype, rep_ms: float, only: str | None = None) -> list[dict]:
    from ridgeline.ops.layernorm.launch import _backward, _forward
    from ridgeline.ops.layernorm.rules import bwd_candidates, bwd_config, fwd_candidates, fwd_config
    from ridgeline.ops.layernorm.spec import ln_bwd_ref, ln_ref, stats_of

    rows = []
    item = dtype.itemsize
    fwd_bytes = 2 * m * n * item + 2 * n * item
    bwd_bytes = 3 * m * n * item + 3 * n * item + 8 * m
    k_fwd, k_bwd = _sets(fwd_bytes), _sets(bwd_bytes)
    g = torch.Generator(device=DEVICE).manual_seed(0)
    xs = [(torch.randn(m, n, device=DEVICE, generator=g) + 0.5).to(dtype) for _ in range(max(k_fwd, k_bwd))]
    dys = [torch.randn(m, n, device=DEVICE, generator=g).to(dtype) for _ in range(k_bwd)]
    w = (1 + 0.5 * torch.randn(n, device=DEVICE, generator=g)).to(dtype)
    b = (0.5 * torch.randn(n, device=DEVICE, generator=g)).to(dtype)
    stats = [stats_of(x, 1e-5) for x in xs[:k_bwd]]
    check_rows = min(m, 512)

    def record(direction, cfg, rule_cfg, fn_sets, check, nbytes):
        row = {"shape": f"{m}x{n}", "dtype": str(dtype).replace("torch.", ""), "dir": direction,
               "config": cfg.describe(), "fields": dataclasses.asdict(cfg), "rule": cfg == rule_cfg}
        try:
            err = check()
            if not err <= 1.0:  # (NaN fails too: unwritten columns read as NaN now and then, and NaN > 1 is False)
                raise AssertionError(f"error ratio {err:.3g} over tolerance")
            us = _time(fn_sets, rep_ms)
            row.update(us=us, gbps=nbytes / us / 1e3, pct_sol=nbytes / (us * 1e-6) / 1e9 / COPY_GBPS)
        except Exception as e:  # a failing config is a result, never a crash
            row["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
            if "--debug" in sys.argv:
                traceback.print_exc()
        rows.append(row)
        if DEVICE == "cuda":
            torch.cuda.synchronize()

    def ratio(out, ref):
        tol = 1e-2 + 1.6e-2 * ref.abs() if item == 2 else 1e-4 + 1e-4 * ref.abs()
        return float(((out.double() - ref).abs() / tol).max())

    def fresh(j: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Check inputs of their own per candidate: a config that leaves columns unwritten must not pass on the
        previous candidate's correct output left in a reused buffer (it did, on the CPU, now and then)."""
        gen = torch.Generator(device=DEVICE).manual_seed(1000 + j)
        return ((torch.randn(check_rows, n, device=DEVICE, generator=gen) + 0.5).to(dtype),
                torch.randn(check_rows, n, device=DEVICE, generator=gen).to(dtype))

    def fwd_check(cfg, j: int) -> float:
        x, _ = fresh(j)
        return ratio(_forward(x, w, b, 1e-5, False, cfg)[0], ln_ref(x, w, b, 1e-5))

    def bwd_check(cfg, j: int) -> float:
        x, dy = fresh(j)
        mean, rstd = stats_of(x, 1e-5)
        return ratio(_backward(dy, x, w, mean, rstd, True, True, cfg)[0], ln_bwd_ref(dy, x, w, mean, rstd)[0])

    rule = fwd_config(n, dtype)
    for j, cfg in enumerate(fwd_candidates(n, dtype) if only != "bwd" else []):
        fns = [lambda x=x, cfg=cfg: _forward(x, w, b, 1e-5, False, cfg) for x in xs[:k_fwd]]
        record("fwd", cfg, rule, fns, lambda cfg=cfg, j=j: fwd_check(cfg, j), fwd_bytes)
    rule = bwd_config(n, dtype)
    for j, cfg in enumerate(bwd_candidates(n, dtype) if only != "fwd" else []):
        fns = [lambda i=i, cfg=cfg: _backward(dys[i], xs[i], w, stats[i][0], stats[i][1], True, True, cfg)
               for i in range(k_bwd)]
        record("bwd", cfg, rule, fns, lambda cfg=cfg, j=j: bwd_check(cfg, j), bwd_bytes)
    if DEVICE == "cuda":  # (the inputs go with this frame)
        torch.cuda.empty_cache()
    return rows


def summary(rows: list[dict]) -> list[str]:
    lines = [f"{'shape':>12} {'dir':>3} {'best us':>9} {'GB/s':>6} {'%SOL':>5} {'rule us':>8} {'gain':>5}  best config"]
    keys = dict.fromkeys((r["shape"], r["dir"]) for r in rows)
    for shape, direction in keys:
        ok = [r for r in rows if r["shape"] == shape and r["dir"] == direction and "us" in r]
        if not ok:
            lines.append(f"{shape:>12} {direction:>3}  (every config failed)")
            continue
        best = min(ok, key=lambda r: r["us"])
        rule = next((r for r in ok if r["rule"]), None)
        rule_us = rule["us"] if rule else float("nan")
        lines.append(f"{shape:>12} {direction:>3} {best['us']:9.2f} {best['gbps']:6.0f} {100 * best['pct_sol']:5.1f} "
                     f"{rule_us:8.2f} {rule_us / best['us']:5.2f}  {best['config']}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--max-seconds", type=float, default=100.0)
    ap.add_argument("--rep-ms", type=float, default=15.0)
    ap.add_argument("--debug", action="store_true")
    ap.add_argument("--only", choices=("fwd", "bwd"), help="one direction")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("tune_layernorm: needs a CUDA GPU", file=sys.stderr)
        return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    t0 = time.time()
    rows: list[dict] = []
    skipped = []
    for m, n in _parse_shapes(args.shapes):
        if time.time() - t0 > args.max_seconds:
            skipped.append(f"{m}x{n}")
            continue
        try:
            rows += tune_shape(m, n, dtype, args.rep_ms, args.only)
        except Exception as e:  # (out of memory, a broken reference): the shape is recorded, the rest go on
            rows.append({"shape": f"{m}x{n}", "dir": "-", "error": f"{type(e).__name__}: {str(e)[:200]}"})
        print(f"tuned {m}x{n} ({time.time() - t0:.0f} s)", flush=True)
        if args.json:  # written as results come: a timeout still leaves what was measured
            args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows,
                                             "skipped": skipped}, indent=1))
    failed = [r for r in rows if "error" in r]
    for r in failed:
        print(f"failed: {r['shape']} {r['dir']} {r.get('config', '')}: {r['error']}")
    if skipped:
        print(f"skipped (out of time): {', '.join(skipped)}")
    print("\n".join(summary([r for r in rows if "config" in r])))
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows, "skipped": skipped},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
