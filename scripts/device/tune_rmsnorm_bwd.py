"""Time the RMSNorm backward's candidate configs (rules_bwd.bwd_candidates) per shape on the GPU, and rstd read
against rstd recomputed, so the lead can set rules_bwd.py's tables from one run.

    python3 scripts/device/tune_rmsnorm_bwd.py [--out $OUT/tune-rmsnorm-bwd.json] [--shapes 4096x4096 ...]

For each shape (bf16): every candidate with the saved rstd read (the contract's path), timed by CUDA-graph replay
(triton.testing.do_bench_cudagraph, one input set: L2-warm for the small shapes); the shipped rule's config beside
them; then the best and the shipped config with rstd recomputed (autograd's path: our forward writes no rstd). The
"step" columns add the forward (rms_norm) to each backward: recomputing wins the training step when its backward is
no slower than reading by more than the forward's extra rstd write would cost (M * 4 bytes at 4270 GB/s).
A failing config is recorded with its error and skipped. The table of the best config per shape is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import torch  # noqa: E402
import triton.testing  # noqa: E402

from ridgeline.lib.launch import multiprocessor_count  # noqa: E402
from ridgeline.ops.rmsnorm.backward import rms_norm_backward  # noqa: E402
from ridgeline.ops.rmsnorm.launch import rms_norm  # noqa: E402
from ridgeline.ops.rmsnorm.rules_bwd import bwd_candidates, bwd_config  # noqa: E402
from ridgeline.ops.rmsnorm.spec_bwd import SWEEP, rstd_of_rows  # noqa: E402

COPY_GBPS = 4270.0


def _time_us(fn, rep: int) -> float:
    fn()  # compile outside the graph
    torch.cuda.synchronize()
    return float(triton.testing.do_bench_cudagraph(fn, rep=rep)) * 1e3


def _bytes(m: int, n: int, fused: bool) -> int:
    return (4 if fused else 3) * m * n * 2 + 2 * n * 2 + 4 * m


def tune_shape(m: int, n: int, rep: int, fused: bool) -> dict:
    torch.manual_seed(0)
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    dres = torch.randn_like(x) if fused else None
    w = (1 + 0.5 * torch.randn(n, device="cuda")).to(torch.bfloat16)
    rstd = rstd_of_rows(x)
    shipped = bwd_config(n, m, multiprocessor_count(x.device))
    rows: list[dict] = []

    def run(cfg, read: bool) -> dict:
        row = {"config": cfg.describe(), "rstd": "read" if read else "recompute", "shipped": cfg == shipped}
        try:
            us = _time_us(lambda: rms_norm_backward(dy, x, w, rstd if read else None, 1e-6, dresidual_out=dres,
                                                    cfg=cfg), rep)
            row.update(us=round(us, 3), gbps=round(_bytes(m, n, fused) / us / 1e3, 1))
        except Exception as e:  # a config that fails to compile or launch is a result, not the end of the run
            row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}",
                       where=traceback.extract_tb(e.__traceback__)[-1].lineno)
        rows.append(row)
        return row

    cands = bwd_candidates(n)
    if shipped not in cands:
        cands.append(shipped)
    for cfg in cands:
        run(cfg, True)
    ok = [r for r in rows if "us" in r]
    best = min(ok, key=lambda r: r["us"]) if ok else None
    best_cfg = next((c for c in cands if best and c.describe() == best["config"]), None)
    recompute = {}
    for label, cfg in (("best", best_cfg), ("shipped", shipped)):
        if cfg is not None:
            recompute[label] = run(cfg, False)
    fwd_us = None
    try:
        fwd_us = round(_time_us(lambda: rms_norm(x, w), rep), 3)
    except Exception as e:  # (the forward is only context here)
        fwd_us = f"{type(e).__name__}: {e}"
    out = {"shape": [m, n], "fused": fused, "bytes": _bytes(m, n, fused), "rows": rows, "best": best,
           "shipped": next((r for r in rows if r["shipped"] and r["rstd"] == "read"), None), "forward_us": fwd_us,
           "recompute": recompute, "rstd_write_us": round(m * 4 / COPY_GBPS / 1e3, 4)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "tune-rmsnorm-bwd.json"))
    ap.add_argument("--shapes", nargs="*", default=[f"{m}x{n}" for m, n in SWEEP])
    ap.add_argument("--rep", type=int, default=15, help="ms of graph replays per timing")
    ap.add_argument("--fused", action="store_true", help="time the fused op's backward (adds d residual_out)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("tune_rmsnorm_bwd: needs a CUDA GPU", file=sys.stderr)
        return 2
    results = []
    for label in args.shapes:
        m, n = (int(v) for v in label.lower().split("x"))
        try:
            results.append(tune_shape(m, n, args.rep, args.fused))
        except Exception as e:  # an out-of-memory shape is recorded, the others still run
            results.append({"shape": [m, n], "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "results": results},
                                             indent=1))
        torch.cuda.empty_cache()
    print(f"\n{'shape':>12} {'best config (rstd read)':<52} {'us':>8} {'GB/s':>7} {'shipped us':>10} "
          f"{'recompute us':>12} {'fwd us':>7}")
    for r in results:
        shape = "x".join(map(str, r["shape"]))
        if "error" in r or not r.get("best"):
            print(f"{shape:>12} {r.get('error', 'every config failed')}")
            continue
        b, s, rc = r["best"], r["shipped"] or {}, r["recompute"].get("best", {})
        fwd = r["forward_us"] if isinstance(r["forward_us"], float) else float("nan")
        print(f"{shape:>12} {b['config']:<52} {b['us']:>8.2f} {b['gbps']:>7.0f} {s.get('us', float('nan')):>10.2f} "
              f"{rc.get('us', float('nan')):>12.2f} {fwd:>7.2f}")
    print(f"(JSON: {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
