"""Process setup for `ridgeline comm`: multicast off, torchrun detection, process groups."""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping
from datetime import timedelta

import torch
import torch.distributed as dist

# NVLink SHARP / multicast objects are never used: NCCL's NVLS algorithms, torch symmetric memory's multicast
# and NVSHMEM's NVLS all stay off in every process we start, set before init_process_group.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def apply_no_multicast(environ: MutableMapping[str, str] | None = None) -> None:
    (os.environ if environ is None else environ).update(NO_MULTICAST)


def multicast_problems(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Each variable of NO_MULTICAST that is not set as required, as 'NAME=value (want V)'."""
    env = os.environ if environ is None else environ
    return [f"{k}={env.get(k)!r} (want {v!r})" for k, v in NO_MULTICAST.items() if env.get(k) != v]


def torchrun_env(environ: MutableMapping[str, str] | None = None) -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when this process was started by torchrun (or any launcher that sets
    its variables), else None."""
    env = os.environ if environ is None else environ
    if not all(env.get(k) for k in TORCHRUN_VARS):
        return None
    try:
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
    except ValueError:
        return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_for(device_type: str) -> str:
    return "nccl" if device_type == "cuda" else "gloo"


def init(rank: int, world: int, device_type: str, timeout_s: float, init_method: str | None = None):
    """Join the process group (NCCL on CUDA, gloo on CPU) and make a gloo group for control messages (timings,
    agreements, verification counts). Returns (device, control group)."""
    apply_no_multicast()
    problems = multicast_problems()
    if problems:  # (cannot happen after apply; kept as the check the issue asks for before any group exists)
        raise RuntimeError(f"multicast must be off: {', '.join(problems)}")
    if device_type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", rank)) % max(torch.cuda.device_count(), 1)
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    kwargs = {"timeout": timedelta(seconds=timeout_s)}
    if device_type == "cuda":
        kwargs["device_id"] = device  # binds the communicator now (eager init): no lazy setup inside a timing
    dist.init_process_group(backend_for(device_type), init_method=init_method, rank=rank, world_size=world,
                            **kwargs)
    control = dist.new_group(backend="gloo") if device_type == "cuda" else dist.group.WORLD
    return device, control
