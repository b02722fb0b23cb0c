"""Tuning driver for the attention launch rules (ridgeline/ops/attention/rules.py), for the H200.

Times candidate tiles per shape with triton.testing.do_bench (median, cold L2 between calls) for the forward and
for each backward kernel (dK/dV and dQ, the other kernel at its rule's config), prints the best config per shape
last and writes every measurement to JSON. A config that fails to compile or run (out of shared memory, too many
registers) is recorded with its error and skipped.

Each kernel's current rule config is timed first, so a budget that runs out still leaves the rule beside what was
timed (s18's D=256 dK/dV ran out before it).

  python3 scripts/device/tune_attention.py OUT.json [--budget-s 60] [--head-dims 64 256] [--kernels dkdv dq]
                                          [--tma-bwd]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from ridgeline.ops.attention.launch import _backward, _forward  # noqa: E402
from ridgeline.ops.attention.rules import AttnConfig, config_for  # noqa: E402
from ridgeline.ops.attention.spec import visible_pairs  # noqa: E402

# (B, S, Hq, Hkv, D, causal)
SHAPES = [(4, 4096, 32, 8, 128, False), (4, 4096, 32, 8, 128, True), (4, 4096, 32, 32, 64, True),
          (4, 4096, 16, 16, 256, True)]
FWD = [AttnConfig(m, n, w, s) for m, n, w, s in [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (128, 64, 8, 4),
                                                  (128, 128, 8, 2), (64, 64, 4, 3), (64, 64, 8, 2), (128, 32, 8, 3)]]
# The TMA candidates (K/V through tensor descriptors): spill-free at sm_90 (scripts/spills_sm90.py --try ...t):
# D=128 128x64 w8 s3 at 167 registers (pointer loads: 191), 128x128 w8 s2-3 at 237; D=64 128x64 w8 s2 at 128
# (two programs an SM); D=256 64x64 w8 s2 at 192 (pointer loads: 218).
FWD += [AttnConfig(m, n, w, s, tma=True) for m, n, w, s in [(128, 64, 8, 3), (128, 64, 8, 2), (128, 128, 8, 3),
                                                            (128, 128, 8, 2), (64, 64, 8, 2), (64, 64, 4, 3)]]
DKDV = [AttnConfig(m, n, w, s) for m, n, w, s in [(64, 128, 8, 2), (64, 64, 8, 2), (64, 64, 4, 3), (64, 32, 8, 2),
                                                   (32, 64, 4, 3), (128, 64, 8, 2), (32, 128, 8, 2),
                                                   # spill-free on sm_90 (scripts/spills_sm90.py) and D=256's wgmma one
                                                   (32, 128, 8, 3), (16, 128, 8, 2), (16, 32, 8, 2), (16, 64, 8, 2)]]
DQ = [AttnConfig(m, n, w, s) for m, n, w, s in [(128, 64, 8, 2), (128, 32, 8, 3), (64, 64, 4, 3), (64, 32, 4, 2),
                                                 (128, 64, 8, 3), (64, 64, 8, 2)]]
# --tma-bwd (s38): each backward kernel's rule tile with its streamed tiles through TMA and by pointer loads, and
# the tiles TMA's lower register use opens up (sm_90 spills, scripts/spills_sm90.py, full / causal: D=128 dK/dV
# 32x64 w4 s3 412/492 B by pointers, 20/44 B through TMA; 64x64 w8 s2 t 12/0 B; 64x128 w8 s2 t 108/172 B; D=256
# dK/dV 64x64 w8 s2 548/572 B -> 136/184 B, 32x64 w8 s2 t 12/24 B, 64x32 w8 s2 t 0 B; every dQ candidate below 0 B
# but D=256 64x64 w4).
TMA_BWD = {  # D: (dK/dV candidates, dQ candidates) through TMA, after the rule's tile both ways; D=256 runs
    # first, then 128 and 64 (the budget may end the grid: D=256 is where the backward trails the flash backend)
    256: ([AttnConfig(*c, tma=True) for c in [(64, 64, 8, 2), (32, 64, 8, 2), (64, 32, 8, 2)]],
          [AttnConfig(*c, tma=True) for c in [(128, 32, 8, 3), (64, 64, 4, 2)]]),
    128: ([AttnConfig(*c, tma=True) for c in [(32, 64, 4, 3), (64, 64, 8, 2), (64, 128, 8, 2)]],
          [AttnConfig(128, 64, 8, 3, tma=True)]),
    64: ([AttnConfig(32, 64, 4, 3, tma=True)], [AttnConfig(64, 64, 4, 3, tma=True)]),
}


def _knob_grid(rule: AttnConfig) -> list[AttnConfig]:
    """The rule's tile without and with the scale folded into the FMA (s23: the lazy rescale, tried beside it,
    lost 6-19% at every shape: git show c9650d2:docs/results/h200-tune-attention-knobs-s23.json)."""
    fold = dataclasses.replace(rule, fold=not rule.fold)
    return [fold, rule, fold]


def _call(fn, *args):
    return lambda: fn(*args)


def _rule_first(kernel: str, d: int, causal: bool, candidates: list[AttnConfig],
                twin: bool = False) -> list[AttnConfig]:
    """The rule's config (and with `twin` the same tile with TMA the other way), then the other candidates."""
    rule = config_for(kernel, d, causal, False)
    head = [rule, dataclasses.replace(rule, tma=not rule.tma)] if twin else [rule]
    return [*head, *(c for c in candidates if c not in head)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--head-dims", type=int, nargs="*", help="only the shapes of these head dims (default: all)")
    ap.add_argument("--kernels", nargs="*", choices=["fwd", "dkdv", "dq"], help="only these kernels (default: all)")
    ap.add_argument("--tma-bwd", action="store_true",
                    help="the backward kernels' TMA candidates (TMA_BWD) instead of their tile grids")
    ap.add_argument("--fwd-knobs", action="store_true",
                    help="the forward's softmax knob instead of its tile grid: the rule's tile as is and with the "
                         "scale folded into the FMA, twice each, alternating")
    args = ap.parse_args()
    t_end = time.time() + args.budget_s
    records, best = [], []
    for b, s, hq, hkv, d, causal in sorted(SHAPES, key=lambda x: -x[4]) if args.tma_bwd else SHAPES:
        if args.head_dims and d not in args.head_dims:
            continue
        q = torch.randn(b, s, hq, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
        right = 0 if causal else -1
        sc = d ** -0.5
        flops = 4 * b * hq * d * visible_pairs(s, s, -1, right)
        out, lse = _forward(q, k, v, None, None, s, s, sc, -1, right)
        dout = torch.randn_like(out)
        label = f"B{b} S{s} H{hq}/{hkv} D{d}{' causal' if causal else ''}"
        default_kv, default_q = config_for("dkdv", d, causal, False), config_for("dq", d, causal, False)
        fwd_args = (q, k, v, None, None, s, s, sc, -1, right, False)
        bwd_args = (q, k, v, out, dout, lse, None, None, None, s, s, sc, -1, right)
        wanted = set(args.kernels or ("fwd", "dkdv", "dq"))
        jobs = []
        if "fwd" in wanted:
            if args.fwd_knobs:  # (repeats: the knob's effect is a few percent, near do_bench's run-to-run spread)
                rule = config_for("fwd", d, causal, False)
                jobs += [("fwd", c, _call(_forward, *fwd_args, c)) for c in [rule, *_knob_grid(rule)]]
            else:
                jobs += [("fwd", c, _call(_forward, *fwd_args, c)) for c in _rule_first("fwd", d, causal, FWD)]
        kv_grid, q_grid = TMA_BWD[d] if args.tma_bwd else (DKDV, DQ)
        if args.tma_bwd:  # the whole backward with TMA in both kernels and by pointer loads in both (the one that
            # is the rules' pair is the rule rows below: not timed twice)
            for way in (True, False):
                pair = (dataclasses.replace(default_kv, tma=way), dataclasses.replace(default_q, tma=way))
                if pair != (default_kv, default_q):
                    jobs.append(("bwd", pair[0], _call(_backward, *bwd_args, pair)))
        if "dkdv" in wanted:
            jobs += [("dkdv", c, _call(_backward, *bwd_args, (c, default_q)))
                     for c in _rule_first("dkdv", d, causal, kv_grid, args.tma_bwd)]
        if "dq" in wanted:
            jobs += [("dq", c, _call(_backward, *bwd_args, (default_kv, c)))
                     for c in _rule_first("dq", d, causal, q_grid, args.tma_bwd)]
        per: dict[str, tuple[float, str]] = {}
        for kernel, cfg, fn in jobs:
            rec = {"shape": label, "kernel": kernel, "config": cfg.describe()}
            if time.time() > t_end:
                rec["skipped"] = "budget"
                records.append(rec)
                continue
            try:
                ms = triton.testing.do_bench(fn, warmup=5, rep=40)
                work = flops * (2.5 if kernel != "fwd" else 1.0)
                rec.update(ms=ms, tflops=work / ms / 1e9)
                if kernel not in per or ms < per[kernel][0]:
                    per[kernel] = (ms, cfg.describe())
            except Exception as e:  # a config the GPU refuses is a result, not a crash
                rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
                torch.cuda.synchronize()
            records.append(rec)
            print(json.dumps(rec), flush=True)
        for kernel, (ms, desc) in per.items():
            best.append((label, kernel, ms, desc))
        del q, k, v, out, lse, dout
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps({"records": records, "best": best}, indent=1))
    print("\nbest config per shape (backward kernels timed as the whole backward; TFLOP/s with the 2.5x count)")
    for label, kernel, ms, desc in best:
        print(f"{label:32s} {kernel:5s} {ms:8.3f} ms  {desc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
