"""Time the open launch choices of the cross-entropy kernel on the GPU, in one call (the lead sets rules.py from it).

Usage (GPU machine, repo root):  python3 scripts/device/tune_cross_entropy.py [--json OUT.json] [--budget S]

Per shape (bf16) and per contract (the training step writes the gradient; the forward does not), every candidate:
- layout: the row in registers (V <= 32768; warps 8/16/32), or chunks of 4096/8192/16384 over 8/16 warps;
- grid: a program per row, a persistent grid of 1/2/4 programs per SM, or one bounded by an L2 budget of
  4/8/16/32 MiB of rows in flight (the two-pass training step re-reads each row: it comes from L2 only while the
  rows in flight fit);
timed with triton.testing.do_bench (L2 flushed between calls; median), GB/s on the contract's bytes. Each
candidate's result is checked against the shipped config's (loss within 1e-5, gradient within 2 bf16 ulps); a
config that fails to compile, raises or disagrees is recorded with its reason and skipped, never a crash. The last
lines printed are the best config per shape and contract beside the shipped one.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from ridgeline.ops.cross_entropy import launch as L  # noqa: E402
from ridgeline.ops.cross_entropy.rules import LaunchConfig, config_for, grid_for  # noqa: E402

SHAPES = [(4096, 32000), (16384, 32000), (4096, 128256), (8192, 128256), (8192, 151936), (4096, 256000)]
L2_BUDGETS_MIB = (4, 8, 16, 32)


def candidates(n: int, v: int, has_grad: bool, sms: int, itemsize: int) -> list[tuple[LaunchConfig, int, str]]:
    """(config, grid, label) to time."""
    out: list[tuple[LaunchConfig, int, str]] = []
    grids: list[tuple[int, str]] = [(n, "row/program")] + [(min(n, sms * k), f"{k}/SM") for k in (1, 2, 4)]
    if has_grad:
        row_bytes = v * itemsize
        grids += [(max(1, min(n, (mib << 20) // row_bytes)), f"L2 {mib} MiB") for mib in L2_BUDGETS_MIB]
    block = 1 << (v - 1).bit_length()
    if block <= 32768:
        for warps in (8, 16, 32):
            for grid, label in grids[:3]:
                out.append((LaunchConfig(block, warps, True), grid, f"1-pass {block} w{warps} {label}"))
    for chunk, warps in ((4096, 8), (8192, 16), (16384, 16)):
        if chunk >= block:
            continue
        for grid, label in grids:
            out.append((LaunchConfig(chunk, warps, False), grid, f"2-pass {chunk} w{warps} {label}"))
    return out


def _time(fn, budget_s: float) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=max(5, int(budget_s * 200)), rep=max(10, int(budget_s * 1000)),
                                         return_mode="median"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="tune-cross_entropy.json")
    ap.add_argument("--budget", type=float, default=0.05, help="seconds of timing per candidate")
    ap.add_argument("--shapes", default="", help="NxV,NxV,... (default: the built-in list)")
    args = ap.parse_args()
    shapes = [tuple(int(p) for p in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    records: list[dict] = []
    best: list[tuple] = []
    t_start = time.time()
    for n, v in shapes:
        gen = torch.Generator(device=dev).manual_seed(0)
        x = (2 * torch.randn(n, v, generator=gen, device=dev)).to(torch.bfloat16)
        t = torch.randint(0, v, (n,), generator=gen, device=dev)
        grad = torch.empty_like(x)
        for has_grad in (True, False):
            contract = "cross_entropy_fwd_bwd" if has_grad else "cross_entropy"
            nbytes = (2 if has_grad else 1) * n * v * 2 + 8 * n + 4
            case = L.case_of(x, has_grad)
            shipped_cfg = config_for(case)
            shipped_grid = grid_for(case, shipped_cfg)
            g_arg = grad if has_grad else None
            ref_loss = L._run(x, t, -100, 0.0, "mean", 0.0, g_arg, False).clone()
            ref_grad = grad.clone() if has_grad else None
            rows = []
            for cfg, grid, label in [(shipped_cfg, shipped_grid, "shipped")] + candidates(n, v, has_grad, sms, 2):
                rec = {"contract": contract, "shape": [n, v], "label": label, "config": cfg.describe(), "grid": grid}
                try:
                    loss = L._run(x, t, -100, 0.0, "mean", 0.0, g_arg, False, cfg, grid)
                    torch.cuda.synchronize()
                    if not torch.allclose(loss, ref_loss, rtol=1e-5, atol=1e-5):
                        raise AssertionError(f"loss {float(loss)} != shipped {float(ref_loss)}")
                    if has_grad and not torch.allclose(grad.float(), ref_grad.float(), rtol=8e-3, atol=1e-12):
                        raise AssertionError("gradient differs from the shipped config's")
                    call = functools.partial(L._run, x, t, -100, 0.0, "mean", 0.0, g_arg, False, cfg, grid)
                    ms = _time(call, args.budget)
                    rec.update(ms=ms, gbps=nbytes / ms / 1e6, sol=nbytes / ms / 1e6 / 4270.0)
                    rows.append(rec)
                except Exception as e:  # a failing config is a result, never a crash
                    rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                    rec["where"] = traceback.format_exc().splitlines()[-3:-1]
                records.append(rec)
                print(json.dumps(rec), flush=True)
            if rows:
                top = max(rows, key=lambda r: r["gbps"])
                ship = next((r for r in rows if r["label"] == "shipped"), None)
                best.append((contract, f"{n}x{v}", top["label"], top["gbps"], ship["gbps"] if ship else float("nan")))
            Path(args.json).write_text(json.dumps({"sms": sms, "records": records}, indent=1))
        del x, t, grad
        torch.cuda.empty_cache()
    print(f"\n# {len(records)} candidates in {time.time() - t_start:.0f} s; best per shape (GB/s, bf16):")
    print(f"{'contract':24} {'shape':>12} {'best':>32} {'GB/s':>7} {'shipped':>8}")
    for contract, shape, label, gbps, ship in best:
        print(f"{contract:24} {shape:>12} {label:>32} {gbps:7.0f} {ship:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
