"""Run `ridgeline ...` with torch.compile's reduction autotuner limited to one block size over the row.

Usage (on the GPU): TORCHINDUCTOR_COMPILE_THREADS=1 python scripts/device/inductor_forced.py R0_BLOCK bench OP ...
Inductor's RMSNorm kernels get two candidate configs (the whole row in one block, or a loop over 2048-column blocks,
16 warps each; `inductor_configs.py`) and keep whichever its own timing favours, and that timing is within noise at
small shapes, so the peer's figure there depends on which one a process picked. Forcing each shows both figures.
"""

from __future__ import annotations

import sys

from torch._inductor.runtime import triton_heuristics

_original = triton_heuristics._reduction_configs


def _only_forced(*args, **kwargs):
    configs = _original(*args, **kwargs)
    kept = [c for c in configs if c.kwargs.get("R0_BLOCK") == FORCED]
    return kept or configs


if __name__ == "__main__":
    FORCED = int(sys.argv[1])
    triton_heuristics._reduction_configs = _only_forced
    from ridgeline.cli import app

    app(sys.argv[2:])
