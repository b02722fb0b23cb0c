"""int4_matmul's decode loop, compiled ahead of time for sm_90 (no GPU needed), at the rules' tiles and beside them.

Usage: python scripts/int4_unpack_sass.py [--shape 1x4096x4096] [--json OUT]
For each candidate tile config (the rule for the shape's M first, then the other orientation and neighbours), the
shipped kernel is recorded as `ridgeline profile` records it (132 SMs, bf16 x) and compiled: one trip of its main
loop (instructions, per 2048 weights a warp, so tiles of other sizes compare), registers and the top opcodes. This
is the compile behind `docs/perf/gemm.md`'s instruction counts and the candidates the H200 tuning run times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

import ridgeline.ops.int4_matmul.launch as L  # noqa: E402
from ridgeline.ops.int4_matmul.rules import TileConfig, tile_config  # noqa: E402
from ridgeline.profile.aot import compile_launches  # noqa: E402
from ridgeline.profile.launches import capture_call  # noqa: E402


def candidates(m: int) -> list[TileConfig]:
    rule = tile_config(m)
    grid = [rule, TileConfig(16 if m <= 16 else 32, 64, 4, 4)]  # the other orientation (x as the A operand)
    if m <= 8:
        grid += [TileConfig(8, 64, 4, 4, swap_ab=True, groups_per_step=2), TileConfig(8, 128, 4, 4, swap_ab=True)]
    elif m <= 16:
        grid += [TileConfig(16, 64, 4, 4, swap_ab=True), TileConfig(16, 32, 2, 4, swap_ab=True, groups_per_step=2),
                 # two 8-wide dots on 4 warps (mma.sync, where one 16-wide dot there is wgmma)
                 *(TileConfig(16, bn, 4, st, swap_ab=True, halves=True) for bn, st in ((64, 4), (64, 3), (128, 4)))]
    return grid


def compile_one(shape: tuple[int, int, int], cfg: TileConfig, out_dir: Path) -> dict:
    original = L.tile_config
    L.tile_config = lambda m: cfg  # (the launch reads the rules through this name)
    try:
        call = capture_call("int4_matmul", "ridgeline", shape, torch.bfloat16, sm_count=132)
    finally:
        L.tile_config = original
    facts = next(k for k in compile_launches(call.launches, 90, out_dir) if k["name"].startswith("_int4_mm"))
    step = max(facts["sass"]["loops"], key=lambda lp: lp["instructions"])
    weights_a_warp = cfg.block_n * 128 * cfg.groups_per_step // cfg.num_warps
    return {"config": cfg.describe(), "registers": facts.get("registers"), "loop": step["instructions"],
            "per_2048_weights_a_warp": round(step["instructions"] * 2048 / weights_a_warp, 1),
            "top": dict(list(step["histogram"].items())[:8])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="1x4096x4096", help="MxNxK (N, K: a layer; M: the batch)")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    a = ap.parse_args()
    shape = tuple(int(v) for v in a.shape.split("x"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, cfg in enumerate(candidates(shape[0])):
            row = compile_one(shape, cfg, Path(tmp) / str(i))
            rows.append(row)
            top = ", ".join(f"{op} {c}" for op, c in row["top"].items())
            print(f"{row['config']:28s} regs {row['registers']!s:>4}  loop {row['loop']:4d}  "
                  f"{row['per_2048_weights_a_warp']:6.1f} a 2048 weights a warp: {top}")
    if a.json:
        a.json.write_text(json.dumps({"shape": shape, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
