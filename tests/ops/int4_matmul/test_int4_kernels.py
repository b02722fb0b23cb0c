"""CPU (interpreter) tests of int4_matmul and pack_int4: values vs float64, layouts, edge shapes, errors, autograd,
torch.compile, the launch rules and the harness."""

from __future__ import annotations

import math

import pytest
import torch

import ridgeline
from ridgeline.core.registry import get_spec, resolve
from ridgeline.core.spec import Case
from ridgeline.ops.int4_matmul.launch import int4_matmul, launch_plan
from ridgeline.ops.int4_matmul.pack import GroupSizeError, pack_int4, unpack_int4, unpack_nibbles
from ridgeline.ops.int4_matmul.rules import TILE_RULES, TileConfig, splits_for, tile_config

DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _weights(n: int, k: int, g: int = 128, seed: int = 0):
    w = torch.randn((n, k), generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    return pack_int4(w, g)


def _check(y: torch.Tensor, x: torch.Tensor, wp, s, g: int = 128) -> None:
    ref = x.double() @ unpack_int4(wp, s, g).t()
    spec = get_spec("int4_matmul")
    tol = spec.tolerance_for(Case((x.shape[0], wp.shape[0], x.shape[1]), x.dtype), "y", x.dtype)
    assert y.dtype == x.dtype and y.shape == ref.shape
    err = (y.double() - ref).abs()
    assert bool((err <= tol.atol + tol.rtol * ref.abs()).all()), float(err.max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 64, 512), (17, 72, 384), (3, 40, 256), (2, 33, 1024), (5, 1, 128)])
def test_values(dtype, shape):
    m, n, k = shape
    wp, s = _weights(n, k)
    x = torch.randn((m, k)).to(dtype)
    _check(int4_matmul(x, wp, s), x, wp, s)


@pytest.mark.parametrize("g", [32, 64, 256])
def test_group_sizes(g):
    wp, s = _weights(48, 512, g)
    x = torch.randn((3, 512), dtype=torch.float16)
    _check(int4_matmul(x, wp, s, g), x, wp, s, g)


def test_layouts_strided_transposed_3d_and_fp32_scales():
    wp, s = _weights(40, 256)
    base = torch.randn((6, 256 + 24), dtype=torch.float16)
    x = base[:, :256]
    _check(int4_matmul(x, wp, s), x, wp, s)
    xt = torch.randn((256, 6), dtype=torch.float16).t()
    _check(int4_matmul(xt, wp, s), xt, wp, s)
    _check(int4_matmul(x, wp, s.float()), x, wp, s.float())
    x3 = torch.randn((2, 3, 256), dtype=torch.float16)
    y3 = int4_matmul(x3, wp, s)
    assert y3.shape == (2, 3, 40)
    assert torch.equal(y3.reshape(6, 40), int4_matmul(x3.reshape(6, 256), wp, s))


def test_empty_rows_and_zero_n():
    wp, s = _weights(40, 256)
    y = int4_matmul(torch.empty((0, 256), dtype=torch.bfloat16), wp, s)
    assert y.shape == (0, 40) and y.dtype == torch.bfloat16


def test_split_launches_agree_bitwise_and_batch_invariance():
    wp, s = _weights(64, 2048)
    x = torch.randn((20, 2048), dtype=torch.float16)
    plan = launch_plan(20, 64, 2048, 128, x.device)
    assert plan["splits"] > 1  # 4 SMs under the interpreter: the split rule is exercised
    a = int4_matmul(x, wp, s, split_programs=True, fused_reduce=False)
    b = int4_matmul(x, wp, s, split_programs=False)
    assert torch.equal(a, b)
    # the partials added in the kernel by each tile's last program: the same bits, and the counters left at zero
    # (twice: a second launch that found a counter not reset would skip or repeat a tile's sum)
    from ridgeline.ops.int4_matmul.launch import _counters

    assert launch_plan(20, 64, 2048, 128, x.device, split_progs=True, fused_reduce=True)["fused_reduce"]
    for _ in range(2):
        y = torch.full_like(a, float("nan"))
        y.copy_(int4_matmul(x, wp, s, split_programs=True, fused_reduce=True))
        assert torch.equal(y, a)
        assert not _counters(x.device).any()
    one = int4_matmul(x[7:8], wp, s)
    assert torch.equal(one, a[7:8])  # a row alone == that row in the batch (BLOCK_M 16 vs 32 here)
    assert torch.equal(int4_matmul(x, wp, s), a)  # deterministic


def test_nan_propagates():
    wp, s = _weights(32, 256)
    x = torch.randn((2, 256), dtype=torch.float16)
    x[0, 5] = float("nan")
    y = int4_matmul(x, wp, s)
    assert y[0].isnan().all() and not y[1].isnan().any()


def test_errors():
    wp, s = _weights(40, 256)
    x = torch.randn((2, 256), dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="^x: expected dtype"):
        int4_matmul(x.to(torch.int32), wp, s)
    with pytest.raises(TypeError, match="^w_packed: expected dtype uint8"):
        int4_matmul(x, wp.to(torch.int8), s)
    with pytest.raises(ValueError, match="^x: expected last dim K"):
        int4_matmul(x[:, :128], wp, s)
    with pytest.raises(ValueError, match="^scales: expected shape"):
        int4_matmul(x, wp, s[:, :1])
    with pytest.raises(GroupSizeError, match="^group_size: expected one of"):
        int4_matmul(x, wp, s, 100)
    with pytest.raises(ValueError, match="^w_packed: the last dim must be contiguous"):
        int4_matmul(x, wp.t().contiguous().t(), s)
    with pytest.raises(TypeError, match="^scales: expected dtype"):
        int4_matmul(x, wp, s.to(torch.int32))


def test_errors_when_x_requires_grad():
    """The autograd path (the custom op) checks its arguments first: the same one-line errors, and a weight on
    another device is refused instead of dispatching to the op's fake (meta) result."""
    wp, s = _weights(40, 256)
    x = torch.randn((2, 256), requires_grad=True)
    for group, text in ((None, "^group_size: expected one of"), ("abc", "^group_size: expected one of"),
                        (128.5, "^group_size: expected one of")):
        with pytest.raises(GroupSizeError, match=text):
            int4_matmul(x, wp, s, group)
    with pytest.raises(ValueError, match="^w_packed is on meta but x is on cpu"):
        int4_matmul(x, wp.to("meta"), s)


def test_k_zero_with_leading_dims():
    y = int4_matmul(torch.randn((2, 3, 0)).half(), torch.empty((4, 0), dtype=torch.uint8), torch.empty((4, 0)).half())
    assert y.shape == (2, 3, 4) and bool((y == 0).all())


def test_pack_exact_and_roundtrip():
    w = torch.randn((7, 384)).to(torch.bfloat16)
    w[1, 128:256] = 0
    wp, s = pack_int4(w)
    assert wp.dtype == torch.uint8 and wp.shape == (7, 192) and s.shape == (7, 3) and s.dtype == torch.bfloat16
    q = unpack_nibbles(wp)
    assert int(q.min()) >= -8 and int(q.max()) <= 7 and int(q.max()) == 7
    assert float(s[1, 1]) == 0 and bool((q[1, 128:256] == 0).all())
    # the word order (pack.py): bytes 0..3 of word i hold k 8i + (0, 2), (4, 6), (1, 3), (5, 7) as (low, high)
    for word in (0, 5, 23):
        for b, (k_lo, k_hi) in enumerate(((0, 2), (4, 6), (1, 3), (5, 7))):
            byte = int(wp[0, 4 * word + b])
            assert (byte & 15) - 8 == int(q[0, 8 * word + k_lo]) and (byte >> 4) - 8 == int(q[0, 8 * word + k_hi])
    deq = unpack_int4(wp, s)
    err = (deq - w.double()).abs().reshape(7, 3, 128)
    assert bool((err <= s.double()[..., None] / 2 + 1e-12).all())  # within half a step (clamp only above +7)


def test_pack_errors():
    with pytest.raises(GroupSizeError, match="^K: 200 is not a multiple of group_size 128"):
        pack_int4(torch.randn(4, 200))
    with pytest.raises(TypeError, match="^w: expected dtype"):
        pack_int4(torch.randn(4, 256).to(torch.float64))
    with pytest.raises(ValueError, match="^w: expected a 2-D"):
        pack_int4(torch.randn(256))


def test_autograd_matches_float64():
    wp, s = _weights(24, 256)
    x = torch.randn((3, 256), dtype=torch.float32, requires_grad=True)
    y = int4_matmul(x, wp, s)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    xd = x.detach().double().requires_grad_(True)
    ((xd @ unpack_int4(wp, s).t()) * dy.double()).sum().backward()
    assert torch.allclose(x.grad.double(), xd.grad, atol=1e-4, rtol=1e-4)
    # (No gradcheck in float64: the kernel takes 16/32-bit x; the backward is a torch matmul on the exact w_deq.)


def test_torch_compile_fullgraph():
    wp, s = _weights(24, 256)
    x = torch.randn((3, 256), dtype=torch.float16)

    @torch.compile(fullgraph=True)
    def f(x):
        return int4_matmul(x, wp, s) * 2

    assert torch.equal(f(x), int4_matmul(x, wp, s) * 2)


def test_rules():
    assert [max_m for max_m, _ in TILE_RULES] == sorted(max_m for max_m, _ in TILE_RULES)
    assert tile_config(1).block_m == 8 and tile_config(1000).block_m == 64
    assert all(isinstance(c, TileConfig) and c.block_m >= 8 and c.block_n >= 16 for _, c in TILE_RULES)
    # One MMA orientation for every batch to 32 rows (one instruction family: batch invariance, kernel.py).
    assert all(tile_config(m).swap_ab for m in range(1, 33)) and not tile_config(33).swap_ab
    # The numeric split depends on (N, K) only, never on M; decode of a 4096 x 4096 layer on 132 SMs splits.
    assert splits_for(4096, 4096, 128, 132) > 1 and splits_for(57344, 8192, 128, 132) == 1
    assert splits_for(4096, 128, 128, 132) == 1
    for m in (1, 16, 64, 256, 1024):
        assert launch_plan(m, 4096, 4096, 128, torch.device("cpu"))["splits"] == splits_for(4096, 4096, 128, 4)


def test_spec_cost_and_tolerance():
    spec = get_spec("int4_matmul")
    c = spec.cost((16, 4096, 4096), torch.bfloat16)
    assert c.bytes == 16 * 4096 * 2 + 4096 * 4096 // 2 + 4096 * 32 * 2 + 16 * 4096 * 2
    assert c.flops == 2 * 16 * 4096 * 4096 and c.unit == "bf16"
    t = spec.tolerance_for(Case((1, 64, 4096), torch.bfloat16), "y", torch.bfloat16)
    assert t.atol == pytest.approx(2**-7 * math.sqrt(4096))


@pytest.mark.parametrize("op", ["int4_matmul", "pack_int4"])
def test_harness_check_cpu(op):
    dtypes = [torch.float16, torch.float32] if op == "int4_matmul" else [torch.bfloat16, torch.float32]
    result = ridgeline.check(op, impls=["ridgeline"], dtypes=dtypes, device="cpu")
    assert result and all(r.passed for r in result), [(r.shape, r.dtype, r.variant, r.reasons) for r in result
                                                        if not r.passed]


def test_pack_peer_agrees():
    fn = resolve("pack_int4", "torch-eager").fn
    w = torch.randn((5, 256)).to(torch.float16)
    a, b = fn(w, 128), pack_int4(w, 128)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("cfg", [TileConfig(8, 16, 1, 1, swap_ab=True), TileConfig(16, 32, 2, 2, swap_ab=True,
                                                                                   groups_per_step=2),
                                 TileConfig(16, 16, 1, 1, groups_per_step=4), TileConfig(8, 32, 4, 3, swap_ab=False)])
def test_configs_values_and_bits(dtype, cfg):
    """Every orientation, tile and groups-a-trip against float64, on 7 groups (a trip of 2 or 4 groups ends on a
    masked tail) with splits; and bitwise equal to the rules' launch (same numeric split, same per-group sums)."""
    wp, s = _weights(40, 7 * 128, seed=3)
    x = torch.randn((5, 7 * 128), generator=torch.Generator().manual_seed(4)).to(dtype)
    y = int4_matmul(x, wp, s, cfg=cfg)
    _check(y, x, wp, s)
    assert torch.equal(y, int4_matmul(x, wp, s))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("cfg", [TileConfig(16, 32, 4, 2, swap_ab=True, halves=True),
                                 TileConfig(32, 16, 2, 1, swap_ab=True, halves=True, groups_per_step=2)])
def test_halves_values_and_bits(dtype, cfg):
    """x's rows as two dots' halves: rows in one half only, in both, and past one tile (a second, partial M tile)
    against float64, and bitwise equal to the rules' launch (the same per-group sums, the halves side by side)."""
    wp, s = _weights(40, 5 * 128, seed=5)
    for m in (3, 13, 19):
        x = torch.randn((m, 5 * 128), generator=torch.Generator().manual_seed(m)).to(dtype)
        y = int4_matmul(x, wp, s, cfg=cfg)
        _check(y, x, wp, s)
        assert torch.equal(y, int4_matmul(x, wp, s)), m


def test_check_config_errors():
    wp, s = _weights(40, 256)
    x = torch.randn((2, 256), dtype=torch.float16)
    for bad, text in ((TileConfig(block_m=12), "^cfg: block_m must be a power of two in 8..256"),
                      (TileConfig(block_n=8), "^cfg: block_n must be a power of two in 16..256"),
                      (TileConfig(groups_per_step=3), "^cfg: groups_per_step must be one of 1, 2, 4"),
                      (TileConfig(num_warps=3), "^cfg: num_warps must be 1, 2, 4 or 8"),
                      (TileConfig(num_stages=0), "^cfg: num_warps must be 1, 2, 4 or 8 and num_stages"),
                      (TileConfig(swap_ab=1), "^cfg: swap_ab must be a bool"),
                      (TileConfig(16, 64, 4, 4, halves=True), "^cfg: halves must be a bool, and True only with swap"),
                      (TileConfig(8, 64, 4, 4, swap_ab=True, halves=True), "^cfg: halves must be a bool")):
        with pytest.raises(ValueError, match=text):
            int4_matmul(x, wp, s, cfg=bad)
    with pytest.raises(TypeError, match="^cfg: expected a rules.TileConfig"):
        int4_matmul(x, wp, s, cfg=(16, 64))
