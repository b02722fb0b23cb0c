"""Time candidate launch configs of the softmax kernels per shape on the GPU, so the rules can be set from one call.

Usage (on the GPU machine, from the repo root, src/ on PYTHONPATH):
  python3 scripts/device/tune_softmax.py $OUT/h200-tune-softmax.json [--shapes 1024x32768,...] [--budget-s 45]

For each direction (fwd, bwd) and shape it times the shipped config (rules.py) and the alternatives the rules
left open: warps of the one-pass layout, two pieces or one block (unaligned widths), its cache hints (the loads'
eviction policy, the stores' cache modifier) and a persistent grid, two rows a program at 4096-8192 columns, one
pass against split rows near the register limit (32768 columns forward, 16384-32768 backward), and for the split
rows (the sweep's wide shapes: 65536, 128256, 151936, 262144 columns) the chunk width (8-32 KB) and warps, of the
two-kernel split and of the split read once (one cooperative kernel), the groups of rows launched per kernel pair
(16-48 MiB of input, or all rows in one pair) and kernel 2's walk order. Timing:
triton.testing.do_bench (L2 flushed before each call: cold inputs), median. Every config's output is checked
against torch.softmax first (a wrong config is recorded, never a win); a config that fails to compile or run is
recorded with its error and skipped. The JSON holds every sample's median; the table printed last is the best
config per shape beside the shipped one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace

import torch
import triton
from triton.testing import do_bench

from ridgeline.ops.softmax import launch, rules
from ridgeline.ops.softmax.rules import LaunchConfig, config_for

COPY_GBPS = 4270.0  # probed device-to-device copy bandwidth of the H200 (FACTS.md)
# Most informative first (the split rows at the sweep's wide shapes, then the one-pass limits), so a spent budget
# cuts the least.
FWD_SHAPES = ["16384x4096", "8192x8192", "256x128256", "64x262144", "512x65536", "128x151936", "16x128256",
              "1024x32768", "32x32768", "4096x4100", "4096x1024"]
BWD_SHAPES = ["16384x4096", "8192x8192", "4096x4096", "256x128256", "64x262144", "512x65536", "1024x32768",
              "1024x16384", "4096x4100"]
MiB = 2**20


def candidates(n: int, itemsize: int, bwd: bool) -> list[tuple[str, LaunchConfig]]:
    shipped = config_for(n, itemsize, bwd)
    out: list[tuple[str, LaunchConfig]] = [("shipped", shipped)]
    block = triton.next_power_of_2(n)
    if bwd and block * itemsize == 131072:
        # Liger's backward holds a whole 65536-column bf16 row pair in one 32-warp program and ran 1.29x our split
        # rows at 512x65536 (s17): the same one pass past our 64 KB limit, to measure before any rule moves.
        out.append(("1p w32 128KB", LaunchConfig(True, block, 32)))
    if block * itemsize <= 65536:  # one pass, warps around the shipped choice (2 to 64 columns a thread)
        for warps in (4, 8, 16, 32):
            if 2 <= block // (32 * warps) <= 64:
                out.append((f"1p w{warps}", LaunchConfig(True, block, warps)))
                first = 1 << (n.bit_length() - 1)
                second = max(triton.next_power_of_2(n - first), 32 * warps) if n > first else 0
                if second and first + second < block:
                    out.append((f"1p pieces w{warps}", LaunchConfig(True, first, warps, piece_b=second)))
    if shipped.one_pass:  # cache hints and a persistent grid on the shipped layout (no bit changes)
        for load, store in (("", ""), ("evict_first", ""), ("evict_last", ""), ("evict_first", ".cs"), ("", ".cs")):
            cfg = replace(shipped, load_policy=load, store_cm=store)
            out.append((f"hint load:{load or 'default'} store:{store or 'default'}", cfg))
        for per_sm in (2, 4, 8):
            out.append((f"persistent {per_sm}/SM", replace(shipped, programs_per_sm=per_sm)))
    if shipped.one_pass and 2048 < block <= 8192 and not shipped.piece_b:  # two rows a program, more warps
        for warps in (8, 16):
            out.append((f"1p rows2 w{warps}", LaunchConfig(True, block, warps, rows=2)))
    if block <= 2048:  # rows packed per program (the rules pack below 1024 columns)
        for rows, warps in ((2, 4), (4, 8)):
            out.append((f"1p rows{rows} w{warps}", LaunchConfig(True, block, warps, rows=rows)))
    if block * itemsize >= 32768:  # split rows: chunk widths and warps (8 to 64 columns a thread) ...
        group = rules.SPLIT_GROUP_BYTES
        for chunk_bytes in (8192, 16384, 32768):
            chunk = chunk_bytes // itemsize
            for warps in (4, 8, 16):
                if 8 <= chunk // (32 * warps) <= 64:
                    out.append((f"split c{chunk} w{warps}", LaunchConfig(False, chunk, warps, group_bytes=group)))
        # ... the split read once (one cooperative kernel, kernel_coop.py) at the same chunks and warps ...
        for chunk_bytes in (8192, 16384, 32768):
            chunk = chunk_bytes // itemsize
            for warps in (4, 8, 16):
                if 8 <= chunk // (32 * warps) <= 64:
                    out.append((f"coop c{chunk} w{warps}", LaunchConfig(False, chunk, warps, coop=True)))
                    # (prefetch: each program loads its group's next row while this row's group is awaited)
                    out.append((f"coop c{chunk} w{warps} prefetch",
                                LaunchConfig(False, chunk, warps, coop=True, prefetch=True)))
        # ... and, at the shipped chunk, the groups of rows per kernel pair and kernel 2's walk order.
        base = shipped if not shipped.one_pass else _split_default(itemsize)
        for mib in (0, 16, 24, 48):
            label = f"split c{base.block} groups<={mib}MiB" if mib else f"split c{base.block} one group"
            out.append((label, replace(base, group_bytes=mib * MiB)))
        out.append((f"split c{base.block} forward walk", replace(base, reverse=False)))
    seen, unique = set(), []
    for label, cfg in out:  # the shipped config may equal a candidate: time it once
        if cfg not in seen:
            seen.add(cfg)
            unique.append((label, cfg))
    return unique


def _split_default(itemsize: int) -> LaunchConfig:
    return LaunchConfig(False, rules.SPLIT_CHUNK_BYTES // itemsize, rules.SPLIT_WARPS,
                        group_bytes=rules.SPLIT_GROUP_BYTES)


def _inputs(m: int, n: int, dtype: torch.dtype, bwd: bool) -> tuple[torch.Tensor, ...]:
    x = 2 * torch.randn(m, n, device="cuda", dtype=torch.float32)
    if not bwd:
        return (x.to(dtype),)
    return torch.softmax(x, -1).to(dtype), torch.randn(m, n, device="cuda").to(dtype)


def _run(bwd: bool, cfg: LaunchConfig, args: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return launch._softmax_backward_last(*args, cfg) if bwd else launch._softmax_last(args[0], cfg)


def _reference(bwd: bool, args: tuple[torch.Tensor, ...]) -> torch.Tensor:
    if not bwd:
        return torch.softmax(args[0].float(), -1)
    y, dy = (a.float() for a in args)
    return y * (dy - (dy * y).sum(-1, keepdim=True))


def tune_shape(bwd: bool, shape: str, dtype: torch.dtype, records: list[dict], deadline: float,
               labels: tuple[str, ...] = ()) -> None:
    m, n = (int(v) for v in shape.split("x"))
    args = _inputs(m, n, dtype, bwd)
    ref = _reference(bwd, args)
    nbytes = (3 if bwd else 2) * m * n * dtype.itemsize
    direction = "bwd" if bwd else "fwd"
    for label, cfg in candidates(n, dtype.itemsize, bwd):
        if labels and not label.startswith(labels):
            continue
        rec = {"direction": direction, "shape": shape, "dtype": str(dtype).replace("torch.", ""), "label": label,
               "config": asdict(cfg), "describe": cfg.describe()}
        if time.monotonic() > deadline:
            rec["error"] = "skipped: time budget spent"
            records.append(rec)
            continue
        try:
            out = _run(bwd, cfg, args)
            torch.cuda.synchronize()
            err = float((out.float() - ref).abs().max())
            if not err <= 1e-5 + 1.6e-2 * float(ref.abs().max()):
                raise AssertionError(f"wrong result: max abs error {err:.3g}")
            ms = do_bench(lambda cfg=cfg: _run(bwd, cfg, args), warmup=5, rep=20)
            rec.update(us=ms * 1e3, gbps=nbytes / (ms * 1e-3) / 1e9, sol=nbytes / (ms * 1e-3) / 1e9 / COPY_GBPS)
        except Exception as e:  # a config that fails is recorded and skipped, never a crash
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        records.append(rec)
        print(json.dumps(rec), flush=True)


def best_table(records: list[dict]) -> list[str]:
    lines = [f"{'dir':4} {'shape':>11} {'best':34} {'us':>8} {'GB/s':>6} {'SOL':>5} | {'shipped us':>10} "
             f"{'best/shipped':>12}"]
    keys = sorted({(r["direction"], r["shape"]) for r in records}, key=lambda k: (k[0] != "fwd", k[1]))
    for d, s in keys:
        timed = [r for r in records if r["direction"] == d and r["shape"] == s and "us" in r]
        if not timed:
            lines.append(f"{d:4} {s:>11} (nothing timed)")
            continue
        best = min(timed, key=lambda r: r["us"])
        shipped = next((r for r in timed if r["label"] == "shipped"), None)
        ship_us = f"{shipped['us']:10.2f}" if shipped else f"{'-':>10}"
        gain = f"{shipped['us'] / best['us']:12.3f}" if shipped else f"{'-':>12}"
        lines.append(f"{d:4} {s:>11} {best['label'][:34]:34} {best['us']:8.2f} {best['gbps']:6.0f} "
                     f"{best['sol']:5.2f} | {ship_us} {gain}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json_out")
    p.add_argument("--shapes", help="comma-separated MxN for both directions (default: the built-in lists)")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    p.add_argument("--budget-s", type=float, default=60.0, help="stop timing new configs after this many seconds")
    p.add_argument("--only", choices=("fwd", "bwd"))
    p.add_argument("--labels", help="comma-separated label prefixes to time (e.g. shipped,coop); default: all")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("tune_softmax: needs a CUDA GPU", file=sys.stderr)
        return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    deadline = time.monotonic() + a.budget_s
    records: list[dict] = []
    plan = []
    if a.only != "bwd":
        plan += [(False, s) for s in (a.shapes.split(",") if a.shapes else FWD_SHAPES)]
    if a.only != "fwd":
        plan += [(True, s) for s in (a.shapes.split(",") if a.shapes else BWD_SHAPES)]
    for bwd, shape in plan:
        try:
            tune_shape(bwd, shape, dtype, records, deadline, tuple(a.labels.split(",")) if a.labels else ())
        except Exception as e:  # e.g. out of memory for the inputs: recorded, the next shape goes on
            records.append({"direction": "bwd" if bwd else "fwd", "shape": shape, "error": f"{type(e).__name__}: {e}"})
        torch.cuda.empty_cache()
        with open(a.json_out, "w") as f:  # written as it goes: a killed run keeps what it measured
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                       "records": records}, f, indent=1)
    print("\n".join(best_table(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
