"""Sweep launch configurations of the RMSNorm kernel on a GPU: the data behind `launch_config`'s heuristic.

Usage (on the GPU): python scripts/explore_rmsnorm.py OUT.json [--fused] [--regime graph-cold|graph-hot|cold-eager]
                    [--shapes sweep|decode|decode-lite|wide|wide-lite|w32k|w32k-lite|large|aligned|cliff|odd|
                              small|small-zone|zone|w16k|w8k16k[-fused]|w8k-decode|w4k-large|hoist[-lite]|const-n|stream-odd|
                              stream-mid|stream-fp16|joint|joint-wide|joint-odd|tiny] [--focus]
                    [--budget S] [--dry] [--quant [dynamic|static]] [--dtype bf16|fp16] [--wdtype bf16|fp32]
                    [--two-pass] [--unroll] [--stream] [--stream-loads] [--const-n] [--hoist] [--shared-out]
Each (shape, config) is checked against the float64 reference first, then timed; results are written as they
come; the last lines printed are the best config per shape beside the current heuristic. Candidates come from
`candidate_configs(n)`; --focus times only the default with weight-first on/off and a 32-register cap on/off
(split rows: the weight's timing and the two-pass kernel; one-pass rows of 16K columns: the split configs).
Inputs rotate over sets (each with its own weight) like the bench's graph-cold regime. --quant times the dynamic
FP8 epilogue (per-row scales; --focus then also tries the two-pass grid and a 64-register cap on wide rows, and
the row's max reduced with its sum, joint_max); --quant static, the static one (one scale). --stream adds every
one-pass candidate with L2 stream hints.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math

import torch
import triton

from ridgeline.harness.timing import time_cold_eager, time_graph
from ridgeline.lib.launch import interpreter_enabled
from ridgeline.ops.rmsnorm.launch import _launch
from ridgeline.ops.rmsnorm.rules import (
    LaunchConfig,
    candidate_configs,
    chunked_candidates,
    config_for,
    row_pieces,
    split_candidates,
    two_pass_config,
)
from ridgeline.ops.rmsnorm.spec import DECODE, SWEEP

L2_BYTES = 60 * 2**20
# The static FP8 epilogue's scale: y (about N(0,1) x N(0,1)) / 0.2 stays below e4m3's 448, so the check sees no
# saturated value.
STATIC_SCALE = 0.2


def make_sets(m: int, n: int, dtype: torch.dtype, fused: bool, count: int, device: str, quant: int = 0,
              wdtype: torch.dtype | None = None):
    """(x, residual, y, residual_out, weight, scales) per set (quant 1: scales is the static scale, 2: per row)."""
    sets = []
    for _ in range(count):
        x = torch.randn(m, n, device=device, dtype=dtype)
        r = torch.randn(m, n, device=device, dtype=dtype) if fused else None
        w = torch.randn(n, device=device, dtype=wdtype or dtype)  # each set its own weight (bench: cold in L2)
        y = torch.empty(m, n, device=device, dtype=torch.float8_e4m3fn if quant else dtype)
        scales = (torch.full((1,), STATIC_SCALE, device=device) if quant == 1
                  else torch.empty(m, device=device, dtype=torch.float32) if quant else None)
        sets.append((x, r, y, torch.empty_like(x) if fused else None, w, scales))
    return sets


def focus_configs(default, quant: bool, fused: bool, n: int) -> list:
    """The default with weight-first on/off and a register cap on/off (wide FP8 rows: grid and a 64 cap); FP8
    rows in one pass also with the row's max reduced together with its sum (joint_max), uncapped and at 40.
    Split rows: the weight loaded with x or after the wait, and the two-pass kernel; one-pass rows of 16K columns
    (16-bit outputs): also the split configs."""
    if quant and not default.single_pass:
        return [dataclasses.replace(default, programs_per_sm=per_sm, max_registers=regs)
                for per_sm in (0, 1, 2) for regs in (0, 64)]
    out = [default]
    if default.single_pass:
        # (from the default without the knobs the row count switches on, so each is timed with and without)
        base = dataclasses.replace(default, stream_hints=False, joint_max=False)
        out += [dataclasses.replace(base, weight_first=wf, max_registers=regs)
                for wf in (False, True) for regs in (0, 32)]
        if quant:
            out += [dataclasses.replace(base, weight_first=True, joint_max=True, max_registers=regs)
                    for regs in (0, 40)]
    if default.split:  # the weight loaded with x or after the wait, and the two-pass kernel split rows replace
        out += [dataclasses.replace(default, weight_first=not default.weight_first), two_pass_config(fused)]
    elif not quant and n >= 16384 and not interpreter_enabled():  # (split rows need a GPU)
        out += split_candidates(n)
    if not quant and 16384 <= n <= 32768:  # the whole row in one program of 16 or 32 warps, one block or pieces
        for warps in (16, 32):
            layouts = {(triton.next_power_of_2(n), 0, 0), (*row_pieces(n, min_piece=32 * warps), 0, 0)[:3]}
            out += [LaunchConfig(first, True, warps, 0, b, c, loop_free=True, weight_first=wf)
                    for first, b, c in sorted(layouts) for wf in (False, True)]
            # Two passes over one chunk the width of the row: the second re-reads x from L1/L2 instead of
            # holding it through the reduction (torch.compile's reduction kernel with R0_BLOCK = the row).
            out.append(LaunchConfig(triton.next_power_of_2(n), False, warps, 0, l2_hints=True))
    return list(dict.fromkeys(out))


def small_chunk_two_pass(n: int) -> list:
    """Two passes over 1K-4K-column chunks, one program per row, L2 hints: torch.compile's layout for RMSNorm at
    every width (scripts/inductor_code.py), which led ours by 1-4% at large aligned shapes."""
    out = [LaunchConfig(chunk, False, warps, 0, l2_hints=True)
           for chunk, warps in ((1024, 4), (2048, 4), (2048, 8), (2048, 16), (4096, 8), (4096, 16), (8192, 16),
                                (16384, 32)) if chunk < n]
    # (and without the grid-stride loop around the row, as inductor's kernel has none; at 16 warps also without
    # the L2 hints, as inductor's two loops over 2048 columns are)
    loop_free = [dataclasses.replace(c, loop_free=True) for c in out if c.num_warps == 16 or c.block_n == 16384]
    return out + loop_free + [dataclasses.replace(c, l2_hints=False) for c in loop_free if c.num_warps == 16]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--fused", action="store_true")
    ap.add_argument("--regime", default="graph-cold")
    ap.add_argument("--budget", type=float, default=0.25)
    ap.add_argument("--shapes", default="sweep")
    ap.add_argument("--dry", action="store_true", help="check only (CPU smoke test), no timing")
    ap.add_argument("--focus", action="store_true",
                    help="only the default config with weight-first on/off and a 32-register cap on/off")
    ap.add_argument("--quant", nargs="?", const="dynamic", choices=("dynamic", "static"),
                    help="an FP8 epilogue: dynamic (per-row scales; the default) or static (one scale, STATIC_SCALE)")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"), help="x's (and the outputs') dtype")
    ap.add_argument("--wdtype", default="bf16", choices=("bf16", "fp32"), help="the weight's dtype")
    ap.add_argument("--unroll", action="store_true",
                    help="also two passes over 2K-16K chunks, one program per row, each pass unrolled 1, 2 or 4 "
                         "times")
    ap.add_argument("--stream", action="store_true",
                    help="also every one-pass candidate with L2 stream hints (rows evict_first, weight evict_last)")
    ap.add_argument("--const-n", action="store_true",
                    help="also the default and two passes over 2K-16K chunks (one program per row, L2 hints; fused: "
                         "also the second pass reversed), with the hidden size compiled in (const_n), and rows read "
                         "as equal chunks summed elementwise in one pass or two (chunked_candidates)")
    ap.add_argument("--hoist", action="store_true",
                    help="also every one-pass candidate over pieces, or with the weight first, with every load before "
                         "the first store (hoist_loads: the fused op)")
    ap.add_argument("--two-pass", action="store_true",
                    help="also two passes over small chunks (as torch.compile's kernels do) for rows of any width")
    ap.add_argument("--stream-loads", action="store_true",
                    help="also every one-pass candidate with evict_first on the loads of x and the residual only "
                         "(stream_loads: the weight evict_last, stores without a hint)")
    ap.add_argument("--ab-stream-loads", action="store_true",
                    help="only the default, and (one pass) it without L2 hints, with stream_loads, with stream_hints")
    ap.add_argument("--shared-out", action="store_true",
                    help="every input set writes the same output tensors, as the bench's out-of-place calls do (each "
                         "call's outputs come from the graph's pool at the same address, so they stay in L2); by "
                         "default each set has its own outputs")
    ap.add_argument("--warps", type=int, default=0,
                    help="also time every one-pass candidate with this many warps (other bits: a layout study)")
    ap.add_argument("--reverse", action="store_true",
                    help="time each shape's candidates in reverse order (the default last): checks that the order "
                         "of timing does not favour the first")
    args = ap.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    wdtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.wdtype]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shapes = {"sweep": SWEEP, "decode": DECODE, "all": SWEEP + DECODE, "tiny": [(3, 4100), (2, 20000)],
              "wide": [(2048, 65536), (4096, 32768), (4096, 16384), (512, 131072), (1, 65536), (64, 65536)],
              "large": [(1024, 4096), (16384, 4096), (65536, 4096), (4096, 8192), (16384, 8192), (4096, 16384),
                        (4096, 32768), (2048, 65536)],
              "wide-lite": [(1, 65536), (64, 65536), (2048, 65536), (4096, 32768), (1, 32768), (128, 32768),
                            (4096, 16384), (4096, 20000)],
              "w32k": [(4096, 32768), (1024, 32768), (128, 32768), (1, 32768), (4096, 20000), (4096, 24576),
                       (2048, 16896), (16, 20000)],
              "w32k-lite": [(4096, 32768), (4096, 24576), (4096, 20000), (1024, 32768)],
              "odd": [(4096, 4100), (4096, 5125), (1024, 5125), (16384, 5125), (4096, 4097), (1, 5125),
                      (128, 5125), (16384, 4100)],
              "aligned": [(4096, 4096), (16384, 4096), (65536, 4096), (4096, 7168), (4096, 8192), (16384, 8192),
                          (4096, 16384), (1024, 8192), (4096, 5120)],
              "joint": [(m, n) for n in (4096, 8192) for m in (1, 128, 512, 1024, 2048)],
              "small": [(1, 4096), (16, 4096), (64, 4096)],
              "const-n": [(4096, 16384), (1024, 16384), (1, 16384), (4096, 20000), (16, 20000), (4096, 24576),
                          (2048, 16896), (4096, 32768), (1024, 32768), (128, 32768), (1, 32768)],
              "w16k": [(1, 20000), (16, 20000), (128, 20000), (256, 20000), (1024, 20000), (4096, 20000),
                       (1, 16896), (256, 16896), (2048, 16896), (4096, 16896)],
              "w8k16k": [(m, 8192) for m in (1, 16, 128, 256, 512, 1024, 2048, 4096, 16384)]
              + [(m, 16384) for m in (1, 16, 128, 256, 1024, 4096)],
              "w8k16k-fused": [(m, 8192) for m in (1, 128, 1024, 4096, 16384)]
              + [(m, 16384) for m in (1, 128, 1024, 4096)],
              "w8k-decode": [(m, 8192) for m in (1, 16, 128, 256)],
              "hoist-lite": [(1, 16384), (128, 16384), (4096, 16384), (1, 8192), (128, 8192), (4096, 8192),
                             (1, 20000), (4096, 20000), (1, 5120), (4096, 5120)],
              "hoist": [(m, n) for n in (8192, 16384) for m in (1, 128, 1024, 4096)]
              + [(16384, 8192), (1, 20000), (4096, 20000), (2048, 16896), (1024, 5120), (4096, 5120), (4096, 4100),
                 (4096, 5125)],
              "w4k-large": [(4096, 4096), (16384, 4096), (65536, 4096)],
              "zone": [(256, 32768), (512, 32768), (256, 20000), (512, 20000), (512, 24576), (4096, 24576)],
              "small-zone": [(128, 4096), (256, 4096), (1, 8192), (16, 8192), (128, 8192), (16, 5120), (16, 7168)],
              "stream-mid": [(1536, 4096), (2048, 4096), (2048, 5120), (3072, 4100)],
              "stream-fp16": [(4096, 4096), (4096, 5120), (2048, 4096)],
              "joint-wide": [(m, n) for n in (7168, 16384) for m in (1, 128, 1024, 2048)],
              "joint-odd": [(m, n) for n in (4100, 5120, 5125) for m in (128, 1024, 2048)],
              "stream-odd": [(4096, 4100), (16384, 4100), (4096, 5125), (16384, 5125), (2048, 4096), (2048, 5120),
                             (16384, 5120), (65536, 5120)],
              "decode-lite": [(m, n) for n in (4096, 8192) for m in (1, 16, 128, 256)],
              "w8k-rows": [(m, 8192) for m in (1, 16, 128, 256, 512, 1024, 2048, 4096, 16384)],
              "w4k-small": [(m, 4096) for m in (1, 16, 128)],
              "w4k-rows": [(m, 4096) for m in (1, 16, 128, 256, 512, 1024, 4096, 16384, 65536)],
              "w4k-decode": [(m, 4096) for m in (1, 16, 128, 256)],
              "w4k-mid": [(m, 4096) for m in (2048, 4096, 8192)],
              "w4k-64": [(m, 4096) for m in (32, 48, 64, 96)],
              "wfp32-large": [(4096, 4096), (16384, 4096), (65536, 4096), (1024, 16384), (4096, 16384)],
              "w7k-rows": [(m, 7168) for m in (1, 16, 128, 256, 1024, 4096)],
              "w7k-mid": [(m, 7168) for m in (128, 1024, 4096)],
              "fused-128": [(m, 4096) for m in (64, 128, 256)],
              "fused-small": [(m, 4096) for m in (16, 128, 256)],
              "w8k-1024": [(1024, 8192)],
              "fused-256": [(256, 4096)],
              # outputs from 2 to 128 MB at the sweep's widths: where evict_first on the row loads (stream_loads)
              # stops paying, against the L2 (60 MB on the H200)
              "l2-fit": [(m, 4096) for m in (256, 512, 1024, 2048, 3072, 4096, 6144, 8192)]
              + [(m, 8192) for m in (256, 512, 1024, 1536, 2048, 3072, 4096)]
              + [(m, n) for n in (5120, 7168) for m in (1024, 2048, 4096)]
              + [(m, n) for n in (4100, 5125) for m in (1024, 4096)]
              + [(256, 16384), (1024, 16384), (2048, 16384), (256, 20000), (1024, 20000), (128, 32768), (512, 32768)],
              # FP8 outputs (1 byte; the fused op's residual_out 2) from 16 KB to 128 MB: the L2 rule's edge
              "fp8-l2": [(m, 4096) for m in (16, 256, 1024, 2048, 4096, 8192, 16384)]
              + [(m, 8192) for m in (1024, 2048, 4096, 8192)],
              "fp8-l2-eager": [(m, n) for n in (4096, 8192) for m in (1024, 4096, 8192)],
              "l2-beyond": [(m, n) for n in (7168, 8192) for m in (2048, 3072, 4096, 8192, 16384)],
              "l2-fit-eager": [(1024, 4096), (4096, 4096), (1024, 8192), (4096, 8192), (2048, 5120), (16, 4096)],
              "w8k-fused-mid": [(1024, 8192), (4096, 8192)],
              "plain-lost": [(16384, 8192), (4096, 7168)],
              "w7k-16w": [(m, 7168) for m in (1, 128, 1024, 4096, 16384)],
              "plain-lost-eager": [(4096, 7168), (4096, 8192), (16384, 8192)],
              "plain-small": [(128, 4096), (256, 4096), (256, 8192)],
              "fused-const-n": [(m, 4096) for m in (1, 16, 128, 256, 1024, 4096, 16384, 65536)]
              + [(m, 7168) for m in (1, 128, 1024, 4096)] + [(m, 5120) for m in (1, 1024, 4096)],
              "cliff": [(m, 4096) for m in (256, 512, 768, 1024, 1280, 1536, 2048, 4096)]
              + [(m, 8192) for m in (256, 512, 1024, 2048)] + [(m, 5120) for m in (512, 1024, 4096)]}[args.shapes]
    quant = {None: 0, "static": 1, "dynamic": 2}[args.quant]  # (kernel_constexprs' QUANT)
    results = []
    for m, n in shapes:
        row_bytes = (3 if args.fused else 1) * 2 + (1 if quant else 2)
        bytes_moved = row_bytes * m * n + wdtype.itemsize * n + (4 * m if quant == 2 else 0)
        count = 1 if args.regime != "graph-cold" or bytes_moved >= 4 * L2_BYTES else min(
            2048, math.ceil(3 * L2_BYTES / bytes_moved))
        sets = make_sets(m, n, dtype, args.fused, count, device, quant, wdtype)
        if args.shared_out:
            sets = [(s[0], s[1], sets[0][2], sets[0][3], s[4], sets[0][5]) for s in sets]
        x0, w = sets[0][0], sets[0][4]
        base = x0.double()
        if args.fused:
            base = (x0.double() + sets[0][1].double()).to(dtype).double()
        ref = base * torch.rsqrt(base.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
        default = config_for(n, dtype, m, args.fused, weight_dtype=wdtype, quant=quant)
        if args.focus:
            cands = focus_configs(default, bool(quant), args.fused, n)
        else:  # (--const-n alone: the default and its variants only)
            cands = [default] if args.const_n else candidate_configs(n)
        if args.ab_stream_loads:
            plain = dataclasses.replace(default, stream_loads=False, stream_hints=False)
            cands = [default] + ([plain, dataclasses.replace(plain, stream_loads=True),
                                  dataclasses.replace(plain, stream_hints=True, hoist_loads=False)]
                                 if default.single_pass else [])
        if args.two_pass:
            cands = cands + [c for c in small_chunk_two_pass(n) if c not in cands]
        if args.unroll:
            cands = cands + [LaunchConfig(chunk, False, warps, 0, l2_hints=True, loop_free=True, unroll=u)
                             for chunk, warps in ((2048, 16), (4096, 16), (8192, 16), (16384, 32))
                             for u in (1, 2, 4) if chunk * u <= n]
        if args.const_n:
            cands = cands + chunked_candidates(n)  # (one pass and two over equal chunks: the same bits)
            cands = cands + [dataclasses.replace(default, const_n=True)] + [
                LaunchConfig(chunk, False, warps, 0, l2_hints=True, loop_free=True, reverse_pass2=rev, const_n=True)
                for chunk, warps in ((16384, 32), (8192, 16), (4096, 16), (2048, 8), (2048, 16)) if chunk < n
                for rev in ((False, True) if args.fused else (False,))]
        if args.hoist:
            cands = cands + [dataclasses.replace(c, hoist_loads=True) for c in cands
                             if c.single_pass and not c.hoist_loads and (c.piece_b or c.weight_first)]
        if args.stream:
            cands = cands + [dataclasses.replace(c, stream_hints=True) for c in cands if c.single_pass]
        if args.stream_loads:
            cands = cands + [dataclasses.replace(c, stream_loads=True) for c in cands
                             if c.single_pass and not c.stream_hints]
        if args.warps:
            cands = cands + [dataclasses.replace(c, num_warps=args.warps) for c in cands if c.single_pass]
        cands = list(dict.fromkeys(cands))
        if args.reverse:
            cands.reverse()
        for cfg in cands:
            rec = {"shape": [m, n], "dtype": args.dtype, "fused": args.fused, "regime": args.regime,
                   "config": cfg.describe(),
                   "quant": quant, "weight_dtype": args.wdtype,
                   "weight_first": cfg.weight_first, "max_registers": cfg.max_registers, "loop_free": cfg.loop_free,
                   "joint_max": cfg.joint_max, "stream_hints": cfg.stream_hints, "stream_loads": cfg.stream_loads,
                   "block_n": cfg.block_n, "single_pass": cfg.single_pass, "num_warps": cfg.num_warps,
                   "programs_per_sm": cfg.programs_per_sm, "split": cfg.split, "default": cfg == default,
                   "const_n": cfg.const_n, "shared_out": args.shared_out,
                   "bytes": bytes_moved}
            try:
                calls = [functools.partial(_launch, s[0], n, s[1], n, s[3], n, s[4], s[2], n, m, n, 1e-6, 0.0, cfg,
                                           quant, s[5]) for s in sets]
                calls[0]()
                if device == "cuda":
                    torch.cuda.synchronize()
                got = sets[0][2].double()
                if quant:  # dequantized: within an e4m3 half-ulp (2^-4 relative) of the reference
                    got = got * (STATIC_SCALE if quant == 1 else sets[0][5].double()[:, None])
                    err = ((got - ref).abs() / (ref.abs() + 1e-2)).max().item()
                else:
                    err = (got - ref).abs().max().item()
                if not err < 0.1:
                    raise AssertionError(f"wrong result: max err {err}")
                if args.dry:
                    rec.update(median_us=1.0, iqr_us=0.0, n=0, gbps=0.0)
                elif args.regime == "cold-eager":
                    t = time_cold_eager(calls[0], args.budget)
                else:
                    t = time_graph(calls, args.budget, regime=args.regime)
                if not args.dry:
                    rec.update(median_us=t.median_us, iqr_us=t.iqr_us, n=t.n, gbps=bytes_moved / t.median_us / 1e3)
            except Exception as e:  # record and go on
                rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            results.append(rec)
        del sets
        if device == "cuda":
            torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    print(f"{'shape':>12} {'default us':>10} {'best us':>9} {'best GB/s':>9}  best config")
    for m, n in shapes:
        rows = [r for r in results if r["shape"] == [m, n] and "median_us" in r]
        if not rows:
            continue
        best = min(rows, key=lambda r: r["median_us"])
        dflt = next((r for r in rows if r["default"]), None)
        print(f"{m:>6}x{n:<6} {dflt['median_us'] if dflt else float('nan'):10.2f} {best['median_us']:9.2f} "
              f"{best['gbps']:9.0f}  {best['config']}")


if __name__ == "__main__":
    main()
