"""layer_norm under autograd (the custom op's registered backward) and torch.compile, and the harness's check of
both contracts on small cases."""

import pytest
import torch

from conftest import DEVICE
from ridgeline import layer_norm
from ridgeline.core.spec import Case
from ridgeline.harness.correctness import check
from ridgeline.ops.layernorm.spec import TOLERANCES


def _leaves(shape, dtype, wdtype=None, bias=True):
    n = shape[-1]
    x = (torch.randn(shape, device=DEVICE) + 0.5).to(dtype).requires_grad_()
    w = (1 + 0.5 * torch.randn(n, device=DEVICE)).to(wdtype or dtype).requires_grad_()
    b = (0.5 * torch.randn(n, device=DEVICE)).to(wdtype or dtype).requires_grad_() if bias else None
    return x, w, b


def _ref_grads(x, w, b, dy, eps=1e-5):
    """Gradients of the float64 formula (plain torch ops, no F.layer_norm) by autograd."""
    leaves = [t.detach().double().requires_grad_() for t in (x, w) + ((b,) if b is not None else ())]
    xd, wd = leaves[:2]
    mean = xd.mean(-1, keepdim=True)
    var = (xd - mean).pow(2).mean(-1, keepdim=True)
    y = (xd - mean) / torch.sqrt(var + eps) * wd + (leaves[2] if b is not None else 0.0)
    y.backward(dy.double())
    return y.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize(("dtype", "wdtype"), [(torch.float32, None), (torch.bfloat16, None),
                                               (torch.float16, torch.float32)])
def test_autograd_matches_fp64_autograd(dtype, wdtype):
    x, w, b = _leaves((2, 3, 200), dtype, wdtype)
    y = layer_norm(x, w, b)
    dy = torch.randn_like(y)
    y.backward(dy)
    ref_y, (gx, gw, gb) = _ref_grads(x, w, b, dy)
    tol, wtol = TOLERANCES[dtype], TOLERANCES[wdtype or dtype]
    torch.testing.assert_close(y.detach().double(), ref_y, atol=tol.atol, rtol=tol.rtol)
    torch.testing.assert_close(x.grad.double(), gx, atol=2 * tol.atol, rtol=tol.rtol)
    assert w.grad.dtype == w.dtype and b.grad.dtype == b.dtype
    torch.testing.assert_close(w.grad.double(), gw, atol=3 * wtol.atol, rtol=wtol.rtol)
    torch.testing.assert_close(b.grad.double(), gb, atol=3 * wtol.atol, rtol=wtol.rtol)


def test_only_the_gradients_asked_for():
    x, w, _ = _leaves((4, 64), torch.float32, bias=False)
    w.requires_grad_(False)
    layer_norm(x, w).sum().backward()  # dy = ones expanded (row stride 0)
    assert x.grad is not None and w.grad is None
    x2 = x.detach()
    w2 = w.detach().requires_grad_()
    b2 = torch.zeros(64, device=DEVICE, requires_grad=True)
    (layer_norm(x2, w2, b2) * torch.randn(4, 64, device=DEVICE)).sum().backward()
    assert w2.grad is not None and b2.grad is not None and x2.grad is None


def test_gradcheck_float32():
    # The kernels take float32, float16 and bfloat16 only (no float64 Triton path), so gradcheck runs in float32 with
    # finite-difference steps and tolerances sized for it: our backward kernels against our forward kernel.
    x, w, b = _leaves((3, 17), torch.float32)
    assert torch.autograd.gradcheck(lambda *t: layer_norm(*t, eps=1e-5), (x, w, b), eps=1e-2, atol=2e-2, rtol=2e-2,
                                    fast_mode=True)


def test_no_grad_call_does_not_record():
    x, w, b = _leaves((2, 32), torch.float32)
    with torch.no_grad():
        y = layer_norm(x, w, b)
    assert not y.requires_grad


def test_torch_compile_fullgraph_forward_and_backward():
    x, w, b = _leaves((4, 96), torch.float32)

    def f(x, w, b):
        return layer_norm(x, w, b) * 2.0

    dy = torch.randn(4, 96, device=DEVICE)
    compiled = torch.compile(f, fullgraph=True, dynamic=False)
    out = compiled(x, w, b)
    out.backward(dy)
    grads = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    eager = f(x, w, b)
    eager.backward(dy)
    assert torch.equal(out, eager)
    for g, t in zip(grads, (x, w, b)):
        assert torch.equal(g, t.grad), "compiled and eager backward: the same kernels, the same bits"


@pytest.mark.slow
def test_torch_compile_fullgraph_inference():
    x = torch.randn(4, 96, device=DEVICE)
    w, b = torch.randn(96, device=DEVICE), torch.randn(96, device=DEVICE)
    with torch.no_grad():
        got = torch.compile(lambda x: layer_norm(x, w, b) + 1.0, fullgraph=True)(x)
    assert torch.equal(got, layer_norm(x, w, b) + 1.0)


@pytest.mark.parametrize("op", ["layernorm", "layernorm_bwd"])
def test_harness_check_passes_on_cpu_cases(op):
    cases = [Case(s, d, v) for s, d, v in [((1, 1), torch.float32, ""), ((7, 769), torch.bfloat16, ""),
                                           ((7, 769), torch.bfloat16, "strided"), ((5, 4100), torch.float16, ""),
                                           ((7, 769), torch.bfloat16, "w-fp32"), ((2, 3, 64), torch.float32, ""),
                                           ((0, 64), torch.bfloat16, "")]]
    if op == "layernorm":
        cases += [Case((7, 769), torch.float32, "nan"), Case((7, 300), torch.bfloat16, "inf")]
    results = check(op, ["ridgeline"], [torch.float32, torch.float16, torch.bfloat16], DEVICE, cases=cases)
    assert len(results) == len(cases)
    assert all(r.passed for r in results), [(r.shape, r.dtype, r.variant, r.reasons) for r in results if not r.passed]


def test_harness_check_catches_a_wrong_backward():
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Impl
    from ridgeline.harness.correctness import check_case
    from ridgeline.ops.layernorm.launch import layer_norm_backward

    def wrong(dy, x, weight, mean, rstd):  # dbias summed over one row too few
        dx, dw, db = layer_norm_backward(dy, x, weight, mean, rstd)
        return dx, dw, db - dy[-1].to(db.dtype)

    r = check_case(get_spec("layernorm_bwd"), Impl("layernorm_bwd", "wrong", "user", wrong),
                   Case((9, 64), torch.float32), DEVICE)
    assert not r.passed and any("dbias" in reason for reason in r.reasons), r.reasons


@pytest.mark.parametrize("wdtype", [None, torch.bfloat16])
def test_a_float32_bias_gets_a_float32_gradient(wdtype):
    """dbias is rounded once, to the bias's dtype: a float32 bias beside a bf16 weight (or no weight, bf16 x) used to
    get its sum rounded to bf16 first (2^-9 relative error) and then cast up."""
    x = (torch.randn(64, 256, device=DEVICE) + 0.5).to(torch.bfloat16).requires_grad_()
    w = None if wdtype is None else (1 + 0.5 * torch.randn(256, device=DEVICE)).to(wdtype).requires_grad_()
    b = (0.5 * torch.randn(256, device=DEVICE)).requires_grad_()
    dy = torch.randn(64, 256, device=DEVICE).to(torch.bfloat16)
    layer_norm(x, w, b).backward(dy)
    assert b.grad.dtype == torch.float32
    tol = TOLERANCES[torch.float32]
    torch.testing.assert_close(b.grad.double(), dy.double().sum(0), atol=tol.atol * 8, rtol=tol.rtol)


def test_custom_ops_pass_torch_library_opcheck():
    """The fake implementations agree with the real ops (shapes, dtypes, strides) and the autograd registration is
    sound, including a strided x and a bias whose dtype is not the weight's."""
    from ridgeline.ops.layernorm import launch

    x, w, b = _leaves((3, 40), torch.float32)
    xs = torch.randn(3, 53, device=DEVICE)[:, :40]
    torch.library.opcheck(launch.layer_norm_op, (xs, w.detach(), None, 1e-5))
    torch.library.opcheck(launch.layer_norm_fwd_op, (x, None, b.detach().half().requires_grad_(), 1e-5))
    _, mean, rstd = launch.layer_norm_forward(x.detach(), w.detach(), b.detach())
    dy = torch.randn(3, 40, device=DEVICE)
    torch.library.opcheck(launch.layer_norm_bwd_op, (dy, x.detach(), w.detach(), mean, rstd, True, True,
                                                     torch.float16))
    torch.library.opcheck(launch.layer_norm_bwd_op, (dy, x.detach(), None, mean, rstd, False, True, None))
