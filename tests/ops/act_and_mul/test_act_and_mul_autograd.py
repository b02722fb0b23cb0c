"""Autograd through the custom ops (against float64 autograd), gradcheck on our float64 kernels, torch.compile
(fullgraph) of functions that call them, and the harness's check of our implementations on CPU cases."""

import pytest
import torch
import torch.nn.functional as F

import ridgeline
from conftest import DEVICE
from ridgeline import gelu_and_mul, gelu_mul, silu_and_mul, silu_and_mul_backward, silu_mul
from ridgeline.core.spec import Case
from ridgeline.ops.act_and_mul.spec import TOLERANCES

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rand(*shape, dtype=torch.float32):
    return (2 * torch.randn(*shape, device=DEVICE)).to(dtype)


def close(a, b, dtype):
    tol = TOLERANCES[dtype]
    torch.testing.assert_close(a.double(), b.double(), atol=tol.atol, rtol=tol.rtol)


def _ref_act(approximate):
    return F.silu if approximate is None else (lambda g: F.gelu(g, approximate=approximate))


@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_autograd_matches_fp64(dtype, approximate):
    x = rand(2, 3, 2 * 77, dtype=dtype).requires_grad_()
    dy = rand(2, 3, 77, dtype=dtype)
    y = silu_and_mul(x) if approximate is None else gelu_and_mul(x, approximate)
    assert y.requires_grad and y.grad_fn is not None
    (dx,) = torch.autograd.grad(y, x, dy)
    xd = x.detach().double().requires_grad_()
    ref = _ref_act(approximate)(xd[..., :77]) * xd[..., 77:]
    (dref,) = torch.autograd.grad(ref, xd, dy.double())
    close(y.detach(), ref.detach(), dtype)
    close(dx, dref, dtype)
    assert dx.dtype == dtype


@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_tensor_autograd_matches_fp64(dtype, approximate):
    gate = rand(5, 130, dtype=dtype).requires_grad_()
    up = rand(5, 130, dtype=dtype).requires_grad_()
    y = silu_mul(gate, up) if approximate is None else gelu_mul(gate, up, approximate)
    dy = rand(5, 130, dtype=dtype)
    dg, du = torch.autograd.grad(y, (gate, up), dy)
    g64, u64 = (t.detach().double().requires_grad_() for t in (gate, up))
    rg, ru = torch.autograd.grad(_ref_act(approximate)(g64) * u64, (g64, u64), dy.double())
    close(dg, rg, dtype)
    close(du, ru, dtype)


def test_grad_of_one_input_only_and_a_loss_through_it():
    gate = rand(4, 64).requires_grad_()
    up = rand(4, 64)  # no grad
    silu_mul(gate, up).square().sum().backward()
    g64 = gate.detach().double().requires_grad_()
    (F.silu(g64) * up.double()).square().sum().backward()
    close(gate.grad, g64.grad, torch.float32)


def test_gradcheck_in_float64_runs_our_kernels():
    """The kernels compute float64 tensors in float64, so gradcheck tests our backward kernel itself."""
    x = torch.randn(3, 2 * 9, device=DEVICE, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(silu_and_mul, (x,))
    assert torch.autograd.gradcheck(lambda t: gelu_and_mul(t, "none"), (x,))
    assert torch.autograd.gradcheck(lambda t: gelu_and_mul(t, "tanh"), (x,))
    g = torch.randn(3, 9, device=DEVICE, dtype=torch.float64, requires_grad=True)
    u = torch.randn(3, 9, device=DEVICE, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: gelu_mul(a, b, "tanh"), (g, u))
    assert torch.autograd.gradcheck(silu_mul, (g, u))


def test_out_with_grad_is_refused():
    x = rand(2, 8).requires_grad_()
    with pytest.raises(ValueError, match="out: not supported when x requires grad"):
        silu_and_mul(x, out=torch.empty(2, 4, device=DEVICE))
    with torch.no_grad():  # no autograd: the eager path writes out
        out = torch.empty(2, 4, device=DEVICE)
        assert silu_and_mul(x, out=out) is out


def test_fullgraph_compile_forward_and_backward():
    import torch._dynamo

    def mlp_act(gate_up, gate, up):
        return silu_and_mul(gate_up) * 2.0 + gelu_mul(gate, up, "tanh")

    compiled = torch.compile(mlp_act, fullgraph=True, backend="aot_eager")
    gu = rand(6, 2 * 40).requires_grad_()
    g, u = rand(6, 40).requires_grad_(), rand(6, 40).requires_grad_()
    out = compiled(gu, g, u)
    exp = mlp_act(gu, g, u)
    assert torch.equal(out, exp)
    grads = torch.autograd.grad(out.sum(), (gu, g, u))
    exp_grads = torch.autograd.grad(exp.sum(), (gu, g, u))
    assert all(torch.equal(a, b) for a, b in zip(grads, exp_grads))
    torch._dynamo.reset()


def test_compile_of_the_backward_function_and_no_grad_calls():
    import torch._dynamo

    x, dy = rand(4, 32), rand(4, 16)
    fn = torch.compile(lambda a, b: silu_and_mul_backward(b, a) + 1.0, fullgraph=True, backend="aot_eager")
    assert torch.equal(fn(x, dy), silu_and_mul_backward(dy, x) + 1.0)
    torch._dynamo.reset()


def test_custom_ops_pass_torch_library_opcheck():
    from ridgeline.ops.act_and_mul import launch

    x, dy = rand(3, 16), rand(3, 8)
    g, u = rand(3, 8), rand(3, 8)
    torch.library.opcheck(launch.act_and_mul_op, (x.requires_grad_(), "silu"))
    torch.library.opcheck(launch.act_and_mul_bwd_op, (dy, x.detach(), "gelu"))
    torch.library.opcheck(launch.act_mul_op, (g.requires_grad_(), u, "gelu_tanh"))
    torch.library.opcheck(launch.act_mul_bwd_op, (dy, g.detach(), u, "silu"))


CHECK_CASES = {
    "silu_and_mul": [Case((5, 1538), torch.bfloat16), Case((3, 8200), torch.float16, "strided"),
                     Case((2, 3, 128), torch.float32, "nan"), Case((0, 28672), torch.bfloat16),
                     Case((3, 8200), torch.bfloat16, "inf")],
    "gelu_and_mul": [Case((5, 1538), torch.bfloat16), Case((3, 8200), torch.bfloat16, "tanh+strided"),
                     Case((7, 14), torch.float32, "tanh+inf")],
    "silu_and_mul_bwd": [Case((5, 1538), torch.bfloat16), Case((3, 8200), torch.float16, "strided+nan"),
                         Case((1, 2), torch.float32)],
    "gelu_and_mul_bwd": [Case((5, 1538), torch.bfloat16, "tanh"), Case((3, 8200), torch.float32, "strided"),
                         Case((2, 3, 128), torch.bfloat16, "inf")],
}


@pytest.mark.parametrize("op", list(CHECK_CASES))
def test_harness_check_passes_ours(op):
    results = ridgeline.check(op, impls=["ridgeline", "torch-eager"], cases=CHECK_CASES[op], device=DEVICE)
    ours = [r for r in results if r.impl == "ridgeline"]
    assert len(ours) == len(CHECK_CASES[op])
    assert all(r.passed for r in ours), [(r.shape, r.variant, r.reasons) for r in ours if not r.passed]
    # The eager peer agrees on the values (on the CPU its GELU is not batch invariant: that is its own matter).
    eager = [r for r in results if r.impl == "torch-eager"]
    assert all(r.passed or all("batch invariant" in why for why in r.reasons) for r in eager), \
        [(r.shape, r.variant, r.reasons) for r in eager]


def test_contracts_refuse_odd_widths_and_count_bytes():
    spec = ridgeline.core.registry.get_spec("silu_and_mul")
    with pytest.raises(ValueError, match="even last dim"):
        spec.check_shape((4, 7))
    assert spec.cost((4096, 28672), torch.bfloat16).bytes == 3 * 4096 * 14336 * 2
    bwd = ridgeline.core.registry.get_spec("gelu_and_mul_bwd")
    assert bwd.cost((4096, 28672), torch.bfloat16, "tanh").bytes == 5 * 4096 * 14336 * 2
    assert bwd.cost((8, 64), torch.float32, "tanh").flops > bwd.cost((8, 64), torch.float32).flops
