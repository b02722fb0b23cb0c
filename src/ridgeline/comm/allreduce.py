"""ridgeline's own all-reduce (sum) for small messages: one-shot and two-shot over peer-accessible buffers.

    from ridgeline.comm import all_reduce
    y = all_reduce(x)                              # out of place, one-shot
    all_reduce(x, out=x, algorithm="twoshot")      # in place

Collective: every rank of the group calls it with the same size and dtype, in the same order (the first call
also builds the group's workspace, itself collective). Messages up to MAX_BYTES (4 MiB) only: above that NCCL's
ring/tree wins and the buffers would grow; the call refuses (ValueError). Works in CUDA graphs (fixed buffers).

Where the peer buffers come from:
- CUDA: `torch.distributed._symmetric_memory` (empty + rendezvous; `buffer_ptrs` are the peers' buffers mapped
  into this process). Multicast is never used: the kernels only load, store and CAS through these pointers, and
  `ridgeline.comm.env` turns NVLS/multicast off before any process group exists.
- CPU (gloo groups): one shared-memory file per rank, mapped by every rank, so the same Triton kernels run under
  Triton's interpreter across real processes (what CI exercises; see docs/perf/collectives.md).
"""

from __future__ import annotations

import mmap
import os
import secrets
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ridgeline.comm.kernel import FLAG_BYTES, MAX_PROGRAMS, MAX_WORLD, one_shot_kernel, two_shot_kernel
from ridgeline.lib.fastlaunch import CachedLauncher

MAX_BYTES = 4 << 20
ALGORITHMS = ("oneshot", "twoshot")
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
BUFFER_BYTES = FLAG_BYTES + MAX_BYTES

# Launch rules, first match wins: (message bytes at most, programs at most, num_warps, why). Guesses from the
# one-GPU facts (a program's barrier is n CAS round trips over NVLink, ~1-2 us; below ~32 KiB one program's
# loads are fewer than its barrier's latency): to be settled on 2+ GPUs with `ridgeline comm --impl ...`.
RULES: tuple[tuple[int, int, int, str], ...] = (
    (32 << 10, 1, 4, "a few 16-byte loads per thread: more programs only add barrier signals"),
    (256 << 10, 4, 8, "latency-bound: a few programs overlap their peers' reads"),
    (1 << 20, 16, 8, "n x size bytes cross the links: spread the loads over more SMs"),
    (MAX_BYTES, MAX_PROGRAMS, 16, "bandwidth-bound: the most programs the flag region holds"),
)


def rule_for(nbytes: int) -> tuple[int, int]:
    """(programs at most, num_warps) for a message of `nbytes`."""
    for limit, programs, warps, _why in RULES:
        if nbytes <= limit:
            return programs, warps
    raise ValueError(f"x: {nbytes} bytes is above ridgeline's all-reduce limit of {MAX_BYTES} bytes")


@dataclass
class Workspace:
    """One group's peer-accessible buffers: `table` (int64, on the device) holds every rank's buffer address."""

    rank: int
    world: int
    device: torch.device
    table: torch.Tensor
    kind: str  # "symmetric-memory" or "shared-memory"
    keep: list[Any] = field(default_factory=list)  # what keeps the mappings alive


_WORKSPACES: dict[tuple, Workspace] = {}


def _group_key(group: Any, device: torch.device) -> tuple:
    return (id(group) if group is not None else None, device.type, device.index)


def workspace(device: torch.device, group: Any = None) -> Workspace:
    """The group's workspace on `device`, built on first use (a collective call: every rank at once)."""
    key = _group_key(group, device)
    ws = _WORKSPACES.get(key)
    if ws is None:
        if not dist.is_initialized():
            raise ValueError("group: torch.distributed is not initialized; call init_process_group first")
        world = dist.get_world_size(group)
        if world > MAX_WORLD:
            raise ValueError(f"group: {world} ranks; ridgeline's all-reduce handles at most {MAX_WORLD} (one node)")
        ws = _symmetric(device, group) if device.type == "cuda" else _shared(device, group)
        _WORKSPACES[key] = ws
    return ws


def release_workspaces() -> None:
    """Drop every workspace (before destroy_process_group)."""
    _WORKSPACES.clear()


def _symmetric(device: torch.device, group: Any) -> Workspace:
    import torch.distributed._symmetric_memory as symm_mem

    if not hasattr(symm_mem, "empty"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.distributed._symmetric_memory.empty")
    pg = group if group is not None else dist.group.WORLD
    name = pg.group_name
    enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
    if enable is not None:  # needed by torch 2.6-2.7, a deprecated no-op since
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            enable(name)
    buf = symm_mem.empty(BUFFER_BYTES, dtype=torch.uint8, device=device)
    buf[:FLAG_BYTES].zero_()
    handle = symm_mem.rendezvous(buf, name)
    table = torch.tensor([int(p) for p in handle.buffer_ptrs], dtype=torch.int64, device=device)
    torch.cuda.synchronize(device)
    dist.barrier(group=group)  # every rank's flags are zero before anyone signals
    return Workspace(dist.get_rank(group), dist.get_world_size(group), device, table, "symmetric-memory",
                     [buf, handle])


def _shared(device: torch.device, group: Any) -> Workspace:
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    token = [secrets.token_hex(6) if rank == 0 else None]
    src = dist.get_global_rank(group, 0) if group is not None else 0
    dist.broadcast_object_list(token, src=src, group=group)
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    paths = [os.path.join(folder, f"ridgeline-comm-{token[0]}-{p}") for p in range(world)]
    fd = os.open(paths[rank], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, BUFFER_BYTES)  # a new file reads as zeros: the flags start clear
    finally:
        os.close(fd)
    dist.barrier(group=group)
    maps = []
    for path in paths:
        fd = os.open(path, os.O_RDWR)
        try:
            maps.append(mmap.mmap(fd, BUFFER_BYTES))
        finally:
            os.close(fd)
    dist.barrier(group=group)
    os.unlink(paths[rank])  # the mappings stay valid; nothing is left behind in /dev/shm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # frombuffer on a writable mmap warns about non-writability
        views = [torch.frombuffer(m, dtype=torch.uint8) for m in maps]
    table = torch.tensor([v.data_ptr() for v in views], dtype=torch.int64)
    return Workspace(rank, world, device, table, "shared-memory", [maps, views])


_ONE = CachedLauncher(one_shot_kernel)
_TWO = CachedLauncher(two_shot_kernel)


def _validate(x: Any, out: Any, algorithm: str) -> None:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in DTYPES:
        raise TypeError(f"x: expected dtype bfloat16, float16 or float32, got {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"x: expected a contiguous tensor, got strides {tuple(x.stride())}")
    nbytes = x.numel() * x.element_size()
    if nbytes > MAX_BYTES:
        raise ValueError(f"x: {nbytes} bytes is above ridgeline's all-reduce limit of {MAX_BYTES} bytes (4 MiB); "
                         "use torch.distributed.all_reduce")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out: expected a torch.Tensor, got {type(out).__name__}")
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
            raise ValueError(f"out: expected shape {tuple(x.shape)}, {x.dtype} on {x.device}, got "
                             f"{tuple(out.shape)}, {out.dtype} on {out.device}")
        if not out.is_contiguous():
            raise ValueError(f"out: expected a contiguous tensor, got strides {tuple(out.stride())}")


def all_reduce(x: torch.Tensor, *, algorithm: str = "oneshot", out: torch.Tensor | None = None,
               group: Any = None) -> torch.Tensor:
    """Sum of `x` over the ranks of `group` (default: the world), into `out` (default: a new tensor; `out=x`
    is in place). Same bits on every rank. Refuses messages above MAX_BYTES."""
    _validate(x, out, algorithm)
    if out is None:
        out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    ws = workspace(x.device, group)
    if ws.device != x.device:
        raise ValueError(f"x: on {x.device}, but the group's workspace is on {ws.device}")
    if x.is_cuda and x.get_device() != torch.cuda.current_device():
        with torch.cuda.device(x.device):  # Triton compiles for and launches on the current device
            return _launch(x, out, ws, n, algorithm)
    return _launch(x, out, ws, n, algorithm)


def _launch(x: torch.Tensor, out: torch.Tensor, ws: Workspace, n: int, algorithm: str) -> torch.Tensor:
    programs, warps = rule_for(n * x.element_size())
    block = warps * 32 * (16 // x.element_size())  # one 16-byte vector per thread per step
    if algorithm == "oneshot":
        span = triton_cdiv(triton_cdiv(n, programs), block) * block
        grid = triton_cdiv(n, span)
        _ONE.launch(grid, (x, out, ws.table, n, span, ws.rank),
                    {"WORLD": ws.world, "BLOCK": block, "DATA_OFF": FLAG_BYTES}, warps)
    else:
        shard = triton_cdiv(n, ws.world)
        span = triton_cdiv(triton_cdiv(shard, programs), block) * block
        grid = triton_cdiv(shard, span)
        _TWO.launch(grid, (x, out, ws.table, n, shard, span, ws.rank),
                    {"WORLD": ws.world, "BLOCK": block, "DATA_OFF": FLAG_BYTES}, warps)
    return out


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
