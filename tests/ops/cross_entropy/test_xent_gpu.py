"""Cross-entropy on the GPU (skipped without CUDA): the sweep's shapes against float64, more than 2^31 logits,
every row written (poisoned buffers), determinism, batch invariance, the peers through the harness, autograd and
torch.compile on the device."""

import pytest
import torch

import ridgeline
from ridgeline import cross_entropy, cross_entropy_fwd_bwd
from ridgeline.core.registry import get_spec, resolve
from ridgeline.core.spec import Case
from ridgeline.ops.cross_entropy.spec import HUGE, IGNORE_INDEX, reference

pytestmark = pytest.mark.gpu


def _inputs(n, v, dtype=torch.bfloat16, seed=0, ignore_every=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = (2 * torch.randn(n, v, generator=gen, device="cuda")).to(dtype)
    t = torch.randint(0, v, (n,), generator=gen, device="cuda")
    if ignore_every:
        t[1::ignore_every] = IGNORE_INDEX
    return x, t


@pytest.mark.parametrize("shape", [(4096, 32000), (1024, 128256), (512, 256000), (333, 50257), (64, 262144)])
@pytest.mark.parametrize("op", ["cross_entropy", "cross_entropy_fwd_bwd"])
def test_harness_check_at_sweep_widths(op, shape):
    cases = [Case(shape, torch.bfloat16), Case(shape, torch.bfloat16, "ls+z+ignore"),
             Case(shape, torch.float16, "none+strided"), Case(shape, torch.float32, "sum")]
    results = ridgeline.check(op, impls=["ridgeline"], cases=cases, device="cuda")
    assert [(r.shape, r.variant, r.reasons) for r in results if not r.passed] == []


def test_every_gradient_element_is_written():
    x, t = _inputs(2048, 128256, ignore_every=7)
    for _ in range(2):
        junk = torch.full((2048 * 128256,), float("nan"), dtype=torch.bfloat16, device="cuda")
        del junk  # (the next allocation of that size reuses the NaN-filled block)
        loss, g = cross_entropy_fwd_bwd(x, t)
        assert torch.isfinite(g).all() and torch.isfinite(loss)


def test_more_than_2_31_logits():
    n, v = HUGE
    assert n * v > 2**31
    x, t = _inputs(n, v)
    t[-1] = v - 1  # the last column of the last row
    loss_rows, g = cross_entropy_fwd_bwd(x, t, reduction="none")
    tail = slice(n - 3, n)
    ref_rows, ref_g = reference(x[tail], t[tail], reduction="none", with_grad=True)
    torch.testing.assert_close(loss_rows[tail].double(), ref_rows, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(g[tail].double(), ref_g, atol=1e-9, rtol=8e-3)
    mean = cross_entropy(x, t)
    torch.testing.assert_close(mean.double(), loss_rows.double().mean(), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("v", [32000, 151936])
def test_deterministic_and_batch_invariant(v):
    x, t = _inputs(1024, v, ignore_every=5)
    rows, g = cross_entropy_fwd_bwd(x, t, reduction="none")
    for _ in range(3):
        r2, g2 = cross_entropy_fwd_bwd(x, t, reduction="none")
        assert torch.equal(rows, r2) and torch.equal(g, g2)
    for sl in (slice(0, 1), slice(300, 307), slice(1023, 1024)):
        r, gs = cross_entropy_fwd_bwd(x[sl], t[sl], reduction="none")
        assert torch.equal(r, rows[sl]) and torch.equal(gs, g[sl])
    assert torch.equal(cross_entropy(x, t), cross_entropy(x, t))


@pytest.mark.parametrize("peer", ["torch-eager", "torch-compile", "liger", "quack"])
@pytest.mark.parametrize("op", ["cross_entropy", "cross_entropy_fwd_bwd"])
def test_peers_agree_with_the_reference(op, peer):
    impl = resolve(op, peer)
    if not impl.available:
        pytest.skip(impl.reason)
    variants = ["", "ignore"] + ([] if peer == "quack" else ["ls+z"])
    cases = [Case((2048, 128256), torch.bfloat16, v) for v in variants]
    results = ridgeline.check(op, impls=[peer], cases=cases, device="cuda")
    assert [(r.variant, r.reasons) for r in results if not r.passed] == []


def test_autograd_and_compile_on_the_device():
    x, t = _inputs(1024, 128256, ignore_every=3)
    xr = x.clone().requires_grad_()
    loss = cross_entropy(xr, t, label_smoothing=0.1)
    (loss * 4.0).backward()
    ref_loss, ref_g = reference(x, t, label_smoothing=0.1, with_grad=True)
    torch.testing.assert_close(loss.double(), ref_loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(xr.grad.double(), 4.0 * ref_g, atol=1e-10, rtol=1.6e-2)
    compiled = torch.compile(lambda a, b: cross_entropy(a, b, label_smoothing=0.1), fullgraph=True)
    xc = x.clone().requires_grad_()
    lc = compiled(xc, t)
    (lc * 4.0).backward()
    assert torch.equal(lc, loss) and torch.equal(xc.grad, xr.grad)


def test_graph_capture_of_the_training_step():
    x, t = _inputs(1024, 32000)
    cross_entropy_fwd_bwd(x, t)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss, g = cross_entropy_fwd_bwd(x, t)
    x.copy_(_inputs(1024, 32000, seed=1)[0])
    graph.replay()
    ref_loss, ref_g = reference(x, t, with_grad=True)
    torch.testing.assert_close(loss.double(), ref_loss, atol=1e-5, rtol=1e-5)


def test_launch_info_names_the_config():
    info = get_spec("cross_entropy_fwd_bwd").launch_info(Case((4096, 128256), torch.bfloat16), "cuda")
    assert info["config"] and info["grid"] >= 1


@pytest.mark.parametrize("shape", [(4096, 128256), (333, 50257)])
@pytest.mark.parametrize("chunk, warps, per_sm", [(8192, 8, 0), (16384, 16, 0), (4096, 8, 1), (8192, 16, 2)])
@pytest.mark.parametrize("has_grad", [True, False], ids=["fwd_bwd", "fwd"])
def test_lane_statistics_on_the_device(shape, chunk, warps, per_sm, has_grad):
    """The chunked pass with per-lane (max, sum) (the tuning driver's `lanes` candidates): float64's loss and
    gradient, every row written over a poisoned buffer, the same bits twice and for a row alone."""
    from ridgeline.ops.cross_entropy import launch as L
    from ridgeline.ops.cross_entropy.rules import LaunchConfig

    n, v = shape
    x, t = _inputs(n, v, ignore_every=5)
    cfg = LaunchConfig(chunk, warps, False, programs_per_sm=per_sm, lanes=True)
    xv, tv, ii, ls, z = L._validate(x, t, IGNORE_INDEX, 0.0, "none", 0.0)

    def run(xs, ts):
        g = torch.full(xs.shape, float("nan"), dtype=xs.dtype, device="cuda") if has_grad else None
        return L._run(xs, ts, ii, ls, "none", z, g, False, cfg), g  # (the grid from the config: grid_for)

    rows, g = run(xv, tv)
    ref_rows, ref_g = reference(x[:256], t[:256], reduction="none", with_grad=True)
    torch.testing.assert_close(rows[:256].double(), ref_rows, atol=1e-4, rtol=1e-5)
    again, g2 = run(xv, tv)
    assert torch.equal(again, rows)
    one, g1 = run(xv[7:8].clone(), tv[7:8].clone())
    assert torch.equal(one, rows[7:8])
    if has_grad:
        assert not g.isnan().any()
        torch.testing.assert_close(g[:256].double(), ref_g, atol=1e-9, rtol=8e-3)
        assert torch.equal(g2, g) and torch.equal(g1, g[7:8])
        from dataclasses import replace

        cfg = replace(cfg, back=True)  # the gradient pass last chunk first: the same bits
        back_rows, g_back = run(xv, tv)
        assert torch.equal(back_rows, rows) and torch.equal(g_back, g)
