"""Our softmax kernels (forward and backward) against float64 on the CPU interpreter: dtypes, widths (one pass,
two pieces, packed rows, split rows), strided rows, other dims, empty inputs, NaN/inf, bad input, autograd,
torch.compile, and the harness's check. The interpreter's rules split rows from 8192 columns forward (4096
backward) into 4096-column chunks and launch them in groups of 256 KiB, so tiny shapes take the split path."""

import pytest
import torch

from conftest import DEVICE
from ridgeline.ops.softmax import launch
from ridgeline.ops.softmax.launch import softmax, softmax_backward
from ridgeline.ops.softmax.rules import MIN_S_BLOCK, LaunchConfig, config_for
from ridgeline.ops.softmax.spec import TOLERANCES

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Packed rows (1, 7, 100), one block (769, 5120), two pieces (4100); split rows under the interpreter: 20000 (5
# chunks), 70001 (18 chunks, the last of 369 columns, odd N); backward also 4100 and 5120 (2 chunks).
SHAPES = [(1, 1), (7, 7), (33, 100), (5, 769), (3, 4100), (2, 5120), (2, 20000), (2, 70001), (2, 3, 64)]


def rand(*shape, dtype=torch.float32, scale=2.0):
    return (scale * torch.randn(*shape, device=DEVICE)).to(dtype)


def ref_bwd(y, dy):
    yd, gd = y.double(), dy.double()
    return yd * (gd - (gd * yd).sum(-1, keepdim=True))


def assert_close(out, ref, dtype):
    tol = TOLERANCES[dtype]
    assert out.dtype == dtype and out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, atol=tol.atol, rtol=tol.rtol, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_fp64(dtype, shape):
    x = rand(*shape, dtype=dtype)
    assert_close(softmax(x), torch.softmax(x.double(), -1), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_matches_fp64(dtype, shape):
    y = torch.softmax(rand(*shape), -1).to(dtype)
    dy = rand(*shape, dtype=dtype, scale=1.0)
    assert_close(softmax_backward(y, dy), ref_bwd(y, dy), dtype)


def test_the_shapes_cover_every_layout():
    kinds = {(c.one_pass, c.rows > 1, bool(c.piece_b)) for s in SHAPES for c in [config_for(s[-1], 2)]}
    assert kinds == {(True, True, False), (True, False, False), (True, False, True), (False, False, False)}
    assert config_for(5120, 2).one_pass and not config_for(5120, 2, bwd=True).one_pass  # backward: half the limit
    assert config_for(70001, 2).block == 4096 and config_for(70001, 4, bwd=True).block == 4096


def test_strided_rows_are_read_in_place():
    buf = rand(6, 4113)
    x = buf[:, 7:7 + 4100]  # unaligned start and stride
    assert_close(softmax(x), torch.softmax(x.double(), -1), torch.float32)
    xw = rand(3, 70014)[:, :70001]  # split rows, strided
    assert_close(softmax(xw), torch.softmax(xw.double(), -1), torch.float32)
    yw = torch.softmax(rand(3, 9013), -1)[:, 3:9003]
    dyw = rand(3, 9001, dtype=torch.float32)[:, :9000]
    assert_close(softmax_backward(yw, dyw), ref_bwd(yw, dyw), torch.float32)
    y = torch.softmax(rand(5, 800), -1)[:, :769]
    dy = rand(5, 790)[:, :769]
    assert_close(softmax_backward(y, dy), ref_bwd(y, dy), torch.float32)


def test_unmergeable_and_transposed_layouts_are_copied():
    x = rand(4, 3, 64).transpose(0, 1)  # leading dims cannot be one row stride
    assert_close(softmax(x), torch.softmax(x.double(), -1), torch.float32)
    xt = rand(64, 5).t()  # last dim stride 5
    assert_close(softmax(xt), torch.softmax(xt.double(), -1), torch.float32)


@pytest.mark.parametrize("dim", [0, 1, -2, -3])
def test_other_dims_go_through_a_copy(dim):
    x = rand(3, 5, 70)
    assert_close(softmax(x, dim=dim), torch.softmax(x.double(), dim), torch.float32)
    y = torch.softmax(x, dim)
    dy = rand(3, 5, 70)
    ref = torch._softmax_backward_data(dy.double(), y.double(), dim, torch.float64)
    assert_close(softmax_backward(y, dy, dim=dim), ref, torch.float32)


def test_last_index_is_the_last_dim():
    x = rand(4, 300, dtype=torch.bfloat16)
    assert torch.equal(softmax(x, dim=1), softmax(x))
    assert softmax(x, dim=1).is_contiguous()


def test_empty_inputs():
    assert softmax(rand(0, 4096)).shape == (0, 4096)
    assert softmax(rand(3, 0)).shape == (3, 0)
    assert softmax(rand(0, 70001)).shape == (0, 70001)
    assert softmax_backward(rand(0, 70001), rand(0, 70001)).shape == (0, 70001)


@pytest.mark.parametrize("n", [50, 9000, 70001])
def test_nan_and_inf_follow_torch(n):
    x = rand(7, n)
    x[0, 3] = float("nan")
    x[1, 0] = float("inf")
    x[2, 1] = float("-inf")
    x[2, n - 1] = float("-inf")
    x[3] = float("-inf")  # a row of -inf is NaN, as in torch
    x[4, n // 2:] = float("-inf")  # split rows: whole chunks of -inf in a finite row give 0
    x[5, n - 1] = float("nan")  # (split rows: in the last, ragged chunk)
    x[6, n - 2] = float("inf")
    y, ref = softmax(x), torch.softmax(x.double(), -1)
    assert torch.equal(y.isnan(), ref.isnan())
    assert y[0].isnan().all() and y[1].isnan().all() and y[3].isnan().all() and y[6].isnan().all()
    assert y[2, 1] == 0 and y[2, n - 1] == 0 and (y[4, n // 2:] == 0).all()
    assert_close(y[2], ref[2], torch.float32)
    assert_close(y[4], ref[4], torch.float32)


@pytest.mark.parametrize("n", [4100, 70001])
def test_batch_invariant_and_deterministic(n):
    x = rand(9, n, dtype=torch.bfloat16)
    y = softmax(x)
    assert torch.equal(y, softmax(x))
    for i in (0, 4, 8):
        assert torch.equal(y[i:i + 1], softmax(x[i:i + 1].clone()))
    g = rand(9, n, dtype=torch.bfloat16)
    dx = softmax_backward(y, g)
    assert torch.equal(dx[4:5], softmax_backward(y[4:5].clone(), g[4:5].clone()))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: softmax([1.0, 2.0]), TypeError, "x: expected a torch.Tensor, got list"),
        (lambda: softmax(torch.ones(3, 4, dtype=torch.int32)), TypeError, "x: expected dtype float32, float16"),
        (lambda: softmax(torch.ones(3, 4, dtype=torch.float64)), TypeError, "x: expected dtype"),
        (lambda: softmax(torch.tensor(1.0)), ValueError, "x: expected at least 1 dim"),
        (lambda: softmax(torch.ones(3, 4), dim=2), ValueError, r"dim: expected a dim in \[-2, 1\]"),
        (lambda: softmax(torch.ones(3, 4), dim=1.0), TypeError, "dim: expected an int, got float"),
        (lambda: softmax_backward(torch.ones(3, 4), torch.ones(3, 5)), ValueError,
         r"dy: expected shape \(3, 4\) \(same as y\)"),
        (lambda: softmax_backward(torch.ones(3, 4), torch.ones(3, 4, dtype=torch.float16)), TypeError,
         r"dy: expected dtype float32 \(same as y\), got float16"),
        (lambda: softmax_backward(torch.ones(3, 4), "dy"), TypeError, "dy: expected a torch.Tensor"),
    ],
)
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=message) as e:
        call()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 769), (2, 70001)])
def test_autograd_matches_fp64_autograd(dtype, shape):
    x = rand(*shape, dtype=dtype).requires_grad_()
    w = rand(*shape, scale=1.0)
    (softmax(x).float() * w).sum().backward()
    xd = x.detach().double().requires_grad_()
    (torch.softmax(xd, -1) * w.double()).sum().backward()
    # The saved y is rounded to the dtype (as torch saves it), and dy - sum(dy * y) cancels: for 16-bit dtypes the
    # error is relative to the gradient's scale, not to each element.
    tol = TOLERANCES[dtype]
    atol = tol.atol if dtype == torch.float32 else tol.rtol * float(xd.grad.abs().max())
    assert x.grad.dtype == dtype
    torch.testing.assert_close(x.grad.double(), xd.grad, atol=atol, rtol=tol.rtol)


def test_gradcheck():
    """Not in float64: the kernels take fp32/fp16/bf16 only (float32 math), so gradcheck runs in float32 with
    tolerances for float32 finite differences (the fp64 comparison of the gradient is the test above)."""
    x = rand(3, 17, scale=1.0).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: softmax(t), (x,), eps=1e-2, atol=2e-3, rtol=2e-2)
    x = rand(3, 4, 5, scale=1.0).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: softmax(t, dim=1), (x,), eps=1e-2, atol=2e-3, rtol=2e-2)


def test_torch_compile_fullgraph_forward_and_backward():
    def fn(x):
        return softmax(x * 1.5, dim=-1) * 2.0

    compiled = torch.compile(fn, fullgraph=True, dynamic=False)
    for shape in ((4, 300), (2, 9000)):  # one pass, split rows (3 chunks)
        x = rand(*shape).requires_grad_()
        w = rand(*shape, scale=1.0)
        out = compiled(x)
        torch.testing.assert_close(out.double(), 2.0 * torch.softmax(1.5 * x.detach().double(), -1), atol=1e-6,
                                   rtol=1e-5)
        (out * w).sum().backward()
        xd = x.detach().double().requires_grad_()
        (2.0 * torch.softmax(1.5 * xd, -1) * w.double()).sum().backward()
        torch.testing.assert_close(x.grad.double(), xd.grad, atol=1e-6, rtol=1e-4)


# Split configs by hand (the tuning driver launches such): one chunk exactly, one ragged chunk, many chunks (more
# than MIN_S_BLOCK, so kernel 2 combines a wider block) with a ragged last one of 40 columns, chunks of 1024.
SPLITS = [(4096, LaunchConfig(False, 4096, 4)), (3000, LaunchConfig(False, 4096, 4)),
          (9000, LaunchConfig(False, 256, 2)), (8192, LaunchConfig(False, 1024, 4))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, cfg", SPLITS, ids=["1-chunk", "1-ragged-chunk", "36-chunks", "8-chunks"])
def test_split_rows_by_hand_match_fp64(dtype, n, cfg):
    assert -(-9000 // 256) > MIN_S_BLOCK
    x = rand(3, n, dtype=dtype)
    assert_close(launch._softmax_last(x, cfg), torch.softmax(x.double(), -1), dtype)
    y = torch.softmax(rand(3, n), -1).to(dtype)
    dy = rand(3, n, dtype=dtype, scale=1.0)
    assert_close(launch._softmax_backward_last(y, dy, cfg), ref_bwd(y, dy), dtype)


def test_groups_of_rows_and_the_walk_order_change_no_bit():
    from dataclasses import replace

    x = rand(7, 9000, dtype=torch.bfloat16)
    y = torch.softmax(rand(7, 9000), -1).to(torch.bfloat16)
    dy = rand(7, 9000, dtype=torch.bfloat16, scale=1.0)
    base = LaunchConfig(False, 1024, 4)  # all rows in one pair of launches, kernel 2 walking last to first
    fwd, bwd = launch._softmax_last(x, base), launch._softmax_backward_last(y, dy, base)
    # Rows one by one, three at a time (3 + 3 + 1), and the forward walk.
    for cfg in (replace(base, group_bytes=1), replace(base, group_bytes=3 * 9000 * 2), replace(base, reverse=False)):
        assert torch.equal(launch._softmax_last(x, cfg), fwd), cfg.describe()
        assert torch.equal(launch._softmax_backward_last(y, dy, cfg), bwd), cfg.describe()


# Split rows read once (kernel_coop.py) by hand: under the interpreter two launches (publish, then combine and
# write) on the same workspace, two groups of programs so the persistent row loop runs; the same chunks as SPLITS.
# (prefetch: each program loads its group's next row before it waits; the prefetch past the last row is masked.)
@pytest.mark.parametrize("dtype, prefetch", [(d, False) for d in DTYPES] + [(torch.bfloat16, True)])
@pytest.mark.parametrize("n, cfg", SPLITS, ids=["1-chunk", "1-ragged-chunk", "36-chunks", "8-chunks"])
def test_split_rows_read_once_match_fp64_and_the_two_kernel_split_bitwise(dtype, prefetch, n, cfg):
    from dataclasses import replace

    coop = replace(cfg, coop=True, prefetch=prefetch)
    x = rand(5, n, dtype=dtype)
    x[1, : n // 2] = float("-inf")  # whole chunks of -inf in a finite row give 0
    x[2, n - 1] = float("nan")  # a NaN in the last chunk: the row is NaN
    x[3] = float("-inf")  # a row of only -inf: NaN, as torch
    out = launch._softmax_last(x, coop)
    assert_close(out, torch.softmax(x.double(), -1), dtype)
    assert torch.equal(out.nan_to_num(7.0), launch._softmax_last(x, cfg).nan_to_num(7.0))
    y = torch.softmax(rand(5, n), -1).to(dtype)
    dy = rand(5, n, dtype=dtype, scale=1.0)
    dx = launch._softmax_backward_last(y, dy, coop)
    assert_close(dx, ref_bwd(y, dy), dtype)
    assert torch.equal(dx, launch._softmax_backward_last(y, dy, cfg))
    for direction in launch._COOP_LAUNCHERS.values():
        assert not direction.workspace.get(x.device, 2, 1)[1].any(), "the kernels leave their counters at 0"


@pytest.mark.parametrize("prefetch", [False, True], ids=["", "prefetch"])
def test_split_rows_read_once_on_strided_rows_and_one_row(prefetch):
    from dataclasses import replace

    cfg = replace(SPLITS[2][1], coop=True, prefetch=prefetch)
    buf = rand(3, 9013)
    x = buf[:, 5:5 + 9000]  # unaligned start and stride: read in place
    assert_close(launch._softmax_last(x, cfg), torch.softmax(x.double(), -1), torch.float32)
    one = rand(1, 9000)
    assert torch.equal(launch._softmax_last(one, cfg), launch._softmax_last(torch.cat([one, x]), cfg)[:1])


def test_explicit_one_pass_configs_agree_and_must_fit():
    x = rand(3, 9000)
    ref = torch.softmax(x.double(), -1)
    for cfg in (LaunchConfig(True, 8192, 8, piece_b=1024), LaunchConfig(True, 16384, 16)):
        assert_close(launch._softmax_last(x, cfg), ref, torch.float32)
    with pytest.raises(ValueError, match="cfg: .* does not fit a row of 9000 columns"):
        launch._softmax_last(x, LaunchConfig(True, 8192, 8))


def test_cache_hints_and_a_persistent_grid_change_no_bit():
    from dataclasses import replace

    x = rand(9, 4100, dtype=torch.bfloat16)  # two pieces (4096 + 256), nine rows over a grid of at most 4
    y = torch.softmax(rand(9, 4100), -1).to(torch.bfloat16)
    dy = rand(9, 4100, dtype=torch.bfloat16, scale=1.0)
    base = LaunchConfig(True, 4096, 8, piece_b=256)
    fwd, bwd = launch._softmax_last(x, base), launch._softmax_backward_last(y, dy, base)
    assert_close(fwd, torch.softmax(x.double(), -1), torch.bfloat16)
    for cfg in (replace(base, load_policy="", store_cm=".cs"), replace(base, load_policy="evict_first"),
                replace(base, programs_per_sm=1)):
        assert torch.equal(launch._softmax_last(x, cfg), fwd), cfg.describe()
        assert torch.equal(launch._softmax_backward_last(y, dy, cfg), bwd), cfg.describe()
    with pytest.raises(ValueError, match="store_cm"):
        replace(base, store_cm=".xx")
    with pytest.raises(ValueError, match="programs_per_sm"):
        LaunchConfig(False, 4096, 8, programs_per_sm=2)


def test_harness_check_passes_on_the_cpu_set():
    import ridgeline
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Case

    for op in ("softmax", "softmax_bwd"):
        cases = [Case(s, torch.bfloat16) for s in get_spec(op).shapes("cpu")[:3]]
        cases += [Case((5, 769), torch.float16, "strided"), Case((3, 4100), torch.float32, "inf"),
                  Case((2, 70001), torch.bfloat16, "nan")]
        results = ridgeline.check(op, ["ridgeline"], device="cpu", cases=cases)
        assert results and all(r.passed for r in results), [(r.shape, r.reasons) for r in results if not r.passed]


@pytest.mark.parametrize("interpreted", ["1", "0"])
def test_meta_tensors_give_shapes_past_2_31_elements(interpreted, monkeypatch):
    """On the meta device softmax and its backward answer with the op's shapes (no launch on no data)."""
    monkeypatch.setenv("TRITON_INTERPRET", interpreted)  # (meta needs neither a GPU nor the interpreter)
    x = torch.empty(2**31 // 4096 + 1, 4096, dtype=torch.bfloat16, device="meta")
    for y in (softmax(x), softmax(x, dim=0), softmax_backward(x, x), softmax_backward(x, x, dim=0)):
        assert y.is_meta and y.shape == x.shape and y.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="dy is on cpu but y is on meta"):
        softmax_backward(x[:2], torch.ones(2, 4096, dtype=torch.bfloat16))


def test_custom_ops_pass_torch_library_opcheck():
    """The fake implementations agree with the real ops (shapes, dtypes, strides) for strided rows too, and the
    autograd registration is sound."""
    torch.library.opcheck(launch.softmax_op, (rand(3, 40).requires_grad_(),))
    torch.library.opcheck(launch.softmax_op, (rand(3, 53)[:, :40],))
    y = torch.softmax(rand(3, 40), -1)
    torch.library.opcheck(launch.softmax_backward_op, (y, rand(3, 53)[:, :40]))
