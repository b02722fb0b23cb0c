"""Does Triton's M == 1 specialization cost the FP8 GEMM what it cost the bf16 one, and are TMA loads right at
decode sizes? (docs/perf/README.md, next steps.) Row-wise scales; each case timed by ridgeline's graph timing over
enough weight copies to pass 256 MB (each call reads its weight from DRAM, as in the bench's graph-cold regime):
torch._scaled_mm; the rule's tile through TMA and through pointer loads (since s23 the rule itself is the pointer
form at M <= 32, from this driver's run); pointer loads over one row read twice (a.expand(2, K): zero row stride,
Triton's M = 2 code) on a few tiles; and the same at M = 16. Prints a table last and writes every timing to JSON.

  python3 scripts/device/fp8_m1.py --json OUT.json
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from graph_cases import run_shapes  # noqa: E402  (this folder)

from ridgeline.ops.scaled_mm.launch import launch_scaled_mm  # noqa: E402
from ridgeline.ops.scaled_mm.rules import TileConfig, config_for  # noqa: E402

SHAPES = [(1, 4096, 4096), (1, 6144, 4096), (1, 28672, 4096), (1, 10240, 8192), (1, 8192, 28672),
          (16, 4096, 4096), (16, 28672, 4096)]
POINTER_TILES = [(64, 32, 128, 4), (64, 32, 128, 6), (64, 64, 128, 4), (64, 128, 128, 4), (64, 64, 64, 6)]


def _cases(m: int, n: int, k: int, sms: int) -> tuple[dict, torch.Tensor]:
    """name -> the calls over each weight copy, for one shape; and the rule's output (the bits to compare)."""
    copies = max(2, -(-256 * 2**20 // (n * k)))
    a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    bs = [(torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn) for _ in range(copies)]
    sa = torch.rand(m, 1, device="cuda") + 0.5
    sb = torch.rand(n, device="cuda") + 0.5
    a_run, sa_run = (a.expand(2, k), sa.expand(2, 1)) if m == 1 else (a, sa)  # one row read twice
    rule = config_for(m, n, k, "row", sms, interpreted=False)
    ptr, tma = dataclasses.replace(rule, use_tma=False), dataclasses.replace(rule, use_tma=True)

    def over(fn):
        return [lambda b=b: fn(b) for b in bs]

    cases = {
        "torch._scaled_mm": over(lambda b: torch._scaled_mm(a, b.t(), sa, sb.view(1, -1), out_dtype=torch.bfloat16)),
        f"rule ({rule.describe()})": over(lambda b: launch_scaled_mm(a, b, sa, sb, cfg=rule)),
        "rule's tile, TMA": over(lambda b: launch_scaled_mm(a, b, sa, sb, cfg=tma)),
        "rule's tile, pointer loads": over(lambda b: launch_scaled_mm(a, b, sa, sb, cfg=ptr)),
    }
    for bm, bn, bk, st in POINTER_TILES:
        cfg = TileConfig(bm, bn, bk, 1, 4, st, use_tma=False)
        name = f"{'aliased M=2' if m == 1 else 'pointer'} {cfg.describe()}"
        cases[name] = over(lambda b, cfg=cfg: launch_scaled_mm(a_run, b, sa_run, sb, cfg=cfg))
    return cases, launch_scaled_mm(a, b=bs[0], scale_a=sa, scale_b=sb, cfg=rule).float()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.4, help="graph timing budget per case")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    run_shapes(SHAPES, lambda m, n, k: _cases(m, n, k, sms), args.json, args.budget_s,
               lambda y, r: torch.equal(y[:1].float(), r[:1]),  # (the first row: the aliased runs write two)
               lambda m, n, k, us: {"gbps": n * k / us / 1e3}, peers=("torch._scaled_mm",))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
