"""The training step's split rows read once (kernel_coop.py, forced through the launch's config override): the
same loss and gradient bits as the two-kernel split (kernel_split.py) for every option, in place, strided logits,
ignored / bad / NaN / -inf rows, chunk counts from one to many, and the counters left at 0; on the GPU also
4096 x 128256 against float64, two streams at once, a CUDA graph and more than 2^31 logits. Under the CPU
interpreter the kernel runs as two launches (publish, then combine and write: lib/coop.py)."""

import pytest
import torch

from conftest import DEVICE
from ridgeline.ops.cross_entropy import launch as L
from ridgeline.ops.cross_entropy.rules import LaunchConfig, split_config
from ridgeline.ops.cross_entropy.spec import HUGE, IGNORE_INDEX, reference

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
OPTIONS = [{}, {"label_smoothing": 0.1}, {"z_loss": 1e-3}, {"reduction": "sum"}, {"reduction": "none"},
           {"label_smoothing": 0.2, "z_loss": 1e-4, "reduction": "none"}]


def _inputs(n, v, dtype, seed=0, pad=0, device=DEVICE):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = (2 * torch.randn(n, v + pad, generator=gen, device=device)).to(dtype)[:, :v]
    t = torch.randint(0, v, (n,), generator=gen, device=device)
    t[1::4] = IGNORE_INDEX
    return x, t


def _call(x, t, cfg, inplace=False, label_smoothing=0.0, reduction="mean", z_loss=0.0):
    x, t, ii, ls, z = L._validate(x, t, IGNORE_INDEX, label_smoothing, reduction, z_loss)
    g = x if inplace else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return L._run(x, t, ii, ls, reduction, z, g, False, cfg), g


def _pair(v, chunk, itemsize=2, warps=4, prefetch=False):
    return (split_config(v, itemsize, chunk, warps, 0),
            split_config(v, itemsize, chunk, warps, coop=True, prefetch=prefetch))


def _same(a, b):
    return torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))


# (prefetch: each program loads the group's next row before it waits; under the interpreter, 2 groups of 5 rows:
# the prefetch past the last row is masked.)
@pytest.mark.parametrize("dtype, prefetch", [(d, False) for d in DTYPES] + [(torch.bfloat16, True)])
@pytest.mark.parametrize("kw", OPTIONS, ids=lambda k: "+".join(f"{a}={b}" for a, b in k.items()) or "plain")
def test_read_once_equals_the_two_kernel_split_bitwise(dtype, prefetch, kw):
    x, t = _inputs(5, 700, dtype)
    split, coop = _pair(700, 128, prefetch=prefetch)  # 6 chunks, the last of 60 columns
    loss, g = _call(x, t, coop, **kw)
    want_loss, want_g = _call(x, t, split, **kw)
    assert _same(loss, want_loss) and _same(g, want_g)
    li, gi = _call(x.clone(), t, coop, inplace=True, **kw)  # the gradient over the logits
    assert _same(li, want_loss) and _same(gi, want_g)
    (ref_loss,) = reference(x, t, **kw)
    torch.testing.assert_close(loss.double(), ref_loss, atol=2e-5, rtol=2e-5)
    _, sync = L._COOP.workspace.get(x.device, 2, 1)
    assert not sync.any(), "the kernel leaves its counters at 0 for the next launch"


@pytest.mark.parametrize("v, chunk", [(64, 64), (300, 512), (5000, 256)], ids=["1-chunk", "1-ragged", "20-chunks"])
def test_chunk_counts_and_strided_logits(v, chunk):
    x, t = _inputs(3, v, torch.bfloat16, pad=13)
    split, coop = _pair(v, chunk)
    (loss, g), (want_loss, want_g) = _call(x, t, coop, reduction="none"), _call(x, t, split, reduction="none")
    assert _same(loss, want_loss) and _same(g, want_g)


@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_ignored_bad_nan_and_minus_inf_rows(prefetch):
    x, t = _inputs(6, 300, torch.float32)
    split, coop = _pair(300, 64, itemsize=4, prefetch=prefetch)
    t[0] = IGNORE_INDEX
    t[2], t[3] = 300, -5  # out of range: NaN rows, never an address
    x[4, 7] = float("nan")
    x[5, 64:128] = float("-inf")
    rows, g = _call(x, t, coop, reduction="none")
    want_rows, want_g = _call(x, t, split, reduction="none")
    assert _same(rows, want_rows) and _same(g, want_g)
    assert rows[0].item() == 0.0 and not g[0].any()
    assert torch.isnan(rows[2:5]).all() and torch.isfinite(rows[[1, 5]]).all() and (g[5, 64:128] == 0).all()


def test_a_row_alone_gets_the_bits_it_gets_in_the_batch():
    x, t = _inputs(5, 1000, torch.bfloat16)
    _, coop = _pair(1000, 256)
    rows, g = _call(x, t, coop, reduction="none")
    r1, g1 = _call(x[3:4].clone(), t[3:4].clone(), coop, reduction="none")
    assert torch.equal(r1, rows[3:4]) and torch.equal(g1, g[3:4])


def test_coop_is_a_split_layout_without_groups():
    assert split_config(128256, 2, coop=True).describe() == "coop CHUNK=8192 warps=8"
    assert split_config(128256, 2, coop=True, prefetch=True).describe() == "coop CHUNK=8192 warps=8 prefetch"
    with pytest.raises(ValueError, match="prefetch"):
        split_config(128256, 2, prefetch=True)
    with pytest.raises(ValueError, match="coop"):
        LaunchConfig(8192, 8, False, coop=True)
    with pytest.raises(ValueError, match="coop"):
        LaunchConfig(8192, 8, False, split=True, group_bytes=1 << 20, coop=True)


# --- on the GPU ------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1, "z_loss": 1e-4, "reduction": "none"}])
@pytest.mark.parametrize("chunk, warps", [(4096, 4), (8192, 8), (16384, 16)])
@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_gpu_read_once_4096x128256(kw, chunk, warps, prefetch):
    x, t = _inputs(4096, 128256, torch.bfloat16, device="cuda")
    split = split_config(128256, 2, chunk, warps, 0)
    coop = split_config(128256, 2, chunk, warps, coop=True, prefetch=prefetch)
    loss, g = _call(x, t, coop, **kw)
    want_loss, want_g = _call(x, t, split, **kw)
    assert torch.equal(loss, want_loss) and torch.equal(g, want_g)
    for _ in range(2):  # the cached launch path
        l2, g2 = _call(x, t, coop, **kw)
        assert torch.equal(l2, loss) and torch.equal(g2, g)
    li, gi = _call(x.clone(), t, coop, inplace=True, **kw)
    assert torch.equal(li, loss) and torch.equal(gi, g)
    if not kw:
        ref_loss, ref_g = reference(x[:512], t[:512], with_grad=True, reduction="sum")
        ls, gs = _call(x[:512], t[:512], coop, reduction="sum")
        torch.testing.assert_close(ls.double(), ref_loss, atol=1e-3, rtol=1e-5)
        torch.testing.assert_close(gs.double(), ref_g, atol=1e-9, rtol=8e-3)
    torch.cuda.synchronize()
    assert not L._COOP.workspace.get(x.device, 1, 1)[1].any()


@pytest.mark.gpu
@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_gpu_read_once_on_two_streams_and_in_a_graph(prefetch):
    split = split_config(151936, 2, 8192, 8, 0)
    coop = split_config(151936, 2, 8192, 8, coop=True, prefetch=prefetch)
    inputs = [_inputs(1024, 151936, torch.bfloat16, seed=s, device="cuda") for s in (1, 2)]
    want = [_call(x, t, split, reduction="none") for x, t in inputs]
    streams = [torch.cuda.Stream() for _ in inputs]
    torch.cuda.synchronize()
    for _ in range(3):
        outs = []
        for (x, t), s in zip(inputs, streams):
            with torch.cuda.stream(s):
                outs.append(_call(x, t, coop, reduction="none"))
        torch.cuda.synchronize()
        assert all(torch.equal(o[0], w[0]) and torch.equal(o[1], w[1]) for o, w in zip(outs, want))
    x, t = inputs[0]
    g = torch.empty_like(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = L._run(x, t, IGNORE_INDEX, 0.0, "none", 0.0, g, False, coop)
    for _ in range(2):
        x.copy_((2 * torch.randn(x.shape, device="cuda")).to(x.dtype))
        graph.replay()
        torch.cuda.synchronize()
        want_loss, want_g = _call(x, t, split, reduction="none")
        assert torch.equal(loss, want_loss) and torch.equal(g, want_g)


@pytest.mark.gpu
@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_gpu_read_once_more_than_2_31_logits(prefetch):
    n, v = HUGE
    x, t = _inputs(n, v, torch.bfloat16, device="cuda")
    t[-1] = v - 1
    split, coop = split_config(v, 2), split_config(v, 2, coop=True, prefetch=prefetch)
    rows, g = _call(x, t, coop, reduction="none")
    want_rows, want_g = _call(x, t, split, reduction="none")
    assert torch.equal(rows, want_rows) and torch.equal(g, want_g)
    tail = slice(n - 3, n)
    (ref_rows,) = reference(x[tail], t[tail], reduction="none")
    torch.testing.assert_close(rows[tail].double(), ref_rows, atol=1e-4, rtol=1e-5)
