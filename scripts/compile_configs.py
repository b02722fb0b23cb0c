"""Compile RMSNorm launch configs ahead of time for sm_90 (no GPU needed): registers, spills, access widths.

Usage: python scripts/compile_configs.py [N ...] [--fused] [--all] [--quant 1|2] [--m M]
       python scripts/compile_configs.py N ... --check-layouts
Without --all only the config `config_for` picks (for M rows) is compiled; with it, every candidate the explore
script times. --quant compiles the FP8 epilogue (1 static scale, 2 dynamic per-row scales).
Prints one line per config: what `docs/perf/rmsnorm.md` quotes for registers, spills and vector widths.
--check-layouts compiles each op (plain, fused, static and dynamic FP8; bf16 rows, bf16 or fp32 weight, with and
without a weight) with every config `config_for` may pick for it, on rows of other strides and pointer alignments,
and exits 1 if the register layout of a row's sum differs from the op's reference anywhere (it decides the order
of the sum, so the bits: batch invariance and `fused.out == rms_norm(residual_out)` depend on it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import re
import tempfile
from pathlib import Path

import torch

from ridgeline.ops.rmsnorm.kernel import (
    _rms_norm_kernel,
    kernel_constexprs,
    row_alignments,
    split_constexprs,
)
from ridgeline.ops.rmsnorm.rules import LaunchConfig, candidate_configs, config_for, launch_config
from ridgeline.ops.rmsnorm.split import _rms_norm_split_kernel
from ridgeline.profile import TensorArg, TritonLaunch, aot_compile, kernel_facts, occupancy
from ridgeline.profile.aot import _compile_key, aot_ttgir


def launch_for(n: int, cfg: LaunchConfig, fused: bool, dtype: torch.dtype = torch.bfloat16,
               aligned: tuple[bool, ...] = (True,) * 5, strides: tuple[int, ...] | None = None,
               has_weight: bool = True, quant: int = 0, weight_dtype: torch.dtype | None = None) -> TritonLaunch:
    """The launch `_launch` makes: tensors (x, residual, residual_out, weight, y) 16-byte aligned or not, row
    strides (x, residual, residual_out, y; default n), alignments capped at N's as `_launch` does."""
    xs, rs, ros, ys = strides or (n,) * 4
    xa, ra, roa, ya, na = row_alignments(n, (xs, rs, ros, ys))
    x, r, ro, w, y = (TensorArg(dtype, a) for a in aligned)
    if weight_dtype is not None:
        w = TensorArg(weight_dtype, aligned[3])
    if quant:
        y = TensorArg(torch.float8_e4m3fn, aligned[4])
    if cfg.split:  # rows split across programs: their own kernel
        args = {
            "X": x, "x_stride_q": xs // xa, "R": r, "r_stride_q": rs // ra, "RO": ro, "ro_stride_q": ros // roa,
            "W": w, "Y": y, "y_stride_q": ys // ya, "M": 4096, "n_q": n // na, "eps": 1e-6, "inv_n": 1.0 / n,
            "weight_offset": 0.0,
            "PART": TensorArg(torch.float32, True), "SYNC": TensorArg(torch.int32, True), "groups": 100,
            **split_constexprs(cfg, (xa, ra, roa, ya, na), fused, has_weight),
        }
        return TritonLaunch(_rms_norm_split_kernel, args, cfg.num_warps, 4096, cfg.describe())
    args = {
        "X": x, "x_stride_q": xs // xa, "R": r, "r_stride_q": rs // ra, "RO": ro, "ro_stride_q": ros // roa,
        "W": w, "Y": y, "y_stride_q": ys // ya, "M": 4096, "n_q": n // na, "eps": 1e-6, "inv_n": 1.0 / n,
            "weight_offset": 0.0,
        "S": TensorArg(torch.float32, True), "qmax": 448.0, "min_scale": 1e-5,
        **kernel_constexprs(cfg, (xa, ra, roa, ya, na), fused, has_weight, cfg.loop_free, quant, n),
    }
    options = {"maxnreg": cfg.max_registers} if cfg.max_registers else {}
    return TritonLaunch(_rms_norm_kernel, args, cfg.num_warps, 4096, cfg.describe(), options=options)


def reduction_layouts(launch: TritonLaunch) -> tuple[tuple[str, str], ...]:
    """(size, register layout) of the float32 tensors the compiled kernel reduces, in order of first use."""
    ttgir = aot_ttgir(launch)  # (the layouts are decided by then: no PTX or ptxas)
    layouts = dict(re.findall(r"(#blocked\d*) = (#ttg\.blocked<\{[^}]*\}>)", ttgir))
    # Reductions of one tensor (`...>) -> f32`) or several at once (`...>) -> (f32, f32)`: joint_max).
    reduced = re.findall(r"tensor<(\d+)xf32, (#blocked\d*)>\) -> \(?f32", ttgir)
    # The whole layout (elements a thread, threads a warp, warps), not its name: names differ between kernels.
    # Each (size, layout) once, in order of first use: the dynamic FP8 op reduces a piece's sum and max apart or,
    # with joint_max, together, and the two must agree on the sum's layout.
    return tuple(dict.fromkeys((size, layouts[name]) for size, name in reduced))


def _job_launch(job: tuple) -> TritonLaunch:
    n, cfg, fused, aligned, strides, has_weight, quant, wdtype = job
    return launch_for(n, cfg, fused, aligned=aligned, strides=strides, has_weight=has_weight, quant=quant,
                      weight_dtype=wdtype)


def _layouts_job(job: tuple) -> tuple:
    return reduction_layouts(_job_launch(job))


def layout_groups(n: int) -> dict[str, tuple[tuple, list[tuple]]]:
    """name -> (reference launch, launches that must lay the row out as it does), for bf16 rows of n columns.
    Reference: the op on contiguous, aligned rows (the plain op's for the fused one: they agree bitwise).
    Others: every config `config_for` may pick for it (they differ in knobs chosen by row count, which must not
    change a bit), on rows of other strides, with x and residual off 16 bytes or not. FP8 outputs (16 one-byte
    values per 16-byte store) get their own layout (16 elements per thread where the 16-bit op has 8)."""
    bf16, fp32 = torch.bfloat16, torch.float32
    strides = sorted({n, n + 1, n + 4, n + 8, 2 * n})
    few, many = 1, 1 << 20  # rows: the weight-first and the weight-late sides of the FP8 rule

    def variants(cfgs: list[tuple[LaunchConfig, bool]], has_weight: bool, quant: int, wdtype) -> list[tuple]:
        return list(dict.fromkeys((n, cfg, fused, (xa, xa, True, True, True), (st, st, n, n), has_weight, quant,
                                   wdtype) for cfg, fused in cfgs for xa in (True, False) for st in strides))

    groups = {}
    for has_weight in (True, False):
        # (4096 rows: inside the plain op's stream-hint zone at up to 5120 columns, STREAM_ZONE)
        plain = [(config_for(n, bf16, m), False) for m in (1, 1024, 4096, many)]
        fused = [(config_for(n, bf16, m, True), True) for m in (1, 1024, 4096, many)]
        ref = (n, plain[0][0], False, (True,) * 5, None, has_weight, 0, bf16)
        groups[f"plain+fused weight={has_weight}"] = (ref, variants(plain + fused, has_weight, 0, bf16))
        for quant, name in ((1, "static FP8"), (2, "dynamic FP8")):
            cfgs = [(config_for(n, bf16, m, fused, quant=quant), fused) for m in (few, many) for fused in
                    ((False, True) if quant == 2 else (False,))]
            if quant == 2:  # the row's max reduced with its sum: it must sum in the same order (same bits)
                cfgs += [(dataclasses.replace(c, weight_first=True, joint_max=True), fused) for c, fused in cfgs
                         if c.single_pass]
            ref = (n, cfgs[0][0], False, (True,) * 5, None, has_weight, quant, bf16)
            groups[f"{name} weight={has_weight}"] = (ref, variants(cfgs, has_weight, quant, bf16))
    # Rows split across programs (GPU only: `config_for` takes two passes in the interpreter): the chunk's sum.
    split = [(c, fused) for fused in (False, True) for c in (launch_config(n, bf16, fused),) if c.split]
    split += [(dataclasses.replace(c, weight_first=not c.weight_first), fused) for c, fused in split]
    for has_weight, wdtype in ((True, bf16), (False, bf16), (True, fp32)):
        if split:
            groups[f"split rows weight={has_weight} {wdtype}"] = (
                (n, split[0][0], False, (True,) * 5, None, has_weight, 0, wdtype),
                variants(split, has_weight, 0, wdtype))
    # An fp32 weight with bf16 rows: its own layouts (wider weight loads), as invariant.
    plain = [(config_for(n, bf16, m, fused, weight_dtype=fp32), fused) for m in (1, 1024, 4096, many)
             for fused in (False, True)]
    groups["plain+fused fp32 weight"] = ((n, plain[0][0], False, (True,) * 5, None, True, 0, fp32),
                                         variants(plain, True, 0, fp32))
    dyn = [(config_for(n, bf16, m, True, weight_dtype=fp32, quant=2), True) for m in (few, many)]
    groups["dynamic FP8 fp32 weight"] = ((n, dyn[0][0], False, (True,) * 5, None, True, 2, fp32),
                                         variants(dyn, True, 2, fp32))
    return groups


def check_layouts(ns: list[int]) -> list[str]:
    """Where a row's sum is laid out otherwise than its group's reference (`layout_groups`). Each distinct
    specialization is lowered once to TTGIR (where Triton fixes the layouts), in parallel, one process per CPU
    (about 2200 kernels for the test's eleven widths)."""
    groups = {(n, name): g for n in ns for name, g in layout_groups(n).items()}
    jobs = sorted({job for ref, others in groups.values() for job in (ref, *others)}, key=repr)
    # Jobs whose launches specialize alike (strides and alignments that give the same constexprs) compile once.
    key_of = {job: _compile_key(_job_launch(job)) for job in jobs}
    firsts = list({key_of[job]: job for job in reversed(jobs)}.values())
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        by_key = dict(zip((key_of[j] for j in firsts), pool.map(_layouts_job, firsts, chunksize=8)))
    layouts = {job: by_key[key_of[job]] for job in jobs}
    problems = []
    for (n, name), (ref, others) in groups.items():
        for job in others:
            if layouts[job] != layouts[ref]:
                _, cfg, fused, aligned, strides, *_ = job
                problems.append(f"N={n} {name}: {cfg.describe()} fused={fused} x aligned={aligned[0]} "
                                f"stride={strides[0]}: {layouts[job]} != {layouts[ref]}")
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
