"""The warp-specialized FP8 GEMM (Gluon, kernel_ws.py) on an sm_90 GPU: against float64 in every scale mode at
shapes that cut its 256x128 and 128x128 tiles (one row, odd M, N not a multiple of the tile, K not a multiple of
128), with a bias and an fp16 output, the same bits as the Triton kernel's 256x128x128 tile, and the calls it must
leave to the Triton kernel."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ridgeline.core.registry import get_spec
from ridgeline.core.spec import Case
from ridgeline.ops.scaled_mm.launch import launch_scaled_mm
from ridgeline.ops.scaled_mm.launch_ws import ws_supported
from ridgeline.ops.scaled_mm.rules import TileConfig
from ridgeline.ops.scaled_mm.spec import FP8

pytestmark = pytest.mark.gpu
needs_sm90 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")
SPEC = get_spec("scaled_mm")
TRITON = TileConfig(256, 128, 128, 8, 8, 4)
WS = replace(TRITON, warp_specialized=True)
WS128 = replace(WS, block_m=128)  # one 64-row wgmma a warpgroup (s30)
WS128_N64, WS128_N32 = replace(WS128, block_n=64, num_stages=6), replace(WS128, block_n=32, num_stages=6)  # (s31)
# (s34) the next K step's wgmma in flight during the promotion: two partials, odd and even K-step tails
WS128P, WS128P_N64 = replace(WS128, ws_pipeline=True), replace(WS128_N64, ws_pipeline=True)
# (s36) and its block scales loaded a trip ahead (two K steps), multiplied a trip later
WS128PA, WS128PA_N64 = replace(WS128P, ws_scales_ahead=True), replace(WS128P_N64, ws_scales_ahead=True)


def _inputs(shape, variant, seed=0):
    return SPEC.make_inputs(Case(shape, FP8, variant), "cuda", seed)


def _run(inputs, cfg):
    return launch_scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], inputs["out_dtype"],
                            inputs["bias"], cfg=cfg)


MODE_TILES = [(mode, tile, name) for mode in ("tensor", "row", "block")
              for tile, name in ((WS, "256"), (WS128, "128"), (WS128_N64, "128x64"), (WS128_N32, "128x32"),
                                 (WS128P, "128p"), (WS128P_N64, "128x64p"), (WS128PA, "128pa"),
                                 (WS128PA_N64, "128x64pa"))]


@needs_sm90
@pytest.mark.parametrize(("mode", "tile"), [(m, t) for m, t, _ in MODE_TILES],
                         ids=[f"{m}-{n}" for m, _, n in MODE_TILES])
@pytest.mark.parametrize("shape", [(1000, 1032, 1040), (256, 128, 128), (1, 136, 4096), (513, 4104, 640),
                                   (2049, 4096, 4096), (300, 8, 256), (130, 264, 384)])
def test_ws_matches_float64(mode, shape, tile):
    inputs = _inputs(shape, mode)
    # Poison: a freed NaN block of the output's size, which the caching allocator hands to the output next.
    del_me = torch.full((shape[0], shape[1]), float("nan"), dtype=torch.bfloat16, device="cuda")
    del del_me
    y = _run(inputs, tile)
    (ref,) = SPEC.reference(inputs)
    tol = SPEC.tolerance_for(Case(shape, FP8, mode), "y", y.dtype)
    err = (y.double() - ref).abs()
    assert bool((err <= tol.atol + tol.rtol * ref.abs()).all()), f"max err {err.max().item():.3g}"


@needs_sm90
@pytest.mark.parametrize("variant", ["row+bias", "block+bias", "row+fp16", "tensor+fp16+bias", "row+strided"])
def test_ws_bias_fp16_output_and_strided_rows(variant):
    shape = (777, 1032, 2048)
    inputs = _inputs(shape, variant)
    y = _run(inputs, WS)
    (ref,) = SPEC.reference(inputs)
    tol = SPEC.tolerance_for(Case(shape, FP8, variant), "y", y.dtype)
    err = (y.double() - ref).abs()
    assert y.dtype == inputs["out_dtype"]
    assert bool((err <= tol.atol + tol.rtol * ref.abs()).all()), f"max err {err.max().item():.3g}"


@needs_sm90
@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (2049, 1032, 1000)])
def test_ws_gives_the_triton_kernels_bits(mode, shape):
    """Same K steps of 128, each a fresh partial added into fp32 in K order: the same arithmetic as kernel.py,
    whichever tile."""
    inputs = _inputs(shape, mode, seed=1)
    want = _run(inputs, TRITON)
    for tile in (WS, WS128, WS128_N64, WS128_N32, WS128P, WS128P_N64, WS128PA, WS128PA_N64):
        assert torch.equal(_run(inputs, tile), want), tile.describe()


@needs_sm90
def test_ws_is_deterministic_and_batch_invariant():
    inputs = _inputs((4096, 4096, 4096), "row", seed=2)
    full = _run(inputs, WS)
    assert torch.equal(full, _run(inputs, WS))
    for m in (1, 255, 257, 1000):
        part = {**inputs, "a": inputs["a"][:m], "scale_a": inputs["scale_a"][:m]}
        assert torch.equal(_run(part, WS), full[:m]), m


@needs_sm90
def test_ws_declines_what_it_cannot_take():
    a = torch.empty((512, 256), dtype=FP8, device="cuda")
    bf16 = torch.empty((512, 256), dtype=torch.bfloat16, device="cuda")
    assert ws_supported(WS, a, bf16, "row")
    assert not ws_supported(TRITON, a, bf16, "row")  # not asked for
    assert not ws_supported(WS, a, bf16.float(), "row")  # fp32 output: the Triton kernel's
    assert not ws_supported(replace(WS, block_n=256), a, bf16, "block")  # one weight block a tile
    assert ws_supported(WS128, a, bf16, "block") and ws_supported(WS128_N32, a, bf16, "block")
    assert not ws_supported(replace(WS, block_m=64), a, bf16, "row")
    odd = torch.empty((512, 260), dtype=torch.bfloat16, device="cuda")[:, :250]
    assert not ws_supported(WS, a, odd, "row")  # rows not 16-byte aligned for the TMA store
    # and the fallback runs: an output of N = 250 through the Triton kernel, right against float64
    inputs = _inputs((300, 250, 512), "row")
    y = _run(inputs, WS)
    (ref,) = SPEC.reference(inputs)
    tol = SPEC.tolerance_for(Case((300, 250, 512), FP8, "row"), "y", y.dtype)
    assert bool(((y.double() - ref).abs() <= tol.atol + tol.rtol * ref.abs()).all())
