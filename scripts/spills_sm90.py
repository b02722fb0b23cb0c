"""Registers, spills and shared memory of every attention kernel at the tile configs the GPU launch rules pick,
compiled ahead of time for sm_90 (no GPU needed).

Usage: python scripts/spills_sm90.py [--d 64 128 256] [--kernel fwd dkdv dq] [--try KERNEL:BMxBNxWxS[t] ...]

The launches are recorded the way `ridgeline profile` records them (`capture_call` on meta inputs with the
package's `gpu_rules` hook: exactly the arguments launch.py passes on a GPU), for B1 S4096 H8 bf16, causal and
not, at each D; then `ridgeline.profile.aot.compile_launches` compiles each distinct specialization with Triton's
bundled ptxas (in a clean child process where Triton's interpreter is on) and `kernel_facts` reads the ptxas
report. `--try dkdv:64x64x8x2` also compiles that config (BLOCK_M x BLOCK_N x warps x stages) in place of the
rule's, for every recorded dK/dV launch: candidates for rules.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import torch

from ridgeline.profile.aot import _compile_key, compile_in_child, compile_launches, interpreter_on
from ridgeline.profile.launches import TritonLaunch, capture_call

KERNELS = {"_attn_fwd": "fwd", "_attn_bwd_dkdv": "dkdv", "_attn_bwd_dq": "dq"}  # (the delta preprocess: no tiles)


def recorded_launches(dims: list[int], kernels: list[str]) -> list[tuple[str, TritonLaunch]]:
    """(label, launch) of every tiled attention kernel at each D, causal or not, as the GPU rules configure it."""
    out = []
    for d in dims:
        for variant in ("", "causal"):
            for op in ("attention", "attention_bwd"):
                call = capture_call(op, "ridgeline", (1, 4096, 8, 8, d), torch.bfloat16, variant)
                for la in call.launches:
                    kind = KERNELS.get(la.name)
                    if kind in kernels:
                        out.append((f"{kind:4} D={d:<3} {'causal' if variant else 'full':6}", la))
    return out


def with_config(launch: TritonLaunch, block_m: int, block_n: int, warps: int, stages: int,
                tma: bool = False) -> TritonLaunch:
    extra = {"TMA": True} if tma else {}
    return dataclasses.replace(launch, args={**launch.args, "BLOCK_M": block_m, "BLOCK_N": block_n, **extra},
                               num_warps=warps, num_stages=stages,
                               config=f"BLOCK_M={block_m} BLOCK_N={block_n} warps={warps} stages={stages}"
                               + (" tma" if tma else ""))


def compile_all(launches: list[TritonLaunch], out_dir: Path) -> list[dict]:
    """Each launch's kernel facts (one compile per distinct specialization, as the profiler does)."""
    if interpreter_on():
        kernels = compile_in_child(launches, 90, out_dir)
        assert kernels is not None, "a recorded launch could not travel to the compiler child"
    else:
        kernels = compile_launches(launches, 90, out_dir)
    # One entry per distinct specialization (the profiler's own key), in first-seen order: map launches onto them.
    keys = list(dict.fromkeys(_compile_key(la) for la in launches))
    by_key = dict(zip(keys, kernels, strict=True))
    return [by_key[_compile_key(la)] for la in launches]


def config_of(la: TritonLaunch) -> str:
    tma = " tma" if la.args.get("TMA") else ""
    return f"{la.args['BLOCK_M']}x{la.args['BLOCK_N']} w{la.num_warps} s{la.num_stages}{tma}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", nargs="*", type=int, default=[64, 128, 256])
    ap.add_argument("--kernel", nargs="*", default=["fwd", "dkdv", "dq"], choices=["fwd", "dkdv", "dq"])
    ap.add_argument("--try", dest="tries", nargs="*", default=[], metavar="KERNEL:BMxBNxWxS[t]",
                    help="a trailing t: the TMA candidate (the streamed tiles through tensor descriptors)")
    args = ap.parse_args()
    rows = recorded_launches(args.d, args.kernel)
    extra = []
    for t in args.tries:
        kind, cfg = t.split(":")
        tma = cfg.endswith("t")
        bm, bn, w, s = (int(x) for x in cfg.rstrip("t").split("x"))
        extra += [(label + " try", with_config(la, bm, bn, w, s, tma)) for label, la in rows if label.startswith(kind)]
    rows += extra
    with tempfile.TemporaryDirectory() as tmp:
        facts = compile_all([la for _, la in rows], Path(tmp))
    print(f"{'kernel / case':22} {'config':16} {'regs':>4} {'spill st/ld B':>14} {'smem B':>7} {'occupancy':>9}")
    for (label, la), f in zip(rows, facts, strict=True):
        occ = (f.get("occupancy") or {}).get("occupancy")
        occ_text = f"{occ:.0%}" if isinstance(occ, float) else "?"
        print(f"{label:22} {config_of(la):16} {f['registers']!s:>4} "
              f"{f['spill_stores_bytes']!s:>6}/{f['spill_loads_bytes']!s:<7} {f['shared_bytes']!s:>7} {occ_text:>9}")


if __name__ == "__main__":
    main()
