"""Which launch config torch.compile's autotuner picks for the RMSNorm peers, and what it measured for each candidate.

Usage (on the GPU): python scripts/device/inductor_configs.py OP MxN [MxN ...]
Inductor benchmarks every candidate config of a generated kernel the first time it runs and keeps the fastest; its
debug log holds each candidate's time, registers and spills. This prints those lines for each shape (one compile
per shape, as the bench's peer does), so a figure of torch.compile's that moves between runs can be traced to the
config it chose there.
"""

from __future__ import annotations

import logging
import sys

import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case


def main() -> None:
    op, shapes = sys.argv[1], [tuple(int(v) for v in s.split("x")) for s in sys.argv[2:]]
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("    %(message)s"))
    log = logging.getLogger("torch._inductor.runtime.triton_heuristics")
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    spec, impl = registry.get_spec(op), registry.resolve(op, "torch-compile")
    for shape in shapes:
        print(f"== {op} {shape[0]}x{shape[1]} bf16", flush=True)
        inputs = spec.make_inputs(Case(shape, torch.bfloat16), torch.device("cuda"), 0)
        spec.call(impl.fn, inputs)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
