"""Time the open launch choices of the cross-entropy kernel on the GPU, in one call (the lead sets rules.py from it).

Usage (GPU machine, repo root):  python3 scripts/device/tune_cross_entropy.py [--json OUT.json] [--budget S]

Per shape (bf16) and per contract (the training step writes the gradient; the forward does not), every candidate:
- layout: the row in registers (V <= 32768; warps 8/16/32), or chunks of 4096/8192/16384 over 8/16 warps;
- grid: a program per row, a persistent grid of 1/2/4 programs per SM, or one bounded by an L2 budget of
  4/8/16/32 MiB of rows in flight (the two-pass training step re-reads each row: it comes from L2 only while the
  rows in flight fit);
- split rows (kernel_split.py, the candidate no shipped rule picks): a program per (row, chunk) of 2048-16384
  columns over 4-16 warps; the training step's rows launched in groups of 16/32/48 MiB of logits or as one group
  (kernel 2 re-reads its chunk from L2 while the group fits), and the default once without kernel 2's reverse walk;
- split rows read once (kernel_coop.py, the training step): one cooperative kernel, chunks of 4096-16384 over
  4-16 warps (`--layouts coop`: these alone beside the shipped config);
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
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from ridgeline.ops.cross_entropy import launch as L  # noqa: E402
from ridgeline.ops.cross_entropy.rules import LaunchConfig, config_for, grid_for, split_config, split_plan  # noqa: E402

SHAPES = [(4096, 32000), (16384, 32000), (4096, 128256), (8192, 128256), (8192, 151936), (4096, 256000)]
L2_BUDGETS_MIB = (4, 8, 16, 32)
# Split rows: (chunk columns, warps) for 16-bit logits (8-64 values a thread), and the group budgets (0: one group).
SPLIT_LAYOUTS = ((2048, 4), (4096, 4), (4096, 8), (8192, 4), (8192, 8), (8192, 16), (16384, 8), (16384, 16))
SPLIT_GROUPS_MIB = (16, 32, 48, 0)
# Split rows read once (kernel_coop.py, the training step only): (chunk columns, warps).
COOP_LAYOUTS = ((4096, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16))


def _grids(n: int, v: int, has_grad: bool, sms: int, itemsize: int) -> list[tuple[int, str]]:
    """(programs, label) of the grids the chunked layouts are timed on: a program per row, 1/2/4 per SM and, for
    the training step, grids bounded so the rows' re-read stays within an L2 budget."""
    grids = [(n, "row/program")] + [(min(n, sms * k), f"{k}/SM") for k in (1, 2, 4)]
    if has_grad:
        grids += [(max(1, min(n, (mib << 20) // (v * itemsize))), f"L2 {mib} MiB") for mib in L2_BUDGETS_MIB]
    return grids


def candidates(n: int, v: int, has_grad: bool, sms: int, itemsize: int) -> list[tuple[LaunchConfig, int, str]]:
    """(config, grid, label) to time."""
    out: list[tuple[LaunchConfig, int, str]] = []
    grids = _grids(n, v, has_grad, sms, itemsize)
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


LANE_LAYOUTS = ((4096, 8), (8192, 8), (8192, 16), (16384, 16))  # (chunk columns, warps) with per-lane statistics


def lane_candidates(n: int, v: int, has_grad: bool, sms: int, itemsize: int) -> list[tuple[LaunchConfig, int, str]]:
    """(config, grid, label) of the chunked layouts whose first pass keeps (max, sum) per lane (no block reduction
    in the loop: kernel._lane_stats) over the same grids as `candidates`: a program per row, 1/2/4 per SM and,
    for the training step, grids bounded so the re-read stays in L2."""
    block = 1 << (v - 1).bit_length()
    out = [(LaunchConfig(chunk, warps, False, lanes=True), grid, f"lanes {chunk} w{warps} {label}")
           for chunk, warps in LANE_LAYOUTS if chunk < block for grid, label in _grids(n, v, has_grad, sms, itemsize)]
    if has_grad:  # the gradient pass last chunk first (the most recently read: more of the re-read from L2)
        out += [(replace(cfg, back=True), grid, f"{label} back") for cfg, grid, label in out]
    return out


def split_candidates(n: int, v: int, has_grad: bool, itemsize: int) -> list[tuple[LaunchConfig, int, str]]:
    """(config, grid of the first group's kernel 1, label) of the split-row layouts to time."""
    out: list[tuple[LaunchConfig, int, str]] = []
    default = split_config(v, itemsize)
    for chunk, warps in SPLIT_LAYOUTS:
        if chunk > (1 << (v - 1).bit_length()):  # (wider than the row's power-of-two block)
            continue
        for mib in SPLIT_GROUPS_MIB if has_grad else (0,):
            cfg = split_config(v, itemsize, chunk, warps, mib << 20)
            chunks, rows = split_plan(n, v, itemsize, cfg, has_grad)
            groups = -(-n // rows)
            label = f"split {chunk} w{warps} " + (f"g{mib}MiB x{groups}" if mib else "one group")
            out.append((cfg, chunks * min(n, rows), label))
    if has_grad:
        cfg = split_config(v, itemsize, reverse=False)
        chunks, rows = split_plan(n, v, itemsize, cfg, has_grad)
        out.append((cfg, chunks * min(n, rows), f"split {default.block} w{default.num_warps} "
                    f"g{default.group_bytes >> 20}MiB forward-walk"))
    return out


def coop_candidates(n: int, v: int, has_grad: bool, itemsize: int) -> list[tuple[LaunchConfig, int, str]]:
    """(config, grid (its groups are sized at launch: the chunks of every row, for the record), label) of the
    split rows read once; the training step only (the forward alone reads the logits once already)."""
    if not has_grad:
        return []
    # (prefetch: each program loads its group's next row while this row's group is awaited)
    return [(split_config(v, itemsize, chunk, warps, coop=True, prefetch=pf), -(-v // chunk) * n,
             f"coop {chunk} w{warps}" + (" prefetch" if pf else ""))
            for chunk, warps in COOP_LAYOUTS if chunk <= (1 << (v - 1).bit_length()) for pf in (False, True)]


def _time(fn, budget_s: float) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=max(5, int(budget_s * 200)), rep=max(10, int(budget_s * 1000)),
                                         return_mode="median"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="tune-cross_entropy.json")
    ap.add_argument("--budget", type=float, default=0.05, help="seconds of timing per candidate")
    ap.add_argument("--shapes", default="", help="NxV,NxV,... (default: the built-in list)")
    ap.add_argument("--layouts", default="all", choices=("all", "shipped", "split", "coop", "lanes"),
                    help="candidates: all; the shipped kernel's grid only; the split rows (two kernels and read "
                         "once); the split rows read once only (each beside the shipped config)")
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
            grid_cands = candidates(n, v, has_grad, sms, 2) if args.layouts in ("all", "shipped") else []
            split_cands = split_candidates(n, v, has_grad, 2) if args.layouts in ("all", "split") else []
            coop_cands = coop_candidates(n, v, has_grad, 2) if args.layouts in ("all", "coop") else []
            lane_cands = lane_candidates(n, v, has_grad, sms, 2) if args.layouts in ("all", "lanes") else []
            others = grid_cands + split_cands + coop_cands + lane_cands
            for cfg, grid, label in [(shipped_cfg, shipped_grid, "shipped")] + others:
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
    best_split = {}
    for r in records:
        if r["label"].startswith(("split", "coop", "lanes")) and "gbps" in r:
            key = (r["contract"], f"{r['shape'][0]}x{r['shape'][1]}")
            if key not in best_split or r["gbps"] > best_split[key]["gbps"]:
                best_split[key] = r
    if best_split:
        print("\n# best split-row candidate per shape (GB/s, fraction of 4270 GB/s):")
        for (contract, shape), r in best_split.items():
            print(f"{contract:24} {shape:>12} {r['label']:>32} {r['gbps']:7.0f} {r['sol']:5.2f}")
    print(f"\n# {len(records)} candidates in {time.time() - t_start:.0f} s; best per shape (GB/s, bf16):")
    print(f"{'contract':24} {'shape':>12} {'best':>32} {'GB/s':>7} {'shipped':>8}")
    for contract, shape, label, gbps, ship in best:
        print(f"{contract:24} {shape:>12} {label:>32} {gbps:7.0f} {ship:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
