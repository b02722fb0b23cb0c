"""Our LayerNorm kernels (forward and backward) against float64 references: dtypes, pieces, wide rows, strided rows,
tiny and empty inputs, NaN/inf, determinism and batch invariance, and each bad input's one-line error."""

import pytest
import torch

from conftest import DEVICE
from ridgeline import layer_norm, layer_norm_backward, layer_norm_forward
from ridgeline.ops.layernorm.spec import TOLERANCES, ln_bwd_ref, ln_ref, stats_of

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rand(*shape, dtype=torch.float32, shift=0.0):
    return (torch.randn(*shape, device=DEVICE, dtype=torch.float32) + shift).to(dtype)


def assert_close(out, ref, dtype, atol_scale=1.0):
    tol = TOLERANCES[dtype]
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref, atol=tol.atol * atol_scale, rtol=tol.rtol)


def affine(n, dtype):
    return 1 + 0.5 * rand(n, dtype=dtype), 0.5 * rand(n, dtype=dtype)


# One block (7, 64), pieces (769 = 512 + 256+, 4100 = 4096 + 256, 5120 = 4096 + 1024), four rows a tile (7, 64), the
# three-pass wide kernel (20000), leading dims (2, 3, 64).
FWD_SHAPES = [(1, 1), (7, 7), (9, 64), (5, 769), (3, 4100), (2, 5120), (2, 20000), (2, 3, 64)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", FWD_SHAPES)
def test_forward_matches_fp64(dtype, shape):
    x = rand(*shape, dtype=dtype, shift=0.5)
    w, b = affine(shape[-1], dtype)
    y, mean, rstd = layer_norm_forward(x, w, b, 1e-5)
    assert_close(y, ln_ref(x, w, b, 1e-5), dtype)
    assert torch.equal(layer_norm(x, w, b, 1e-5), y), "with and without saved statistics: the same bits"
    ref_mean, ref_rstd = stats_of(x, 1e-5)
    assert mean.shape == rstd.shape == (x.numel() // shape[-1],) and mean.dtype == rstd.dtype == torch.float32
    torch.testing.assert_close(mean, ref_mean, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(rstd, ref_rstd, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (9, 64), (5, 769), (3, 4100), (2, 5120), (2, 9000), (2, 3, 64)])
def test_backward_matches_fp64(dtype, shape):
    x, dy = rand(*shape, dtype=dtype, shift=0.5), rand(*shape, dtype=dtype)
    w, _ = affine(shape[-1], dtype)
    mean, rstd = stats_of(x, 1e-5)
    dx, dw, db = layer_norm_backward(dy, x, w, mean, rstd)
    rdx, rdw, rdb = ln_bwd_ref(dy, x, w, mean, rstd)
    assert dx.shape == x.shape and dw.shape == db.shape == (shape[-1],)
    assert_close(dx, rdx, dtype, atol_scale=1 + shape[-1] ** 0.5 / 50)
    rows = x.numel() // shape[-1]
    assert_close(dw, rdw, dtype, atol_scale=rows ** 0.5)
    assert_close(db, rdb, dtype, atol_scale=rows ** 0.5)


@pytest.mark.parametrize("wdtype", [torch.float32, torch.float16])
def test_weight_and_bias_dtypes_independent_of_x(wdtype):
    x = rand(4, 300, dtype=torch.bfloat16, shift=1.0)
    w, b = affine(300, wdtype)
    assert_close(layer_norm(x, w, b), ln_ref(x, w, b, 1e-5), torch.bfloat16)
    dy = rand(4, 300, dtype=torch.bfloat16)
    mean, rstd = stats_of(x, 1e-5)
    dx, dw, db = layer_norm_backward(dy, x, w, mean, rstd)
    assert dw.dtype == db.dtype == wdtype and dx.dtype == torch.bfloat16
    rdx, rdw, rdb = ln_bwd_ref(dy, x, w, mean, rstd)
    assert_close(dx, rdx, torch.bfloat16)
    assert_close(dw, rdw, wdtype, atol_scale=2)


def test_no_weight_no_bias_and_each_alone():
    x = rand(3, 129, shift=2.0)
    w, b = affine(129, torch.float32)
    for ww, bb in ((None, None), (w, None), (None, b)):
        assert_close(layer_norm(x, ww, bb), ln_ref(x, ww, bb, 1e-5), torch.float32)
    dy = rand(3, 129)
    mean, rstd = stats_of(x, 1e-5)
    dx, dw, db = layer_norm_backward(dy, x, None, mean, rstd)
    assert dw is None
    rdx, _, rdb = ln_bwd_ref(dy, x, None, mean, rstd)
    assert_close(dx, rdx, torch.float32)
    assert_close(db, rdb, torch.float32)
    dx2, dw2, db2 = layer_norm_backward(dy, x, w, mean, rstd, compute_dweight=False, compute_dbias=False)
    assert dw2 is None and db2 is None


def test_centring_and_eps_are_used():
    # Rows far from zero with a small spread: E[x^2] - mean^2 would cancel (var 1e-4 against ulp(100) = 8e-6: a few %
    # off); centring first keeps the error at the mean's float32 rounding.
    x = rand(2, 64) * 1e-2 + 10.0
    assert_close(layer_norm(x, None, None, eps=1e-8), ln_ref(x, None, None, 1e-8), torch.float32, atol_scale=50)
    # (eps = 1e-2: outputs ~0.1; the float32 mean of values near 10 is off by up to ~ulp(10) = 1e-6, over sqrt(var +
    # eps) = 0.1 that is ~1e-5 on every element: the plain float32 atol failed ~3% of random draws.)
    assert_close(layer_norm(x, None, None, eps=1e-2), ln_ref(x, None, None, 1e-2), torch.float32, atol_scale=5)
    assert not torch.allclose(layer_norm(x, None, None, eps=1e-2), layer_norm(x, None, None, eps=1e-6))


def test_strided_rows_are_read_in_place():
    buf = rand(6, 4113, shift=0.5)
    x = buf[:, 7:7 + 4100]  # unaligned start and stride
    w, b = affine(4100, torch.float32)
    assert_close(layer_norm(x, w, b), ln_ref(x, w, b, 1e-5), torch.float32)
    buf3 = rand(2, 3, 800, dtype=torch.bfloat16)
    x3 = buf3[..., 3:772]
    w3, b3 = affine(769, torch.bfloat16)
    assert_close(layer_norm(x3, w3, b3), ln_ref(x3, w3, b3, 1e-5), torch.bfloat16)
    dy3 = rand(2, 3, 790, dtype=torch.bfloat16)[..., 1:770]
    mean, rstd = stats_of(x3, 1e-5)
    dx, dw, db = layer_norm_backward(dy3, x3, w3, mean.view(2, 3, 1), rstd.view(2, 3, 1))
    rdx, rdw, rdb = ln_bwd_ref(dy3, x3, w3, mean, rstd)
    assert_close(dx, rdx, torch.bfloat16)
    assert_close(dw, rdw, torch.bfloat16, atol_scale=3)


def test_exotic_layouts_are_copied():
    x = rand(4, 3, 64).transpose(0, 1)  # leading dims cannot be one row stride
    xt = rand(64, 5).t()  # last dim stride 5
    w, b = affine(64, torch.float32)
    assert_close(layer_norm(x, w, b), ln_ref(x, w, b, 1e-5), torch.float32)
    assert_close(layer_norm(xt, w, b), ln_ref(xt, w, b, 1e-5), torch.float32)
    dy = rand(64).expand(5, 64)  # what y.sum() hands back: every row the same memory (row stride 0)
    mean, rstd = stats_of(xt, 1e-5)
    dx, _, db = layer_norm_backward(dy, xt, w, mean, rstd)
    assert_close(dx, ln_bwd_ref(dy, xt, w, mean, rstd)[0], torch.float32)


def test_empty_rows():
    x = rand(0, 4096, dtype=torch.bfloat16)
    w, b = affine(4096, torch.bfloat16)
    assert layer_norm(x, w, b).shape == (0, 4096)
    y, mean, rstd = layer_norm_forward(x, w, b)
    assert mean.shape == rstd.shape == (0,)
    dx, dw, db = layer_norm_backward(x, x, w, mean, rstd)
    assert dx.shape == (0, 4096) and torch.equal(dw, torch.zeros_like(w)) and torch.equal(db, torch.zeros_like(w))


def test_nan_and_inf_propagate_like_the_reference():
    x = rand(3, 50)
    x[0, 3] = float("nan")
    x[1, 0] = float("inf")
    y, ref = layer_norm(x), ln_ref(x, None, None, 1e-5)
    assert torch.equal(y.isnan(), ref.isnan()) and y[:2].isnan().all()
    assert_close(y[2], ref[2], torch.float32)


def test_determinism_and_batch_invariance():
    for n, dtype in ((1000, torch.bfloat16), (64, torch.float32), (5120, torch.bfloat16)):
        x, dy = rand(13, n, dtype=dtype, shift=0.3), rand(13, n, dtype=dtype)
        w, b = affine(n, dtype)
        y, mean, rstd = layer_norm_forward(x, w, b)
        dx, dw, db = layer_norm_backward(dy, x, w, mean, rstd)
        y2, mean2, rstd2 = layer_norm_forward(x, w, b)
        dx2, dw2, db2 = layer_norm_backward(dy, x, w, mean, rstd)
        assert all(torch.equal(a, b) for a, b in ((y, y2), (mean, mean2), (rstd, rstd2), (dx, dx2), (dw, dw2),
                                                  (db, db2)))
        for sl in (slice(0, 1), slice(5, 9), slice(12, 13)):
            ys, ms, rs = layer_norm_forward(x[sl], w, b)
            assert torch.equal(ys, y[sl]) and torch.equal(ms, mean[sl]) and torch.equal(rs, rstd[sl])
            assert torch.equal(layer_norm_backward(dy[sl], x[sl], w, mean[sl], rstd[sl])[0], dx[sl])


def test_inputs_not_modified():
    x, dy = rand(4, 100), rand(4, 100)
    w, b = affine(100, torch.float32)
    copies = [t.clone() for t in (x, dy, w, b)]
    _, mean, rstd = layer_norm_forward(x, w, b)
    layer_norm_backward(dy, x, w, mean, rstd)
    assert all(torch.equal(a, c) for a, c in zip((x, dy, w, b), copies))


# --- bad input: a clear one-line error naming the argument ---------------------------------------------------
def test_rejects_bad_x():
    with pytest.raises(TypeError, match="x: expected dtype"):
        layer_norm(torch.ones(2, 4, dtype=torch.int32, device=DEVICE))
    with pytest.raises(TypeError, match="x: expected dtype"):
        layer_norm(torch.ones(2, 4, dtype=torch.float64, device=DEVICE))
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        layer_norm([1.0, 2.0])
    with pytest.raises(ValueError, match="x: hidden size"):
        layer_norm(rand(3, 0))
    with pytest.raises(ValueError, match="x: expected at least 1 dim"):
        layer_norm(torch.tensor(1.0, device=DEVICE))


def test_rejects_bad_weight_bias_and_eps():
    x = rand(2, 8)
    with pytest.raises(ValueError, match=r"weight: expected shape \(8,\)"):
        layer_norm(x, rand(7))
    with pytest.raises(ValueError, match=r"bias: expected shape \(8,\)"):
        layer_norm(x, None, rand(2, 8))
    with pytest.raises(TypeError, match="bias: expected dtype"):
        layer_norm(x, None, torch.ones(8, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError, match="weight is on meta"):
        layer_norm(x, torch.empty(8, device="meta"))
    with pytest.raises(ValueError, match="eps: expected a finite non-negative float"):
        layer_norm(x, eps=-1.0)
    with pytest.raises(ValueError, match="eps"):
        layer_norm(x, eps=float("nan"))
    with pytest.raises(TypeError, match="eps: expected a float"):
        layer_norm(x, eps="1e-5")


def test_rejects_bad_backward_inputs():
    x, dy = rand(3, 8), rand(3, 8)
    w = rand(8)
    mean, rstd = stats_of(x, 1e-5)
    with pytest.raises(ValueError, match="dy: expected shape"):
        layer_norm_backward(rand(3, 9), x, w, mean, rstd)
    with pytest.raises(TypeError, match="dy: expected dtype"):
        layer_norm_backward(dy.half(), x, w, mean, rstd)
    with pytest.raises(TypeError, match="mean: expected dtype float32"):
        layer_norm_backward(dy, x, w, mean.double(), rstd)
    with pytest.raises(ValueError, match="rstd: expected 3 values"):
        layer_norm_backward(dy, x, w, mean, rstd[:2])
    with pytest.raises(TypeError, match="rstd: expected a torch.Tensor"):
        layer_norm_backward(dy, x, w, mean, None)


def test_bad_input_through_the_autograd_path_is_one_line():
    """A call that needs gradients goes through the custom op: its arguments are checked first (the op's own parser
    answers a list in several lines, float(eps) names nothing, and True was taken as eps = 1.0)."""
    x = rand(2, 8).requires_grad_()
    cases = [(lambda: layer_norm(x, [1.0] * 8), TypeError, "weight: expected a torch.Tensor, got list"),
             (lambda: layer_norm(x, None, "b"), TypeError, "bias: expected a torch.Tensor, got str"),
             (lambda: layer_norm(x, rand(7)), ValueError, r"weight: expected shape \(8,\)"),
             (lambda: layer_norm(x, eps=None), TypeError, "eps: expected a float, got NoneType"),
             (lambda: layer_norm(x, eps="1e-5"), TypeError, "eps: expected a float, got str"),
             (lambda: layer_norm(x, eps=True), TypeError, "eps: expected a float, got bool"),
             (lambda: layer_norm(rand(2, 8), rand(8).requires_grad_(), eps=-1.0), ValueError, "eps: expected a finite")]
    for call, error, message in cases:
        with pytest.raises(error, match=message) as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("interpreted", ["1", "0"])
def test_meta_tensors_give_shapes_past_2_31_elements(interpreted, monkeypatch):
    """On the meta device (shape propagation, e.g. a model built without memory) every public function answers with
    the op's shapes and dtypes instead of launching on no data; 2^31 + 4096 elements: nothing overflows."""
    monkeypatch.setenv("TRITON_INTERPRET", interpreted)  # (meta needs neither a GPU nor the interpreter)
    m, n = 2**31 // 4096 + 1, 4096
    x = torch.empty(m, n, dtype=torch.bfloat16, device="meta")
    w = torch.empty(n, dtype=torch.float32, device="meta")
    y = layer_norm(x, w, w)
    assert y.is_meta and y.shape == (m, n) and y.dtype == torch.bfloat16
    y, mean, rstd = layer_norm_forward(x, w, None)
    assert y.shape == (m, n) and mean.shape == rstd.shape == (m,) and mean.dtype == torch.float32 and mean.is_meta
    dx, dw, db = layer_norm_backward(x, x, w, mean, rstd, dbias_dtype=torch.float16)
    assert dx.is_meta and dx.shape == (m, n) and dw.dtype == torch.float32 and db.dtype == torch.float16
    assert layer_norm_backward(x, x, None, mean, rstd, compute_dbias=False)[1:] == (None, None)
    with pytest.raises(ValueError, match="weight: expected shape"):
        layer_norm(x, torch.empty(7, device="meta"))
