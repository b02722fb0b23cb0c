"""Does Triton's M == 1 specialization cost the FP8 GEMM what it cost the bf16 one? (docs/perf/README.md, next
steps.) For each decode shape, row-wise scales, times with triton.testing.do_bench (median, L2 flushed):
torch._scaled_mm; the rule's config at M = 1; the same config on two real rows (M = 2 code, TMA); pointer loads at
M = 1; pointer loads over one row read twice (a.expand(2, K): zero row stride, the M = 2 code); and a few tiles
of the M = 2 code. Prints a table last and writes every timing to JSON.

  python3 scripts/device/fp8_m1.py --json OUT.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from ridgeline.ops.scaled_mm.launch import launch_scaled_mm  # noqa: E402
from ridgeline.ops.scaled_mm.rules import TileConfig, config_for  # noqa: E402

SHAPES = [(4096, 4096), (6144, 4096), (28672, 4096), (8192, 28672)]


def _ms(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=10, rep=60))


def _cases(n: int, k: int, sms: int) -> tuple[dict, object]:
    """name -> a call, for one (N, K); and the rule's M = 1 output (the bits every one-row variant must give)."""
    a = (torch.randn(1, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    sa1 = torch.rand(1, 1, device="cuda") + 0.5
    sa2 = sa1.expand(2, 1)
    sb = torch.rand(n, device="cuda") + 0.5
    a2 = torch.cat([a, a])
    aa = a.expand(2, k)
    rule = config_for(1, n, k, "row", sms, interpreted=False)
    ptr = dataclasses.replace(rule, use_tma=False)
    cases = {
        "torch._scaled_mm": lambda: torch._scaled_mm(a, b.t(), sa1, sb.view(1, -1), out_dtype=torch.bfloat16),
        f"rule M=1 ({rule.describe()})": lambda: launch_scaled_mm(a, b, sa1, sb, cfg=rule),
        "rule M=2 (two rows)": lambda: launch_scaled_mm(a2, b, sa2, sb, cfg=rule),
        "pointer M=1": lambda: launch_scaled_mm(a, b, sa1, sb, cfg=ptr),
        "pointer M=2 aliased": lambda: launch_scaled_mm(aa, b, sa2, sb, cfg=ptr),
    }
    for bm, bn, bk, st in [(64, 32, 128, 6), (64, 64, 128, 6), (64, 32, 256, 4), (64, 64, 256, 4),
                           (64, 128, 128, 6)]:
        cfg = TileConfig(bm, bn, bk, 1, 4, st, use_tma=True)
        cases[f"M=2 {cfg.describe()}"] = lambda cfg=cfg: launch_scaled_mm(a2, b, sa2, sb, cfg=cfg)
    return cases, launch_scaled_mm(a, b, sa1, sb, cfg=rule).float()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for n, k in SHAPES:
        cases, ref = _cases(n, k, sms)
        for name, fn in cases.items():
            rec = {"shape": f"1x{n}x{k}", "case": name}
            try:
                y = fn()
                if not name.startswith("torch"):  # every variant's first row must give the rule's bits
                    rec["same_bits"] = bool(torch.equal(y[:1].float(), ref))
                rec["us"] = _ms(fn) * 1e3
            except Exception as e:  # a result, not a crash
                rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(rec)
            print(json.dumps(rec), flush=True)
            args.json.write_text(json.dumps(rows, indent=1))
    print(f"\n{'shape':16} {'case':56} {'us':>8} same bits")
    for r in rows:
        print(f"{r['shape']:16} {r['case'][:56]:56} {r.get('us', float('nan')):8.2f} {r.get('same_bits', '')!s:5} "
              f"{r.get('error', '')[:60]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
