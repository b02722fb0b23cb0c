"""Paged decode attention's profile hook (found by ridgeline.profile.hooks: the `profile` module of the package).

- `meta_inputs`: the spec's inputs on the meta device (shapes only), so `ridgeline profile` records the launches of
  a 128K-token cache without memory or a GPU;
- `gpu_rules`: while active, the launch picks what a CUDA GPU with `sm_count` SMs would (the split from the SMs,
  tensor-core dots and plain casts instead of the interpreter's fp32 dots and emulated rounding); the cache of
  validated calls is emptied on the way in and out, so no plan crosses the boundary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ridgeline.core.spec import Case, Inputs, OpSpec
from ridgeline.ops.paged_attention.spec import dims_of


def meta_inputs(spec: OpSpec, case: Case) -> Inputs | None:
    b, length, hq, hkv, d, bs, nq = dims_of(case.shape)
    blocks = max(1, -(-length // bs))
    kv_dtype = torch.float8_e4m3fn if "fp8kv" in case.variant else case.dtype
    n_blocks = b * blocks + 3
    q_shape = (b, hq, d) if len(case.shape) == 6 else (b, nq, hq, d)
    scale = 0.01 if "fp8kv" in case.variant else None
    return {"q": torch.empty(q_shape, dtype=case.dtype, device="meta"),
            "k_cache": torch.empty((n_blocks, bs, hkv, d), dtype=kv_dtype, device="meta"),
            "v_cache": torch.empty((n_blocks, bs, hkv, d), dtype=kv_dtype, device="meta"),
            "block_table": torch.empty((b, blocks), dtype=torch.int32, device="meta"),
            "seq_lens": torch.empty((b,), dtype=torch.int32, device="meta"),
            "scale": None, "k_scale": scale, "v_scale": scale}


@contextlib.contextmanager
def gpu_rules(spec: OpSpec, sm_count: int) -> Iterator[None]:
    from ridgeline.ops.paged_attention import launch

    values = {"INTERPRETED": False, "multiprocessor_count": lambda device: sm_count,
              "require_runnable_device": lambda *a, **k: None}
    old = {k: vars(launch)[k] for k in values}
    launch._CALLS.clear()
    try:
        for k, v in values.items():
            setattr(launch, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(launch, k, v)
        launch._CALLS.clear()
