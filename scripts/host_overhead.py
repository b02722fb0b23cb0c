"""Host time of one eager call (no graph) per implementation, with and without ridgeline's fast launch path.

Usage (on the GPU): python scripts/host_overhead.py OUT.json
Explains cold-eager figures: when a call's host time exceeds the L2 flush that do_bench runs before it, the
GPU idles inside the timed region and cold-eager reports host time, not kernel time.
"""

from __future__ import annotations

import functools
import json
import os
import sys

import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.harness.timing import time_host

SHAPES = [(1, 4096), (1024, 4096), (4096, 4096)]


def main() -> None:
    out = []
    for op in ("rmsnorm", "fused_add_rmsnorm"):
        spec = registry.get_spec(op)
        for impl in registry.implementations(op):
            if not impl.available:
                continue
            modes = ["1", "0"] if impl.source == "ours" else ["1"]
            for mode in modes:
                os.environ["RIDGELINE_FAST_LAUNCH"] = mode
                for shape in SHAPES:
                    inputs = spec.make_inputs(Case(shape, torch.bfloat16), "cuda", 0)
                    args = [inputs[k] for k in inputs]
                    t = time_host(functools.partial(impl.fn, *args), 0.5)
                    name = impl.name + ("" if mode == "1" or impl.source != "ours" else " (triton launch)")
                    out.append({"op": op, "impl": name, "shape": list(shape), "host_us": t.median_us, "n": t.n})
                    print(f"{op:18} {name:32} {shape[0]:>5}x{shape[1]:<5} {t.median_us:8.2f} us")
    from triton import knobs

    from ridgeline.ops.rmsnorm import launch as k

    diag = {"fast_launches": k._LAUNCHER.fast_launches, "fallback_reason": k._LAUNCHER.fallback_reason,
            "launch_enter_hook": repr(knobs.runtime.launch_enter_hook)}
    print(diag)
    with open(sys.argv[1], "w") as f:
        json.dump({"diagnostics": diag, "results": out}, f, indent=1)


if __name__ == "__main__":
    main()
