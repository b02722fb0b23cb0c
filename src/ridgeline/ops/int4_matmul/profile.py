"""int4_matmul's profile hook (found by ridgeline.profile.hooks: the `profile` module of the spec's package).

- `meta_inputs`: the contract's inputs on the meta device (shapes and strides only), so `ridgeline profile` records
  the launches of a 70B layer without memory or a GPU;
- `gpu_rules`: while active, the launcher picks what a CUDA GPU with `sm_count` SMs would (the numeric split counts
  SMs; under the CPU interpreter it would take 4 and the interpreter's dot emulation).
"""

from __future__ import annotations

import contextlib

import torch

from ridgeline.core.spec import Case, Inputs, OpSpec
from ridgeline.lib.peers import module_globals
from ridgeline.ops.int4_matmul.spec import GROUP, STRIDE_PAD

PACKAGE = __name__.rpartition(".")[0]


def meta_inputs(spec: OpSpec, case: Case) -> Inputs | None:
    if spec.name != "int4_matmul":
        return None
    m, n, k = case.shape
    dt, v = case.dtype, case.variant
    if "transposed" in v:
        x = torch.empty((k, m), dtype=dt, device="meta").t()
    elif "strided" in v:
        x = torch.empty((m, k + STRIDE_PAD), dtype=dt, device="meta")[:, :k]
    else:
        x = torch.empty((m, k), dtype=dt, device="meta")
    sdt = torch.float32 if "scales-fp32" in v else (torch.bfloat16 if dt == torch.float32 else dt)
    return {"x": x, "w_packed": torch.empty((n, k // 2), dtype=torch.uint8, device="meta"),
            "scales": torch.empty((n, k // GROUP), dtype=sdt, device="meta"), "group_size": GROUP}


def gpu_rules(spec: OpSpec, sm_count: int) -> contextlib.AbstractContextManager:
    """The GPU's launch rules (for `sm_count` SMs) while the profiler records launches on a CPU."""
    values = {"interpreter_enabled": lambda: False, "multiprocessor_count": lambda device: sm_count,
              "require_runnable_device": lambda *a, **k: None}
    return module_globals(PACKAGE, values, skip=(PACKAGE + ".peers",))
