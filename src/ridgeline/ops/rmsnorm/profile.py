"""RMSNorm's profile hook (found by ridgeline.profile.hooks: the `profile` module of the spec's package).

- `meta_inputs`: a forward contract's inputs on the meta device (shapes and strides only), so `ridgeline profile`
  records the launch of any size without memory or a GPU;
- `gpu_rules`: while active, the launch rules of every loaded module of this package pick what a CUDA GPU with
  `sm_count` SMs would, even under Triton's CPU interpreter (which takes its own configs for wide rows and
  emulates rounding) and on meta or CPU tensors;
- `describe_launch`: the launch configuration's own description (`LaunchConfig.describe`), for the config the
  wrapper launched (the weight's dtype and the FP8 epilogue change it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ridgeline.core.spec import Case, Inputs, OpSpec
from ridgeline.lib.peers import module_globals
from ridgeline.ops.rmsnorm.spec import EPS, STRIDE_PAD

PACKAGE = __name__.rpartition(".")[0]
# The kernel's QUANT epilogue per op (0: none, 1: static FP8 scale, 2: dynamic per-row FP8 scales).
QUANT = {"rmsnorm_fp8": 1, "rmsnorm_dynamic_quant": 2, "fused_add_rmsnorm_dynamic_quant": 2}


def _fused(spec: OpSpec) -> bool:
    return spec.name.startswith("fused_add")


def meta_inputs(spec: OpSpec, case: Case) -> Inputs | None:
    shape, dtype, variant = case.shape, case.dtype, case.variant
    if not shape or any(v in variant for v in ("nan", "inf")):
        return None  # (values matter there: the profiler falls back to real inputs)
    if spec.name.endswith("_bwd"):
        return None  # (the backward contracts take other inputs: the profiler makes their own, on the CPU)
    n = shape[-1]

    def rows() -> torch.Tensor:  # the spec's layouts: contiguous rows, or rows inside a buffer STRIDE_PAD wider
        if "strided" in variant:
            return torch.empty((*shape[:-1], n + STRIDE_PAD), dtype=dtype, device="meta")[..., :n]
        return torch.empty(shape, dtype=dtype, device="meta")

    wdtype = torch.float32 if "w-fp32" in variant else dtype
    inputs: Inputs = {"x": rows(), "weight": torch.empty((n,), dtype=wdtype, device="meta"), "eps": EPS}
    if _fused(spec):
        inputs = {"x": inputs["x"], "residual": rows(), "weight": inputs["weight"], "eps": EPS}
    if spec.name == "rmsnorm_fp8":
        inputs["scale"] = torch.empty((1,), dtype=torch.float32, device="meta")
    return inputs


@contextlib.contextmanager
def gpu_rules(spec: OpSpec, sm_count: int) -> Iterator[None]:
    """The GPU's launch rules (for `sm_count` SMs) while the profiler records launches on a CPU."""
    def anywhere(*a: Any, **k: Any) -> None:  # recording only: nothing runs, any device (meta too) will do
        return None

    values = {"_INTERPRETED": False, "multiprocessor_count": lambda device: sm_count,
              "_sm_count_hint": lambda: sm_count, "require_runnable_device": anywhere}
    # The wrappers check x through lib's require_rows, which calls lib.launch's own require_runnable_device: set
    # there too, or meta inputs are refused (and, without the interpreter, the CPU inputs after them).
    with module_globals(PACKAGE, values, skip=(PACKAGE + ".peers",)), \
            module_globals("ridgeline.lib", {"require_runnable_device": anywhere}):
        yield


def describe_launch(spec: OpSpec, case: Case, inputs: Inputs, launch: Any) -> dict[str, Any]:
    from ridgeline.ops.rmsnorm.rules import config_for

    module = getattr(getattr(launch.kernel, "fn", None), "__module__", None) or ""
    if not module.startswith(PACKAGE + ".") or module.startswith(PACKAGE + ".peers"):
        return {}  # a peer's kernel: its own constexprs describe it
    shape = case.shape
    m = 1
    for d in shape[:-1]:
        m *= d
    weight = inputs.get("weight")
    wdtype = weight.dtype if isinstance(weight, torch.Tensor) else None
    # (called inside gpu_rules when the launch was recorded without running: the GPU's config, as captured)
    cfg = config_for(shape[-1], case.dtype, m, _fused(spec), wdtype, QUANT.get(spec.name, 0))
    return {"config": cfg.describe()}
