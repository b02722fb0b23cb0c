"""The warp-specialized FP8 GEMM (Gluon, kernel_ws.py) compiles for sm_90 on a machine without a GPU, with this
Triton and (where RIDGELINE_OLDEST_TRITON names it, as in CI) the oldest one we support: Gluon is Triton's
experimental layer and its API moves between releases, so this is what tells a Triton bump broke the kernel the
H100/H200 rules pick from M = 129. Compiled in a child process without the CPU interpreter."""

from __future__ import annotations

import pytest

from gluon_aot_child import compile_in_child


@pytest.mark.slow
@pytest.mark.parametrize("triton_path", ["this", "oldest"])
def test_ws_kernel_compiles_for_sm90(triton_path):
    results = compile_in_child("ridgeline.ops.scaled_mm.launch_ws",
                               "[compile_for_sm90(s, 3, b) for s, b in ((0, False), (1, True), (2, False))]",
                               triton_path)
    for mode, r in zip(("tensor", "row+bias", "block"), results):
        # 3 stages of 256x128 A + 128x128 B and two 64x128 bf16 output buffers fit the 227 KB a block may take
        assert r["shared"] <= 227 * 1024, (mode, r)
        sass = r["sass"]
        # Per K step each MMA warpgroup issues two m64 wgmmas of 4 k32 instructions (8 in the loop), the load warp
        # two TMA loads, each warpgroup one TMA store an output half (2 halves), and the warps trade registers.
        assert sass["QGMMA"] >= 8 and sass["UTMALDG"] >= 2 and sass["UTMASTG"] >= 2, (mode, sass)
        assert sass["USETMAXREG"] >= 2 and sass["SYNCS"] > 0, (mode, sass)
    # Per-tensor scales keep every register (the spills of the row and block epilogues are in gemm.md).
    assert results[0]["spill_stores_bytes"] == 0, results[0]


@pytest.mark.slow
@pytest.mark.parametrize("triton_path", ["this", "oldest"])
def test_ws_kernel_128_rows_compiles_without_spills(triton_path):
    """128-row tiles: one 64-row wgmma a warpgroup, so one partial and one accumulator live; block scales (whose
    256-row tile spills inside its K loop) fit the registers."""
    results = compile_in_child("ridgeline.ops.scaled_mm.launch_ws",
                               "[compile_for_sm90(s, 4, False, 128) for s in (1, 2)]", triton_path)
    for mode, r in zip(("row", "block"), results):
        assert r["shared"] <= 227 * 1024, (mode, r)
        assert r["sass"]["QGMMA"] >= 4 and r["sass"]["UTMASTG"] >= 1, (mode, r["sass"])
        assert r["spill_stores_bytes"] == 0 and r["spill_loads_bytes"] == 0, (mode, r)


@pytest.mark.slow
@pytest.mark.parametrize("triton_path", ["this", "oldest"])
def test_ws_kernel_narrow_tiles_compile_without_spills(triton_path):
    """The 128-row tile's N tiles of 64 and 32 (65-128 rows, 6 stages) in row and block mode."""
    results = compile_in_child("ridgeline.ops.scaled_mm.launch_ws",
                               "[compile_for_sm90(s, 6, False, 128, block_n=n) for s in (1, 2) for n in (64, 32)]",
                               triton_path)
    for name, r in zip(("row-64", "row-32", "block-64", "block-32"), results):
        assert r["shared"] <= 227 * 1024, (name, r)
        assert r["sass"]["QGMMA"] >= 4 and r["sass"]["UTMASTG"] >= 1, (name, r["sass"])
        assert r["spill_stores_bytes"] == 0 and r["spill_loads_bytes"] == 0, (name, r)


@pytest.mark.slow
@pytest.mark.parametrize("triton_path", ["this", "oldest"])
def test_ws_pipelined_tile_keeps_a_wgmma_in_flight(triton_path):
    """The 128-row tile with two partials (`ws_pipeline`): ptxas must keep one wgmma outstanding while the other
    partial is promoted (a `WARPGROUP.DEPBAR.LE gsb0, 0x1` in the loop). Where it cannot (in-flight accumulator
    registers touched, too few registers) it serializes every wgmma with a wait for zero: the tile is then just
    slower. No spills in any mode."""
    results = compile_in_child(
        "ridgeline.ops.scaled_mm.launch_ws",
        "[{k: v for k, v in r.items() if k != 'sass_text'} | "
        "{'wait1': r['sass_text'].count('WARPGROUP.DEPBAR.LE gsb0, 0x1')} "
        "for r in (compile_for_sm90(s, 4, False, 128, block_n=n, pipeline=True, keep_sass=True, scales_ahead=a) "
        "for s, n, a in ((1, 128, False), (2, 128, False), (2, 64, False), (2, 128, True), (2, 64, True)))]",
        triton_path)
    # (tensor scales' loop is row's: the epilogue differs; -ahead: block scales loaded a trip ahead, s36)
    names = ["row-128", "block-128", "block-64", "block-128-ahead", "block-64-ahead"]
    for name, r in zip(names, results, strict=True):
        assert r["spill_stores_bytes"] == 0 and r["spill_loads_bytes"] == 0, (name, r)
        assert r["wait1"] >= 2, (name, r)  # each trip's two waits leave the other partial's wgmma in flight
