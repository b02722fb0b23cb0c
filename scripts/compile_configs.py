"""Compile RMSNorm launch configs ahead of time for sm_90 (no GPU needed): registers, spills, access widths.

Usage: python scripts/compile_configs.py [N ...] [--fused] [--all]
Without --all only the config `launch_config` picks is compiled; with it, every candidate the explore script
times. Prints one line per config: what `docs/perf/rmsnorm.md` quotes for registers, spills and vector widths.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from ridgeline.harness.profile import TensorArg, TritonLaunch, aot_compile, kernel_facts, occupancy
from ridgeline.kernels._launch import stride_alignment
from ridgeline.kernels.rmsnorm import (
    LaunchConfig,
    _rms_norm_kernel,
    candidate_configs,
    kernel_constexprs,
    launch_config,
)


def launch_for(n: int, cfg: LaunchConfig, fused: bool, dtype: torch.dtype = torch.bfloat16) -> TritonLaunch:
    a = stride_alignment(n)
    t = TensorArg(dtype, True)
    args = {
        "X": t, "x_stride_q": n // a, "R": t, "r_stride_q": n // a, "RO": t, "ro_stride_q": n // a,
        "W": t, "Y": t, "y_stride_q": n // a, "M": 4096, "n_q": n // a, "eps": 1e-6, "weight_offset": 0.0,
        **kernel_constexprs(cfg, (a,) * 5, fused, True, cfg.loop_free),
    }
    options = {"maxnreg": cfg.max_registers} if cfg.max_registers else {}
    return TritonLaunch(_rms_norm_kernel, args, cfg.num_warps, 4096, cfg.describe(), options=options)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="*", type=int, default=[4096, 4100, 5120, 5125, 7168, 8192, 16384, 65536])
    ap.add_argument("--fused", action="store_true")
    ap.add_argument("--all", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            cfgs = candidate_configs(n) if args.all else [launch_config(n, torch.bfloat16, args.fused)]
            for i, cfg in enumerate(cfgs):
                facts = kernel_facts(aot_compile(launch_for(n, cfg, args.fused)), Path(tmp), "aot", f"k{n}-{i}")
                sass = facts.get("sass", {})
                occ = occupancy(facts["registers"], facts["shared_bytes"], cfg.num_warps)
                print(f"N={n:<6} {cfg.describe():52} regs {facts['registers']:>3} spills "
                      f"{facts['spill_stores_bytes']}/{facts['spill_loads_bytes']} occupancy "
                      f"{occ['occupancy']:.0%} LDG {sass.get('global_loads')} STG {sass.get('global_stores')}")


if __name__ == "__main__":
    main()
