"""Diagnostic (s31): the block-scaled Gluon GEMM's scales through shared memory (the SMEM_SCALES candidate of
kernel_ws.py: each MMA warpgroup copies the next step's scales with cp.async, 224 / 56 registers) against the
shipped tiles (the 256-row tile's scales loaded a step ahead into registers, the 128-row tile's in the step; the
same arithmetic: compared bitwise), the shipped kernel with its scale loads reading step 0's address every step
(the same instructions, L1 hits instead of L2 / DRAM round trips: wrong numbers, a latency probe), and the
row-scaled kernel on the same tiles. Graph timings over weight copies (graph_cases.py); prints a table last.

  python3 scripts/device/diag_fp8_block.py --json OUT.json [--budget-s 0.15] [--shapes MxNxK,...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from graph_cases import run_shapes  # noqa: E402  (this folder)

import ridgeline.ops.scaled_mm.kernel_ws as shipped  # noqa: E402
from ridgeline.ops.scaled_mm.launch import launch_scaled_mm  # noqa: E402
from ridgeline.ops.scaled_mm.rules import WS_TILE_128, WS_TILE_BLOCK  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1024, 28672, 4096), (2048, 4096, 4096), (512, 6144, 4096),
          (300, 28672, 4096)]


def _l1_probe():
    """The shipped kernel with every scale load at step 0's address (a copy compiled from an edited source)."""
    src = Path(shipped.__file__).read_text()
    for step in ("(ki + 1) * stride_sbk", "(ki + 1) * stride_sak", "ki * stride_sbk", "ki * stride_sak"):
        assert step in src, step
        src = src.replace(step, "0")
    path = Path(tempfile.mkdtemp()) / "kernel_ws_l1.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("kernel_ws_l1", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._scaled_mm_ws_kernel


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.15)
    ap.add_argument("--shapes", default="", help="MxNxK,... instead of the built-in shapes")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in t.split("x")) for t in args.shapes.split(",") if t] or SHAPES
    real, l1 = shipped._scaled_mm_ws_kernel, _l1_probe()

    def with_kernel(kernel, fn):
        def call():
            shipped._scaled_mm_ws_kernel = kernel  # launch_ws imports it at call time
            try:
                return fn()
            finally:
                shipped._scaled_mm_ws_kernel = real
        return call

    smem_256 = replace(WS_TILE_BLOCK, ws_regs=(224, 56), smem_scales=True)
    smem_128 = replace(WS_TILE_128, smem_scales=True)

    def cases(m, n, k):
        copies = max(2, -(-256 * 2**20 // (n * k)))
        a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
        bs = [(torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn) for _ in range(copies)]
        kb, nb = -(-k // 128), -(-n // 128)
        sa_blk, sb_blk = torch.rand(m, kb, device="cuda") + 0.5, torch.rand(nb, kb, device="cuda") + 0.5
        sa_row, sb_row = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5

        def blk(cfg, kernel=None):
            calls = [lambda b=b: launch_scaled_mm(a, b, sa_blk, sb_blk, cfg=cfg) for b in bs]
            return [with_kernel(kernel, c) for c in calls] if kernel is not None else calls

        out = {"block 256 (rule)": blk(WS_TILE_BLOCK), "block 256 smem-scales r224/56": blk(smem_256),
               "block 256 scales from L1": blk(WS_TILE_BLOCK, l1), "block 128": blk(WS_TILE_128),
               "block 128 smem-scales": blk(smem_128)}
        for name, cfg in (("256", WS_TILE_BLOCK), ("128", WS_TILE_128)):
            out[f"row {name}"] = [lambda b=b, c=cfg: launch_scaled_mm(a, b, sa_row, sb_row, cfg=c) for b in bs]
        return out, out["block 256 (rule)"][0]()

    rows = run_shapes(shapes, cases, args.json.with_name(args.json.stem + "-rows.json"), args.budget_s, torch.equal,
                      lambda m, n, k, us: {"tflops": 2 * m * n * k / us / 1e6},
                      peers=("row 256", "row 128", "block 256 scales from L1"))
    args.json.write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
