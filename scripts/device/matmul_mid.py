"""The bf16 GEMM at mid M (65-512 rows: the sweep's 0.63-0.78x cuBLAS cells and the audit's cliffs) in graph
timings over weight copies past 256 MB (every call reads its weight from DRAM, as the bench's graph-cold regime):
cuBLAS, the rule, and non-persistent tiles through pointer loads and TMA, among them the templates
torch.compile(max-autotune) picked there in the s23 audit (64x64x128 s5 w4, 64x128x128 s4 w4, 128x128x64 s5 w8).
Each candidate's first row is compared bitwise with the rule's (batch invariance across the rules needs the same
bits). Prints a table last and writes every timing to JSON.

  python3 scripts/device/matmul_mid.py --json OUT.json [--budget-s 0.3] [--set cliffs|wide|decode]

--set cliffs: the audit's one-valid-row cells (257, 385, 1281 rows) beside full last rows (320, 448, 1280) on the
persistent 128x128 tile through TMA (the rule) and through pointer loads, and the 128x128x64 w8 pointer tile.
--set wide (s33): 65-128 rows against weights wider than 8192, where s23's one run had the 128x128x64 w8 pointer
tile at 69.4 us against the rule's 80.8 (128x28672x4096, cuBLAS 67.8): whether a tile of all the rows wins
wherever its N tiles alone fill the SMs, and what 10240-wide weights take (128x10240x8192 is the sweep's 0.68x).
--set decode (s33): M = 1 and 16 on the wide weights the s23 sweep has behind cuBLAS (1x28672x4096 0.83x,
1x10240x8192 0.90x, 16x28672x4096 0.93x). The rules' decode tiles hold 160-192 KB of stages, one program an SM, and
those weights take 3-7 waves of them, each wave filling its pipeline again: tiles of 72-160 KB let 1-3 programs
share an SM. The decode tuning (h200-tune-matmul.json) timed these tiles only on 4096- and 8192-wide weights.
--set tails (s39): the cut launches of ops/matmul/tails.py (a partial last wave's columns on the 128x128 tile, a
last tile row of one row on the decode rule) against the single launch, at the sweep's 0.87x cell and the audit's
wave cliffs, with shapes the planner leaves whole beside them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from graph_cases import run_shapes  # noqa: E402  (this folder)

from ridgeline.ops.matmul import rules  # noqa: E402
from ridgeline.ops.matmul.launch import matmul_2d  # noqa: E402

SHAPES = [(m, 4096, 4096) for m in (65, 128, 129, 256, 257, 320, 385, 512)] + [
    (128, 4096, 14336), (128, 28672, 4096), (256, 10240, 8192), (512, 6144, 4096)]
G = rules.GemmConfig
POINTER = [(64, 64, 128, 4, 5), (64, 128, 128, 4, 4), (128, 128, 64, 8, 5), (64, 128, 64, 4, 5), (128, 128, 128, 8, 3)]
TMA = [(64, 64, 128, 4, 5), (128, 128, 64, 4, 5), (64, 128, 128, 4, 4)]
CANDIDATES = ([G(bm, bn, bk, w, s, 8, persistent=False, tma=False) for bm, bn, bk, w, s in POINTER]
              + [G(bm, bn, bk, w, s, 8, persistent=False, tma=True) for bm, bn, bk, w, s in TMA])


CLIFF_SHAPES = [(m, 4096, 4096) for m in (257, 320, 385, 448, 1280, 1281)]
CLIFF_CANDIDATES = [G(128, 128, 64, 4, 5, 8, persistent=True, tma=False), G(128, 128, 64, 4, 5, 8, persistent=True),
                    G(128, 128, 64, 8, 5, 8, persistent=False, tma=False), G(128, 128, 64, 8, 5, 8, persistent=True,
                                                                             tma=False)]


WIDE_SHAPES = [(128, 28672, 4096), (96, 28672, 4096), (65, 28672, 4096), (128, 57344, 8192), (128, 10240, 8192),
               (128, 16384, 4096)]
# (bm, bn, bk, warps, stages, tma); the last one is the s23 rule's tile, the rule itself since s33 the first
WIDE_CANDIDATES = [G(bm, bn, bk, w, s, 8, persistent=False, tma=t)
                   for bm, bn, bk, w, s, t in ((128, 128, 64, 8, 5, False), (128, 128, 64, 8, 4, False),
                                               (128, 128, 128, 8, 3, False), (128, 128, 64, 8, 5, True),
                                               (128, 64, 128, 4, 4, False),
                                               (128, 64, 64, 4, 4, False),  # (96 KB: two programs an SM)
                                               (64, 128, 128, 4, 4, False))]


DECODE_SHAPES = [(1, 28672, 4096), (1, 10240, 8192), (1, 57344, 8192), (16, 28672, 4096), (16, 10240, 8192),
                 (1, 4096, 4096)]
DECODE_CANDIDATES = [G(16, bn, bk, 4, st, 1, persistent=False, tma=False)
                     for bn, bk, st in ((32, 512, 4), (32, 512, 2), (32, 256, 4), (32, 256, 6), (32, 128, 6),
                                        (64, 256, 4), (64, 256, 3), (64, 128, 4), (64, 128, 6), (128, 128, 4))]


TAIL_SHAPES = [(1024, 10240, 8192), (1024, 6144, 4096), (1025, 4096, 4096), (2049, 4096, 4096), (3073, 4096, 4096),
               (1281, 4096, 4096), (1536, 4096, 4096), (1025, 10240, 8192), (1024, 4096, 4096)]


def _operands(m: int, n: int, k: int) -> tuple[torch.Tensor, list[torch.Tensor], Callable]:
    """x, weight copies past 256 MB (every call reads its weight from DRAM), and `over(fn)`: fn's call on each."""
    copies = max(2, -(-256 * 2**20 // (2 * n * k)))
    x = torch.randn(m, k, device="cuda").bfloat16()
    ws = [(torch.randn(n, k, device="cuda") / k**0.5).bfloat16() for _ in range(copies)]

    def over(fn):
        return [lambda w=w: fn(w) for w in ws]

    return x, ws, over


def _tail_cases(m: int, n: int, k: int, _candidates: list) -> tuple[dict, torch.Tensor]:
    from ridgeline.ops.matmul import tails

    x, ws, over = _operands(m, n, k)
    pieces = tails.plan(m, n, k, torch.cuda.get_device_properties(0).multi_processor_count, force=True)
    name = "cut " + " + ".join(f"{p.r1 - p.r0}x{p.c1 - p.c0}@" + (f"{p.config.block_m}x{p.config.block_n}"
                                                                 if p.config else "rules") for p in pieces or ())
    cases = {"cublas": over(lambda w: F.linear(x, w)),
             "single launch": over(lambda w: matmul_2d(x, w, None, x.dtype, "nt", tails=False))}
    if pieces:
        cases[name] = over(lambda w: matmul_2d(x, w, None, x.dtype, "nt", tails=True))
    return cases, matmul_2d(x, ws[0], None, x.dtype, "nt", tails=False)


def _cases(m: int, n: int, k: int, candidates: list) -> tuple[dict, torch.Tensor]:
    x, ws, over = _operands(m, n, k)
    rule = rules.config_for(m, n, k, x.dtype, x.device)[0]
    cases = {"cublas": over(lambda w: F.linear(x, w)),
             f"rule {rule.describe()}": over(lambda w: matmul_2d(x, w, None, x.dtype, "nt", rule))}
    for cfg in candidates:
        if cfg != rule:
            cases[cfg.describe()] = over(lambda w, cfg=cfg: matmul_2d(x, w, None, x.dtype, "nt", cfg))
    return cases, matmul_2d(x, ws[0], None, x.dtype, "nt", rule)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.3, help="graph timing budget per case")
    ap.add_argument("--set", choices=["mid", "cliffs", "wide", "decode", "tails"], default="mid")
    args = ap.parse_args()
    shapes, candidates = {"mid": (SHAPES, CANDIDATES), "cliffs": (CLIFF_SHAPES, CLIFF_CANDIDATES),
                          "wide": (WIDE_SHAPES, WIDE_CANDIDATES),
                          "decode": (DECODE_SHAPES, DECODE_CANDIDATES), "tails": (TAIL_SHAPES, [])}[args.set]
    make = _tail_cases if args.set == "tails" else _cases
    run_shapes(shapes, lambda m, n, k: make(m, n, k, candidates), args.json, args.budget_s,
               torch.equal,  # (every row: the rules keep one K order)
               lambda m, n, k, us: {"tflops": 2 * m * n * k / us / 1e6}, peers=("cublas",))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
