"""A test helper: the FP8 GEMM's launch for explicit tile configs, recorded (not run) on meta tensors under the GPU
rules and compiled for sm_90 in a child process, as `ridgeline profile` does. Several tests ask the same question
of other candidates: does it compile, onto which tensor-core instructions, with how many registers and spills."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ridgeline.core.registry import get_spec
from ridgeline.ops.scaled_mm.launch import launch_scaled_mm
from ridgeline.ops.scaled_mm.profile import gpu_rules
from ridgeline.ops.scaled_mm.rules import TileConfig
from ridgeline.ops.scaled_mm.spec import FP8
from ridgeline.profile.aot import compile_in_child
from ridgeline.profile.launches import LaunchCapture


def _meta_operands(m: int, n: int, k: int, mode: str) -> tuple[torch.Tensor, ...]:
    a = torch.empty((m, k), dtype=FP8, device="meta")
    b = torch.empty((n, k), dtype=FP8, device="meta")
    kb, nb = -(-k // 128), -(-n // 128)
    shapes = {"tensor": ((1,), (1,)), "row": ((m, 1), (n,)), "block": ((m, kb), (nb, kb))}[mode]
    return (a, b, *(torch.empty(s, dtype=torch.float32, device="meta") for s in shapes))


def compile_tiles_sm90(calls: list[tuple[int, int, int, str, TileConfig]], tmp_path: Path) -> list[dict[str, Any]]:
    """(M, N, K, scale mode, tile) per launch -> each compiled kernel's facts (registers, spills, SASS), in order."""
    launches = []
    for m, n, k, mode, cfg in calls:
        with gpu_rules(get_spec("scaled_mm"), 132), LaunchCapture(run=False) as cap:
            try:
                launch_scaled_mm(*_meta_operands(m, n, k, mode), cfg=cfg)
            except Exception:  # noqa: BLE001 - after its launch a recorded call trips on outputs never computed
                pass
        assert [la.name for la in cap.launches] == ["_scaled_mm_kernel"], [la.name for la in cap.launches]
        launches.append(cap.launches[0])
    kernels = compile_in_child(launches, 90, tmp_path)
    assert kernels is not None and len(kernels) == len(launches)
    for facts in kernels:
        print({key: facts.get(key) for key in ("registers", "spill_stores_bytes", "spill_loads_bytes",
                                                "shared_bytes")}, facts["sass"]["tensor_cores"])
    return [dict(facts, launch_args=la.args) for facts, la in zip(kernels, launches)]
