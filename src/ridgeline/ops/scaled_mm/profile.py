"""The profile hook of scaled_mm and the quantizers (found by ridgeline.profile.hooks):

- `meta_inputs`: the spec's inputs on the meta device (shapes and strides only), so `ridgeline profile` records
  the launch of any size without memory or a GPU (meta tensors count as 16-byte aligned: the TMA path);
- `gpu_rules`: while active, the launch rules pick what a CUDA GPU with `sm_count` SMs would, even under Triton's
  CPU interpreter and on meta tensors;
- `gpu_notes`: where the rules send the GEMM to the warp-specialized Gluon kernel on sm_90, which a CPU capture
  cannot record (it records the Triton tile the rules pick off Hopper).
"""

from __future__ import annotations

import contextlib

import torch

from ridgeline.core.spec import Case, Inputs, OpSpec
from ridgeline.lib.peers import module_globals
from ridgeline.ops.scaled_mm.spec import BLOCK, FP8, STRIDE_PAD, parse_variant

PACKAGE = __name__.rpartition(".")[0]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def meta_inputs(spec: OpSpec, case: Case) -> Inputs | None:
    def empty(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device="meta")

    if spec.name != "scaled_mm":
        m, k = case.shape
        x = empty(m, k + 13, dtype=case.dtype)[:, :k] if "strided" in case.variant else empty(m, k, dtype=case.dtype)
        return {"x": x} if spec.name == "quantize_fp8_per_token" else {"x": x, "group": BLOCK}
    m, n, k = case.shape
    v = parse_variant(case.variant)
    a = empty(m, k + STRIDE_PAD, dtype=FP8)[:, :k] if v["strided"] else empty(m, k, dtype=FP8)
    b = empty(k, n, dtype=FP8).t() if v["nmajor"] else empty(n, k, dtype=FP8)
    sa, sb = {"tensor": (empty(), empty()), "row": (empty(m, 1), empty(1, n)),
              "block": (empty(m, _cdiv(k, BLOCK)), empty(_cdiv(n, BLOCK), _cdiv(k, BLOCK)))}[v["mode"]]
    bias = empty(n, dtype=v["out_dtype"]) if v["bias"] else None
    return {"a": a, "b": b, "scale_a": sa, "scale_b": sb, "out_dtype": v["out_dtype"], "bias": bias}


def gpu_rules(spec: OpSpec, sm_count: int) -> contextlib.AbstractContextManager:
    """The GPU's launch rules (for `sm_count` SMs) while the profiler records launches on a CPU."""
    values = {"_INTERPRETED": False, "multiprocessor_count": lambda device: sm_count,
              "require_runnable_device": lambda *a, **k: None}
    return module_globals(PACKAGE, values, skip=(PACKAGE + ".peers",))


def gpu_notes(spec: OpSpec, case: Case, sm_count: int) -> list[str]:
    """The kernel an sm_90 GPU runs where it is not the recorded Triton launch: the rules' tile with the Gluon
    kernel allowed (the spec's `rule_config`, as its bench records name it), where the Gluon kernel takes it."""
    from ridgeline.ops.scaled_mm.launch_ws import ws_tile

    if spec.name != "scaled_mm" or 0 in case.shape:
        return []
    cfg = spec.rule_config(case, sm_count, on_sm90=True, interpreted=False)
    if not (cfg.use_tma and ws_tile(cfg, parse_variant(case.variant)["mode"])):
        return []
    return [f"On an sm_90 GPU (H100, H200) the rules run this GEMM on the warp-specialized Gluon kernel "
            f"(ops/scaled_mm/kernel_ws.py, {cfg.describe()}), not the Triton launch recorded here; its sm_90 "
            "compile: ops/scaled_mm/launch_ws.py's compile_for_sm90 (without TRITON_INTERPRET)"]
