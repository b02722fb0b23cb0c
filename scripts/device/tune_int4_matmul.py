"""Time int4_matmul's launch candidates per shape on the GPU, to settle the guesses in ops/int4_matmul/rules.py.

Usage (on the GPU machine, from the repo root, src/ on PYTHONPATH):
  python3 scripts/device/tune_int4_matmul.py [--shapes 1x4096x4096,16x28672x4096] [--json OUT.json]
                                             [--max-seconds 100] [--rep-ms 10] [--only-split | --only-gemv]

For each (M, N, K) shape (bf16, group 128): cuBLAS on the dequantized bf16 weight (the baseline of the issue's 3x
target), the shipped rules, and candidates over the tile config (BLOCK_M, BLOCK_N, warps, stages), split programs
on/off, the numeric split (rules.splits_for scaled: none, half, the rule, double), and the second kernel body
(layout "split-nibbles", ops/int4_matmul/kernel_split.py: groups per K step, swap-AB; no rule picks it yet; with
--only-split just cuBLAS, the rules and this body). Each candidate is checked against the float64 reference once
and compared BITWISE with the shipped rules' output (`same_bits`: a candidate with another numeric split is
expected to differ; one with the same split but other tiles must not, or batch invariance across the tile rules
does not hold; a split-nibbles candidate sums each group as two half-K dots, so it differs from the shipped body,
and `same_bits_family` compares it with the first split-nibbles candidate of the same MMA orientation instead:
groups per step and BLOCK_M must not change its bits), then timed with triton.testing.do_bench_cudagraph over
enough input sets to exceed the L2 three times (cold L2). A failing config is recorded and skipped, never a crash;
when --max-seconds runs out the shapes left are skipped and said so. The best config per shape is printed last;
everything measured goes to --json.
--only-gemv (its candidates run only with this flag): the third body (layout "gemv", kernel_gemv.py: CUDA cores,
every row in one program) at the decode shapes, M = 1, 4, 16 over the sweep's N x K (GEMV_SHAPES, unless
--shapes), beside cuBLAS and the rules; `same_bits_family` compares each gemv candidate with the first one at that
shape (BLOCK_N, warps and groups per step should not change its bits), and `rows_invariant` says whether the M = 1
call's row equals row 0 of the M = 4 and 16 calls on the same weight (batch invariance within the family).
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

DEFAULT_SHAPES = "1x4096x4096,1x8192x28672,16x4096x4096,16x57344x8192,64x8192x28672,256x4096x4096,1024x4096x4096"
GEMV_SHAPES = ",".join(f"{m}x{nk}" for m in (1, 4, 16) for nk in (
    "4096x4096", "6144x4096", "28672x4096", "8192x8192", "10240x8192", "57344x8192", "4096x14336", "8192x28672"))
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


def candidates(m: int) -> list[tuple[int, int, int, int]]:
    """About a dozen per shape (each compiles once on the GPU, ~1 s): the rule's BLOCK_M and the next smaller one,
    three widths, two pipeline depths; 8 warps only for 128-row tiles."""
    from ridgeline.ops.int4_matmul.rules import tile_config

    rule_bm = tile_config(m).block_m
    out = []
    for bm in sorted({rule_bm, max(16, rule_bm // 2)}):
        for bn in (32, 64, 128):
            for stages in (3, 4):
                out.append((bm, bn, 8 if bm >= 128 else 4, stages))
    return out


def split_candidates(m: int) -> list:
    """The split-nibbles body (a candidate no rule picks yet): decode (M <= 16) gets the grid of the choices that
    matter (swap-AB or not, groups per step, BLOCK_N, stages; all spill-free at sm_90); larger M a few 32-row tiles
    only (64-row ones with 2+ groups per step spilled at sm_90), to see where it stops helping."""
    from ridgeline.ops.int4_matmul.rules import TileConfig

    bm = 16 if m <= 16 else 32
    grid = [(True, 64, 2, 4), (True, 64, 4, 3), (True, 64, 1, 4), (True, 128, 2, 3), (True, 128, 4, 3),
            (False, 64, 2, 4), (False, 64, 4, 3), (False, 128, 2, 3)]
    if m > 16:
        grid = [(True, 64, 2, 4), (True, 64, 1, 4), (False, 64, 2, 4)]
    return [TileConfig(bm, bn, 4, stages, layout="split-nibbles", groups_per_step=gps, swap_ab=swap)
            for swap, bn, gps, stages in grid]


def gemv_candidates() -> list:
    """The gemv body's grid (compile facts in kernel_gemv.py): 128-bit weight loads at all of them; 8 and 16 warps
    load x straight into the reduction's layout, 4 warps (the last, for comparison) route it through shared memory."""
    from ridgeline.ops.int4_matmul.rules import TileConfig

    grid = [(64, 8, 1), (64, 8, 2), (64, 8, 4), (128, 8, 1), (128, 8, 2), (128, 8, 4), (128, 16, 2), (64, 4, 2)]
    return [TileConfig(layout="gemv", block_n=bn, num_warps=w, groups_per_step=gps) for bn, w, gps in grid]


def tune_shape(m: int, n: int, k: int, rep_ms: float, only_split: bool = False, only_gemv: bool = False) -> dict:
    from ridgeline.core.spec import Case
    from ridgeline.ops.int4_matmul import launch as L
    from ridgeline.ops.int4_matmul.pack import pack_int4, unpack_int4
    from ridgeline.ops.int4_matmul.rules import TileConfig, splits_for
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
    cands = [(None, None, base_splits), (None, True, base_splits), (None, False, base_splits)]
    cands += [(c, None, base_splits) for c in candidates(m)]
    cands += [(None, None, sp) for sp in split_opts if sp != base_splits]
    cands += [(c, None, base_splits) for c in split_candidates(m)]
    if only_gemv:  # (not in the default grid: the plan's default tuning step has no time left for 8 more a shape)
        cands = [(None, None, base_splits)] + [(c, None, base_splits) for c in gemv_candidates() if m <= 16]
    elif only_split:  # the shipped body's grid was timed already (2026-12-01): the rules and the new body only
        cands = [(None, None, base_splits)] + [(c, None, base_splits) for c in split_candidates(m)]
    family: dict[object, torch.Tensor] = {}  # the first output per MMA orientation (split-nibbles), or "gemv"
    for tile, split_progs, splits in cands:
        name = ("rules" if tile is None else tile.describe() if isinstance(tile, TileConfig) else
                "BM{} BN{} w{} s{}".format(*tile)) + \
            ("" if split_progs is None else f" split_programs={split_progs}") + \
            ("" if splits == base_splits else f" splits={splits}")
        cfg = tile if isinstance(tile, TileConfig) else TileConfig(*tile) if tile else None
        try:
            L.splits_for = (lambda *a, _s=splits: _s)
            y = L.int4_matmul(x0, wp0, s0, cfg=cfg, split_programs=split_progs)
            err = (y.double() - ref).abs()
            if not bool((err <= tol.atol + tol.rtol * ref.abs()).all()):
                rows.append({"impl": name, "error": f"wrong: max abs err {float(err.max()):.3g}"})
                continue
            us = _time([lambda x=x, w=w, sc=s, c=cfg, sp=split_progs: L.int4_matmul(x, w, sc, cfg=c, split_programs=sp)
                        for x, w, s in sets], rep_ms)
            row = {"impl": name, "us": us, "same_bits": bool(torch.equal(y, shipped)),
                   "weight_GBps": n * k / 2 / us / 1e3}
            if cfg is not None and cfg.layout == "split-nibbles":
                row["same_bits_family"] = bool(torch.equal(y, family.setdefault(cfg.swap_ab, y)))
            if cfg is not None and cfg.layout == "gemv":
                row["same_bits_family"] = bool(torch.equal(y, family.setdefault("gemv", y)))
                try:
                    row["rows_invariant"] = _gemv_rows_invariant(x0, wp0, s0, cfg)
                except Exception as e:  # the timing stands; the check's failure is its own result
                    row["rows_invariant"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
            rows.append(row)
        except Exception as e:  # a config that fails to compile or launch is a result
            first = str(e).splitlines()[0][:160] if str(e) else ""
            rows.append({"impl": name, "error": f"{type(e).__name__}: {first}"})
        finally:
            L.splits_for = original
    return {"shape": [m, n, k], "bytes": nbytes, "sol_us": nbytes / COPY_GBPS / 1e3, "base_splits": base_splits,
            "rows": rows}


def _gemv_rows_invariant(x, wp, s, cfg) -> bool:
    """Row 0 alone, in 4 rows and in 16 rows (other rows fresh): the same bits (within the gemv family)."""
    from ridgeline.ops.int4_matmul import launch as L

    g = torch.Generator(device=DEVICE).manual_seed(99)
    big = torch.randn((16, x.shape[1]), generator=g, device=DEVICE).to(x.dtype)
    big[0] = x[0]
    one = L.int4_matmul(big[:1].clone(), wp, s, cfg=cfg)
    return all(torch.equal(one, L.int4_matmul(big[:r].clone(), wp, s, cfg=cfg)[:1]) for r in (4, 16))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=None, help=f"default {DEFAULT_SHAPES} (--only-gemv: GEMV_SHAPES)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--max-seconds", type=float, default=None, help="default 100 (--only-gemv: 300, 24 shapes)")
    ap.add_argument("--rep-ms", type=float, default=10.0)
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--only-split", action="store_true",
                      help="time cuBLAS, the shipped rules and the split-nibbles candidates only")
    only.add_argument("--only-gemv", action="store_true",
                      help="time cuBLAS, the shipped rules and the gemv candidates only (M <= 16 shapes)")
    args = ap.parse_args(argv)
    max_seconds = args.max_seconds or (300.0 if args.only_gemv else 100.0)
    shape_text = args.shapes or (GEMV_SHAPES if args.only_gemv else DEFAULT_SHAPES)
    shapes = [tuple(int(v) for v in p.lower().split("x")) for p in shape_text.split(",")]
    t0, results, skipped = time.time(), [], []
    for shape in shapes:
        if time.time() - t0 > max_seconds:
            skipped.append(list(shape))
            continue
        try:
            results.append(tune_shape(*shape, args.rep_ms, args.only_split, args.only_gemv))
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
        split = [x for x in ours if "split-nibbles" in x["impl"]]
        sbest = min(split, key=lambda x: x["us"]) if split else {"impl": "-", "us": float("nan")}
        print(f"{'x'.join(map(str, r['shape'])):>18} {r['sol_us']:7.1f} {cub:8.1f} {rules:8.1f} {best['us']:8.1f}"
              f"  {cub / best['us']:7.2f}x  {best['impl']} ({best.get('same_bits')})")
        gemv = [x for x in ours if x["impl"].startswith("gemv")]
        if gemv:
            gbest = min(gemv, key=lambda x: x["us"])
            fam = all(x.get("same_bits_family", True) for x in gemv)
            inv = all(x.get("rows_invariant", True) is True for x in gemv)
            print(f"{'':>18} gemv best {gbest['us']:.1f} us ({cub / gbest['us']:.2f}x cuBLAS, "
                  f"{rules / gbest['us']:.2f}x rules): {gbest['impl']}; same bits across configs: {fam}; "
                  f"M=1 row == at M=4/16: {inv}")
        if split:
            family_ok = all(x.get("same_bits_family", True) for x in split)
            print(f"{'':>18} split-nibbles best {sbest['us']:.1f} us ({cub / sbest['us']:.2f}x cuBLAS): "
                  f"{sbest['impl']}; same bits within its family: {family_ok}")
    if skipped:
        print(f"skipped (time): {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
