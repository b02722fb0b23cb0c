"""The decode tile computed as y^T = b a^T (`TileConfig.swap_ab`): the same products, scales and promotions per
output as the plain tile, so the same bits in every scale mode, deferred or not; refused on the Gluon kernel; it
compiles for sm_90 onto the tensor cores without spills at the decode tiles the driver times."""

from __future__ import annotations

import pytest
import torch

from ridgeline.core.registry import get_spec
from ridgeline.core.spec import Case
from ridgeline.ops.scaled_mm.launch import launch_scaled_mm
from ridgeline.ops.scaled_mm.rules import TileConfig
from ridgeline.ops.scaled_mm.spec import FP8

SPEC = get_spec("scaled_mm")


def _integer_inputs(m: int, n: int, k: int, mode: str, seed: int) -> tuple[torch.Tensor, ...]:
    # Small integers are exact in e4m3 and every partial sum of their products is exact in fp32, whatever order a
    # dot adds them in (the interpreter's numpy matmul picks its own by shape): so equal bits here test the scales'
    # and the epilogue's order, which is what the orientation could change.
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-8, 9, (m, k), generator=g).float().to(FP8)
    b = torch.randint(-8, 9, (n, k), generator=g).float().to(FP8)
    kb, nb = -(-k // 128), -(-n // 128)
    scales = {"tensor": ((1,), (1,)), "row": ((m, 1), (n,)), "block": ((m, kb), (nb, kb))}[mode]
    sa, sb = (torch.rand(shape, generator=g) + 0.5 for shape in scales)
    return a, b, sa, sb


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("shape", [(1, 45, 300), (5, 130, 256), (20, 33, 129)])
def test_the_swapped_tile_gives_the_plain_tiles_bits(mode, shape):
    args = (*_integer_inputs(*shape, mode, 13), torch.float32)
    bias = torch.randn(shape[1], dtype=torch.float32)
    for defer in (False, True):
        plain = launch_scaled_mm(*args, bias=bias, cfg=TileConfig(16, 32, 128, 1, 4, 1, use_tma=False,
                                                                  defer_scale=defer))
        # an 8-row swapped tile leaves 20 rows in three row tiles (the last partial); 64 weight rows a tile
        swapped = launch_scaled_mm(*args, bias=bias, cfg=TileConfig(8, 64, 128, 1, 4, 1, use_tma=False,
                                                                    defer_scale=defer, swap_ab=True))
        assert torch.equal(plain, swapped), (mode, defer)


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("shape", [(1, 45, 300), (20, 130, 129)])
def test_the_swapped_tile_matches_the_float64_reference(mode, shape):
    inputs = SPEC.make_inputs(Case(shape, FP8, mode), "cpu", 17)
    bias = torch.randn(shape[1], dtype=torch.float32)
    for defer in (False, True):
        y = launch_scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], torch.float32,
                             bias=bias, cfg=TileConfig(16, 64, 128, 1, 4, 1, use_tma=False, defer_scale=defer,
                                                       swap_ab=True))
        ref = SPEC.reference(dict(inputs, out_dtype=torch.float32, bias=bias))[0]
        tol = SPEC.tolerance_for(Case(shape, FP8, mode), "y", torch.float32)
        assert bool(((y.double() - ref).abs() <= tol.atol + tol.rtol * ref.abs()).all()), (mode, defer)


def test_a_poisoned_output_is_fully_written_by_the_swapped_tile():
    inputs = SPEC.make_inputs(Case((3, 70, 256), FP8, "row"), "cpu", 3)
    y = launch_scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], torch.bfloat16,
                         cfg=TileConfig(8, 32, 128, 1, 4, 1, use_tma=False, swap_ab=True))
    assert y.shape == (3, 70) and bool(torch.isfinite(y.float()).all())


def test_swap_ab_is_refused_on_the_warp_specialized_kernel_and_named_in_the_description():
    with pytest.raises(ValueError, match="swap_ab"):
        TileConfig(256, 128, 128, warp_specialized=True, swap_ab=True)
    assert "swapAB" in TileConfig(8, 64, 128, swap_ab=True).describe()


def test_the_tuning_driver_times_swapped_tiles_at_decode_sizes_only():
    from ridgeline.ops.scaled_mm.rules import candidate_configs

    for mode in ("row", "block"):
        for m in (1, 16, 32):
            swapped = [c for c in candidate_configs(mode, m) if c.swap_ab]
            assert swapped and all(c.block_m >= max(16, m) and not c.use_tma for c in swapped), (mode, m)
            assert all(c.defer_scale == (mode == "block") for c in swapped)
        assert not any(c.swap_ab for c in candidate_configs(mode, 64))


@pytest.mark.slow
def test_swapped_decode_tiles_compile_for_sm90_onto_the_tensor_cores_without_spills(tmp_path):
    from scaled_mm_sm90 import compile_tiles_sm90

    kernels = compile_tiles_sm90([
        (1, 8192, 28672, "block", TileConfig(8, 64, 128, 1, 4, 6, use_tma=False, defer_scale=True, swap_ab=True)),
        (16, 8192, 8192, "row", TileConfig(16, 128, 128, 1, 4, 6, use_tma=False, swap_ab=True))], tmp_path)
    for facts in kernels:
        assert facts["launch_args"]["SWAP_AB"] is True
        assert facts["registers"] and not facts.get("spill_stores_bytes") and not facts.get("spill_loads_bytes")
        assert facts["sass"]["tensor_cores"]
