"""The GEMM's profile hook (found by ridgeline.profile.hooks): meta-device inputs of any size, and the GPU's launch
rules while recording (the interpreter otherwise picks its own small tiles and the fp32 upcast)."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from ridgeline.core.spec import Case, Inputs, OpSpec
from ridgeline.lib.peers import module_globals
from ridgeline.ops.matmul.spec import STRIDE_PAD, layout_of, parts

PACKAGE = __name__.rpartition(".")[0]


def meta_inputs(spec: OpSpec, case: Case) -> Inputs | None:
    lead, (n, k) = case.shape[:-2], case.shape[-2:]
    p, dtype = parts(case.variant), case.dtype

    def empty(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device="meta")

    x = empty(*lead, k + STRIDE_PAD)[..., :k] if "strided" in p else empty(*lead, k)
    layout = layout_of(case.variant)
    if layout == "nt":
        w = empty(k, n).T if "wt" in p else empty(n, k)
    else:
        w = empty(n, k).T if "wt" in p else empty(k, n)
    return {"x": x, "w": w, "bias": empty(n) if "bias" in p else None, "layout": layout}


def gpu_rules(spec: OpSpec, sm_count: int) -> contextlib.AbstractContextManager:
    """The GPU's launch rules (for `sm_count` SMs) while the profiler records launches on a CPU."""
    values = {"_INTERPRETED": False, "multiprocessor_count": lambda device: sm_count,
              "require_runnable_device": lambda *a, **k: None}
    return module_globals(PACKAGE, values, skip=(PACKAGE + ".peers",))


def describe_launch(spec: OpSpec, case: Case, inputs: Inputs, launch: Any) -> dict[str, Any]:
    module = getattr(getattr(launch.kernel, "fn", None), "__module__", None) or ""
    if not module.startswith(PACKAGE + ".") or module.startswith(PACKAGE + ".peers"):
        return {}
    a = launch.args
    feed = "tma" if a.get("TMA") else "ptr"
    return {"config": f"{feed} {a.get('BLOCK_M')}x{a.get('BLOCK_N')}x{a.get('BLOCK_K')} w{launch.num_warps} "
                      f"s{a.get('NUM_STAGES')} g{a.get('GROUP_M')} A_KM={a.get('A_KM')} B_KN={a.get('B_KN')}"}
