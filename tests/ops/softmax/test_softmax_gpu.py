"""GPU-only softmax tests (skipped without CUDA): run on the H200 with `pytest tests/ops/softmax -m gpu`."""

import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.harness.bench import PEER_NEAR_MISS
from ridgeline.harness.correctness import check_case, only_order_variance, value_near_miss
from ridgeline.ops.softmax.launch import softmax, softmax_backward
from ridgeline.ops.softmax.rules import config_for
from ridgeline.ops.softmax.spec import HUGE, HUGE_WIDE, TOLERANCES

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape", [HUGE, HUGE_WIDE], ids=["one-pass", "split-rows"])
@pytest.mark.parametrize("op", ["softmax", "softmax_bwd"])
def test_more_than_2_31_elements(op, shape):
    assert shape[0] * shape[1] > 2**31
    n = shape[-1]
    assert config_for(n, 2, op == "softmax_bwd").one_pass == (shape == HUGE)
    r = check_case(registry.get_spec(op), registry.resolve(op, "ridgeline"), Case(shape, torch.bfloat16), "cuda")
    assert r.passed, r.reasons


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", [(4096, 1024), (1024, 4100), (512, 32768), (512, 65536), (256, 128256),
                                   (128, 151936), (64, 262144), (3, 151936), (1, 262144), (64, 65537), (4096, 100),
                                   (1, 1)])
def test_large_shapes_forward_and_backward(dtype, shape):
    x = (2 * torch.randn(shape, device="cuda")).to(dtype)
    y = softmax(x)
    tol = TOLERANCES[dtype]
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), -1), atol=tol.atol, rtol=tol.rtol)
    dy = torch.randn(shape, device="cuda").to(dtype)
    yd, gd = y.double(), dy.double()
    ref = yd * (gd - (gd * yd).sum(-1, keepdim=True))
    torch.testing.assert_close(softmax_backward(y, dy).double(), ref, atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("m, n", [(300, 4100), (300, 32000), (300, 65536), (300, 128256), (150, 151936),
                                  (100, 262144)])
def test_deterministic_and_batch_invariant(m, n):
    """Split rows (65536 and wider) launch in groups of rows at these sizes; repeated calls take the cached fast
    launch path, the single rows one group each."""
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = softmax(x)
    assert torch.equal(y, softmax(x))
    for i in (0, m // 2, m - 1):
        assert torch.equal(y[i:i + 1], softmax(x[i:i + 1].clone()))
    g = torch.randn_like(x)
    dx = softmax_backward(y, g)
    assert torch.equal(dx, softmax_backward(y, g))
    i = m // 2
    assert torch.equal(dx[i:i + 1], softmax_backward(y[i:i + 1].clone(), g[i:i + 1].clone()))


@pytest.mark.parametrize("n", [65536, 151936])
def test_split_groups_and_walk_order_change_no_bit(n):
    from dataclasses import replace

    from ridgeline.ops.softmax import launch

    x = torch.randn(512, n, device="cuda", dtype=torch.bfloat16)
    g = torch.randn_like(x)
    shipped = config_for(n, 2)
    assert not shipped.one_pass
    y, dx = launch._softmax_last(x, shipped), launch._softmax_backward_last(x, g, shipped)
    for cfg in (replace(shipped, group_bytes=0), replace(shipped, group_bytes=2**20), replace(shipped, reverse=False)):
        for _ in range(2):  # the first call compiles / launches through Triton, the second the cached fast path
            assert torch.equal(launch._softmax_last(x, cfg), y), cfg.describe()
            assert torch.equal(launch._softmax_backward_last(x, g, cfg), dx), cfg.describe()


def test_strided_rows_equal_contiguous_within_tolerance():
    buf = torch.randn(1024, 4113, device="cuda", dtype=torch.bfloat16)
    x = buf[:, 7:7 + 4100]
    torch.testing.assert_close(softmax(x).double(), torch.softmax(x.double(), -1), atol=1e-5, rtol=1.6e-2)
    wide = torch.randn(200, 128256 + 13, device="cuda", dtype=torch.bfloat16)[:, 5:5 + 128256]  # split rows
    torch.testing.assert_close(softmax(wide).double(), torch.softmax(wide.double(), -1), atol=1e-5, rtol=1.6e-2)
    y = softmax(wide)
    g = torch.randn(200, 128256 + 7, device="cuda", dtype=torch.bfloat16)[:, :128256]
    yd, gd = y.double(), g.double()
    torch.testing.assert_close(softmax_backward(y, g).double(), yd * (gd - (gd * yd).sum(-1, keepdim=True)),
                               atol=1e-5, rtol=1.6e-2)


@pytest.mark.parametrize("op", ["softmax", "softmax_bwd"])
@pytest.mark.parametrize("peer", ["torch-eager", "torch-compile", "liger", "quack"])
def test_peers_agree_with_the_reference(op, peer):
    """Peers must get the values right; batch invariance is a property we promise and they do not (the bench
    times a peer that fails only that, with a caveat). torch.compile's softmax backward fails it on CPU too."""
    impl = registry.resolve(op, peer)
    if not impl.available:
        pytest.skip(impl.reason)
    spec = registry.get_spec(op)
    shapes = [(4096, 4096), (256, 32000), (7, 769)] + ([] if peer == "liger" else [(64, 128256)])
    for shape in shapes:
        r = check_case(spec, impl, Case(shape, torch.bfloat16), "cuda")
        # torch eager's and Liger's softmax backward miss the bf16 bound by 2.4x / 6.1x on the H200 (s16: where
        # dy ~ sum(y * dy) cancels); the bench times such a near miss with a caveat, and so this test accepts it.
        assert r.passed or only_order_variance(r.reasons) or value_near_miss(
            r.reasons, r.worst_value_ratio, PEER_NEAR_MISS), (shape, r.reasons, r.worst_value_ratio)


def test_autograd_and_compile_on_gpu():
    x = torch.randn(64, 32000, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(64, 32000, device="cuda")
    compiled = torch.compile(lambda t: softmax(t), fullgraph=True, dynamic=False)
    (compiled(x).float() * w).sum().backward()
    xd = x.detach().double().requires_grad_()
    (torch.softmax(xd, -1) * w.double()).sum().backward()
    torch.testing.assert_close(x.grad.double(), xd.grad, atol=1.6e-2 * float(xd.grad.abs().max()), rtol=1.6e-2)


def test_runs_under_cuda_graph_capture():
    x = torch.randn(256, 128256, device="cuda", dtype=torch.bfloat16)
    g_in = torch.randn_like(x)
    y0 = softmax(x)
    softmax_backward(y0, g_in)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = softmax(x)
        dx = softmax_backward(y, g_in)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, softmax(x))
        assert torch.equal(dx, softmax_backward(softmax(x), g_in))


COOP = [(4096, 4), (8192, 8), (16384, 16)]  # chunk (16-bit columns) and warps of the tuning driver's candidates


@pytest.mark.parametrize("m, n", [(1, 262144), (64, 262144), (256, 128256), (2048, 65536), (3, 65537)])
@pytest.mark.parametrize("chunk, warps", COOP, ids=[f"c{c}w{w}" for c, w in COOP])
@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_split_rows_read_once_equal_the_two_kernel_split_bitwise(m, n, chunk, warps, prefetch):
    """The cooperative kernel (persistent groups, one launch) computes what the two-kernel split does, chunk for
    chunk: bitwise equal, on Triton's launch path and the cached one, and it leaves its counters at 0."""
    from ridgeline.ops.softmax import launch
    from ridgeline.ops.softmax.rules import LaunchConfig

    x = (2 * torch.randn(m, n, device="cuda")).to(torch.bfloat16)
    g = torch.randn_like(x)
    split, coop = LaunchConfig(False, chunk, warps), LaunchConfig(False, chunk, warps, coop=True, prefetch=prefetch)
    y, dx = launch._softmax_last(x, split), launch._softmax_backward_last(x, g, split)
    for _ in range(2):
        assert torch.equal(launch._softmax_last(x, coop), y)
        assert torch.equal(launch._softmax_backward_last(x, g, coop), dx)
    torch.cuda.synchronize()
    assert not any(c.workspace.get(x.device, 1, 1)[1].any() for c in launch._COOP_LAUNCHERS.values())


@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_split_rows_read_once_on_two_streams_and_in_a_graph(prefetch):
    """Two streams at once each take their own counters; a captured graph takes fresh ones; replays agree."""
    from ridgeline.ops.softmax import launch
    from ridgeline.ops.softmax.rules import LaunchConfig

    split, coop = LaunchConfig(False, 8192, 8), LaunchConfig(False, 8192, 8, coop=True, prefetch=prefetch)
    xs = [(2 * torch.randn(512, 131072, device="cuda")).to(torch.bfloat16) for _ in range(2)]
    want = [launch._softmax_last(x, split) for x in xs]
    streams = [torch.cuda.Stream() for _ in xs]
    torch.cuda.synchronize()
    for _ in range(3):
        outs = []
        for x, s in zip(xs, streams):
            with torch.cuda.stream(s):
                outs.append(launch._softmax_last(x, coop))
        torch.cuda.synchronize()
        assert all(torch.equal(o, w) for o, w in zip(outs, want))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = launch._softmax_last(xs[0], coop)
    for _ in range(2):
        xs[0].copy_((2 * torch.randn(xs[0].shape, device="cuda")).to(torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, launch._softmax_last(xs[0], split))


@pytest.mark.parametrize("bwd", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_split_rows_read_once_past_2_31_elements(bwd, prefetch):
    from ridgeline.ops.softmax import launch
    from ridgeline.ops.softmax.rules import LaunchConfig

    m, n = HUGE_WIDE
    assert m * n > 2**31
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    split, coop = LaunchConfig(False, 8192, 8), LaunchConfig(False, 8192, 8, coop=True, prefetch=prefetch)
    if bwd:
        g = torch.randn_like(x)
        assert torch.equal(launch._softmax_backward_last(x, g, coop), launch._softmax_backward_last(x, g, split))
    else:
        assert torch.equal(launch._softmax_last(x, coop), launch._softmax_last(x, split))
