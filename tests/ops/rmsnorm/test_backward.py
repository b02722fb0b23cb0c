"""RMSNorm backward (kernel_bwd.py, backward.py, autograd.py) against float64 autograd: dtypes, layouts, one and
two passes, no weight, weight offset, the fused op's residual gradient, determinism, batch invariance of dx,
autograd through the custom ops, gradcheck, torch.compile, the harness, and each bad input's message."""

import pytest
import torch

from conftest import DEVICE
from ridgeline import fused_add_rms_norm, rms_norm
from ridgeline.ops.rmsnorm.backward import fused_add_rms_norm_backward, rms_norm_backward
from ridgeline.ops.rmsnorm.rules_bwd import BwdConfig, bwd_candidates, bwd_config, bwd_layout
from ridgeline.ops.rmsnorm.spec_bwd import BWD_TOLERANCES, rstd_of_rows

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Ours is held tighter than the contract (which must also pass eager PyTorch's 16-bit roundings).
TIGHT = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32).to(dtype)


def ref_grads(dy, x, weight, eps=1e-6, offset=0.0, dres=None):
    """float64 autograd of the forward formula."""
    xd = x.detach().double().requires_grad_()
    wd = weight.detach().double().requires_grad_() if weight is not None else None
    y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    if wd is not None:
        y = y * (wd + offset)
    y.backward(dy.double())
    dx = xd.grad + (dres.double() if dres is not None else 0.0)
    return dx, (wd.grad if wd is not None else None)


def close(out, ref, dtype, rows=1):
    atol, rtol = TIGHT[dtype]
    torch.testing.assert_close(out.double(), ref, atol=atol * max(1, rows) ** 0.5, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (5, 769), (3, 4100), (2, 3, 64), (2, 20000)])
def test_backward_matches_fp64(dtype, shape):
    x, w, dy = rand(*shape, dtype=dtype), 1 + 0.5 * rand(shape[-1], dtype=dtype), rand(*shape, dtype=dtype)
    ref_dx, ref_dw = ref_grads(dy, x, w)
    rows = x.numel() // shape[-1]
    for rstd in (None, rstd_of_rows(x)):  # recomputed, or read as the forward saved it
        dx, dw = rms_norm_backward(dy, x, w, rstd)
        assert dx.dtype == dtype and dx.shape == x.shape and dw.dtype == w.dtype and dw.shape == w.shape
        close(dx, ref_dx, dtype)
        close(dw, ref_dw, dtype, rows)


@pytest.mark.parametrize("cfg", [BwdConfig(128, False, 4, False, 1), BwdConfig(1024, True, 4, False, 2),
                                 BwdConfig(1024, True, 8, True, 4)], ids=BwdConfig.describe)
def test_every_layout_is_right(cfg):
    x, w, dy = rand(9, 700), rand(700), rand(9, 700)
    ref_dx, ref_dw = ref_grads(dy, x, w)
    dx, dw = rms_norm_backward(dy, x, w, cfg=cfg)
    close(dx, ref_dx, torch.float32)
    close(dw, ref_dw, torch.float32, 9)


@pytest.mark.parametrize("hold", [True, False], ids=["w-held", "w-per-row"])
@pytest.mark.parametrize("rows", [9, 2], ids=["rows-loop", "fewer-rows-than-programs"])
def test_prefetching_the_next_row_changes_no_bit(hold, rows):
    """One pass with the next row's loads issued before this row's reduction (BwdConfig.prefetch): dx and dweight
    bitwise those without, for the plain and the fused backward (the prefetch past the last row is masked)."""
    x, w, dy, dres = rand(rows, 700, dtype=torch.bfloat16), rand(700), rand(rows, 700, dtype=torch.bfloat16), \
        rand(rows, 700, dtype=torch.bfloat16)
    plain, pre = BwdConfig(1024, True, 4, hold, 2), BwdConfig(1024, True, 4, hold, 2, prefetch=True)
    assert pre.describe().endswith("prefetch grid=2/SM")
    for rstd in (None, rstd_of_rows(x)):
        want = rms_norm_backward(dy, x, w, rstd, cfg=plain)
        got = rms_norm_backward(dy, x, w, rstd, cfg=pre)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    want = rms_norm_backward(dy, x, w, None, dresidual_out=dres, cfg=plain)  # (the fused op's backward)
    got = rms_norm_backward(dy, x, w, None, dresidual_out=dres, cfg=pre)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    close(got[0], ref_grads(dy, x, w, dres=dres)[0], torch.bfloat16)


def test_no_weight_offset_and_weight_dtype():
    x, dy = rand(4, 300, dtype=torch.bfloat16), rand(4, 300, dtype=torch.bfloat16)
    dx, dw = rms_norm_backward(dy, x, None)
    assert dw is None
    close(dx, ref_grads(dy, x, None)[0], torch.bfloat16)
    w = rand(300)  # an fp32 weight with bf16 rows: dweight in fp32
    dx, dw = rms_norm_backward(dy, x, w, weight_offset=1.0, eps=1e-3)
    ref_dx, ref_dw = ref_grads(dy, x, w, eps=1e-3, offset=1.0)
    assert dw.dtype == torch.float32
    close(dx, ref_dx, torch.bfloat16)
    close(dw, ref_dw, torch.bfloat16, 4)
    assert rms_norm_backward(dy, x, w, need_dweight=False)[1] is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_backward_adds_the_residual_gradient(dtype):
    s, w, dy, dres = rand(6, 769, dtype=dtype), rand(769), rand(6, 769, dtype=dtype), rand(6, 769, dtype=dtype)
    ref_dx, ref_dw = ref_grads(dy, s, w, dres=dres)
    dx, dw = fused_add_rms_norm_backward(dy, dres, s, w, rstd_of_rows(s))
    close(dx, ref_dx, dtype)
    close(dw, ref_dw, dtype, 6)
    dx0, _ = fused_add_rms_norm_backward(dy, None, s, w)
    close(dx0, ref_grads(dy, s, w)[0], dtype)


def test_strided_and_copied_layouts():
    buf, dbuf = rand(6, 4113), rand(6, 4120)
    x, dy, w = buf[:, 7:7 + 4100], dbuf[:, :4100], rand(4100)  # unaligned start and strides
    ref_dx, ref_dw = ref_grads(dy, x, w)
    dx, dw = rms_norm_backward(dy, x, w)
    close(dx, ref_dx, torch.float32)
    close(dw, ref_dw, torch.float32, 6)
    xt = rand(4, 3, 64).transpose(0, 1)  # leading dims not one row stride: copied
    dyt = rand(3, 4, 64)
    dx, dw = rms_norm_backward(dyt, xt, w[:64].contiguous())
    ref_dx, ref_dw = ref_grads(dyt, xt, w[:64])
    close(dx, ref_dx, torch.float32)


def test_empty_rows():
    x = rand(0, 256, dtype=torch.bfloat16)
    dx, dw = rms_norm_backward(x, x, rand(256))
    assert dx.shape == (0, 256) and torch.equal(dw, torch.zeros(256, device=DEVICE))


def test_nan_stays_in_its_row_for_dx():
    x, w, dy = rand(4, 50), rand(50), rand(4, 50)
    x[1, 3] = float("nan")
    dx, dw = rms_norm_backward(dy, x, w)
    assert dx[1].isnan().all() and not dx[[0, 2, 3]].isnan().any()
    assert dw.isnan().all()  # every column sums row 1


def test_deterministic_and_dx_batch_invariant():
    x, w, dy = rand(37, 1000, dtype=torch.bfloat16), rand(1000), rand(37, 1000, dtype=torch.bfloat16)
    dx, dw = rms_norm_backward(dy, x, w)
    dx2, dw2 = rms_norm_backward(dy, x, w)
    assert torch.equal(dx, dx2) and torch.equal(dw, dw2)
    for sl in (slice(0, 1), slice(5, 9), slice(36, 37)):
        assert torch.equal(rms_norm_backward(dy[sl], x[sl], w)[0], dx[sl])


def test_rules_depend_on_n_only_for_the_layout():
    for n in (64, 769, 4096, 4100, 8192, 16384, 20000):
        layouts = {(c.block_n, c.single_pass, c.num_warps) for c in (bwd_config(n, m, 132) for m in
                                                                     (1, 100, 10000, 10**6))}
        assert layouts == {(bwd_layout(n).block_n, bwd_layout(n).single_pass, bwd_layout(n).num_warps)}
        assert bwd_layout(n).single_pass == (n <= 16384)
        assert all(c.single_pass is False or c.block_n >= n for c in bwd_candidates(n))


# --- autograd through the custom ops ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_autograd_rms_norm(dtype):
    x = rand(5, 300, dtype=dtype).requires_grad_()
    w = (1 + 0.5 * rand(300, dtype=dtype)).requires_grad_()
    y = rms_norm(x, w, 1e-5, weight_offset=0.5)
    assert y.grad_fn is not None
    dy = rand(5, 300, dtype=dtype)
    y.backward(dy)
    ref_dx, ref_dw = ref_grads(dy, x, w, eps=1e-5, offset=0.5)
    close(x.grad, ref_dx, dtype)
    close(w.grad, ref_dw, dtype, 5)
    with torch.no_grad():
        assert rms_norm(x, w).grad_fn is None


def test_autograd_fused_add_rms_norm_both_outputs():
    x, r = rand(4, 200).requires_grad_(), rand(4, 200).requires_grad_()
    w = rand(200).requires_grad_()
    out, res = fused_add_rms_norm(x, r, w)
    dy, dres = rand(4, 200), rand(4, 200)
    torch.autograd.backward((out, res), (dy, dres))
    s = (x + r).detach()
    ref_dx, ref_dw = ref_grads(dy, s, w, dres=dres)
    close(x.grad, ref_dx, torch.float32)
    close(r.grad, ref_dx, torch.float32)
    close(w.grad, ref_dw, torch.float32, 4)
    x.grad = None
    out2, _ = fused_add_rms_norm(x, r.detach(), w.detach())
    out2.backward(dy)  # residual_out unused: its gradient is None
    close(x.grad, ref_grads(dy, s, w)[0], torch.float32)


def test_inplace_refuses_grad_in_one_line():
    x, r, w = rand(3, 64).requires_grad_(), rand(3, 64), rand(64)
    with pytest.raises(ValueError, match=r"^inplace: .*inplace=False$"):
        fused_add_rms_norm(x, r, w, inplace=True)
    with torch.no_grad():
        fused_add_rms_norm(x, r, w, inplace=True)  # no grad recorded: allowed


@pytest.mark.filterwarnings("ignore:Input #.* is not a double precision")
def test_gradcheck_fp64_formula_fp32_kernel():
    """The kernels take fp16/bf16/fp32 only (no fp64 loads are compiled), so gradcheck runs in float32 with
    tolerances for it; the double-precision comparison is test_backward_matches_fp64."""
    x = rand(3, 17).requires_grad_()
    w = (1 + 0.5 * rand(17)).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: rms_norm(a, b), (x, w), eps=1e-3, atol=2e-2, rtol=2e-2,
                                    fast_mode=True)


def test_fullgraph_compile_forward_and_backward():
    import torch._dynamo

    w = (1 + 0.5 * rand(128)).requires_grad_()

    def layer(x, r):
        h, res = fused_add_rms_norm(x, r, w)
        return (rms_norm(h * 2.0, w) * res).sum()

    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    x, r = rand(6, 128).requires_grad_(), rand(6, 128).requires_grad_()
    compiled(x, r).backward()
    got = (x.grad.clone(), r.grad.clone(), w.grad.clone())
    x.grad = r.grad = w.grad = None
    layer(x, r).backward()
    for a, b in zip(got, (x.grad, r.grad, w.grad)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


# --- the contracts through the harness ------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["rmsnorm_bwd", "fused_add_rmsnorm_bwd"])
def test_harness_passes_ours(op):
    from ridgeline.core.spec import Case
    from ridgeline.harness.correctness import check

    cases = [Case((7, 769), torch.bfloat16), Case((2, 5, 769), torch.float16, "strided"),
             Case((7, 769), torch.bfloat16, "w-fp32"), Case((3, 4100), torch.float32, "nan"),
             Case((0, 4096), torch.bfloat16), Case((1, 64), torch.float32)]
    results = check(op, impls=["ridgeline", "torch-eager"], device="cpu", cases=cases)
    assert results and all(r.passed for r in results), [(r.impl, r.label, r.reasons) for r in results if not r.passed]


def test_contract_cost_and_tolerance():
    from ridgeline.core.registry import get_spec

    plain, fused = get_spec("rmsnorm_bwd"), get_spec("fused_add_rmsnorm_bwd")
    assert plain.cost((4096, 4096), torch.bfloat16).bytes == 3 * 4096 * 4096 * 2 + 2 * 4096 * 2 + 4 * 4096
    assert fused.cost((4096, 4096), torch.bfloat16).bytes == 4 * 4096 * 4096 * 2 + 2 * 4096 * 2 + 4 * 4096
    assert plain.cost((8, 64), torch.bfloat16, "w-fp32").bytes == 3 * 8 * 64 * 2 + 2 * 64 * 4 + 32
    from ridgeline.core.spec import Case
    assert plain.tolerance_for(Case((400, 8), torch.bfloat16), "dweight", torch.float32).atol == pytest.approx(
        BWD_TOLERANCES[torch.bfloat16].atol * 20)
    assert plain.rows((0, 8)) == 0 and plain.rows((9, 8)) == 1


# --- bad input: one line naming the argument ----------------------------------------------------------------
def test_rejects_bad_arguments():
    x, w = rand(2, 8), rand(8)
    with pytest.raises(ValueError, match=r"dy: expected shape \(2, 8\)"):
        rms_norm_backward(rand(2, 9), x, w)
    with pytest.raises(TypeError, match="dy: expected dtype"):
        rms_norm_backward(torch.ones(2, 8, dtype=torch.int32, device=DEVICE), x, w)
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        rms_norm_backward(x, [1.0], w)
    with pytest.raises(ValueError, match=r"weight: expected shape \(8,\)"):
        rms_norm_backward(x, x, rand(7))
    with pytest.raises(TypeError, match="rstd: expected dtype float32"):
        rms_norm_backward(x, x, w, torch.ones(2, dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match=r"rstd: expected shape \(2,\)"):
        rms_norm_backward(x, x, w, torch.ones(3, device=DEVICE))
    with pytest.raises(ValueError, match="dresidual_out: expected shape"):
        rms_norm_backward(x, x, w, dresidual_out=rand(3, 8))
    with pytest.raises(ValueError, match="eps: expected a non-negative float"):
        rms_norm_backward(x, x, w, eps=-1.0)
    with pytest.raises(ValueError, match="weight_offset: only meaningful with a weight"):
        rms_norm_backward(x, x, None, weight_offset=1.0)
    with pytest.raises(ValueError, match="cfg: .* does not fit a row of 8 columns"):
        rms_norm_backward(x, x, w, cfg=BwdConfig(4, True, 1))
    with pytest.raises(ValueError, match="rstd is on meta"):
        rms_norm_backward(x, x, w, torch.empty(2, device="meta"))
    with pytest.raises(TypeError, match="^need_dweight: expected a bool, got str$"):
        rms_norm_backward(x, x, w, need_dweight="no")  # (was taken as True)
    with pytest.raises(TypeError, match="^cfg: expected a BwdConfig"):
        rms_norm_backward(x, x, w, cfg="1-pass")
