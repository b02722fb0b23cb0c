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

`--swap` (s40): the decode tile computed as y^T = b a^T (`TileConfig.swap_ab`: the weight's rows on the MMA's
64-row side, a's 1-32 rows on its narrow side, where the plain tile pads a to 64 rows and block scales rescale a
64 x BLOCK_N partial every K step), row-wise beside the row rule (bits against it) and block-wise beside the block
rule (bits against it), over N tiles of 32-128, a's tiles of 8-32 rows, 4 and 6 stages. Writes OUT.row.json and
OUT.block.json.

  python3 scripts/device/fp8_block_decode.py --json OUT.json [--swap]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
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
SWAP_SHAPES = [(1, 4096, 4096), (1, 8192, 28672), (4, 57344, 8192), (16, 6144, 4096), (16, 8192, 8192),
               (32, 4096, 14336)]


def _operands(m: int, n: int, k: int) -> tuple:
    """a, the weight copies (past 256 MB together), block scales (sa, sb) and row-wise ones (sa_row, sb_row)."""
    copies = max(2, -(-256 * 2**20 // (n * k)))
    kb = -(-k // 128)
    a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    bs = [(torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn) for _ in range(copies)]
    sa, sb = torch.rand(m, kb, device="cuda") + 0.5, torch.rand(-(-n // 128), kb, device="cuda") + 0.5
    sa_row, sb_row = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5
    return a, bs, sa, sb, sa_row, sb_row


def _over(bs: list, fn) -> list:
    return [lambda b=b: fn(b) for b in bs]


def _cases(m: int, n: int, k: int, sms: int) -> tuple[dict, torch.Tensor]:
    """name -> the calls over each weight copy, for one shape; and the block rule's output (the bits to compare)."""
    a, bs, sa, sb, sa_row, sb_row = _operands(m, n, k)
    rule = config_for(m, n, k, "block", sms, interpreted=False)
    over = functools.partial(_over, bs)

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


def _swapped(rule, m: int, block: bool) -> list:
    """The swapped decode candidates around a rule's pointer-load tile: a's rows on an 8-32-wide MMA side (8 wide
    compiles to mma.sync, 16-32 to wgmma: sm_90 compile), N tiles of 32-128, 6 stages (and 4 on one)."""
    rows = sorted({max(8, 1 << (m - 1).bit_length()), max(16, 1 << (m - 1).bit_length())})
    out = []
    for bm in rows:
        for bn in (32, 64, 128):
            out.append(dataclasses.replace(rule, block_m=bm, block_n=bn, num_stages=6, use_tma=False, group_m=1,
                                           swap_ab=True, defer_scale=block))
    out.append(dataclasses.replace(out[1], num_stages=4))
    if block:
        out.append(dataclasses.replace(out[1], defer_scale=False))
    return out


def _swap_cases(m: int, n: int, k: int, sms: int, block: bool) -> tuple[dict, torch.Tensor]:
    """One mode's rule and its swapped candidates (the bits compared with the rule's), beside the row-wise speed."""
    a, bs, sa, sb, sa_row, sb_row = _operands(m, n, k)
    if not block:
        sa, sb = sa_row, sb_row
    mode = "block" if block else "row"
    rule = config_for(m, n, k, mode, sms, interpreted=False)
    over = functools.partial(_over, bs)
    cases = {ROW_CASES[0]: over(lambda b: torch._scaled_mm(a, b.t(), sa_row, sb_row.view(1, -1),
                                                           out_dtype=torch.bfloat16))}
    if block:
        cases[ROW_CASES[1]] = over(lambda b: scaled_mm(a, b, sa_row, sb_row))
    cases[f"{mode} rule ({rule.describe()})"] = over(lambda b: launch_scaled_mm(a, b, sa, sb, cfg=rule))
    for cfg in _swapped(rule, m, block):
        cases[f"{mode} {cfg.describe()}"] = over(lambda b, cfg=cfg: launch_scaled_mm(a, b, sa, sb, cfg=cfg))
    return cases, launch_scaled_mm(a, bs[0], sa, sb, cfg=rule)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.3, help="graph timing budget per case")
    ap.add_argument("--swap", action="store_true", help="the swapped decode tiles (s40), row and block")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if args.swap:
        for block in (False, True):
            run_shapes(SWAP_SHAPES, lambda m, n, k, block=block: _swap_cases(m, n, k, sms, block),
                       args.json.with_suffix(".block.json" if block else ".row.json"), args.budget_s, torch.equal,
                       lambda m, n, k, us: {"gbps": n * k / us / 1e3}, peers=ROW_CASES[:1] if not block
                       else ROW_CASES)
        return 0
    run_shapes(SHAPES, lambda m, n, k: _cases(m, n, k, sms), args.json, args.budget_s, torch.equal,
               lambda m, n, k, us: {"gbps": n * k / us / 1e3}, peers=ROW_CASES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
