"""The FP8 GEMM compiles for sm_90 without register spills at the tiles the GPU rules pick for row-wise and
per-tensor scales (the promoted accumulator doubles the fp32 state: 128x256 over 8 warps spilled 208 B in the main
loop, which cost the H200 25-30%). Launches recorded as `ridgeline profile` records them, compiled ahead of time
with Triton's bundled ptxas."""

from __future__ import annotations

import pytest
import torch

from ridgeline.profile.aot import compile_in_child, compile_launches, interpreter_on
from ridgeline.profile.launches import capture_call

SHAPES = [(16, 8192, 8192), (256, 10240, 8192), (8192, 8192, 8192)]  # decode, mid M, large M


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["row", "tensor"])
def test_rule_tiles_compile_without_spills(tmp_path, mode):
    launches = []
    for shape in SHAPES:
        call = capture_call("scaled_mm", "ridgeline", shape, torch.float8_e4m3fn, mode)
        launches += [la for la in call.launches if la.name == "_scaled_mm_kernel"]
    assert len(launches) == len(SHAPES)
    kernels = compile_in_child(launches, 90, tmp_path) if interpreter_on() else compile_launches(launches, 90, tmp_path)
    assert kernels is not None
    for shape, la, k in zip(SHAPES, launches, kernels):
        assert k["spill_stores_bytes"] == 0 and k["spill_loads_bytes"] == 0, (shape, la.config, k["registers"])
