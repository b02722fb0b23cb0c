"""The block-scaled GEMM's deferred-rescale candidate (each K step's partial scaled one step later): the same
products, scales and additions in the same order as the shipped body, so the same bits; it compiles for sm_90
without spills at the large-M tiles the tuning driver tries."""

from __future__ import annotations

import pytest
import torch

from ridgeline.core.registry import get_spec
from ridgeline.core.spec import Case
from ridgeline.ops.scaled_mm.launch import launch_scaled_mm
from ridgeline.ops.scaled_mm.rules import TileConfig, candidate_configs
from ridgeline.ops.scaled_mm.spec import FP8

SPEC = get_spec("scaled_mm")


@pytest.mark.parametrize("shape", [(37, 45, 300), (64, 130, 512), (1, 16, 128), (20, 33, 129)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_deferred_rescale_gives_the_same_bits_and_the_right_values(shape, out_dtype):
    inputs = SPEC.make_inputs(Case(shape, FP8, "block"), "cpu", 11)
    args = (inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], out_dtype)
    base = TileConfig(16, 32, 128, 1, 4, 1, use_tma=False)
    plain = launch_scaled_mm(*args, cfg=base)
    deferred = launch_scaled_mm(*args, cfg=TileConfig(16, 32, 128, 1, 4, 1, use_tma=False, defer_scale=True))
    assert torch.equal(plain, deferred)
    ref = SPEC.reference(dict(inputs, out_dtype=out_dtype))[0]
    tol = SPEC.tolerance_for(Case(shape, FP8, "block"), "y", out_dtype)
    assert bool(((deferred.double() - ref).abs() <= tol.atol + tol.rtol * ref.abs()).all())


@pytest.mark.parametrize("shape,block_k", [((7, 20, 45), 128), ((5, 17, 100), 64), ((4, 16, 200), 32)])
def test_the_same_bits_below_one_group_and_at_several_steps_per_group(shape, block_k):
    # K < 128 (one partial step), and K steps of 64 / 32 (several steps share a scale group; the last is partial)
    inputs = SPEC.make_inputs(Case(shape, FP8, "block"), "cpu", 5)
    args = (inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], torch.float32)
    plain = launch_scaled_mm(*args, cfg=TileConfig(16, 32, block_k, 1, 4, 1, use_tma=False))
    deferred = launch_scaled_mm(*args, cfg=TileConfig(16, 32, block_k, 1, 4, 1, use_tma=False, defer_scale=True))
    assert torch.equal(plain, deferred)
    ref = SPEC.reference(dict(inputs, out_dtype=torch.float32))[0]
    tol = SPEC.tolerance_for(Case(shape, FP8, "block"), "y", torch.float32)
    assert bool(((deferred.double() - ref).abs() <= tol.atol + tol.rtol * ref.abs()).all())


def test_the_flag_is_ignored_outside_block_mode():
    inputs = SPEC.make_inputs(Case((9, 20, 256), FP8, "row"), "cpu", 2)
    args = (inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"])
    a = launch_scaled_mm(*args, cfg=TileConfig(16, 32, 64, 1, 4, 1, use_tma=False))
    b = launch_scaled_mm(*args, cfg=TileConfig(16, 32, 64, 1, 4, 1, use_tma=False, defer_scale=True))
    assert torch.equal(a, b)


def test_the_driver_times_deferred_candidates_in_block_mode_only():
    block = candidate_configs("block", 4096)
    assert any(c.defer_scale for c in block) and "defer" in next(c for c in block if c.defer_scale).describe()
    assert not any(c.defer_scale for c in candidate_configs("row", 4096))
    assert not any(c.defer_scale and c.block_m * c.block_n >= 128 * 128 and c.num_stages > 3 for c in block)


@pytest.mark.slow
def test_deferred_candidates_compile_for_sm90_without_spills(tmp_path):
    from scaled_mm_sm90 import compile_tiles_sm90

    # (128x128 over 8 warps with 4 stages spilled 44 B: the driver does not try it; see candidate_configs)
    kernels = compile_tiles_sm90([(4096, 4096, 4096, "block", cfg) for cfg in (
        TileConfig(128, 128, 128, 8, 8, 3, defer_scale=True), TileConfig(64, 128, 128, 8, 4, 4, defer_scale=True))],
        tmp_path)
    for facts in kernels:
        assert facts["launch_args"]["DEFER_SCALE"] is True
        assert facts["registers"] and not facts.get("spill_stores_bytes") and not facts.get("spill_loads_bytes")
