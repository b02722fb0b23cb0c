"""Time candidate tile configs of ridgeline's GEMM per shape class on the GPU; print the best per shape last and
write JSON. A config that fails to compile or run (or gives wrong values) is recorded and skipped.

  python3 scripts/device/tune_matmul.py --json $OUT/h200-tune-matmul.json --max-seconds 70
  python3 scripts/device/tune_matmul.py --only-gemv --json $OUT/h200-tune-matmul-gemv.json --max-seconds 300
--only-gemv times the CUDA-core GEMV candidate (rules.GEMV_CANDIDATES, kernel_gemv.py) at M = 1, 4, 8 over the
sweep's decode (N, K) beside cuBLAS and the shipped rule, and checks each candidate's rows bitwise against its own
M = 8 launch (`same_bits_m8`: batch invariance within the family).
Classes and candidates: ridgeline.ops.matmul.rules.CANDIDATES; the shapes per class are below. cuBLAS is timed
beside them (the rules must beat it). Timing: triton.testing.do_bench_cudagraph (weights cold via rotation is not
needed for large M; for decode the weight exceeds L2 at these layers except 8b-o, 32 MiB: flagged in the output).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

# The GEMV candidate's shapes: M = 8 first (its outputs are the bitwise reference of M = 4 and 1).
GEMV_SHAPES = [(m, n, k) for n, k in ((4096, 4096), (28672, 4096), (8192, 28672), (4096, 14336)) for m in (8, 4, 1)]
SHAPES = {
    "decode": [(1, 4096, 4096), (16, 28672, 4096), (1, 8192, 28672)],
    "small": [(64, 4096, 4096), (64, 28672, 4096)],
    "mid": [(256, 6144, 4096), (128, 8192, 8192), (128, 4096, 4096), (128, 28672, 4096), (512, 4096, 4096)],
    "large": [(4096, 4096, 4096), (16384, 4096, 4096), (4096, 28672, 4096), (8192, 8192, 8192)],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--max-seconds", type=float, default=70.0)
    ap.add_argument("--classes", default="decode,small,mid,large")
    ap.add_argument("--only-gemv", action="store_true", help="the GEMV candidate at M = 1, 4, 8 (GEMV_SHAPES)")
    args = ap.parse_args()
    import triton.testing

    from ridgeline.ops.matmul import rules
    from ridgeline.ops.matmul.launch import matmul_2d

    t_end = time.perf_counter() + args.max_seconds
    out: dict = {"results": [], "best": {}}
    shapes = {"gemv": GEMV_SHAPES} if args.only_gemv else {c: SHAPES[c] for c in args.classes.split(",")}
    x8 = {}
    for cls, cls_shapes in shapes.items():
        for m, n, k in cls_shapes:
            g = torch.Generator(device="cuda").manual_seed(n * 7 + k)  # the same x rows and w at every M
            x = torch.randn(max(m, 8), k, device="cuda", generator=g).bfloat16()[:m]
            w = (torch.randn(n, k, device="cuda", generator=g) / k**0.5).bfloat16()
            ref = (x.float() @ w.float().T)
            flops = 2 * m * n * k
            wbytes = n * k * 2
            cub = triton.testing.do_bench_cudagraph(lambda a=x, b=w: torch.nn.functional.linear(a, b))
            rows = [{"class": cls, "shape": [m, n, k], "config": "cublas", "us": cub * 1e3}]
            rule_cfg = rules.config_for(m, n, k, x.dtype, x.device)[0]
            cands = rules.GEMV_CANDIDATES if cls == "gemv" else rules.CANDIDATES[cls]
            for cfg in [rule_cfg] + cands:
                if time.perf_counter() > t_end:
                    rows.append({"class": cls, "shape": [m, n, k], "config": cfg.describe(), "error": "time budget"})
                    break
                try:
                    y = matmul_2d(x, w, None, x.dtype, "nt", cfg)
                    err = (y.float() - ref).abs().max().item()
                    if not err < 0.1:
                        raise ValueError(f"wrong values (max error {err:.3g})")
                    ms = triton.testing.do_bench_cudagraph(
                        lambda c=cfg, a=x, b=w: matmul_2d(a, b, None, a.dtype, "nt", c))
                    row = {"class": cls, "shape": [m, n, k], "config": cfg.describe(), "key": cfg.key(),
                           "us": ms * 1e3, "rule": cfg == rule_cfg}
                    if isinstance(cfg, rules.GemvConfig):  # rows vs the same config's M = 8 launch, bitwise
                        row["splits"] = rules.gemv_plan(m, n, k, cfg, torch.cuda.get_device_properties(0)
                                                        .multi_processor_count)["splits"]
                        if m == 8:
                            x8[(n, k, cfg)] = y
                        elif (n, k, cfg) in x8:
                            row["same_bits_m8"] = bool(torch.equal(y, x8[(n, k, cfg)][:m]))
                    rows.append(row)
                except Exception as e:  # a config that does not compile or fit: recorded, skipped
                    rows.append({"class": cls, "shape": [m, n, k], "config": cfg.describe(),
                                 "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"})
            for r in rows:
                if "us" in r:
                    r["tflops"] = flops / r["us"] / 1e6
                    r["weight_gbps"] = wbytes / r["us"] / 1e3
            out["results"] += rows
            ok = [r for r in rows if "us" in r and r["config"] != "cublas"]
            if ok:
                best = min(ok, key=lambda r: r["us"])
                out["best"][f"{m}x{n}x{k}"] = {**best, "cublas_us": cub * 1e3,
                                               "vs_cublas": cub * 1e3 / best["us"]}
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
            torch.cuda.empty_cache()
    print(f"{'shape':>18} {'best config':>44} {'us':>9} {'TFLOP/s':>8} {'GB/s(w)':>8} {'x cuBLAS':>8}")
    for shape, b in out["best"].items():
        print(f"{shape:>18} {b['config']:>44} {b['us']:9.1f} {b['tflops']:8.1f} {b['weight_gbps']:8.0f} "
              f"{b['vs_cublas']:8.3f}")


if __name__ == "__main__":
    main()
