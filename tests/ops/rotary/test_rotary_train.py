"""The training form (`apply_rotary` in Hugging Face's layout and its backward) against float64 on the CPU
interpreter: layouts, cos/sin forms, the backward as the exact transpose, autograd, torch.compile, bad input."""

import pytest
import torch

from conftest import DEVICE
from ridgeline import check
from ridgeline.core.spec import Case
from ridgeline.ops.rotary.launch_train import apply_rotary, apply_rotary_backward
from ridgeline.ops.rotary.rules import RotaryConfig
from ridgeline.ops.rotary.spec_train import hf_cos_sin, rotate_half, rotate_half_t

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
ONE_ROUNDING = {torch.float32: 1e-6, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def hf_layout(b, s, h, d, dtype=torch.float32):
    """As HF's attention hands q over: q_proj(x).view(B, S, H, D).transpose(1, 2)."""
    return torch.randn(b, s, h, d, device=DEVICE).to(dtype).transpose(1, 2)


def cos_sin(b, s, d, dtype=torch.float32):
    pos = torch.randint(0, 1000, (b, 1), device=DEVICE) + torch.arange(s, device=DEVICE)
    return hf_cos_sin(pos, d, dtype)


def ref(x, cos, sin, backward=False):
    c, s = cos.double(), sin.double()
    if c.dim() == 3:
        c, s = c.unsqueeze(1), s.unsqueeze(1)
    xd = x.double()
    return xd * c + rotate_half_t(xd * s) if backward else xd * c + rotate_half(xd) * s


def assert_one_rounding(out, expect, dtype):
    err = (out.double() - expect).abs()
    assert out.dtype == dtype and out.shape == expect.shape
    assert bool((err <= ONE_ROUNDING[dtype] * expect.abs() + 1e-6).all()), float(err.max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("shape", [(2, 5, 4, 2, 64), (1, 3, 7, 1, 80), (2, 2, 6, 3, 96), (1, 1, 1, 1, 2)])
def test_matches_fp64_within_one_rounding(dtype, backward, shape):
    b, s, hq, hk, d = shape
    q, k = hf_layout(b, s, hq, d, dtype), hf_layout(b, s, hk, d, dtype)
    cos, sin = cos_sin(b, s, d, dtype)
    fn = apply_rotary_backward if backward else apply_rotary
    qo, ko = fn(q, k, cos, sin)
    assert_one_rounding(qo, ref(q, cos, sin, backward), dtype)
    assert_one_rounding(ko, ref(k, cos, sin, backward), dtype)
    assert qo.stride() == q.stride(), "the output keeps the input's memory layout"


@pytest.mark.parametrize("form", ["4d", "shared", "2d", "fp32"])
def test_cos_sin_forms(form):
    b, s, d = 2, 4, 32
    q, k = torch.randn(b, 3, s, d, device=DEVICE), torch.randn(b, 1, s, d, device=DEVICE)  # contiguous [B, H, S, D]
    cos, sin = cos_sin(1 if form in ("shared", "2d") else b, s, d)
    expect_q, expect_k = ref(q, cos, sin), ref(k, cos, sin)
    if form == "4d":
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    elif form == "2d":
        cos, sin = cos[0], sin[0]
    elif form == "fp32":
        q, k = q.bfloat16(), k.bfloat16()
        expect_q, expect_k = ref(q, cos, sin), ref(k, cos, sin)
    qo, ko = apply_rotary(q, k, cos, sin)
    assert_one_rounding(qo, expect_q, q.dtype)
    assert_one_rounding(ko, expect_k, k.dtype)


def test_backward_is_the_exact_transpose_of_the_forward():
    """<f(x), y> == <x, f^T(y)> for any cos, sin (not only HF's, whose halves are equal)."""
    b, s, h, d = 2, 3, 2, 16
    x, y = torch.randn(b, h, s, d, device=DEVICE), torch.randn(b, h, s, d, device=DEVICE)
    cos, sin = torch.randn(b, s, d, device=DEVICE), torch.randn(b, s, d, device=DEVICE)
    fx, _ = apply_rotary(x, x[:, :1], cos, sin)
    fty, _ = apply_rotary_backward(y, y[:, :1], cos, sin)
    lhs, rhs = (fx.double() * y.double()).sum(), (x.double() * fty.double()).sum()
    assert abs(float(lhs - rhs)) < 1e-4 * float(lhs.abs() + 1)
    # With HF's cos/sin the backward rotates by -theta: forward then backward is the identity.
    c, sn = cos_sin(b, s, d)
    back, _ = apply_rotary_backward(*apply_rotary(x, x[:, :1], c, sn), c, sn)
    torch.testing.assert_close(back, x, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autograd_through_the_custom_op_matches_fp64_autograd(dtype):
    b, s, hq, hk, d = 2, 3, 4, 2, 32
    q = hf_layout(b, s, hq, d, dtype).requires_grad_()
    k = hf_layout(b, s, hk, d, dtype).requires_grad_()
    cos, sin = cos_sin(b, s, d, dtype)
    qo, ko = apply_rotary(q, k, cos, sin)
    gq, gk = torch.randn_like(qo), torch.randn_like(ko)
    torch.autograd.backward((qo, ko), (gq, gk))
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    torch.autograd.backward((ref(q64, cos, sin), ref(k64, cos, sin)), (gq.double(), gk.double()))
    assert_one_rounding(q.grad, q64.grad, dtype)
    assert_one_rounding(k.grad, k64.grad, dtype)


def test_fp64_gradcheck_is_not_offered():
    """The kernels take fp32/fp16/bf16 (float32 math): float64 is refused, so gradcheck runs on the exact-transpose
    test above instead."""
    q = torch.randn(1, 1, 2, 4, dtype=torch.float64, device=DEVICE)
    with pytest.raises(TypeError, match="q: expected dtype float32, float16, bfloat16; got float64"):
        apply_rotary(q, q, q[0], q[0])


def test_cos_requiring_grad_is_refused_in_autograd():
    q = torch.randn(1, 2, 3, 8, device=DEVICE, requires_grad=True)
    cos, sin = cos_sin(1, 3, 8)
    with pytest.raises(ValueError, match="cos: requires grad"):
        apply_rotary(q, q, cos.requires_grad_(), sin)


def test_configs_give_the_same_bits_and_batch_invariance():
    b, s, hq, hk, d = 3, 4, 8, 2, 64
    q, k = hf_layout(b, s, hq, d, torch.bfloat16), hf_layout(b, s, hk, d, torch.bfloat16)
    cos, sin = cos_sin(b, s, d, torch.bfloat16)
    base = apply_rotary(q, k, cos, sin)
    for cfg in (RotaryConfig("kv-group", 256, 1), RotaryConfig("token", 8192, 8)):
        other = apply_rotary(q, k, cos, sin, config=cfg)
        assert torch.equal(other[0], base[0]) and torch.equal(other[1], base[1])
    sub = apply_rotary(q[1:2], k[1:2], cos[1:2], sin[1:2])
    assert torch.equal(sub[0], base[0][1:2]) and torch.equal(sub[1], base[1][1:2])


def test_empty_and_inputs_untouched():
    q = torch.randn(0, 2, 3, 8, device=DEVICE)
    cos, sin = torch.randn(0, 3, 8, device=DEVICE), torch.randn(0, 3, 8, device=DEVICE)
    qo, ko = apply_rotary(q, q[:, :1], cos, sin)
    assert qo.shape == (0, 2, 3, 8) and ko.shape == (0, 1, 3, 8)
    q, k = hf_layout(1, 2, 2, 8), hf_layout(1, 2, 1, 8)
    cos, sin = cos_sin(1, 2, 8)
    copies = [t.clone() for t in (q, k, cos, sin)]
    apply_rotary(q, k, cos, sin)
    assert all(torch.equal(a, b) for a, b in zip((q, k, cos, sin), copies))


def test_torch_compile_fullgraph_forward_and_backward():
    """Both custom ops (the serving one too) in one compiled graph, with autograd through the training op."""
    from ridgeline.ops.rotary.launch import rotary_embedding
    from ridgeline.ops.rotary.spec import cos_sin_cache

    cache = cos_sin_cache(16, 16, torch.float32, DEVICE)

    def step(q, k, cos, sin, pos, qs, ks):
        qo, ko = apply_rotary(q, k, cos, sin)
        rotary_embedding(pos, qs, ks, 16, cache, True)
        return (qo.float() * 2).sum() + ko.float().sum() + qs.sum() + ks.sum()

    compiled = torch.compile(step, fullgraph=True, dynamic=False)
    q = hf_layout(1, 3, 2, 16).requires_grad_()
    k = hf_layout(1, 3, 1, 16).requires_grad_()
    cos, sin = cos_sin(1, 3, 16)
    pos = torch.randint(0, 16, (3,), device=DEVICE)
    qs, ks = torch.randn(3, 32, device=DEVICE), torch.randn(3, 16, device=DEVICE)
    qs2, ks2 = qs.clone(), ks.clone()
    loss = compiled(q, k, cos, sin, pos, qs, ks)
    loss.backward()
    expect = step(q.detach(), k.detach(), cos, sin, pos, qs2, ks2)
    torch.testing.assert_close(loss.detach(), expect, atol=1e-4, rtol=1e-5)
    assert torch.equal(qs, qs2) and torch.equal(ks, ks2), "the compiled graph wrote q and k in place"
    g = torch.full_like(q, 2.0)
    torch.testing.assert_close(q.grad, apply_rotary_backward(g, torch.ones_like(k), cos, sin)[0])


def test_check_passes_the_harness_on_cpu_cases():
    bf16 = (((0, 4, 2, 1, 8), ""), ((2, 5, 4, 2, 64), "cos-shared"), ((3, 4, 7, 1, 80), "contiguous+cos-4d"),
            ((2, 3, 6, 3, 96), "nan"))
    cases = [Case(s, torch.bfloat16, v) for s, v in bf16]
    cases += [Case((2, 5, 4, 2, 64), d) for d in (torch.float32, torch.float16)]
    for op in ("rotary_train", "rotary_train_bwd"):
        results = check(op, ["ridgeline"], cases=cases, device=DEVICE)
        assert len(results) == len(cases) and all(r.passed for r in results), [
            (r.label, r.reasons) for r in results if not r.passed]


@pytest.mark.slow
@pytest.mark.parametrize("op", ["rotary_train", "rotary_train_bwd"])
def test_check_passes_every_edge_case_of_every_dtype(op):
    results = check(op, ["ridgeline"], device=DEVICE)
    assert results and all(r.passed for r in results), [(r.label, r.reasons) for r in results if not r.passed]


# --- bad input -------------------------------------------------------------------------------------------------
def _args():
    q, k = hf_layout(2, 3, 4, 8), hf_layout(2, 3, 2, 8)
    cos, sin = cos_sin(2, 3, 8)
    return [q, k, cos, sin]


@pytest.mark.parametrize("index, value, error, match", [
    (0, [1.0], TypeError, "q: expected a torch.Tensor"),
    (0, torch.zeros(2, 4, 3, 8, dtype=torch.int64, device=DEVICE), TypeError, "q: expected dtype"),
    (0, torch.zeros(2, 3, 8, device=DEVICE), ValueError, r"q: expected shape \[B, heads, S, D\]"),
    (0, torch.zeros(2, 4, 3, 7, device=DEVICE), ValueError, "q: head dim D must be even"),
    (1, torch.zeros(2, 2, 3, 8, dtype=torch.float16, device=DEVICE), TypeError, r"k: expected dtype float32 \(same"),
    (1, torch.zeros(2, 2, 4, 8, device=DEVICE), ValueError, r"k: expected \[B=2, heads, S=3, D=8\]"),
    (2, torch.zeros(2, 3, 6, device=DEVICE), ValueError, r"cos: expected shape \[B=2, S=3, D=8\]"),
    (2, torch.zeros(3, 3, 8, device=DEVICE), ValueError, "cos: expected shape"),
    (3, torch.zeros(2, 2, 3, 8, device=DEVICE), ValueError, "sin: expected shape"),
    (3, torch.zeros(2, 3, 8, dtype=torch.int32, device=DEVICE), TypeError, "sin: expected dtype"),
])
def test_bad_input_names_the_argument(index, value, error, match):
    args = _args()
    args[index] = value
    with pytest.raises(error, match=match):
        apply_rotary(*args)


def test_config_of_the_wrong_type_is_one_line():
    with pytest.raises(TypeError, match=r"^config: expected a RotaryConfig \(rules.py\) or None, got str$"):
        apply_rotary(*_args(), config="token")  # (failed deep in resolve with an AttributeError)
