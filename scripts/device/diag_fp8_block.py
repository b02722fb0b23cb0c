"""Diagnostic: the block-scaled Gluon GEMM on its two tiles (256 rows with each step's scales loaded a step ahead,
128 rows with them loaded in the step: the same arithmetic, compared bitwise) beside the row-scaled kernel on the
same tiles: how far block scales stand from row scales (the issue's 0.9x) and which tile the rule should take.
Graph timings over weight copies (graph_cases.py); prints a table last. (Until s32 it also timed the s31
candidate with the scales through shared memory: slower at 10 of 12 tile-shape pairs on an H100, 0.81-1.06x;
removed: git show 65a6543:scripts/device/diag_fp8_block.py.)

  python3 scripts/device/diag_fp8_block.py --json OUT.json [--budget-s 0.15] [--shapes MxNxK,...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from graph_cases import run_shapes  # noqa: E402  (this folder)

from ridgeline.ops.scaled_mm.launch import launch_scaled_mm  # noqa: E402
from ridgeline.ops.scaled_mm.rules import WS_TILE_128, WS_TILE_BLOCK  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1024, 28672, 4096), (2048, 4096, 4096), (512, 6144, 4096),
          (300, 28672, 4096)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.15)
    ap.add_argument("--shapes", default="", help="MxNxK,... instead of the built-in shapes")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in t.split("x")) for t in args.shapes.split(",") if t] or SHAPES

    def cases(m, n, k):
        copies = max(2, -(-256 * 2**20 // (n * k)))
        a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
        bs = [(torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn) for _ in range(copies)]
        kb, nb = -(-k // 128), -(-n // 128)
        sa_blk, sb_blk = torch.rand(m, kb, device="cuda") + 0.5, torch.rand(nb, kb, device="cuda") + 0.5
        sa_row, sb_row = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5

        def blk(cfg):
            return [lambda b=b: launch_scaled_mm(a, b, sa_blk, sb_blk, cfg=cfg) for b in bs]

        out = {"block 256": blk(WS_TILE_BLOCK), "block 128": blk(WS_TILE_128)}
        for name, cfg in (("256", WS_TILE_BLOCK), ("128", WS_TILE_128)):
            out[f"row {name}"] = [lambda b=b, c=cfg: launch_scaled_mm(a, b, sa_row, sb_row, cfg=c) for b in bs]
        return out, out["block 256"][0]()

    rows = run_shapes(shapes, cases, args.json.with_name(args.json.stem + "-rows.json"), args.budget_s, torch.equal,
                      lambda m, n, k, us: {"tflops": 2 * m * n * k / us / 1e6},
                      peers=("row 256", "row 128"))
    args.json.write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
