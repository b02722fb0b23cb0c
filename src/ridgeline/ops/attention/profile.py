"""Attention's profile hook (found by ridgeline.profile.hooks: the `profile` module of the spec's package).

- `meta_inputs`: the spec's inputs on the meta device, so `ridgeline profile` records the launches of any size
  (B4 S4096 H32 D128 included) without memory or a GPU;
- `gpu_rules`: while active, the launch rules and the launches pick what a CUDA GPU would (the GPU tiles, bf16/fp16
  tiles straight into tl.dot), even under Triton's CPU interpreter;
- `gpu_notes`: where the rules send the forward to the Gluon kernel on sm_90, which a CPU capture cannot record.
"""

from __future__ import annotations

import contextlib

import torch

from ridgeline.core.spec import Case, Inputs, OpSpec
from ridgeline.lib.peers import module_globals
from ridgeline.ops.attention.spec import _dims, _window, varlen_lengths

PACKAGE = __name__.rpartition(".")[0]


def meta_inputs(spec: OpSpec, case: Case) -> Inputs | None:
    b, sq, sk, hq, hkv, d, packed = _dims(case.shape)

    def t(*size: int) -> torch.Tensor:
        if "bhsd" in case.variant and not packed:
            return torch.empty((size[0], size[2], size[1], size[3]), dtype=case.dtype, device="meta").transpose(1, 2)
        return torch.empty(size, dtype=case.dtype, device="meta")

    if packed:
        n = case.shape[0]
        q, k, v = t(n, hq, d), t(n, hkv, d), t(n, hkv, d)
        cu = torch.empty((b + 1,), dtype=torch.int32, device="meta")
        max_seqlen = max(varlen_lengths(n))
        lse = torch.empty((hq, n), dtype=torch.float32, device="meta")
    else:
        q, k, v = t(b, sq, hq, d), t(b, sk, hkv, d), t(b, sk, hkv, d)
        cu, max_seqlen = None, None
        lse = torch.empty((b, hq, sq), dtype=torch.float32, device="meta")
    inputs: Inputs = {"q": q, "k": k, "v": v, "causal": "causal" in case.variant,
                      "window": _window(case.variant, sk), "cu_seqlens": cu, "max_seqlen": max_seqlen}
    if spec.name == "attention_bwd":
        inputs.update(out=torch.empty(q.shape, dtype=case.dtype, device="meta"), lse=lse,
                      dout=torch.empty(q.shape, dtype=case.dtype, device="meta"))
    return inputs


def gpu_rules(spec: OpSpec, sm_count: int) -> contextlib.AbstractContextManager:
    """The GPU's launch rules while the profiler records launches on a CPU (the interpreter's tiles otherwise)."""
    return module_globals(PACKAGE, {"_INTERPRETED": False, "require_runnable_device": lambda *a, **k: None},
                          skip=(PACKAGE + ".peers",))


def gpu_notes(spec: OpSpec, case: Case, sm_count: int) -> list[str]:
    """The forward the rules run on an sm_90 GPU where it is not the recorded Triton launch."""
    from ridgeline.ops.attention.rules import WS_FORWARD
    from ridgeline.ops.attention.spec import _gluon_forward_takes, gluon_schedule_args

    if spec.name == "attention_bwd" or not _gluon_forward_takes(case, "cuda", assume_sm90=True):
        return []
    d, causal, seq_k, left, packed = gluon_schedule_args(case)
    sch = WS_FORWARD.schedule(d, causal, seq_k, left, packed)
    extra = (", varlen=True" if packed else "") + (", window=True" if left >= 0 else "")
    return [f"On an sm_90 GPU (H100, H200) the rules run this forward on the warp-specialized Gluon kernel "
            f"(ops/attention/kernel_ws.py, {WS_FORWARD.describe(d, causal, seq_k, left, packed)}), not the Triton "
            f"launch recorded here; its sm_90 compile: python -c 'from ridgeline.ops.attention.launch_ws import "
            f"compile_for_sm90 as c; print(c({d}, {causal}, {WS_FORWARD.stages}, {sch.overlap}, "
            f"pingpong={WS_FORWARD.pingpong}, pairs={sch.pairs}, persistent={sch.persistent}{extra}))' "
            f"(without TRITON_INTERPRET)"]
