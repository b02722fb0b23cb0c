"""Compile RMSNorm launch configs ahead of time for sm_90 (no GPU needed): registers, spills, access widths.

Usage: python scripts/compile_configs.py [N ...] [--fused] [--all] [--quant 1|2] [--m M]
       python scripts/compile_configs.py N ... --check-layouts
Without --all only the config `config_for` picks (for M rows) is compiled; with it, every candidate the explore
script times. --quant compiles the FP8 epilogue (1 static scale, 2 dynamic per-row scales).
Prints one line per config: what `docs/perf/rmsnorm.md` quotes for registers, spills and vector widths.
--check-layouts compiles the plain op on contiguous rows and the plain, fused and dynamic FP8 ops on rows of
other strides and pointer alignments, and exits 1 if the register layout of the row's sum differs anywhere (it
decides the order of the sum, so the bits: batch invariance and `fused.out == rms_norm(residual_out)` depend on it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import tempfile
from pathlib import Path

import torch

from ridgeline.harness.profile import TensorArg, TritonLaunch, aot_compile, kernel_facts, occupancy
from ridgeline.kernels.rmsnorm import (
    LaunchConfig,
    _rms_norm_kernel,
    candidate_configs,
    config_for,
    kernel_constexprs,
    launch_config,
    row_alignments,
)


def launch_for(n: int, cfg: LaunchConfig, fused: bool, dtype: torch.dtype = torch.bfloat16,
               aligned: tuple[bool, ...] = (True,) * 5, strides: tuple[int, ...] | None = None,
               has_weight: bool = True, quant: int = 0) -> TritonLaunch:
    """The launch `_launch` makes: tensors (x, residual, residual_out, weight, y) 16-byte aligned or not, row
    strides (x, residual, residual_out, y; default n), alignments capped at N's as `_launch` does."""
    xs, rs, ros, ys = strides or (n,) * 4
    xa, ra, roa, ya, na = row_alignments(n, (xs, rs, ros, ys))
    x, r, ro, w, y = (TensorArg(dtype, a) for a in aligned)
    if quant:
        y = TensorArg(torch.float8_e4m3fn, aligned[4])
    args = {
        "X": x, "x_stride_q": xs // xa, "R": r, "r_stride_q": rs // ra, "RO": ro, "ro_stride_q": ros // roa,
        "W": w, "Y": y, "y_stride_q": ys // ya, "M": 4096, "n_q": n // na, "eps": 1e-6, "weight_offset": 0.0,
        "S": TensorArg(torch.float32, True), "qmax": 448.0, "min_scale": 1e-5,
        **kernel_constexprs(cfg, (xa, ra, roa, ya, na), fused, has_weight, cfg.loop_free, quant),
    }
    options = {"maxnreg": cfg.max_registers} if cfg.max_registers else {}
    return TritonLaunch(_rms_norm_kernel, args, cfg.num_warps, 4096, cfg.describe(), options=options)


def reduction_layouts(launch: TritonLaunch) -> tuple[tuple[str, str], ...]:
    """(size, elements per thread) of every float32 tensor the compiled kernel reduces, in order."""
    ttgir = aot_compile(launch).asm["ttgir"]
    layouts = dict(re.findall(r"(#blocked\d*) = (#ttg\.blocked<\{[^}]*\}>)", ttgir))
    reduced = re.findall(r"tensor<(\d+)xf32, (#blocked\d*)>\) -> f32", ttgir)
    return tuple((size, re.search(r"sizePerThread = \[(\d+)\]", layouts[name]).group(1)) for size, name in reduced)


def _layouts_job(job: tuple) -> tuple:
    n, cfg, fused, aligned, strides, has_weight, quant = job
    return reduction_layouts(launch_for(n, cfg, fused, aligned=aligned, strides=strides, has_weight=has_weight,
                                        quant=quant))


def check_layouts(ns: list[int]) -> list[str]:
    """Where the row's sum is laid out otherwise than for the same op on contiguous, aligned rows (the plain op's
    layout for the fused one). Compiles in parallel, one process per CPU (hundreds of kernels, no cache)."""
    jobs: dict[tuple, tuple] = {}  # (n, has_weight, op, x_aligned, stride) -> compile job; stride 0: reference
    for n in ns:
        plain, fused = launch_config(n, torch.bfloat16), launch_config(n, torch.bfloat16, True)
        # FP8 outputs (16 one-byte values per 16-byte store) get their own layout (on sm_90: 16 elements per
        # thread where the 16-bit op has 8); it too must be the same for any layout of the input rows, with the
        # weight loaded first (few rows) or after the reduction (many).
        ops = {"plain": (plain, False, 0), "fused": (fused, True, 0),
               "fused FP8 w-first": (config_for(n, torch.bfloat16, 1, quant=2), True, 2),
               "fused FP8 w-late": (config_for(n, torch.bfloat16, 1 << 20, quant=2), True, 2)}
        for has_weight in (True, False):
            for op, (cfg, is_fused, quant) in ops.items():
                if op != "fused":  # the fused op must match the plain op's reference
                    jobs[(n, has_weight, op, True, 0)] = (n, cfg, False, (True,) * 5, None, has_weight, quant)
                for x_aligned in (True, False):
                    for stride in sorted({n, n + 1, n + 4, n + 8, 2 * n}):
                        al = (x_aligned, x_aligned, True, True, True)
                        jobs[(n, has_weight, op, x_aligned, stride)] = (n, cfg, is_fused, al, (stride, stride, n, n),
                                                                        has_weight, quant)
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        layouts = dict(zip(jobs, pool.map(_layouts_job, jobs.values())))
    problems = []
    for (n, has_weight, op, x_aligned, stride), got in layouts.items():
        if stride == 0:
            continue
        want = layouts[(n, has_weight, "plain" if op == "fused" else op, True, 0)]
        if got != want:
            problems.append(f"N={n} {op} weight={has_weight} x aligned={x_aligned} stride={stride}: {got} != {want}")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="*", type=int, default=[4096, 4100, 5120, 5125, 7168, 8192, 16384, 65536])
    ap.add_argument("--fused", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--check-layouts", action="store_true")
    ap.add_argument("--quant", type=int, default=0, choices=(0, 1, 2))
    ap.add_argument("--m", type=int, default=4096, help="rows (config_for's row-count rules)")
    args = ap.parse_args()
    if args.check_layouts:
        problems = check_layouts(args.n)
        print("\n".join(problems) or f"same reduction layout everywhere for N = {args.n}")
        raise SystemExit(1 if problems else 0)
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            cfgs = candidate_configs(n) if args.all else [config_for(n, torch.bfloat16, args.m, args.fused,
                                                                             quant=args.quant)]
            for i, cfg in enumerate(cfgs):
                launch = launch_for(n, cfg, args.fused, quant=args.quant)
                facts = kernel_facts(aot_compile(launch), Path(tmp), "aot", f"k{n}-{i}")
                sass = facts.get("sass", {})
                occ = occupancy(facts["registers"], facts["shared_bytes"], cfg.num_warps)
                print(f"N={n:<6} {cfg.describe():52} regs {facts['registers']:>3} spills "
                      f"{facts['spill_stores_bytes']}/{facts['spill_loads_bytes']} occupancy "
                      f"{occ['occupancy']:.0%} LDG {sass.get('global_loads')} STG {sass.get('global_stores')}")


if __name__ == "__main__":
    main()
