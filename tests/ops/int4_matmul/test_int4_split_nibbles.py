"""CPU (interpreter) tests of int4_matmul's second kernel body, layout "split-nibbles" (kernel_split.py), a tuning
candidate: values vs float64, splits with partial K steps, determinism, batch invariance, groups-per-step
invariance, bad configs, and its ahead-of-time compile for sm_90 (registers, spills, tensor-core SASS)."""

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
# its split and must mask groups off (the next split's and, at the end, past K).
N, K, G = 37, 640, 64


def _cfg(swap: bool = True, gps: int = 4, bm: int = 16, bn: int = 16) -> TileConfig:
    return TileConfig(bm, bn, 4, 2, layout="split-nibbles", groups_per_step=gps, swap_ab=swap)


_weights, _x, _check = weights, activations, check



def test_setup_exercises_splits_and_partial_steps():
    plan = launch_plan(3, N, K, G, torch.device("cpu"), _cfg())
    assert plan["splits"] == 2 and (K // G) // plan["splits"] % 4 != 0


@pytest.mark.parametrize("swap", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 3, 16, 17])
def test_values(m, dtype, swap):
    seed = m * 7 + DTYPES.index(dtype) * 2 + swap
    wp, s = _weights(N, K, G, seed)
    x = _x(m, K, dtype, seed + 100)
    _check(int4_matmul(x, wp, s, G, cfg=_cfg(swap)), x, wp, s, G)


@pytest.mark.parametrize("swap", [True, False])
def test_group_128_two_groups_per_step_and_fp32_scales(swap):
    wp, s = _weights(45, 512, 128, 3)
    x = _x(5, 512, torch.float16, 4)
    _check(int4_matmul(x, wp, s, cfg=_cfg(swap, gps=2, bn=32)), x, wp, s, 128)
    _check(int4_matmul(x, wp, s.float(), cfg=_cfg(swap, gps=2, bn=32)), x, wp, s.float(), 128)


@pytest.mark.parametrize("swap", [True, False])
def test_strided_and_transposed_x(swap):
    wp, s = _weights(N, K, G, 5)
    base = _x(4, K + 24, torch.float16, 6)
    x = base[:, 3:K + 3]  # row stride != K, unaligned start
    _check(int4_matmul(x, wp, s, G, cfg=_cfg(swap)), x, wp, s, G)
    xt = _x(K, 4, torch.float16, 7).t()  # column stride != 1: the stride-2 loads step by 2 * stride_xk
    _check(int4_matmul(xt, wp, s, G, cfg=_cfg(swap)), xt, wp, s, G)


@pytest.mark.parametrize("swap", [True, False])
def test_deterministic_and_launch_invariant(swap):
    """Repeated calls, split programs on or off, and any groups per step give the same bits (the sum order is
    the groups' order within each numeric split, whatever the step)."""
    wp, s = _weights(N, K, G, 8)
    x = _x(3, K, torch.float16, 9)
    first = int4_matmul(x, wp, s, G, cfg=_cfg(swap))
    assert torch.equal(first, int4_matmul(x, wp, s, G, cfg=_cfg(swap)))
    assert torch.equal(first, int4_matmul(x, wp, s, G, cfg=_cfg(swap), split_programs=False))
    for gps in (1, 2, 8):
        assert torch.equal(first, int4_matmul(x, wp, s, G, cfg=_cfg(swap, gps=gps))), gps


@pytest.mark.parametrize("swap", [True, False])
def test_batch_invariance(swap):
    """A row's bits do not depend on the batch: alone, in 3 rows, or in 17 (the second M tile)."""
    wp, s = _weights(N, K, G, 10)
    x = _x(17, K, torch.float16, 11)
    full = int4_matmul(x, wp, s, G, cfg=_cfg(swap))
    assert torch.equal(int4_matmul(x[16:17], wp, s, G, cfg=_cfg(swap)), full[16:17])
    assert torch.equal(int4_matmul(x[5:8], wp, s, G, cfg=_cfg(swap)), full[5:8])
    if swap:  # BLOCK_M is the MMA's N here: a wider token tile must not change the bits either
        assert torch.equal(int4_matmul(x, wp, s, G, cfg=_cfg(swap, bm=32)), full)


def test_empty_rows_launch_nothing():
    wp, s = _weights(N, K, G, 12)
    y = int4_matmul(torch.empty((0, K), dtype=torch.bfloat16), wp, s, G, cfg=_cfg())
    assert y.shape == (0, N) and y.dtype == torch.bfloat16


@pytest.mark.parametrize("cfg, message", [
    (TileConfig(16, 16, 4, 2, layout="nibbles"), "cfg: layout must be one of interleaved, split-nibbles"),
    (TileConfig(16, 16, 4, 2, layout="split-nibbles", groups_per_step=3), "cfg: groups_per_step must be one of"),
    (TileConfig(16, 8, 4, 2, layout="split-nibbles"), "cfg: block_n must be a power of two >= 16"),
    (TileConfig(24, 16, 4, 2, layout="split-nibbles"), "cfg: block_m must be a power of two >= 16"),
    (TileConfig(16, 16, 3, 2, layout="split-nibbles"), "cfg: num_warps must be"),
    (TileConfig(16, 64, 4, 4, groups_per_step=2), "cfg: groups_per_step and swap_ab are split-nibbles options"),
    (TileConfig(16, 64, 4, 4, swap_ab=True), "cfg: groups_per_step and swap_ab are split-nibbles options"),
    ((16, 64, 4, 4), "cfg: expected a rules.TileConfig, got tuple"),
])
def test_bad_config(cfg, message):
    wp, s = _weights(N, K, G, 13)
    x = _x(2, K, torch.float16, 14)
    err = TypeError if isinstance(cfg, tuple) else ValueError
    with pytest.raises(err) as info:
        int4_matmul(x, wp, s, G, cfg=cfg)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_not_picked_by_the_shipped_rules():
    assert all(cfg.layout == "interleaved" for _, cfg in TILE_RULES)
    assert tile_config(1).layout == "interleaved"


def test_dequant_bit_trick_constants():
    """v | bits(1024.0) is 1024 + v in fp16, v | bits(128.0) is 128 + v in bf16: minus 1032 / 136 gives v - 8
    exactly (the interpreter runs the fp16 form in test_values; the bf16 form runs on the GPU only)."""
    v = torch.arange(16, dtype=torch.int16)
    assert torch.equal(((v | 0x6400).view(torch.float16).float() - 1032).to(torch.int16), v - 8)
    assert torch.equal(((v | 0x4300).view(torch.bfloat16).float() - 136).to(torch.int16), v - 8)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the GPU tests compile every kernel for real")
def test_compiles_for_sm90(tmp_path):
    """The candidate's launches at a decode shape, as a 132-SM H200 would make them (both orientations, bf16 and
    fp32 x), compiled ahead of time for sm_90: no error; for 16-bit x no spills and tensor cores (HGMMA when the
    weight is the MMA's M operand). (fp32 x takes the IEEE dot on the FMA units and may spill: not a decode
    target; the facts are printed with -s.)"""
    from ridgeline.ops.int4_matmul.profile import gpu_rules
    from ridgeline.profile.aot import compile_in_child
    from ridgeline.profile.launches import LaunchCapture

    spec = get_spec("int4_matmul")
    launches, names = [], []
    m, n, k = 1, 4096, 4096
    for dtype in (torch.bfloat16, torch.float32):
        for swap in (True, False):
            x = torch.empty((m, k), dtype=dtype, device="meta")
            wp = torch.empty((n, k // 2), dtype=torch.uint8, device="meta")
            sc = torch.empty((n, k // 128), dtype=torch.bfloat16, device="meta")
            with gpu_rules(spec, 132), LaunchCapture(run=False) as cap:
                try:
                    int4_matmul(x, wp, sc, cfg=_cfg(swap, gps=2, bn=64))
                except Exception:  # after its launches a recorded call trips on outputs never computed
                    pass
            assert [la.name for la in cap.launches] == ["_int4_mm_split_kernel", "_splitk_reduce_kernel"]
            launches.append(cap.launches[0])
            names.append((dtype, swap))
    kernels = compile_in_child(launches, 90, tmp_path)
    assert kernels is not None and len(kernels) == len(launches)
    for (dtype, swap), facts in zip(names, kernels):
        print(dtype, "swap_ab" if swap else "", {key: facts.get(key) for key in (
            "registers", "spill_stores_bytes", "spill_loads_bytes", "shared_bytes")}, facts["sass"]["tensor_cores"])
        assert facts["registers"] and facts["sass"]["instructions"] > 0
        if dtype == torch.bfloat16:
            assert facts["spill_stores_bytes"] == 0 and facts["spill_loads_bytes"] == 0, facts
            assert facts["sass"]["tensor_cores"] == ("HGMMA" if swap else "HMMA"), facts["sass"]["tensor_cores"]


@pytest.mark.gpu
@pytest.mark.parametrize("swap", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 6144, 4096), (17, 4100, 14336)])
def test_gpu_values_invariance_determinism(shape, dtype, swap):
    """On the GPU: layer shapes vs float64 (the bf16 bit trick and the tensor-core dots run only here), a row alone
    vs in the batch, repeated calls and groups per step bitwise equal."""
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m + n)
    wp, s = pack_int4(torch.randn((n, k), generator=gen, device="cuda").to(torch.bfloat16))
    x = torch.randn((m, k), generator=gen, device="cuda").to(dtype)
    cfg = _cfg(swap, gps=2, bn=64)
    y = int4_matmul(x, wp, s, cfg=cfg)
    _check(y, x, wp, s, 128)
    assert torch.equal(y, int4_matmul(x, wp, s, cfg=cfg))
    assert torch.equal(y, int4_matmul(x, wp, s, cfg=_cfg(swap, gps=4, bn=64)))
    assert torch.equal(y[m - 1:], int4_matmul(x[m - 1:].clone(), wp, s, cfg=cfg))
