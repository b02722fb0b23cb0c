"""CPU (interpreter) tests of int4_matmul's third kernel body, layout "gemv" (kernel_gemv.py), a tuning candidate on
the CUDA cores: values vs float64, group sizes, strided x, splits with and without split programs, M = 0,
determinism, batch invariance within the family, bad configs; its sm_90 compile (slow) and a GPU test."""

from __future__ import annotations

import pytest
import torch
from int4_helpers import activations, check, weights

from ridgeline.core.registry import get_spec
from ridgeline.ops.int4_matmul.launch import int4_matmul, launch_plan
from ridgeline.ops.int4_matmul.pack import pack_int4
from ridgeline.ops.int4_matmul.rules import TILE_RULES, TileConfig, tile_config

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# 10 groups of 64: two numeric splits of 5 groups under the interpreter (4 SMs), so a step of 4 groups ends past
# its split and masks groups off; N = 37 is not a multiple of BLOCK_N = 16.
N, K, G = 37, 640, 64


def _cfg(bn: int = 16, gps: int = 4, warps: int = 4) -> TileConfig:
    return TileConfig(layout="gemv", block_n=bn, num_warps=warps, groups_per_step=gps)


_weights, _x, _check = weights, activations, check



def test_setup_exercises_splits_partial_steps_and_one_program_per_n_block():
    plan = launch_plan(3, N, K, G, torch.device("cpu"), _cfg())
    assert plan["splits"] == 2 and (K // G) // plan["splits"] % 4 != 0
    assert plan["m_tiles"] == 1 and plan["grid"] == (3, 2) and plan["split_programs"]
    assert launch_plan(16, N, K, G, torch.device("cpu"), _cfg())["grid"] == (3, 2)  # every row in each program


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 3, 4, 16])
def test_values(m, dtype):
    seed = m * 7 + DTYPES.index(dtype)
    wp, s = _weights(N, K, G, seed)
    x = _x(m, K, dtype, seed + 100)
    _check(int4_matmul(x, wp, s, G, cfg=_cfg()), x, wp, s, G)


@pytest.mark.parametrize("g, k", [(32, 32), (64, 128), (128, 384), (256, 256), (256, 1024)])
def test_group_sizes_and_k_of_one_to_many_groups(g, k):
    wp, s = _weights(21, k, g, g + k)
    x = _x(2, k, torch.bfloat16, g)
    for gps in (1, 2):
        _check(int4_matmul(x, wp, s, g, cfg=_cfg(bn=8, gps=gps)), x, wp, s, g)


def test_fp32_scales_and_wide_block():
    wp, s = _weights(45, 512, 128, 3)
    x = _x(4, 512, torch.float16, 4)
    _check(int4_matmul(x, wp, s.float(), cfg=_cfg(bn=64, gps=2)), x, wp, s.float(), 128)


def test_strided_and_transposed_x():
    wp, s = _weights(N, K, G, 5)
    base = _x(4, K + 24, torch.float16, 6)
    x = base[:, 3:K + 3]  # row stride != K, unaligned start
    _check(int4_matmul(x, wp, s, G, cfg=_cfg()), x, wp, s, G)
    xt = _x(K, 3, torch.bfloat16, 7).t()  # column stride != 1
    _check(int4_matmul(xt, wp, s, G, cfg=_cfg()), xt, wp, s, G)


def test_splits_with_and_without_split_programs_and_determinism():
    """Split programs (partials + the ordered reduce) or one program walking both splits, and any groups per
    step: the same bits, call after call (the sum order is the groups' order within each numeric split)."""
    wp, s = _weights(N, K, G, 8)
    x = _x(3, K, torch.float16, 9)
    first = int4_matmul(x, wp, s, G, cfg=_cfg())
    assert torch.equal(first, int4_matmul(x, wp, s, G, cfg=_cfg()))
    assert torch.equal(first, int4_matmul(x, wp, s, G, cfg=_cfg(), split_programs=False))
    for gps in (1, 2, 8):
        assert torch.equal(first, int4_matmul(x, wp, s, G, cfg=_cfg(gps=gps))), gps


def test_batch_invariance_within_the_family():
    """A row's bits do not depend on the batch: rows alone (M = 1) equal the same rows at M = 4 and M = 16."""
    wp, s = _weights(N, K, G, 10)
    x = _x(16, K, torch.bfloat16, 11)
    full = int4_matmul(x, wp, s, G, cfg=_cfg())
    four = int4_matmul(x[4:8], wp, s, G, cfg=_cfg())
    assert torch.equal(four, full[4:8])
    for r in (4, 7, 15):
        assert torch.equal(int4_matmul(x[r:r + 1], wp, s, G, cfg=_cfg()), full[r:r + 1]), r


def test_empty_rows_launch_nothing():
    wp, s = _weights(N, K, G, 12)
    y = int4_matmul(torch.empty((0, K), dtype=torch.bfloat16), wp, s, G, cfg=_cfg())
    assert y.shape == (0, N) and y.dtype == torch.bfloat16


@pytest.mark.parametrize("cfg, message", [
    (TileConfig(layout="gemv", block_n=24), "cfg: block_n must be a power of two in 1..1024 for the gemv layout"),
    (TileConfig(layout="gemv", block_n=2048), "cfg: block_n must be a power of two in 1..1024 for the gemv layout"),
    (TileConfig(layout="gemv", block_m=32), "cfg: the gemv layout has no M tile or swap-AB"),
    (TileConfig(layout="gemv", swap_ab=True), "cfg: the gemv layout has no M tile or swap-AB"),
    (TileConfig(layout="gemv", groups_per_step=3), "cfg: groups_per_step must be one of 1, 2, 4, 8"),
    (TileConfig(layout="gemv", num_warps=3), "cfg: num_warps must be 1, 2, 4, 8 or 16"),
    (TileConfig(layout="gemv", num_stages=0), "cfg: num_warps must be 1, 2, 4, 8 or 16 and num_stages >= 1"),
    (TileConfig(layout="gemm"), "cfg: layout must be one of interleaved, split-nibbles, gemv"),
])
def test_bad_config(cfg, message):
    wp, s = _weights(N, K, G, 13)
    x = _x(2, K, torch.float16, 14)
    with pytest.raises(ValueError) as info:
        int4_matmul(x, wp, s, G, cfg=cfg)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_more_than_16_rows_refused():
    wp, s = _weights(N, K, G, 15)
    with pytest.raises(ValueError, match=r"^cfg: the gemv layout serves M <= 16 rows; got M = 17$"):
        int4_matmul(_x(17, K, torch.float16, 16), wp, s, G, cfg=_cfg())


def test_not_picked_by_the_shipped_rules():
    assert all(cfg.layout == "interleaved" for _, cfg in TILE_RULES)
    assert all(tile_config(m).layout == "interleaved" for m in (1, 4, 16))
    assert _cfg().describe() == "gemv BN16 w4 s1 g4"


def test_dequant_bit_trick():
    """v | bits(2^23) is 2^23 + v in fp32; minus 2^23 + 8 gives v - 8 exactly, for every nibble."""
    v = torch.arange(16, dtype=torch.int32)
    assert torch.equal(((v | 0x4B000000).view(torch.float32) - 8388616.0).to(torch.int32), v - 8)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the GPU tests compile every kernel for real")
def test_compiles_for_sm90_without_spills_and_with_wide_weight_loads(tmp_path):
    """The candidate's launches at 1/4/16 x 4096 x 4096 bf16 as a 132-SM H200 would make them, compiled for sm_90:
    no spills, 128-bit weight loads, no tensor cores, no integer-to-float conversions (facts printed with -s)."""
    from ridgeline.ops.int4_matmul.profile import gpu_rules
    from ridgeline.profile.aot import compile_in_child
    from ridgeline.profile.launches import LaunchCapture

    spec = get_spec("int4_matmul")
    launches = []
    for m in (1, 4, 16):
        x = torch.empty((m, 4096), dtype=torch.bfloat16, device="meta")
        wp = torch.empty((4096, 2048), dtype=torch.uint8, device="meta")
        sc = torch.empty((4096, 32), dtype=torch.bfloat16, device="meta")
        with gpu_rules(spec, 132), LaunchCapture(run=False) as cap:
            try:
                int4_matmul(x, wp, sc, cfg=TileConfig(layout="gemv", block_n=64, num_warps=8, groups_per_step=2))
            except Exception:  # after its launches a recorded call trips on outputs never computed
                pass
        assert [la.name for la in cap.launches] == ["_int4_gemv_kernel", "_splitk_reduce_kernel"]
        launches.append(cap.launches[0])
    kernels = compile_in_child(launches, 90, tmp_path)
    assert kernels is not None and len(kernels) == 3
    for m, facts in zip((1, 4, 16), kernels):
        sass = facts["sass"]
        print(m, facts["registers"], facts["spill_stores_bytes"], sass["global_loads"],
              {op: sass["histogram"].get(op, 0) for op in ("LOP3", "PRMT", "SHF", "FFMA", "FADD", "LDS", "I2F")})
        assert facts["spill_stores_bytes"] == 0 and facts["spill_loads_bytes"] == 0, facts
        assert sass["global_loads"].get("128", 0) >= 2  # [64, 64]-byte tiles over 256 threads: 1 x LDG.128 a group
        assert sass["tensor_cores"] == "none" and sass["histogram"].get("I2F", 0) == 0
        # At 8 warps x is loaded straight into the reduction's layout (LDG.128); at 4 warps Triton routes it through
        # shared memory, ~32 scalar LDS a row and group (kernel_gemv.py's compile facts).
        assert sass["shared_loads"] <= 2 * m, sass["shared_loads"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nk", [(4096, 4096), (6144, 4096), (28672, 4096), (8192, 8192), (10240, 8192),
                                (57344, 8192), (4096, 14336), (8192, 28672)])
def test_gpu_decode_shapes(nk, dtype):
    """The sweep's N x K at M = 1, 4, 16 vs float64, repeated calls, groups per step and M = 1 / 4 rows against the
    16-row call (bitwise: one family)."""
    n, k = nk
    gen = torch.Generator(device="cuda").manual_seed(n + k)
    wp, s = pack_int4(torch.randn((n, k), generator=gen, device="cuda").to(torch.bfloat16))
    x = torch.randn((16, k), generator=gen, device="cuda").to(dtype)
    cfg = TileConfig(layout="gemv", block_n=64, num_warps=8, groups_per_step=2)
    full = int4_matmul(x, wp, s, cfg=cfg)
    _check(full, x, wp, s, 128)
    assert torch.equal(full, int4_matmul(x, wp, s, cfg=cfg))
    assert torch.equal(full, int4_matmul(x, wp, s, cfg=TileConfig(layout="gemv", block_n=64, num_warps=8,
                                                                        groups_per_step=4)))
    for rows in (slice(0, 1), slice(5, 9), slice(15, 16)):
        part = int4_matmul(x[rows].clone(), wp, s, cfg=cfg)
        _check(part, x[rows], wp, s, 128)
        assert torch.equal(part, full[rows])
