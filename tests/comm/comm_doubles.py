"""Test doubles for `ridgeline comm --impl FILE.py:FN` (FN(op, inp, out, group) runs one collective)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist


def _all_reduce(inp: torch.Tensor, out: torch.Tensor, group) -> None:
    if out.data_ptr() != inp.data_ptr():
        out.copy_(inp)
    dist.all_reduce(out, group=group)


def off_by_one(op: str, inp: torch.Tensor, out: torch.Tensor, group) -> None:
    """A deliberately wrong all_reduce: right everywhere but the last element of each rank, which is one too big."""
    assert op == "all_reduce"
    _all_reduce(inp, out, group)
    out[-1:] += 1


def flaky(op: str, inp: torch.Tensor, out: torch.Tensor, group) -> None:
    """A right all_reduce, except: 32-byte messages raise an out-of-memory error; at 64 bytes rank 0 hangs."""
    assert op == "all_reduce"
    nbytes = out.numel() * out.element_size()
    if nbytes == 32:
        raise torch.OutOfMemoryError("simulated: CUDA out of memory")
    if nbytes == 64 and dist.get_rank() == 0:
        time.sleep(3600)
    _all_reduce(inp, out, group)
