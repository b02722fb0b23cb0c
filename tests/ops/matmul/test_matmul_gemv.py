"""CPU (interpreter) tests of the decode GEMV candidate (kernel_gemv.py through matmul_2d's config override):
values vs float64, split-K, bias, strides, edge sizes, determinism, batch invariance within the family, errors."""

from __future__ import annotations

import pytest
import torch

import ridgeline.ops.matmul  # noqa: F401
from ridgeline.ops.matmul import rules
from ridgeline.ops.matmul.launch import matmul_2d
from ridgeline.ops.matmul.spec import matmul_tolerance, reference_matmul

G = rules.GemvConfig


def _close(y: torch.Tensor, ref: torch.Tensor, k: int, dtype: torch.dtype) -> None:
    tol = matmul_tolerance(k, dtype)
    assert y.shape == ref.shape and y.dtype == dtype
    bad = (y.double() - ref).abs() > tol.atol + tol.rtol * ref.abs()
    assert not bad.any(), f"{int(bad.sum())} elements out of tolerance"


def _inputs(m: int, n: int, k: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(dtype)
    w = (torch.randn(n, k, generator=g) / k**0.5).to(dtype)
    return x, w


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k,cfg", [
    (1, 40, 200, G(16, 64, 4)),             # N, K not multiples of the tile; the rule's split (1 on the CPU)
    (3, 37, 300, G(16, 64, 2, splits=3)),   # split programs, the last chunk short
    (8, 24, 130, G(32, 32, 4, splits=2)),   # one column block wider than N
    (8, 33, 96, G(16, 32, 8, splits=1)),
])
def test_values(dtype, m, n, k, cfg):
    x, w = _inputs(m, n, k, dtype)
    _close(matmul_2d(x, w, None, dtype, "nt", cfg), reference_matmul(x, w, None, "nt"), k, dtype)


@pytest.mark.parametrize("splits", [1, 3])
def test_bias_out_dtype_kn_layout_and_strided_x(splits):
    k, n = 150, 20
    buf = torch.randn(4, k + 24).half()
    x = buf[:, 5:5 + k]  # row stride k + 24, a misaligned base: read in place
    w = (torch.randn(n, k) / k**0.5).half()
    b = torch.randn(n).bfloat16()
    cfg = G(16, 32, 4, splits=splits)
    ref = reference_matmul(x, w, b, "nt")
    _close(matmul_2d(x, w, b, torch.float16, "nt", cfg), ref, k, torch.float16)
    _close(matmul_2d(x, w, b, torch.float32, "nt", cfg), ref, k, torch.float32)
    wkn = w.T.contiguous()  # b [K, N]: the "kn" layout through the same body
    _close(matmul_2d(x, wkn, b, torch.float16, "kn", cfg), reference_matmul(x, wkn, b, "kn"), k, torch.float16)
    xt = torch.randn(k, 2).half().T  # x with a unit row stride (element stride 2): any strides
    _close(matmul_2d(xt, w, None, torch.float16, "nt", cfg), reference_matmul(xt, w, None, "nt"), k, torch.float16)


def test_empty_sizes_launch_nothing():
    cfg = G(16, 32, 4)
    y = matmul_2d(torch.empty(0, 32).half(), torch.randn(8, 32).half(), None, torch.float16, "nt", cfg)
    assert y.shape == (0, 8)
    b = torch.randn(8)
    y = matmul_2d(torch.empty(2, 0).half(), torch.empty(8, 0).half(), b, torch.float32, "nt", cfg)
    assert torch.equal(y, b.expand(2, 8))


def test_deterministic_and_batch_invariant_within_the_family():
    k, n = 320, 24
    x, w = _inputs(8, n, k, torch.bfloat16, 1)
    for cfg in (G(16, 64, 4, splits=1), G(16, 64, 4, splits=3)):
        y8 = matmul_2d(x, w, None, torch.bfloat16, "nt", cfg)
        assert torch.equal(y8, matmul_2d(x, w, None, torch.bfloat16, "nt", cfg))
        for rows in ([0], [2, 3, 4], [7]):
            ym = matmul_2d(x[rows], w, None, torch.bfloat16, "nt", cfg)
            assert torch.equal(ym, y8[rows]), (cfg, rows)


def test_split_rule_depends_on_n_k_and_sms_only():
    assert rules.gemv_splits(4096, 4096, 132) == 3  # 128 blocks of 32 columns: 264 programs wanted
    assert rules.gemv_splits(28672, 4096, 132) == 1  # 896 blocks fill the SMs alone
    assert rules.gemv_splits(4096, 14336, 132) == 3
    assert rules.gemv_splits(64, 512, 132) == 1  # too little K to split
    plan = rules.gemv_plan(1, 4096, 4096, G(32, 512, 4), 132)
    assert plan == {"blocks": 128, "splits": 3, "k_chunk": 1536}
    assert rules.gemv_plan(1, 4096, 4096, G(32, 512, 4), 132) == rules.gemv_plan(8, 4096, 4096, G(32, 512, 4), 132)
    assert rules.gemv_plan(1, 64, 1024, G(32, 512, 4, splits=5), 132)["splits"] == 2  # never an empty chunk
    assert all(isinstance(c, rules.GemvConfig) for c in rules.GEMV_CANDIDATES)


def test_shipped_rules_never_pick_the_gemv():
    cpu = torch.device("cpu")
    for m in range(1, 9):
        assert isinstance(rules.config_for(m, 4096, 4096, torch.bfloat16, cpu)[0], rules.GemmConfig)
    assert all(isinstance(r.config, rules.GemmConfig) for r in rules.RULES + rules.INTERPRETER_RULES)


@pytest.mark.parametrize("cfg,m,text", [
    (G(24, 64, 4), 1, "cfg: block_n must be a power of two in 1..1024"),
    (G(16, 8, 4), 1, "cfg: block_k must be a power of two in 16..4096"),
    (G(16, 64, 3), 1, "cfg: num_warps must be 1, 2, 4, 8 or 16"),
    (G(16, 64, 4, splits=0), 1, "cfg: splits must be None"),
    (G(16, 64, 4), 9, "cfg: the gemv config serves M <= 8 rows; got M = 9"),
])
def test_bad_configs(cfg, m, text):
    x, w = _inputs(m, 16, 32, torch.float16)
    with pytest.raises(ValueError, match=text.replace("(", r"\(").replace(".", r"\.")) as info:
        matmul_2d(x, w, None, torch.float16, "nt", cfg)
    assert "\n" not in str(info.value)
