"""Cross-entropy on the CPU interpreter: values and gradients vs float64, every dtype and option, strided rows,
empty and degenerate inputs, NaN, ignored rows, out-of-range targets, each bad argument's message, autograd,
torch.compile, and the harness's check of ours."""

import pytest
import torch
import torch.nn.functional as F

import ridgeline
from conftest import DEVICE
from ridgeline import cross_entropy, cross_entropy_fwd_bwd
from ridgeline.ops.cross_entropy.spec import IGNORE_INDEX, reference

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Ours is float32 from the exact 16-bit logits: the loss holds float32 accuracy for every dtype.
LOSS_TOL = {"atol": 2e-5, "rtol": 2e-5}
GRAD_RTOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}  # one rounding to the dtype


def _inputs(n, v, dtype, seed=0, ignore_every=0, pad=0):
    gen = torch.Generator().manual_seed(seed)
    x = (2 * torch.randn(n, v + pad, generator=gen)).to(dtype)[:, :v]
    t = torch.randint(0, v, (n,), generator=gen)
    if ignore_every:
        t[1::ignore_every] = IGNORE_INDEX
    return x.to(DEVICE), t.to(DEVICE)


def _close_grad(g, ref, dtype, scale):
    assert g.dtype == dtype
    atol = (2.0**-24 if dtype == torch.float16 else 0.0) + 1e-5 * scale / g.shape[1]
    torch.testing.assert_close(g.double(), ref, atol=atol, rtol=GRAD_RTOL[dtype])


OPTIONS = [{}, {"label_smoothing": 0.1}, {"z_loss": 1e-3}, {"reduction": "sum"}, {"reduction": "none"},
           {"label_smoothing": 0.2, "z_loss": 1e-4, "reduction": "none"}]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 1000), (5, 4097), (3, 40000), (1, 1), (2, 3)])
@pytest.mark.parametrize("kw", OPTIONS, ids=lambda k: "+".join(f"{a}={b}" for a, b in k.items()) or "plain")
def test_loss_and_grad_match_fp64(dtype, shape, kw):
    x, t = _inputs(*shape, dtype, ignore_every=3 if shape[0] > 2 else 0)
    loss, g = cross_entropy_fwd_bwd(x, t, **kw)
    ref_loss, ref_g = reference(x, t, with_grad=True, **kw)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss.double(), ref_loss, **LOSS_TOL)
    n_valid = int((t != IGNORE_INDEX).sum())
    _close_grad(g, ref_g, dtype, 1.0 / n_valid if kw.get("reduction", "mean") == "mean" else 1.0)
    # The forward-only path gives the same loss bits.
    assert torch.equal(cross_entropy(x, t, **kw), loss)


def test_closed_form_reference_equals_float64_autograd():
    x, t = _inputs(6, 50, torch.float64, ignore_every=4)
    for kw in OPTIONS:
        xr = x.clone().requires_grad_()
        loss, g = reference(xr.detach(), t, with_grad=True, **kw)
        auto = reference(xr, t, **kw)[0]
        (ag,) = torch.autograd.grad(auto, xr, torch.ones_like(auto))
        torch.testing.assert_close(g, ag, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1}, {"reduction": "sum"}, {"reduction": "none"}])
def test_matches_torch_cross_entropy(kw):
    x, t = _inputs(9, 300, torch.float32, ignore_every=4)
    ours = cross_entropy(x, t, **kw)
    theirs = F.cross_entropy(x, t, **kw)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_strided_rows_are_read_in_place():
    x, t = _inputs(6, 1000, torch.bfloat16, pad=13)
    assert x.stride(0) == 1013
    loss, g = cross_entropy_fwd_bwd(x, t)
    ref_loss, ref_g = reference(x, t, with_grad=True)
    torch.testing.assert_close(loss.double(), ref_loss, **LOSS_TOL)
    _close_grad(g, ref_g, torch.bfloat16, 1 / 6)
    assert g.is_contiguous()


def test_columns_not_contiguous_are_copied():
    x, t = _inputs(4, 30, torch.float32)
    xt = x.t().contiguous().t()  # same values, column-major
    torch.testing.assert_close(cross_entropy(xt, t), cross_entropy(x, t), atol=0, rtol=0)


def test_two_pass_row_wider_than_registers():
    from ridgeline.ops.cross_entropy.launch import launch_config

    cfg, _ = launch_config(40000, torch.bfloat16, 3, True, DEVICE)
    assert not cfg.single  # this shape exercises the chunked stats + gradient passes
    fwd_cfg, _ = launch_config(40000, torch.bfloat16, 3, False, DEVICE)
    assert not fwd_cfg.single


def test_empty_rows():
    x = torch.randn(0, 17, device=DEVICE)
    t = torch.zeros(0, dtype=torch.int64, device=DEVICE)
    assert torch.isnan(cross_entropy(x, t))  # 0/0, as torch
    assert cross_entropy(x, t, reduction="sum").item() == 0.0
    assert cross_entropy(x, t, reduction="none").shape == (0,)
    loss, g = cross_entropy_fwd_bwd(x, t)
    assert g.shape == (0, 17) and torch.isnan(loss)
    assert torch.isnan(F.cross_entropy(x, t))  # (what torch does)


def test_all_rows_ignored_is_nan_with_zero_gradient_like_torch():
    x, t = _inputs(4, 10, torch.float32)
    t[:] = IGNORE_INDEX
    loss, g = cross_entropy_fwd_bwd(x, t)
    xr = x.clone().requires_grad_()
    tl = F.cross_entropy(xr, t)
    tl.backward()
    assert torch.isnan(loss) and torch.isnan(tl)
    assert torch.equal(g, torch.zeros_like(g)) and torch.equal(xr.grad, torch.zeros_like(g))


def test_ignored_rows_are_zero_and_custom_ignore_index():
    x, t = _inputs(8, 100, torch.bfloat16)
    t[2] = 7
    loss_rows, g = cross_entropy_fwd_bwd(x, t, ignore_index=7, reduction="none")
    assert loss_rows[2].item() == 0.0 and torch.equal(g[2], torch.zeros_like(g[2]))
    ref = F.cross_entropy(x.float(), t, ignore_index=7, reduction="none")
    torch.testing.assert_close(loss_rows, ref, atol=1e-5, rtol=1e-5)


def test_nan_logit_poisons_only_its_row():
    x, t = _inputs(4, 100, torch.float32)
    x[1, 5] = float("nan")
    rows, g = cross_entropy_fwd_bwd(x, t, reduction="none")
    assert torch.isnan(rows[1]) and torch.isnan(g[1]).all()
    assert torch.isfinite(rows[[0, 2, 3]]).all() and torch.isfinite(g[[0, 2, 3]]).all()
    assert torch.isnan(cross_entropy(x, t))


def test_out_of_range_target_gives_nan_or_a_clear_error():
    x, t = _inputs(4, 10, torch.float32)
    t[2] = 10
    rows = cross_entropy(x, t, reduction="none")
    assert torch.isnan(rows[2]) and torch.isfinite(rows[[0, 1, 3]]).all()
    _, g = cross_entropy_fwd_bwd(x, t)
    assert torch.isnan(g[2]).all()
    t[3] = -5
    with pytest.raises(ValueError, match=r"^target: 2 of 4 values are outside \[0, 10\) and not ignore_index=-100$"):
        cross_entropy(x, t, check_targets=True)
    with pytest.raises(ValueError, match="target: 2 of 4"):
        cross_entropy(x.clone().requires_grad_(), t, check_targets=True)
    t[2:] = 0
    assert torch.isfinite(cross_entropy(x, t, check_targets=True))


def test_batch_invariance_and_determinism():
    x, t = _inputs(12, 5000, torch.bfloat16, ignore_every=5)
    rows, g = cross_entropy_fwd_bwd(x, t, reduction="none")
    rows2, g2 = cross_entropy_fwd_bwd(x, t, reduction="none")
    assert torch.equal(rows, rows2) and torch.equal(g, g2)
    for sl in (slice(0, 1), slice(5, 8), slice(11, 12)):
        r, gs = cross_entropy_fwd_bwd(x[sl], t[sl], reduction="none")
        assert torch.equal(r, rows[sl]) and torch.equal(gs, g[sl])
    assert torch.equal(cross_entropy(x, t), cross_entropy(x, t))


def test_inputs_not_modified_and_inplace_writes_into_logits():
    x, t = _inputs(5, 300, torch.float16)
    x0, t0 = x.clone(), t.clone()
    loss, g = cross_entropy_fwd_bwd(x, t)
    assert torch.equal(x, x0) and torch.equal(t, t0)
    loss2, g2 = cross_entropy_fwd_bwd(x, t, inplace=True)
    assert g2.data_ptr() == x.data_ptr() and torch.equal(g2, g) and torch.equal(loss2, loss)


def test_int32_target_and_target_stride():
    x, t = _inputs(6, 50, torch.float32)
    wide = torch.stack([t, t], dim=1)[:, 0]  # stride 2
    assert wide.stride(0) == 2
    ref = cross_entropy(x, t)
    assert torch.equal(cross_entropy(x, t.to(torch.int32)), ref)
    assert torch.equal(cross_entropy(x, wide), ref)


# --- autograd and torch.compile -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1, "z_loss": 1e-3}, {"reduction": "none"}])
def test_autograd_matches_float64_reference_autograd(dtype, kw):
    x, t = _inputs(6, 700, dtype, ignore_every=3)
    xr = x.clone().requires_grad_()
    loss = cross_entropy(xr, t, **kw)
    go = torch.rand_like(loss) + 0.5  # a grad_output other than 1: backward scales the stored gradient
    loss.backward(go)
    x64 = x.double().requires_grad_()
    ref = reference(x64, t, **kw)[0]
    ref.backward(go.double())
    torch.testing.assert_close(loss.double(), ref.detach(), **LOSS_TOL)
    rtol = GRAD_RTOL[dtype] * (2 if dtype != torch.float32 else 1)  # two roundings: stored, then scaled
    torch.testing.assert_close(xr.grad.double(), x64.grad, atol=1e-7, rtol=rtol)


def test_backward_with_grad_output_one_equals_fwd_bwd_bitwise():
    x, t = _inputs(5, 1000, torch.bfloat16)
    xr = x.clone().requires_grad_()
    cross_entropy(xr, t).backward()
    assert torch.equal(xr.grad, cross_entropy_fwd_bwd(x, t)[1])


def test_backward_twice_is_refused():
    x, t = _inputs(3, 20, torch.float32)
    xr = x.clone().requires_grad_()
    loss = cross_entropy(xr, t)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward twice"):
        loss.backward()


def test_no_grad_path_writes_no_gradient():
    x, t = _inputs(3, 20, torch.float32)
    with torch.no_grad():
        loss = cross_entropy(x.clone().requires_grad_(), t)
    assert not loss.requires_grad


def test_gradcheck_is_not_applicable_in_float64():
    # The kernel computes in float32 by design and takes no float64 logits, so torch.autograd.gradcheck's float64
    # finite differences cannot be applied; the autograd tests above compare with float64 autograd instead.
    x = torch.randn(2, 3, dtype=torch.float64, device=DEVICE)
    with pytest.raises(TypeError, match="logits: expected dtype float32, float16, bfloat16; got float64"):
        cross_entropy(x, torch.zeros(2, dtype=torch.int64, device=DEVICE))


def test_fullgraph_compile_traces_through_our_ops():
    import torch._dynamo

    torch._dynamo.reset()

    def step(x, t):
        return cross_entropy(x * 1.0, t, label_smoothing=0.1) * 2.0

    x, t = _inputs(4, 64, torch.float32, ignore_every=3)
    xr = x.clone().requires_grad_()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    loss = compiled(xr, t)
    loss.backward()
    xe = x.clone().requires_grad_()
    eager = step(xe, t)
    eager.backward()
    torch.testing.assert_close(loss, eager, atol=0, rtol=0)
    torch.testing.assert_close(xr.grad, xe.grad, atol=0, rtol=0)


# --- argument checks ------------------------------------------------------------------------------------------
def _bad(msg, exc=ValueError, **kw):
    x, t = _inputs(3, 10, torch.float32)
    args = {"logits": x, "target": t, **kw}
    with pytest.raises(exc, match=msg):
        cross_entropy(**args)


def test_bad_arguments_name_themselves():
    _bad(r"^logits: expected a torch.Tensor, got list$", TypeError, logits=[1.0])
    _bad(r"^logits: expected dtype float32, float16, bfloat16; got int64$", TypeError,
         logits=torch.zeros(3, 10, dtype=torch.int64))
    _bad(r"^logits: expected 2 dims \(N, V\), got shape \(3, 10, 1\)$", logits=torch.zeros(3, 10, 1))
    _bad(r"^logits: vocab size \(dim 1\) is 0$", logits=torch.zeros(3, 0))
    _bad(r"^target: expected a torch.Tensor, got int$", TypeError, target=3)
    _bad(r"^target: expected dtype int64 or int32 \(class indices\), got float32$", TypeError,
         target=torch.zeros(3))
    _bad(r"^target: expected shape \(3,\) to match logits' rows, got \(4,\)$",
         target=torch.zeros(4, dtype=torch.int64))
    _bad(r"^ignore_index: expected an int, got float$", TypeError, ignore_index=-100.0)
    _bad(r"^reduction: expected 'mean', 'sum' or 'none', got 'avg'$", reduction="avg")
    _bad(r"^label_smoothing: expected a float in \[0, 1\], got 1.5$", label_smoothing=1.5)
    _bad(r"^label_smoothing: expected a float, got str$", TypeError, label_smoothing="0.1")
    _bad(r"^z_loss: expected a non-negative float, got -0.1$", z_loss=-0.1)
    _bad(r"^z_loss: expected a finite float, got nan$", z_loss=float("nan"))


def test_inplace_needs_contiguous_columns():
    x, t = _inputs(4, 30, torch.float32)
    with pytest.raises(ValueError, match=r"^logits: inplace=True needs the last dim contiguous"):
        cross_entropy_fwd_bwd(x.t().contiguous().t(), t, inplace=True)


def test_cpu_tensor_without_interpreter_says_what_to_do(monkeypatch):
    from ridgeline.ops.cross_entropy import launch

    monkeypatch.setattr("ridgeline.lib.launch.interpreter_enabled", lambda: False)
    with pytest.raises(ValueError, match="logits is on cpu: ridgeline's Triton kernels need a CUDA tensor"):
        launch.cross_entropy(torch.zeros(2, 3), torch.zeros(2, dtype=torch.int64))


# --- the harness ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["cross_entropy", "cross_entropy_fwd_bwd"])
def test_harness_check_passes_on_cpu_and_edge_cases(op):
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Case

    spec = get_spec(op)
    cases = [Case(s, torch.bfloat16) for s in spec.shapes("cpu")]
    cases += [c for c in spec.edge_cases(torch.float16, DEVICE) if c.shape in ((7, 1000), (0, 128), (1, 1))]
    cases += [Case((4, 4), torch.float32, "ignore"), Case((2, 32769), torch.bfloat16, "strided+ignore")]
    impls = ["ridgeline"] + (["ridgeline-inplace"] if op == "cross_entropy_fwd_bwd" else [])
    results = ridgeline.check(op, impls=impls, cases=cases, device=DEVICE)
    failed = [(r.impl, r.shape, r.variant, r.reasons) for r in results if not r.passed]
    assert not failed


def test_harness_catches_a_wrong_gradient():
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Case, Impl
    from ridgeline.harness.correctness import check_case

    def wrong(logits, target, **kw):
        loss, g = cross_entropy_fwd_bwd(logits, target, **kw)
        return loss, g * 1.05

    spec = get_spec("cross_entropy_fwd_bwd")
    res = check_case(spec, Impl(spec.name, "wrong", "user", wrong), Case((8, 1000), torch.float32), DEVICE)
    assert not res.passed and any("dlogits max error" in r for r in res.reasons)


def _run_with(x, t, cfg, **kw):
    from ridgeline.ops.cross_entropy import launch as L

    x, t, ii, ls, z = L._validate(x, t, IGNORE_INDEX, kw.get("label_smoothing", 0.0), kw.get("reduction", "mean"),
                                  kw.get("z_loss", 0.0))
    g = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return L._run(x, t, ii, ls, kw.get("reduction", "mean"), z, g, False, cfg), g


@pytest.mark.parametrize("lanes", [False, True], ids=["block-reductions", "lanes"])
def test_leading_chunks_of_minus_inf_give_torch_finite_loss(lanes):
    """A row whose first chunks are all -inf (masked vocabulary up front): finite loss and gradient, as torch's."""
    from ridgeline.ops.cross_entropy.rules import LaunchConfig

    x, t = _inputs(4, 3000, torch.float32)
    x[0, :2100] = float("-inf")
    t[0] = 2500
    loss, g = _run_with(x, t, LaunchConfig(1024, 4, False, lanes=lanes), reduction="none")
    xr = x.double().requires_grad_()
    want = F.cross_entropy(xr, t, reduction="none")
    (want_g,) = torch.autograd.grad(want.sum(), xr)
    torch.testing.assert_close(loss.double(), want.detach(), **LOSS_TOL)
    torch.testing.assert_close(g.double(), want_g, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", OPTIONS, ids=lambda k: "+".join(f"{a}={b}" for a, b in k.items()) or "plain")
def test_lane_statistics_match_fp64_and_are_batch_invariant(dtype, kw):
    """The chunked pass with per-lane (max, sum) (kernel._lane_stats): float64's loss and gradient with a ragged
    last chunk, ignored rows, a NaN row and a bad target; a row alone gets the bits it gets in the batch."""
    from ridgeline.ops.cross_entropy.rules import LaunchConfig

    cfg = LaunchConfig(1024, 4, False, lanes=True)
    x, t = _inputs(6, 3000, dtype, ignore_every=4)
    loss, g = _run_with(x, t, cfg, **kw)
    ref_loss, ref_g = reference(x, t, with_grad=True, **kw)
    torch.testing.assert_close(loss.double(), ref_loss, **LOSS_TOL)
    n_valid = int((t != IGNORE_INDEX).sum())
    _close_grad(g, ref_g, dtype, 1.0 / n_valid if kw.get("reduction", "mean") == "mean" else 1.0)
    rows, g_rows = _run_with(x, t, cfg, reduction="none")
    one, g_one = _run_with(x[2:3].clone(), t[2:3].clone(), cfg, reduction="none")
    assert torch.equal(one, rows[2:3]) and torch.equal(g_one, g_rows[2:3])
    x[3, 2999] = float("nan")
    t[4] = 3000
    bad, _ = _run_with(x, t, cfg, reduction="none")
    assert torch.isnan(bad[3:5]).all() and torch.isfinite(bad[[0, 2]]).all()


@pytest.mark.parametrize("lanes", [False, True], ids=["block-reductions", "lanes"])
def test_the_gradient_pass_walked_last_chunk_first_gives_the_same_bits(lanes):
    from ridgeline.ops.cross_entropy.rules import LaunchConfig

    x, t = _inputs(5, 2500, torch.bfloat16, ignore_every=3)  # 3 chunks, the last ragged
    fwd = LaunchConfig(1024, 4, False, lanes=lanes)
    back = LaunchConfig(1024, 4, False, lanes=lanes, back=True)
    assert back.describe().endswith(" back")
    (loss, g), (loss_b, g_b) = _run_with(x, t, fwd, label_smoothing=0.1), _run_with(x, t, back, label_smoothing=0.1)
    assert torch.equal(loss, loss_b) and torch.equal(g, g_b)
    with pytest.raises(ValueError, match="back"):
        LaunchConfig(4096, 8, True, back=True)


def test_lanes_is_a_chunked_layout():
    from ridgeline.ops.cross_entropy.rules import Case, LaunchConfig, config_for, lane_columns

    # The rules (s19): lanes for every row wider than one block; the training step's layout from the row's bytes.
    assert config_for(Case(128256, 2, 4096, has_grad=False)) == LaunchConfig(8192, 8, False, lanes=True)
    assert config_for(Case(128256, 2, 4096, has_grad=True)) == LaunchConfig(16384, 16, False, lanes=True, back=True)
    assert config_for(Case(32000, 2, 16384, has_grad=True)) == LaunchConfig(8192, 8, False, lanes=True)
    assert config_for(Case(32768, 4, 7, has_grad=True)) == LaunchConfig(8192, 8, False, lanes=True)  # 128 KB rows
    assert config_for(Case(32769, 4, 7, has_grad=True)) == LaunchConfig(16384, 16, False, lanes=True, back=True)

    assert LaunchConfig(4096, 8, False, lanes=True).describe() == "2-pass BLOCK=4096 warps=8 grid=row/program lanes"
    assert lane_columns(LaunchConfig(4096, 8, False, lanes=True), 2) == 2048  # 8 bf16 a thread, 256 threads
    assert lane_columns(LaunchConfig(1024, 8, False, lanes=True), 2) == 1024  # at most the chunk
    assert lane_columns(LaunchConfig(4096, 8, False), 2) == 0
    with pytest.raises(ValueError, match="lanes"):
        LaunchConfig(4096, 8, True, lanes=True)
