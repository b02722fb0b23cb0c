"""Collectives on several GPUs: `ridgeline comm` (timing and exact verification of torch.distributed's
collectives, nccl-tests' algbw/busbw) and ridgeline's own small-message all-reduce.

>>> from ridgeline.comm import all_reduce            # doctest: +SKIP
>>> y = all_reduce(x, algorithm="oneshot")            # doctest: +SKIP   (every rank, same size; <= 4 MiB)

The Typer command lives in :mod:`ridgeline.comm.cli` (``comm_command``); see docs/perf/collectives.md.
"""

from __future__ import annotations

from .allreduce import ALGORITHMS, MAX_BYTES, all_reduce, release_workspaces, workspace
from .collectives import OPS, bus_factor
from .env import NO_MULTICAST, apply_no_multicast, multicast_problems

__all__ = [
    "ALGORITHMS",
    "MAX_BYTES",
    "NO_MULTICAST",
    "OPS",
    "all_reduce",
    "apply_no_multicast",
    "bus_factor",
    "multicast_problems",
    "release_workspaces",
    "workspace",
]
