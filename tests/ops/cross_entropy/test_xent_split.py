"""The split-row candidate (kernel_split.py, forced through the launch's config override at small V): against
float64 and the shipped kernel for every option, chunk counts from one to many, V not a multiple of the chunk,
strided logits, in place, the forward-only contract, ignored / bad / NaN / -inf rows, bitwise determinism and batch
invariance, the rules' split plan; on the GPU, 4096 x 128256 and more than 2^31 logits against float64."""

import pytest
import torch

from conftest import DEVICE
from ridgeline.ops.cross_entropy import launch as L
from ridgeline.ops.cross_entropy import rules
from ridgeline.ops.cross_entropy.rules import Case, LaunchConfig, split_config, split_plan
from ridgeline.ops.cross_entropy.spec import HUGE, IGNORE_INDEX, reference

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LOSS_TOL = {"atol": 2e-5, "rtol": 2e-5}
GRAD_RTOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
OPTIONS = [{}, {"label_smoothing": 0.1}, {"z_loss": 1e-3}, {"reduction": "sum"}, {"reduction": "none"},
           {"label_smoothing": 0.2, "z_loss": 1e-4, "reduction": "none"}]


def _inputs(n, v, dtype, seed=0, ignore_every=0, pad=0, device=DEVICE):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = (2 * torch.randn(n, v + pad, generator=gen, device=device)).to(dtype)[:, :v]
    t = torch.randint(0, v, (n,), generator=gen, device=device)
    if ignore_every:
        t[1::ignore_every] = IGNORE_INDEX
    return x, t


def _cfg(chunk, v=1000, itemsize=2, warps=4, group_bytes=0, reverse=True):
    return split_config(v, itemsize, chunk=chunk, num_warps=warps, group_bytes=group_bytes, reverse=reverse)


def _call(x, t, cfg=None, grad=True, inplace=False, ignore_index=IGNORE_INDEX, label_smoothing=0.0,
          reduction="mean", z_loss=0.0):
    """(loss, gradient or None) through launch._run with `cfg` (None: the shipped rules)."""
    x, t, ii, ls, z = L._validate(x, t, ignore_index, label_smoothing, reduction, z_loss)
    g = None
    if inplace:
        g = x  # (rows may be strided: the gradient takes the logits' layout)
    elif grad:
        g = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    loss = L._run(x, t, ii, ls, reduction, z, g, False, cfg)
    return loss, g


def _close_grad(g, ref, dtype, scale):
    assert g.dtype == dtype
    atol = (2.0**-24 if dtype == torch.float16 else 0.0) + 1e-5 * scale / g.shape[1]
    torch.testing.assert_close(g.double(), ref, atol=atol, rtol=GRAD_RTOL[dtype])


def _scale(t, kw):
    return 1.0 / int((t != IGNORE_INDEX).sum()) if kw.get("reduction", "mean") == "mean" else 1.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", OPTIONS, ids=lambda k: "+".join(f"{a}={b}" for a, b in k.items()) or "plain")
def test_split_matches_fp64_and_the_shipped_kernel(dtype, kw):
    x, t = _inputs(6, 1000, dtype, ignore_every=3)  # 1000 = 7 chunks of 128 + 104
    cfg = _cfg(128, itemsize=x.element_size(), group_bytes=2 * 1000 * x.element_size())  # 3 groups of 2 rows
    loss, g = _call(x, t, cfg, **kw)
    ref_loss, ref_g = reference(x, t, with_grad=True, **kw)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss.double(), ref_loss, **LOSS_TOL)
    _close_grad(g, ref_g, dtype, _scale(t, kw))
    ship_loss, ship_g = _call(x, t, None, **kw)
    torch.testing.assert_close(loss, ship_loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(g.float(), ship_g.float(), atol=1e-7, rtol=GRAD_RTOL[dtype])
    # The forward-only contract (one kernel-2 program a row, no gradient) gives the same loss bits.
    assert torch.equal(_call(x, t, cfg, grad=False, **kw)[0], loss)
    # In place: the gradient over the logits, the same bits.
    xi = x.clone()
    loss_i, g_i = _call(xi, t, cfg, inplace=True, **kw)
    assert g_i.data_ptr() == xi.data_ptr() and torch.equal(g_i, g) and torch.equal(loss_i, loss)


@pytest.mark.parametrize(("v", "chunk"), [(100, 128), (128, 128), (512, 128), (1000, 16), (777, 64), (1, 16)],
                         ids=["one-chunk", "one-full-chunk", "exact-multiple", "many-chunks", "ragged", "v1"])
def test_chunk_counts(v, chunk):
    x, t = _inputs(3, v, torch.bfloat16)
    kw = {"label_smoothing": 0.1, "z_loss": 1e-3}
    loss, g = _call(x, t, _cfg(chunk, v), **kw)
    ref_loss, ref_g = reference(x, t, with_grad=True, **kw)
    torch.testing.assert_close(loss.double(), ref_loss, **LOSS_TOL)
    _close_grad(g, ref_g, torch.bfloat16, 1 / 3)


@pytest.mark.parametrize(("v", "pad"), [(1000, 13), (1001, 7), (1000, 8)], ids=["odd-stride", "odd-v", "aligned"])
def test_strided_logits_are_read_in_place(v, pad):
    x, t = _inputs(4, v, torch.bfloat16, pad=pad, ignore_every=3)
    assert x.stride(0) == v + pad
    loss, g = _call(x, t, _cfg(256, v), reduction="none")
    ref_loss, ref_g = reference(x, t, with_grad=True, reduction="none")
    torch.testing.assert_close(loss.double(), ref_loss, **LOSS_TOL)
    _close_grad(g, ref_g, torch.bfloat16, 1.0)
    assert torch.equal(_call(x.contiguous(), t, _cfg(256, v), reduction="none")[1], g)
    base = x.as_strided((4, v + pad), (v + pad, 1)).clone()  # the padded buffer, then in place on its view
    view = base[:, :v]
    rows_i, g_i = _call(view, t, _cfg(256, v), reduction="none", inplace=True)
    assert g_i.data_ptr() == base.data_ptr() and torch.equal(g_i, g) and torch.equal(rows_i, loss)
    assert torch.equal(base[:, v:], x.as_strided((4, v + pad), (v + pad, 1))[:, v:])  # the padding untouched


def test_mean_is_the_sum_over_the_valid_rows_as_the_shipped_kernel_divides():
    x, t = _inputs(7, 300, torch.float32, ignore_every=3)
    cfg = _cfg(64, 300, 4)
    mean = _call(x, t, cfg)[0]
    total = _call(x, t, cfg, reduction="sum")[0]
    n_valid = torch.tensor(float((t != IGNORE_INDEX).sum()), dtype=torch.float32)
    assert torch.equal(mean, total / n_valid)  # one float32 division of the same ordered sum


def test_deterministic_batch_invariant_and_group_independent():
    x, t = _inputs(9, 700, torch.bfloat16, ignore_every=4)
    cfg = _cfg(128, 700)
    rows, g = _call(x, t, cfg, reduction="none")
    rows2, g2 = _call(x, t, cfg, reduction="none")
    assert torch.equal(rows, rows2) and torch.equal(g, g2)
    for sl in (slice(0, 1), slice(3, 6), slice(8, 9)):
        r, gs = _call(x[sl], t[sl], cfg, reduction="none")
        assert torch.equal(r, rows[sl]) and torch.equal(gs, g[sl])
    # Groups of rows and kernel 2's walk order change no bit.
    for other in (_cfg(128, 700, group_bytes=1400), _cfg(128, 700, group_bytes=4200, reverse=False)):
        r, gs = _call(x, t, other, reduction="none")
        assert torch.equal(r, rows) and torch.equal(gs, g)


def test_ignored_bad_nan_and_all_minus_inf_rows():
    x, t = _inputs(6, 300, torch.float32)
    cfg = _cfg(64, 300, 4)
    t[0] = IGNORE_INDEX
    t[2] = 300  # out of range
    t[3] = -5  # out of range, and t // CHUNK would be chunk 0 if it were used as an address
    x[4, 7] = float("nan")
    x[5, 64:128] = float("-inf")  # one whole chunk of -inf in a finite row: contributes exactly 0
    rows, g = _call(x, t, cfg, reduction="none")
    assert rows[0].item() == 0.0 and torch.equal(g[0], torch.zeros_like(g[0]))
    assert torch.isnan(rows[2:5]).all() and torch.isnan(g[2:5]).all()
    assert torch.isfinite(rows[[1, 5]]).all() and torch.isfinite(g[[1, 5]]).all()
    t[5] = 10
    rows, g = _call(x, t, cfg, reduction="none")
    # (the reference's smoothing term is 0 * (lse - mean(x)) = NaN at -inf: give it -1e30, whose exp is 0 as well)
    finite = torch.where(x == float("-inf"), -1e30, x)
    ref_rows, ref_g = reference(finite[[1, 5]], t[[1, 5]], reduction="none", with_grad=True)
    torch.testing.assert_close(rows[[1, 5]].double(), ref_rows, **LOSS_TOL)
    torch.testing.assert_close(g[[1, 5]].double(), ref_g, atol=1e-9, rtol=1e-5)
    assert (g[5, 64:128] == 0).all()


def test_all_rows_ignored_mean_is_nan_with_zero_gradient():
    x, t = _inputs(4, 200, torch.bfloat16)
    t[:] = 5
    loss, g = _call(x, t, _cfg(64, 200), ignore_index=5)
    assert torch.isnan(loss) and torch.equal(g, torch.zeros_like(g))


def test_int32_and_strided_targets_and_empty_batch():
    x, t = _inputs(5, 200, torch.float16)
    cfg = _cfg(64, 200)
    ref = _call(x, t, cfg)
    wide = torch.stack([t, t], dim=1)[:, 0]
    for tt in (t.to(torch.int32), wide):
        got = _call(x, tt, cfg)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    e = torch.zeros(0, 200, dtype=torch.float16, device=DEVICE)
    loss, g = _call(e, torch.zeros(0, dtype=torch.int64, device=DEVICE), cfg)
    assert torch.isnan(loss) and g.shape == (0, 200)


def test_rules_split_plan_and_configs():
    cfg = split_config(128256, 2)
    assert (cfg.block, cfg.num_warps, cfg.split, cfg.group_bytes) == (8192, 8, True, 32 * 2**20)
    assert split_config(128256, 4).block == 4096 and split_config(100, 2).block == 128
    assert cfg.describe() == "split CHUNK=8192 warps=8 groups 32 MiB reverse"
    chunks, rows = split_plan(4096, 128256, 2, cfg)
    assert chunks == 16 and rows * 128256 * 2 <= 32 * 2**20 and -(-4096 // rows) == 32
    assert split_plan(4096, 128256, 2, cfg, has_grad=False) == (16, 4096)  # the forward re-reads nothing
    assert split_plan(7, 128256, 2, cfg)[0] == 16  # the chunks never follow the row count
    assert rules.s_block(128256, cfg) == 16 and rules.s_block(262144, _cfg(2048)) == 128
    assert rules.grid_for(Case(128256, 2, 4096, True), cfg) == 16 * rows
    with pytest.raises(ValueError, match="power of two"):
        LaunchConfig(1000, 4, False, split=True)
    with pytest.raises(ValueError, match="split rows take no"):
        LaunchConfig(1024, 4, True, split=True)


def test_the_split_rule_is_off_unless_asked(monkeypatch):
    case = Case(128256, 2, 4096, True)
    rules.config_for.cache_clear()
    assert not rules.config_for(case).split
    monkeypatch.setattr(rules, "SPLIT_ENABLED", True)
    rules.config_for.cache_clear()
    try:
        assert rules.config_for(case) == split_config(128256, 2)
        assert rules.config_for(Case(4000, 2)).single  # rows held in registers stay as they are
    finally:
        monkeypatch.setattr(rules, "SPLIT_ENABLED", False)
        rules.config_for.cache_clear()


# --- on the GPU ------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1, "z_loss": 1e-4, "reduction": "none"}])
def test_gpu_split_4096x128256_against_float64(kw):
    x, t = _inputs(4096, 128256, torch.bfloat16, ignore_every=7, device="cuda")
    cfg = split_config(128256, 2)
    loss, g = _call(x, t, cfg, **kw)
    ref_loss, ref_g = reference(x, t, with_grad=True, **kw)
    torch.testing.assert_close(loss.double(), ref_loss, atol=1e-4, rtol=1e-5)
    _close_grad(g, ref_g, torch.bfloat16, _scale(t, kw))
    del ref_g
    assert torch.equal(_call(x, t, cfg, grad=False, **kw)[0], loss)
    for _ in range(2):
        l2, g2 = _call(x, t, cfg, **kw)
        assert torch.equal(l2, loss) and torch.equal(g2, g)
    if kw.get("reduction") == "none":
        for sl in (slice(0, 1), slice(1000, 1033)):
            r, gs = _call(x[sl], t[sl], cfg, **kw)
            assert torch.equal(r, loss[sl]) and torch.equal(gs, g[sl])
    xi = x.clone()
    li, gi = _call(xi, t, cfg, inplace=True, **kw)
    assert torch.equal(li, loss) and torch.equal(gi, g)


@pytest.mark.gpu
def test_gpu_split_more_than_2_31_logits():
    n, v = HUGE
    x, t = _inputs(n, v, torch.bfloat16, device="cuda")
    t[-1] = v - 1
    rows, g = _call(x, t, split_config(v, 2), reduction="none")
    tail = slice(n - 3, n)
    ref_rows, ref_g = reference(x[tail], t[tail], reduction="none", with_grad=True)
    torch.testing.assert_close(rows[tail].double(), ref_rows, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(g[tail].double(), ref_g, atol=1e-9, rtol=8e-3)
