"""The warp-specialized FP8 GEMM (ops/scaled_mm/kernel_ws.py, Gluon) beside the Triton kernel's rule and
torch._scaled_mm: row-wise and block scales at the large and mid M of the sweep. Each case is timed by ridgeline's
graph timing over weight copies past 256 MB (scripts/device/graph_cases.py); the first output is compared bitwise
with the rule's (the same K steps and promotion: the same bits expected) and, at one shape per mode, with a float64
reference under the contract's tolerance. Prints a table last and writes every timing to JSON.

  python3 scripts/device/fp8_ws.py --json OUT.json [--budget-s 0.3] [--modes row,block] [--shapes MxNxK,...]
      [--ws 256x128s4,256x128s4r224/56,128x64s5,128x128s4p]   (Gluon tiles: BMxBN, stages, optional MMA/load
      registers, p: the next K step's wgmma in flight during the promotion, 128-row tiles; pa: and block scales a
      trip ahead)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from graph_cases import run_shapes  # noqa: E402  (this folder)

from ridgeline.ops.scaled_mm.launch import launch_scaled_mm  # noqa: E402
from ridgeline.ops.scaled_mm.launch_ws import ws_tile  # noqa: E402
from ridgeline.ops.scaled_mm.rules import TileConfig, config_for  # noqa: E402

ROW_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 4096), (1024, 28672, 4096),
              (4096, 4096, 14336), (8192, 6144, 4096), (512, 6144, 4096), (256, 10240, 8192), (2049, 4096, 4096),
              # (s30) a last 256-row tile mostly empty, where the 128-row tile may pay
              (1025, 4096, 4096), (4097, 4096, 4096), (2049, 28672, 4096), (1100, 6144, 4096), (640, 28672, 4096),
              (129, 4096, 4096), (200, 28672, 4096)]
BLOCK_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1024, 28672, 4096), (512, 6144, 4096)]
WS = [TileConfig(256, 128, 128, 8, 4, 4, warp_specialized=True),
      TileConfig(256, 128, 128, 8, 4, 3, warp_specialized=True),
      TileConfig(256, 128, 128, 16, 4, 4, warp_specialized=True),
      # (s30) 128 rows: one 64-row wgmma a warpgroup, so one partial and one accumulator (no spills in block mode,
      # where the 256-row tile spills ~390 B inside the K loop)
      TileConfig(128, 128, 128, 8, 4, 4, warp_specialized=True),
      TileConfig(128, 128, 128, 8, 4, 5, warp_specialized=True)]


def _parse_ws(spec: str) -> TileConfig:
    """'256x128s4', '256x128s4r224/56', '128x128s4p' or '128x128s4pa': a Gluon tile (BLOCK_K 128), its stages,
    register split, whether its K loop keeps two partials (p) and loads block scales a trip ahead (pa)."""
    ahead = spec.endswith("pa")
    spec = spec.removesuffix("a") if ahead else spec
    pipelined = spec.endswith("p")
    tile, _, rest = spec.removesuffix("p").partition("s")
    bm, bn = (int(v) for v in tile.split("x"))
    stages, _, regs = rest.partition("r")
    extra = {"ws_regs": tuple(int(v) for v in regs.split("/"))} if regs else {}
    return TileConfig(bm, bn, 128, 8, 4, int(stages), warp_specialized=True, ws_pipeline=pipelined,
                      ws_scales_ahead=ahead, **extra)


def _scales(mode: str, m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    if mode == "row":
        return torch.rand(m, 1, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5
    return (torch.rand(m, -(-k // 128), device="cuda") + 0.5,
            torch.rand(-(-n // 128), -(-k // 128), device="cuda") + 0.5)


def _reference_check(mode: str, cfg: TileConfig) -> dict:
    """One mid-size call of a Gluon tile against float64 (odd M and N, K past a step edge) on the contract's own
    inputs and bound, as the GPU tests check it. (Until s30 this check drew 4 x randn weights, outside the
    contract's tolerance model, which assumes its W_STD-scaled weights: it failed every tile, old and new.)"""
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Case

    spec = get_spec("scaled_mm")
    case = Case((1000, 1032, 1000), torch.float8_e4m3fn, mode)
    inputs = spec.make_inputs(case, "cuda", 0)
    y = launch_scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], inputs["out_dtype"],
                         inputs["bias"], cfg=cfg).double()
    (ref,) = spec.reference(inputs)
    tol = spec.tolerance_for(case, "y", y.dtype)
    excess = ((y - ref).abs() - (tol.atol + tol.rtol * ref.abs())).max().item()
    return {"shape": "1000x1032x1000", "case": f"{cfg.describe()} vs float64 ({mode})", "max_excess": excess,
            "ok": excess <= 0}


def _cases(mode: str, m: int, n: int, k: int, sms: int, ws: list[TileConfig]) -> tuple[dict, torch.Tensor]:
    copies = max(2, -(-256 * 2**20 // (n * k)))
    a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    bs = [(torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn) for _ in range(copies)]
    sa, sb = _scales(mode, m, n, k)
    rule = config_for(m, n, k, mode, sms, interpreted=False)

    def over(fn):
        return [lambda b=b: fn(b) for b in bs]

    cases = {}
    if mode == "row":
        cases["torch._scaled_mm"] = over(lambda b: torch._scaled_mm(a, b.t(), sa, sb.view(1, -1),
                                                                    out_dtype=torch.bfloat16))
    cases[f"rule ({rule.describe()})"] = over(lambda b: launch_scaled_mm(a, b, sa, sb, cfg=rule))
    if mode == "row":
        same = dataclasses.replace(rule, block_m=256, block_n=128, block_k=128, num_warps=8, num_stages=4)
        if same != rule:
            cases[f"triton {same.describe()}"] = over(lambda b: launch_scaled_mm(a, b, sa, sb, cfg=same))
    for cfg in ws:
        if not ws_tile(cfg, mode):  # (block scales: tiles inside one 128-column weight block)
            continue
        cases[cfg.describe()] = over(lambda b, cfg=cfg: launch_scaled_mm(a, b, sa, sb, cfg=cfg))
    return cases, launch_scaled_mm(a, bs[0], sa, sb, cfg=rule)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.3, help="graph timing budget per case")
    ap.add_argument("--modes", default="row,block", help="scale modes to check and time (row, block)")
    ap.add_argument("--shapes", default="", help="MxNxK,... instead of the built-in shapes of each mode")
    ap.add_argument("--ws", default="", help="Gluon tiles to time instead of the built-in ones: 256x128s4r224/56,...")
    args = ap.parse_args()
    ws = [_parse_ws(t) for t in args.ws.split(",") if t] or WS
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    checks = []
    for mode in args.modes.split(","):
        for cfg in (ws if args.ws else (WS[0], WS[3])):
            if not ws_tile(cfg, mode):
                continue
            try:
                checks.append(_reference_check(mode, cfg))
            except Exception as e:
                checks.append({"case": f"{cfg.describe()} vs float64 ({mode})",
                               "error": f"{type(e).__name__}: {e}"[:400]})
            print(json.dumps(checks[-1]), flush=True)
    rows = []
    given = [tuple(int(v) for v in t.split("x")) for t in args.shapes.split(",") if t]
    for mode, shapes in (("row", given or ROW_SHAPES), ("block", given or BLOCK_SHAPES)):
        if mode not in args.modes.split(","):
            continue
        path = args.json.with_name(args.json.stem + f"-{mode}.json")
        rows += run_shapes(shapes, lambda m, n, k, mode=mode: _cases(mode, m, n, k, sms, ws), path, args.budget_s,
                           lambda y, r: torch.equal(y, r), lambda m, n, k, us: {"tflops": 2 * m * n * k / us / 1e6},
                           peers=("torch._scaled_mm",))
    args.json.write_text(json.dumps({"checks": checks, "rows": rows}, indent=1))
    for c in checks:
        print(c)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
