"""Time int4_matmul's launch candidates per shape on the GPU, to settle the guesses in ops/int4_matmul/rules.py.

Usage (on the GPU machine, from the repo root, src/ on PYTHONPATH):
  python3 scripts/device/tune_int4_matmul.py [--shapes 1x4096x4096,16x28672x4096] [--json OUT.json]
                                             [--max-seconds 100] [--rep-ms 10]

For each (M, N, K) shape (bf16, group 128): cuBLAS on the dequantized bf16 weight (the baseline of the issue's 3x
target), the shipped rules, and candidates over the tile config (orientation: swap-AB or not; BLOCK_M, BLOCK_N,
warps, stages, groups a loop trip), split programs on/off, and the numeric split (rules.splits_for scaled: none,
half, the rule, double). Each candidate is checked against the float64 reference once and compared BITWISE with
the shipped rules' output (`same_bits`: a candidate with another numeric split is expected to differ; one of the
rules' orientation with the same split must not, or batch invariance across the tile rules does not hold; the
other orientation may), then timed with triton.testing.do_bench_cudagraph over enough input sets to exceed the L2
three times (cold L2). A failing config is recorded and skipped, never a crash; when --max-seconds runs out the
shapes left are skipped and said so. The best config per shape is printed last; everything measured goes to
--json. `--fused-only` times just the split programs' two reduces (a second launch, or the tile's last program
adding the partials in the kernel) over the numeric splits. `--halves` times the 9-16-row rule beside the s39
candidate: x's rows as two 8-wide dots on one unpacked weight, on 4 warps (mma.sync; 2x the rule's warps an SM at
the same shared memory). (scripts/int4_unpack_sass.py gives the candidates'
sm_90 loop instructions without a GPU.)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

import torch

DEFAULT_SHAPES = ("1x4096x4096,1x8192x28672,1x57344x8192,4x4096x4096,16x4096x4096,16x57344x8192,16x8192x28672,"
                  "32x4096x4096,64x8192x28672")
L2_BYTES = 60 * 2**20
COPY_GBPS = 4270.0
DEVICE = "cuda"


def _sets(nbytes: int) -> int:
    return max(1, min(8, math.ceil(3 * L2_BYTES / max(1, nbytes))))


def _time(fns, rep_ms: float) -> float:
    import triton.testing

    def run():
        for f in fns:
            f()

    return triton.testing.do_bench_cudagraph(run, rep=rep_ms) * 1000.0 / len(fns)


def candidates(m: int) -> list:
    """About a dozen per shape (each compiles once on the GPU, ~1 s): (BLOCK_M, BLOCK_N, warps, stages, groups a
    trip, swap-AB). Decode: the swapped mma.sync tiles around the rule, one wgmma-sized one, and the unswapped
    orientation the s20 rules used; from 33 rows the wgmma tiles around the s20 rule."""
    from ridgeline.ops.int4_matmul.rules import TileConfig

    if m <= 8:
        grid = [(8, 64, 4, 4, 1), (8, 64, 4, 6, 1), (8, 64, 4, 4, 2), (8, 128, 4, 4, 1), (8, 128, 4, 3, 1),
                (8, 128, 8, 4, 1), (8, 32, 1, 4, 1), (8, 32, 2, 4, 1), (8, 64, 2, 4, 1), (8, 256, 8, 4, 1)]
    elif m <= 16:
        grid = [(16, 64, 2, 4, 1), (16, 128, 2, 4, 1), (16, 128, 2, 3, 1), (16, 64, 2, 6, 1), (16, 64, 2, 4, 2),
                (16, 32, 2, 4, 1), (16, 128, 4, 4, 1),
                # (s30) the decode rule's 8-row tile twice over the rows: two programs of one N block read the
                # weight once from DRAM (neighbours in launch order, the second from L2) at M <= 8's occupancy
                (8, 64, 4, 4, 2), (8, 64, 4, 4, 1), (8, 64, 2, 4, 1)]
    elif m <= 32:
        grid = [(32, 64, 2, 4, 1), (32, 64, 2, 3, 1), (32, 32, 1, 4, 1), (32, 128, 4, 4, 1), (32, 32, 2, 4, 1),
                (8, 64, 4, 4, 2), (16, 64, 2, 4, 1)]
    else:
        grid = []
    out = [TileConfig(bm, bn, w, st, groups_per_step=g, swap_ab=True) for bm, bn, w, st, g in grid]
    if m <= 32:
        out.append(TileConfig(16 if m <= 16 else 32, 64, 4, 4))  # the s20 orientation: x as the A operand
    else:
        out += [TileConfig(64, 128, 4, 3), TileConfig(64, 128, 4, 4), TileConfig(64, 64, 4, 4),
                TileConfig(128, 128, 8, 3), TileConfig(64, 256, 8, 3)]
    return out


def halves_candidates() -> list:
    """(s39) 16-row tiles as two 8-wide dots on 4 or 8 warps, around the 2-warp rule's shared memory."""
    from ridgeline.ops.int4_matmul.rules import TileConfig

    grid = [(64, 4, 4, 1), (64, 4, 3, 1), (64, 4, 6, 1), (64, 4, 4, 2), (128, 4, 4, 1), (128, 8, 4, 1), (128, 8, 3, 1)]
    return [TileConfig(16, bn, w, st, groups_per_step=g, swap_ab=True, halves=True) for bn, w, st, g in grid]


def tune_shape(m: int, n: int, k: int, rep_ms: float, fused_only: bool = False, halves: bool = False) -> dict:
    from ridgeline.core.spec import Case
    from ridgeline.ops.int4_matmul import launch as L
    from ridgeline.ops.int4_matmul.pack import pack_int4, unpack_int4
    from ridgeline.ops.int4_matmul.rules import splits_for
    from ridgeline.ops.int4_matmul.spec import Int4MatmulSpec

    spec = Int4MatmulSpec()
    nbytes = spec.cost((m, n, k), torch.bfloat16).bytes
    sets = []
    for i in range(_sets(nbytes)):
        g = torch.Generator(device=DEVICE).manual_seed(i)
        wp, s = pack_int4(torch.randn((n, k), generator=g, device=DEVICE).to(torch.bfloat16))
        sets.append((torch.randn((m, k), generator=g, device=DEVICE).to(torch.bfloat16), wp, s))
    x0, wp0, s0 = sets[0]
    ref = (x0.double() @ unpack_int4(wp0, s0).t())
    tol = spec.tolerance_for(Case((m, n, k), torch.bfloat16), "y", torch.bfloat16)
    shipped = L.int4_matmul(x0, wp0, s0)
    rows: list[dict] = []
    deq = [unpack_int4(wp, s, dtype=torch.float32).to(torch.bfloat16) for _, wp, s in sets]
    us = _time([lambda x=x, w=w: torch.nn.functional.linear(x, w) for (x, _, _), w in zip(sets, deq)], rep_ms)
    rows.append({"impl": "cublas-bf16", "us": us})
    del deq
    sms = L.multiprocessor_count(x0.device)
    base_splits = splits_for(n, k, 128, sms)
    split_opts = sorted({1, max(1, base_splits // 2), base_splits, min(2 * base_splits, k // 128 // 2 or 1)})
    original = L.splits_for
    # (tile, split programs, splits, fused reduce): None keeps the rule's choice
    cands = [(None, None, base_splits, None), (None, True, base_splits, False), (None, True, base_splits, True),
             (None, False, base_splits, None)]
    if halves:
        cands = cands[:1] + [(c, None, base_splits, None) for c in halves_candidates()]
    elif fused_only:
        cands += [(None, True, sp, True) for sp in split_opts if sp != base_splits]
    else:
        cands += [(c, None, base_splits, None) for c in candidates(m)]
        cands += [(None, None, sp, None) for sp in split_opts if sp != base_splits]
    for tile, split_progs, splits, fused in cands:
        name = ("rules" if tile is None else tile.describe()) + \
            ("" if split_progs is None else f" split_programs={split_progs}") + \
            ("" if fused is None else f" fused_reduce={fused}") + \
            ("" if splits == base_splits else f" splits={splits}")
        cfg = tile
        try:
            L.splits_for = (lambda *a, _s=splits: _s)
            y = L.int4_matmul(x0, wp0, s0, cfg=cfg, split_programs=split_progs, fused_reduce=fused)
            err = (y.double() - ref).abs()
            if not bool((err <= tol.atol + tol.rtol * ref.abs()).all()):
                rows.append({"impl": name, "error": f"wrong: max abs err {float(err.max()):.3g}"})
                continue
            us = _time([lambda x=x, w=w, sc=s, c=cfg, sp=split_progs, f=fused: L.int4_matmul(
                x, w, sc, cfg=c, split_programs=sp, fused_reduce=f) for x, w, s in sets], rep_ms)
            row = {"impl": name, "us": us, "same_bits": bool(torch.equal(y, shipped)),
                   "weight_GBps": n * k / 2 / us / 1e3}
            rows.append(row)
        except Exception as e:  # a config that fails to compile or launch is a result
            first = str(e).splitlines()[0][:160] if str(e) else ""
            rows.append({"impl": name, "error": f"{type(e).__name__}: {first}"})
        finally:
            L.splits_for = original
    return {"shape": [m, n, k], "bytes": nbytes, "sol_us": nbytes / COPY_GBPS / 1e3, "base_splits": base_splits,
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--max-seconds", type=float, default=100.0)
    ap.add_argument("--rep-ms", type=float, default=10.0)
    ap.add_argument("--fused-only", action="store_true",
                    help="only the split programs' reduce: second launch vs fused, over the numeric splits")
    ap.add_argument("--halves", action="store_true",
                    help="only the rule and the 16-row tiles as two 8-wide dots (shapes of 9-16 rows)")
    args = ap.parse_args(argv)
    max_seconds, shape_text = args.max_seconds, args.shapes
    shapes = [tuple(int(v) for v in p.lower().split("x")) for p in shape_text.split(",")]
    t0, results, skipped = time.time(), [], []
    for shape in shapes:
        if time.time() - t0 > max_seconds:
            skipped.append(list(shape))
            continue
        try:
            results.append(tune_shape(*shape, args.rep_ms, args.fused_only, args.halves))
        except Exception:
            results.append({"shape": list(shape), "error": traceback.format_exc(limit=3)})
        if args.json:
            args.json.write_text(json.dumps({"results": results, "skipped": skipped}, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"results": results, "skipped": skipped}, indent=1))
    print(f"{'shape':>18} {'SOL us':>7} {'cuBLAS':>8} {'rules':>8} {'best':>8}  x cuBLAS  best config (same bits)")
    for r in results:
        if "rows" not in r:
            print(f"{'x'.join(map(str, r['shape'])):>18}  failed: {r['error'].splitlines()[-1]}")
            continue
        ok = [x for x in r["rows"] if "us" in x]
        cub = next((x["us"] for x in ok if x["impl"] == "cublas-bf16"), float("nan"))
        rules = next((x["us"] for x in ok if x["impl"] == "rules"), float("nan"))
        ours = [x for x in ok if x["impl"] != "cublas-bf16"]
        best = min(ours, key=lambda x: x["us"]) if ours else {"impl": "-", "us": float("nan")}
        print(f"{'x'.join(map(str, r['shape'])):>18} {r['sol_us']:7.1f} {cub:8.1f} {rules:8.1f} {best['us']:8.1f}"
              f"  {cub / best['us']:7.2f}x  {best['impl']} ({best.get('same_bits')})")
    if skipped:
        print(f"skipped (time): {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
