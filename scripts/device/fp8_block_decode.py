"""Block-scaled FP8 at decode sizes (M <= 64): are the row-wise decode rule's pointer loads and deep pipeline right
for block scales too? Since s23 row-wise scales read the weight by pointer loads over 6 stages at M <= 32 (1.19-1.91x
TMA there, fp8_m1.py); block scales kept s17's deferred 64-row tile through TMA on 4 stages, and their tuning grid
never held a deferred pointer-load tile (rules.candidate_configs). In the s36 sweeps block scales ran 0.58-0.79x
the row-wise speed at M = 1 and 16, the cells that hold the block geomean under the issue's 0.9x.

Each case is timed by ridgeline's graph timing over enough weight copies to pass 256 MB (each call reads its weight
from DRAM, as in the bench's graph-cold regime): torch._scaled_mm and our rule with row-wise scales (the speed the
issue measures block scales against), the block rule, and the block rule's tile by pointer loads / TMA on 4 and 6
stages, deferred or not, grouped or not. Every block case's output is compared bitwise with the block rule's (one
partial a K step of 128 whatever the tile: the same bits). Prints a table last and writes every timing to JSON.

  python3 scripts/device/fp8_block_decode.py --json OUT.json
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from graph_cases import run_shapes  # noqa: E402  (this folder)

from ridgeline.ops.scaled_mm.launch import launch_scaled_mm, scaled_mm  # noqa: E402
from ridgeline.ops.scaled_mm.rules import config_for  # noqa: E402

SHAPES = [(1, 4096, 4096), (1, 8192, 28672), (16, 6144, 4096), (16, 8192, 8192), (32, 4096, 14336),
          (64, 28672, 4096)]
ROW_CASES = ("torch._scaled_mm row", "ours row")


def _cases(m: int, n: int, k: int, sms: int) -> tuple[dict, torch.Tensor]:
    """name -> the calls over each weight copy, for one shape; and the block rule's output (the bits to compare)."""
    copies = max(2, -(-256 * 2**20 // (n * k)))
    kb = -(-k // 128)
    a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    bs = [(torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn) for _ in range(copies)]
    sa_row, sb_row = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5
    sa = torch.rand(m, kb, device="cuda") + 0.5
    sb = torch.rand(-(-n // 128), kb, device="cuda") + 0.5
    rule = config_for(m, n, k, "block", sms, interpreted=False)

    def over(fn):
        return [lambda b=b: fn(b) for b in bs]

    cases = {
        ROW_CASES[0]: over(lambda b: torch._scaled_mm(a, b.t(), sa_row, sb_row.view(1, -1),
                                                      out_dtype=torch.bfloat16)),
        ROW_CASES[1]: over(lambda b: scaled_mm(a, b, sa_row, sb_row)),
        f"block rule ({rule.describe()})": over(lambda b: launch_scaled_mm(a, b, sa, sb, cfg=rule)),
    }
    for tma in (False, True):
        for stages in (4, 6):
            for defer in (True, False):
                for group in (1, 8):
                    cfg = dataclasses.replace(rule, use_tma=tma, num_stages=stages, defer_scale=defer,
                                              group_m=group)
                    if cfg == rule or (group == 8 and not (tma and stages == 4)):
                        continue  # (grouping only matters beside the rule's own form: one row tile at M <= 64)
                    cases[f"block {cfg.describe()}"] = over(lambda b, cfg=cfg: launch_scaled_mm(a, b, sa, sb,
                                                                                             cfg=cfg))
    return cases, launch_scaled_mm(a, bs[0], sa, sb, cfg=rule)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.3, help="graph timing budget per case")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    run_shapes(SHAPES, lambda m, n, k: _cases(m, n, k, sms), args.json, args.budget_s, torch.equal,
               lambda m, n, k, us: {"gbps": n * k / us / 1e3}, peers=ROW_CASES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
