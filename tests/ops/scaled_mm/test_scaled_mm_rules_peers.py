"""The launch rules (data: every config valid, the branches the sm_90 compile check covered) and the peers on a
CPU-only machine: "not installed" answers naming the pip package, torch._scaled_mm refusing block scales by name."""

from __future__ import annotations

import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.ops.scaled_mm.peers.torch_native import dequant_matmul, torch_scaled_mm
from ridgeline.ops.scaled_mm.rules import GEMM_RULES, candidate_configs, config_for
from ridgeline.ops.scaled_mm.spec import FP8


def test_rule_branches():
    assert config_for(8192, 8192, 8192, "row", interpreted=False).describe() == "tile 256x128x128 g8 w8 s4 tma"
    assert config_for(8192, 8192, 8192, "block", interpreted=False).block_n == 128
    small = config_for(16, 4096, 4096, "row", interpreted=False)
    assert small.block_m == 64 and -(-4096 // small.block_n) >= 128  # the tiles cover the SMs
    assert config_for(128, 8192, 8192, "row", interpreted=False).block_n == 64
    assert not config_for(512, 4096, 4100, "row", interpreted=False, tma=False, aligned=False).use_tma
    assert config_for(512, 4096, 4096, "row", interpreted=False, tma=False).block_k == 64
    assert config_for(5, 5, 5, "row", interpreted=True).block_m == 32
    assert config_for(5, 5, 5, "row", interpreted=True, ws=True).block_m == 32


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
def test_the_warp_specialized_kernel_where_it_can_run(mode):
    first = 65  # every mode from 65 rows (s30)
    for m in (first, 1024, 16384):
        cfg = config_for(m, 4096, 4096, mode, interpreted=False, ws=True)
        # at 65 rows the 128-row tile (s30: 1.07-1.26x the Triton tiles at 65-128 rows), 32 columns wide (s31, block
        # scales s32: 128 tiles of 128x32 fit one wave of 132 SMs); block scales' pipelined 128-row tile from 1024
        # rows (s35)
        rows, cols = (128, 32) if m == first else (128 if mode == "block" else 256, 128)
        assert cfg.warp_specialized and (cfg.block_m, cfg.block_n, cfg.block_k) == (rows, cols, 128), (m, cfg)
        # where it cannot (no sm_90, an fp32 output, unaligned N, pointer loads) the Triton tiles take the call
        assert not config_for(m, 4096, 4096, mode, interpreted=False).warp_specialized
        assert not config_for(m, 4096, 4096, mode, interpreted=False, tma=False, ws=False).warp_specialized
    for m in (1, 64, first - 1):
        assert not config_for(m, 4096, 4096, mode, interpreted=False, ws=True).warp_specialized, m
    with pytest.raises(ValueError, match="mode: expected one of"):
        config_for(1, 1, 1, "blocks")


def test_mid_m_narrows_the_gluon_tile_to_one_wave():
    """65-128 rows (s31, block scales s32): N tiles of 64 / 32 while the narrower tiling fits one wave of the SMs."""
    def tile(m, n, mode="row", sms=132):
        cfg = config_for(m, n, 4096, mode, sms, interpreted=False, ws=True)
        assert cfg.warp_specialized and cfg.block_m == 128
        return cfg.block_n, cfg.num_stages

    assert tile(128, 4096) == (32, 6)  # 128 tiles
    assert tile(128, 6144) == (64, 6)  # 96 tiles; 32 would take 192
    assert tile(65, 8192, "tensor") == (64, 6)
    assert tile(128, 10240) == (128, 5)  # 80 tiles; 64 would take 160
    assert tile(128, 28672) == (128, 5)
    assert tile(128, 4096, sms=78) == (64, 6)  # a smaller GPU: 64 tiles fit, 128 do not
    assert tile(128, 4096, "block") == (32, 6)  # inside one 128-column weight block: one scale_b a step
    assert tile(96, 6144, "block") == (64, 6)
    assert tile(128, 28672, "block") == (128, 4)
    assert config_for(300, 4096, 4096, "block", interpreted=False, ws=True).block_n == 128  # 3 x 32 tiles: no


def test_block_rules_keep_k_steps_in_one_scale_group():
    for m in (1, 64, 256, 4096):
        for tma, aligned in ((True, True), (False, True), (False, False)):
            cfg = config_for(m, 4096, 4096, "block", interpreted=False, tma=tma, aligned=aligned)
            assert 128 % cfg.block_k == 0
    for m in (16, 128, 4096):
        assert all(128 % c.block_k == 0 and c.block_n <= 128 for c in candidate_configs("block", m))


def test_the_k_loop_order_does_not_follow_m():
    """Batch invariance (the module docstring): a row's K loop is summed in BLOCK_K steps, so for one layout and
    mode every M must get the same BLOCK_K (the tile, stages and deferred rescale may change; none moves a bit)."""
    for mode in ("tensor", "row", "block"):
        for tma, aligned, ws in ((True, True, False), (True, True, True), (False, True, False), (True, False, False),
                                 (False, False, False)):
            for n, k in ((4096, 4096), (8192, 8192), (1024, 14336)):
                steps = {config_for(m, n, k, mode, interpreted=False, tma=tma, aligned=aligned, ws=ws).block_k
                         for m in (1, 16, 64, 65, 128, 256, 257, 1024, 8192)}
                assert len(steps) == 1, (mode, tma, aligned, ws, n, k, steps)


def test_candidates_fit_shared_memory():
    for mode in ("tensor", "row", "block"):
        for m in (1, 128, 4096):
            cands = candidate_configs(mode, m)
            assert len(cands) >= 4 and all(c.smem_bytes() <= 227 * 1024 for c in cands)
    assert all(r.why for r in GEMM_RULES)


def test_torch_scaled_mm_refuses_block_scales_by_name():
    a = torch.zeros(4, 256).to(FP8)
    b = torch.zeros(8, 256).to(FP8)
    with pytest.raises(ValueError, match="^unsupported: torch._scaled_mm"):
        torch_scaled_mm(a, b, torch.ones(4, 2), torch.ones(1, 2))


def test_eager_dequant_matmul_agrees_with_reference():
    spec = registry.get_spec("scaled_mm")
    for variant in ("tensor", "row+bias", "block"):
        case = Case((9, 130, 260), FP8, variant)
        inputs = spec.make_inputs(case, "cpu", 0)
        (y,) = spec.call(dequant_matmul, inputs)
        (ref,) = spec.reference(inputs)
        tol = spec.tolerance_for(case, "y", y.dtype)
        assert bool(((y.double() - ref).abs() <= tol.atol + tol.rtol * ref.abs()).all()), variant


@pytest.mark.parametrize("op,name,why", [
    ("scaled_mm", "vllm", "vllm not installed"), ("scaled_mm", "sglang", "sglang not installed"),
    ("scaled_mm", "deepgemm", "deep_gemm not installed"),
    ("quantize_fp8_per_token", "vllm", "vllm not installed"),
    ("quantize_fp8_per_group", "vllm", "vllm not installed"),
    ("quantize_fp8_per_group", "sglang", "sglang not installed"),
    ("scaled_mm", "torch-scaled-mm", "CUDA"), ("scaled_mm", "torch-compile", "CUDA"),
])
def test_unavailable_peers_say_why(op, name, why):
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine")
    impl = registry.resolve(op, name)
    assert not impl.available and why in impl.reason


def test_the_gluon_kernel_takes_128_row_tiles_where_they_take_fewer_waves():
    """s30 (H100): 128-row tiles 1.13-1.29x where the last 256-row tile row is mostly empty and the tiles fill the
    SMs badly; 256 rows where the tiles are full or 128 would take twice the waves."""
    def rows(m, n, k=4096, sms=132):
        return config_for(m, n, k, "row", sms, interpreted=False, ws=True).block_m

    assert [rows(m, 4096) for m in (1025, 2049, 4097)] == [128, 128, 128]
    # block scales by padded rows to 1023 (s30, H100: each the faster of the two tiles, or level, there)
    block = {m: config_for(m, n, k, "block", interpreted=False, ws=True).block_m
             for m, n, k in ((65, 6144, 4096), (128, 4096, 14336), (200, 28672, 4096), (256, 10240, 8192),
                             (300, 8192, 8192), (384, 8192, 8192), (400, 6144, 4096), (600, 8192, 8192),
                             (768, 4096, 4096), (1024, 28672, 4096), (2049, 4096, 4096), (8192, 8192, 8192))}
    # (s35) and from 1024 rows the pipelined 128-row tile (1.04-1.06x the 256-row one at four shapes, H100)
    assert block == {65: 128, 128: 128, 200: 256, 256: 256, 300: 128, 384: 128, 400: 256, 600: 128, 768: 256,
                     1024: 128, 2049: 128, 8192: 128}
    assert config_for(8192, 8192, 8192, "block", interpreted=False, ws=True).ws_pipeline
    # (s36) and where K passes 8192, from 1024 rows, with its block scales a trip ahead
    ahead = {(m, n, k): config_for(m, n, k, "block", interpreted=False, ws=True)
             for m, n, k in ((4096, 4096, 14336), (8192, 8192, 28672), (16384, 16384, 16384), (1024, 8192, 28672),
                             (1100, 4096, 14336), (4096, 4096, 8192), (600, 8192, 28672))}
    assert all(c.block_m == 128 and c.ws_pipeline for c in ahead.values())
    assert [shape for shape, c in ahead.items() if c.ws_scales_ahead] == [
        (4096, 4096, 14336), (8192, 8192, 28672), (16384, 16384, 16384), (1024, 8192, 28672), (1100, 4096, 14336)]
    assert not config_for(4096, 4096, 14336, "row", interpreted=False, ws=True).ws_scales_ahead
    # (s34) by waves too below 1024 rows, and from 129 rows the pipelined 5-stage form of the 128-row tile
    big = config_for(768, 8192, 8192, "block", interpreted=False, ws=True)
    assert big.block_m == 128 and big.ws_pipeline and big.num_stages == 5
    assert config_for(300, 8192, 8192, "block", interpreted=False, ws=True).ws_pipeline
    assert not config_for(128, 4096, 14336, "block", interpreted=False, ws=True).ws_pipeline
    assert not config_for(4096, 4096, 4096, "row", interpreted=False, ws=True).ws_pipeline
    # a 128-row block tile narrowed to fill one wave runs plain (200 rows x 2048: 2 x 32 tiles of 64 columns)
    narrow = config_for(200, 2048, 4096, "block", interpreted=False, ws=True)
    assert narrow.block_m == 128 and narrow.block_n < 128 and not narrow.ws_pipeline
    assert rows(640, 28672) == 128
    assert [rows(m, n) for m, n in ((1100, 6144), (4096, 4096), (2048, 4096), (512, 6144), (256, 10240),
                                    (8192, 6144), (1024, 28672))] == [256] * 7
    # the waves are counted on this GPU's SMs: 2049 x 4096 on 144 SMs is 2.0 waves of 256-row tiles
    assert rows(2049, 4096, sms=144) == 256
