"""The collectives `ridgeline comm` measures: sizes, bus factors, buffers, calls, and exact verification.

Sizes follow nccl-tests: `size` is the bytes of the larger buffer (all_gather: the gathered output;
reduce_scatter and all_to_all: the full input), the element count is rounded down to a multiple of the world
size for the ops that split it; algbw = size / time; busbw = algbw * factor(n).

Inputs are small integers (value 1..m at element i of rank r, from a fixed hash of i and r), with m chosen so
that every partial sum of n ranks is an integer the dtype holds exactly (bf16: <= 256, fp16: <= 2048, ...): any
order of summation gives the exact result, so every element can be compared for equality, and `wrong` counts
elements that differ (nccl-tests' #wrong). Outputs are poisoned with 0 (never a right value) before a checked call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv")
ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
           "alltoall": "all_to_all", "send_recv": "sendrecv", "send/recv": "sendrecv", "bcast": "broadcast"}
PLACEMENTS = ("in-place", "out-of-place")
# What torch.distributed offers (its own API: all_reduce and broadcast work in place only; NCCL's all-to-all and
# send/recv have no in-place form).
NATIVE_PLACEMENTS = {
    "all_reduce": ("in-place",), "all_gather": PLACEMENTS, "reduce_scatter": PLACEMENTS,
    "all_to_all": ("out-of-place",), "broadcast": ("in-place",), "sendrecv": ("out-of-place",),
}
SPLIT = {"all_gather", "reduce_scatter", "all_to_all"}
REDUCING = {"all_reduce", "reduce_scatter"}

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64,
          "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64}
_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                  "float64": "fp64", "double": "fp64"}
# The largest integer below which every integer is exact in the dtype.
EXACT = {torch.bfloat16: 256, torch.float16: 2048, torch.float32: 1 << 24, torch.float64: 1 << 53,
         torch.int8: 127, torch.uint8: 255, torch.int32: (1 << 31) - 1, torch.int64: (1 << 62)}


def parse_op(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in OPS:
        raise ValueError(f"--ops: unknown collective {name!r}; expected one of {', '.join(OPS)}")
    return key


def parse_dtype(name: str) -> str:
    key = name.strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise ValueError(f"--dtype: unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return key


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' factor from algbw to busbw (what a link must carry, comparable to its bandwidth)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in SPLIT:
        return (n - 1) / n
    return 1.0


def element_count(op: str, size: int, elem: int, n: int) -> int:
    """Elements of the larger buffer for `size` bytes (0: too small for one element per rank)."""
    count = size // elem
    return count - count % n if op in SPLIT else count


def modulus(op: str, dtype: torch.dtype, n: int) -> int:
    """Inputs are 1..m: m*n (a reduction of n ranks) or m stays exact in the dtype."""
    bound = EXACT[dtype]
    m = bound // n if op in REDUCING else bound
    return max(1, min(m, 1 << 20))


def pattern(rank: int, index: torch.Tensor, m: int) -> torch.Tensor:
    """Rank `rank`'s input value at global element `index` (int64), in 1..m."""
    # A multiplicative hash (high bits: an LCG's low bits repeat), so a shifted, swapped or stale chunk differs
    # almost everywhere. int64 holds index * 1103515245 up to 8e9 elements (64 GiB of bf16).
    return ((index * 1103515245 + 12345 + rank * 2654435761) >> 8) % m + 1


CHUNK = 1 << 25  # elements per step when filling or checking (bounded temporaries at 8 GiB)


def fill(t: torch.Tensor, rank: int, m: int, offset: int = 0) -> None:
    """t[j] = pattern(rank, offset + j) (t contiguous, 1-D)."""
    for s in range(0, t.numel(), CHUNK):
        e = min(t.numel(), s + CHUNK)
        idx = torch.arange(offset + s, offset + e, device=t.device, dtype=torch.int64)
        t[s:e].copy_(pattern(rank, idx, m))


def expected(op: str, rank: int, n: int, count: int, m: int, start: int, stop: int, device) -> torch.Tensor:
    """Exact int64 values of this rank's output elements [start, stop) (`count` = elements of the larger buffer;
    broadcast from rank 0, sendrecv from rank-1)."""
    j = torch.arange(start, stop, device=device, dtype=torch.int64)
    chunk = count // n if op in SPLIT else count
    if op == "all_reduce":
        return sum(pattern(q, j, m) for q in range(n))
    if op == "reduce_scatter":
        return sum(pattern(q, rank * chunk + j, m) for q in range(n))
    if op == "all_gather":
        src = j // chunk
        return sum(torch.where(src == q, pattern(q, j - q * chunk, m), 0) for q in range(n))
    if op == "all_to_all":
        src = j // chunk
        return sum(torch.where(src == q, pattern(q, rank * chunk + (j - q * chunk), m), 0) for q in range(n))
    if op == "broadcast":
        return pattern(0, j, m)
    if op == "sendrecv":
        return pattern((rank - 1) % n, j, m)
    raise ValueError(op)


def count_wrong(op: str, out: torch.Tensor, rank: int, n: int, count: int, m: int) -> int:
    wrong = 0
    for s in range(0, out.numel(), CHUNK):
        e = min(out.numel(), s + CHUNK)
        exp = expected(op, rank, n, count, m, s, e, out.device)
        got = out[s:e]
        wrong += int((got.double() != exp.double()).sum()) if got.is_floating_point() else int((got != exp).sum())
    return wrong


@dataclass
class Buffers:
    """One case's tensors: `inp` what this rank sends, `out` what it receives (they alias for in place)."""

    op: str
    placement: str
    count: int  # elements of the larger buffer
    inp: torch.Tensor
    out: torch.Tensor
    m: int

    def prepare(self, rank: int, n: int) -> None:
        """Poison the output, then write this rank's input pattern (the order matters when they alias)."""
        self.out.zero_()
        fill(self.inp, rank, self.m)  # (every op's input pattern is indexed from 0 on its own rank)

    def wrong(self, rank: int, n: int) -> int:
        return count_wrong(self.op, self.out, rank, n, self.count, self.m)


def make_buffers(op: str, placement: str, count: int, dtype: torch.dtype, device, rank: int, n: int) -> Buffers:
    m = modulus(op, dtype, n)
    chunk = count // n if op in SPLIT else count
    if op == "all_gather":
        out = torch.empty(count, dtype=dtype, device=device)
        inp = out.narrow(0, rank * chunk, chunk) if placement == "in-place" else torch.empty(chunk, dtype=dtype,
                                                                                               device=device)
    elif op == "reduce_scatter":
        inp = torch.empty(count, dtype=dtype, device=device)
        out = inp.narrow(0, rank * chunk, chunk) if placement == "in-place" else torch.empty(chunk, dtype=dtype,
                                                                                               device=device)
    elif placement == "in-place":
        inp = out = torch.empty(count, dtype=dtype, device=device)
    else:
        inp = torch.empty(count, dtype=dtype, device=device)
        out = torch.empty(count, dtype=dtype, device=device)
    return Buffers(op, placement, count, inp, out, m)


def native_call(b: Buffers, group, rank: int, n: int) -> Callable[[], None]:
    """The torch.distributed call of this case (the process group's backend: NCCL on CUDA, gloo on CPU)."""
    op = b.op
    if op == "all_reduce":
        return lambda: dist.all_reduce(b.out, group=group)
    if op == "all_gather":
        return lambda: dist.all_gather_into_tensor(b.out, b.inp, group=group)
    if op == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(b.out, b.inp, group=group)
    if op == "all_to_all":
        return lambda: dist.all_to_all_single(b.out, b.inp, group=group)
    if op == "broadcast":
        src = dist.get_global_rank(group, 0) if group is not None else 0
        return lambda: dist.broadcast(b.out, src=src, group=group)
    if op == "sendrecv":
        peer_to = dist.get_global_rank(group, (rank + 1) % n) if group is not None else (rank + 1) % n
        peer_from = dist.get_global_rank(group, (rank - 1) % n) if group is not None else (rank - 1) % n

        def call() -> None:
            ops = [dist.P2POp(dist.isend, b.inp, peer_to, group), dist.P2POp(dist.irecv, b.out, peer_from, group)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()

        return call
    raise ValueError(op)


def ridgeline_call(b: Buffers, algorithm: str, group) -> Callable[[], None]:
    from ridgeline.comm.allreduce import all_reduce

    if b.op != "all_reduce":
        raise ValueError(f"ridgeline-{algorithm} implements all_reduce only")
    return lambda: all_reduce(b.inp, out=b.out, algorithm=algorithm, group=group)
