"""Our gated-activation kernels against float64: every activation and dtype, both layouts, strided rows, odd widths,
empty inputs, NaN/inf, batch invariance, the erf's accuracy, the launch rules, and each bad input's error."""

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE
from ridgeline import gelu_and_mul, gelu_and_mul_backward, gelu_mul, silu_and_mul, silu_and_mul_backward, silu_mul
from ridgeline.ops.act_and_mul import rules
from ridgeline.ops.act_and_mul.launch import launch_forward
from ridgeline.ops.act_and_mul.spec import TOLERANCES, reference_backward, reference_forward

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
ACTS = ["silu", "gelu", "gelu_tanh"]


def rand(*shape, dtype=torch.float32, scale=2.0):
    return (scale * torch.randn(*shape, device=DEVICE)).to(dtype)


def fwd(x, act):
    if act == "silu":
        return silu_and_mul(x)
    return gelu_and_mul(x, "tanh" if act == "gelu_tanh" else "none")


def bwd(dy, x, act):
    if act == "silu":
        return silu_and_mul_backward(dy, x)
    return gelu_and_mul_backward(dy, x, "tanh" if act == "gelu_tanh" else "none")


def pair(gate, up, act):
    if act == "silu":
        return silu_mul(gate, up)
    return gelu_mul(gate, up, "tanh" if act == "gelu_tanh" else "none")


def assert_close(out, ref, dtype):
    tol = TOLERANCES[dtype]
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref, atol=tol.atol, rtol=tol.rtol, equal_nan=True)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2), (7, 14), (5, 1538), (3, 8200), (2, 3, 128)])
def test_forward_and_backward_match_fp64(shape, dtype, act):
    x = rand(*shape, dtype=dtype)
    dy = rand(*shape[:-1], shape[-1] // 2, dtype=dtype, scale=1.0)
    y = fwd(x, act)
    assert y.shape == (*shape[:-1], shape[-1] // 2)
    assert_close(y, reference_forward(x, act), dtype)
    dx = bwd(dy, x, act)
    assert dx.shape == x.shape and dx.is_contiguous()
    assert_close(dx, reference_backward(dy, x, act), dtype)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_tensor_form_equals_packed_form_bitwise(dtype, act):
    x = rand(6, 2 * 300, dtype=dtype)
    gate, up = x[:, :300].contiguous(), x[:, 300:].contiguous()
    assert torch.equal(pair(gate, up, act), fwd(x, act))
    # The halves of one buffer as strided views: read in place, same bits.
    assert torch.equal(pair(x[:, :300], x[:, 300:], act), fwd(x, act))


def test_strided_rows_are_read_in_place_and_out_may_be_strided():
    buf = rand(6, 2 * 769 + 13)
    x = buf[:, 5:5 + 2 * 769]  # unaligned start and row stride
    assert_close(silu_and_mul(x), reference_forward(x, "silu"), torch.float32)
    out_buf = torch.full((6, 800), float("nan"), device=DEVICE)
    out = out_buf[:, 3:3 + 769]
    res = gelu_and_mul(x, out=out)
    assert res.data_ptr() == out.data_ptr()
    assert_close(out, reference_forward(x, "gelu"), torch.float32)
    assert out_buf[:, :3].isnan().all() and out_buf[:, 3 + 769:].isnan().all(), "wrote outside out's rows"
    dy = rand(6, 780)[:, :769]
    assert_close(silu_and_mul_backward(dy, x), reference_backward(dy, x, "silu"), torch.float32)


def test_unaddressable_layouts_are_copied():
    x = rand(4, 3, 64).transpose(0, 1)  # leading dims cannot be one row stride
    assert_close(silu_and_mul(x), reference_forward(x, "silu"), torch.float32)
    xt = rand(64, 5).t()  # last dim not contiguous
    assert_close(gelu_and_mul(xt, "tanh"), reference_forward(xt, "gelu_tanh"), torch.float32)
    dy = rand(1, 32).expand(5, 32)  # a broadcast dy (row stride 0) is read in place
    assert_close(silu_and_mul_backward(dy, xt), reference_backward(dy, xt, "silu"), torch.float32)


def test_empty_inputs_return_empty_outputs():
    x = rand(0, 28672, dtype=torch.bfloat16)
    assert silu_and_mul(x).shape == (0, 14336)
    assert silu_and_mul_backward(rand(0, 14336, dtype=torch.bfloat16), x).shape == (0, 28672)
    assert gelu_and_mul(rand(3, 0)).shape == (3, 0)
    assert silu_mul(rand(2, 0, 8), rand(2, 0, 8)).shape == (2, 0, 8)


@pytest.mark.parametrize("act", ACTS)
def test_nan_and_inf_propagate_like_the_reference(act):
    x = rand(3, 2 * 50)
    x[0, 3] = float("nan")
    x[1, 0] = float("inf")
    x[1, 1] = float("-inf")
    x[2, 60] = float("-inf")  # an up value
    x[2, 4] = -1e30  # saturates to -0
    dy = rand(3, 50)
    y, ref = fwd(x, act), reference_forward(x, act)
    assert torch.equal(y.isnan(), ref.isnan()) and torch.equal(y.isinf(), ref.isinf())
    assert_close(y, ref, torch.float32)
    dx, dref = bwd(dy, x, act), reference_backward(dy, x, act)
    assert torch.equal(dx.isnan(), dref.isnan()) and torch.equal(dx.isinf(), dref.isinf())
    assert_close(dx, dref, torch.float32)


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh"])
def test_gelu_is_accurate_over_its_range(act):
    """The erf (tl.erf) and the tanh-as-sigmoid form, on a dense grid of gates, against float64. Within a few
    float32 ulps of act(g), plus the float32 floor of the formula for negative g: 1 + erf(g / sqrt 2) cancels
    (~ulp(1) * |g| / 2 absolute; torch's and vLLM's CUDA GELU compute it the same way), and exp(-2z) of the tanh
    form carries the rounding of its argument. The tanh approximation in place of the erf would miss by ~1e-3."""
    g = torch.linspace(-12, 12, 4001, device=DEVICE, dtype=torch.float32)
    x = torch.cat([g, torch.ones_like(g)]).reshape(1, -1)
    y = fwd(x, act).double()[0]
    ref = reference_forward(x, act)[0]
    err = (y - ref).abs()
    bound = 2**-23 * (32 * ref.abs() + 2 * g.double().abs())
    assert (err <= bound).all(), f"worst at g = {float(g[(err / bound).argmax()])}"
    if act == "gelu":  # and the erf form, not the tanh one: they differ by far more than the bound
        tanh_form = reference_forward(x, "gelu_tanh")[0]
        assert ((tanh_form - ref).abs() > bound).any()


def test_batch_invariance_and_determinism():
    x = rand(37, 2 * 1000, dtype=torch.bfloat16)
    dy = rand(37, 1000, dtype=torch.bfloat16)
    full, dfull = silu_and_mul(x), silu_and_mul_backward(dy, x)
    assert torch.equal(full, silu_and_mul(x)) and torch.equal(dfull, silu_and_mul_backward(dy, x))
    for sl in (slice(0, 1), slice(5, 9), slice(36, 37)):
        assert torch.equal(silu_and_mul(x[sl]), full[sl])
        assert torch.equal(silu_and_mul_backward(dy[sl], x[sl]), dfull[sl])


def test_every_config_gives_the_same_bits():
    """No knob changes the arithmetic: tiles, warps and the L2 hint only move work between programs."""
    x = rand(6, 2 * 700, dtype=torch.bfloat16)
    expect = silu_and_mul(x)
    for cfg in (rules.ActConfig(1, 64, 1), rules.ActConfig(4, 256, 2, True), rules.ActConfig(2, 1024, 4)):
        out = torch.empty_like(expect)
        launch_forward(x, 1400, x, 1400, out, 700, 6, 700, 0, True, cfg)
        assert torch.equal(out, expect), cfg.describe()


def test_inputs_not_modified():
    x, dy = rand(4, 100), rand(4, 50)
    copies = (x.clone(), dy.clone())
    silu_and_mul(x)
    gelu_and_mul_backward(dy, x)
    silu_mul(x[:, :50], x[:, 50:])
    assert torch.equal(x, copies[0]) and torch.equal(dy, copies[1])


def test_float64_is_computed_in_float64():
    x = rand(3, 2 * 40, dtype=torch.float64)
    torch.testing.assert_close(gelu_and_mul(x), reference_forward(x, "gelu"), atol=1e-13, rtol=1e-13)


# --- the launch rules -------------------------------------------------------------------------------------------
def test_rules_table_is_ordered_data_with_reasons():
    assert rules.RULES[-1].match == rules.Match(), "the last rule must catch every call"
    assert all(r.why for r in rules.RULES)
    names = {rules.first_rule(rules.Call(d, 2, m, bwd)).name
             for d in (64, 14336) for m in (1, 64, 4096) for bwd in (False, True)}
    assert names == {"narrow rows", "one to four rows", "decode", "decode backward", "bulk", "bulk backward"}
    assert rules.first_rule(rules.Call(14336, 2, 4096, interpreted=True)).name == "interpreter"


@pytest.mark.parametrize("d", [1, 7, 769, 11008, 14336, 28672])
@pytest.mark.parametrize("m", [1, 3, 64, 16384])
def test_configs_fit_the_call(d, m):
    for bwd in (False, True):
        cfg = rules.config_for(d, 2, m, bwd)
        assert cfg.block_n <= max(1, 1 << (d - 1).bit_length())
        assert cfg.block_m <= max(1, 1 << (m - 1).bit_length())
    cands = rules.candidate_configs(d, 2, m)
    assert cands and len(set(cands)) == len(cands)
    assert all(1 <= c.per_thread() <= 16 for c in cands)


def test_config_rejects_non_powers_of_two():
    with pytest.raises(ValueError, match="ActConfig.block_n: expected a power of two"):
        rules.ActConfig(1, 1000, 4)


# --- bad input: one line naming the argument ----------------------------------------------------------------------
def test_rejects_bad_x():
    with pytest.raises(ValueError, match="x: the last dim holds \\[gate, up\\] and must be even, got 7"):
        silu_and_mul(rand(2, 7))
    with pytest.raises(TypeError, match="x: expected dtype"):
        silu_and_mul(torch.ones(2, 4, dtype=torch.int32, device=DEVICE))
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        gelu_and_mul([1.0, 2.0])
    with pytest.raises(ValueError, match="x: expected at least 1 dim"):
        silu_and_mul(torch.tensor(1.0, device=DEVICE))
    with pytest.raises(ValueError, match="approximate: expected 'none' or 'tanh', got 'fast'"):
        gelu_and_mul(rand(2, 4), "fast")


def test_rejects_bad_out_dy_and_pairs():
    x = rand(3, 8)
    with pytest.raises(ValueError, match=r"out: expected shape \(3, 4\) \(from x\), got \(3, 8\)"):
        silu_and_mul(x, out=rand(3, 8))
    with pytest.raises(TypeError, match="out: expected dtype torch.float32"):
        silu_and_mul(x, out=rand(3, 4, dtype=torch.float16))
    with pytest.raises(ValueError, match="out: rows overlap"):
        silu_and_mul(x, out=rand(1, 4).expand(3, 4))
    with pytest.raises(ValueError, match=r"dy: expected shape \(3, 4\) \(from x\)"):
        silu_and_mul_backward(rand(3, 8), x)
    with pytest.raises(TypeError, match="dy: expected dtype"):
        gelu_and_mul_backward(rand(3, 4, dtype=torch.bfloat16), x)
    with pytest.raises(ValueError, match=r"up: expected shape \(3, 8\) \(from gate\)"):
        silu_mul(x, rand(3, 9))
    with pytest.raises(TypeError, match="up: expected dtype"):
        gelu_mul(x, x.half())
    with pytest.raises(ValueError, match="up is on meta but gate is on"):
        silu_mul(x, torch.empty(3, 8, device="meta"))


def test_cpu_tensor_without_interpreter_says_what_to_do(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="need a CUDA tensor, or Triton's CPU interpreter"):
        silu_and_mul(torch.randn(2, 8))


def test_f_silu_is_what_the_reference_means():
    """A test of the test: the float64 reference is torch's own silu(gate) * up on x = [gate, up]."""
    x = torch.randn(2, 6, dtype=torch.float64)
    assert torch.equal(reference_forward(x, "silu"), F.silu(x[:, :3]) * x[:, 3:])


def test_bad_input_through_the_autograd_path_is_one_line():
    """With an input that requires grad the call goes through the custom op: its arguments are checked first (the
    op's own parser answered a non-tensor `up` in several lines)."""
    g = rand(3, 8).requires_grad_()
    for call, error, message in [(lambda: silu_mul(g, [1.0]), TypeError, "up: expected a torch.Tensor, got list"),
                                 (lambda: gelu_mul(g, None), TypeError, "up: expected a torch.Tensor, got NoneType"),
                                 (lambda: silu_mul(g, rand(3, 9)), ValueError, r"up: expected shape \(3, 8\)"),
                                 (lambda: silu_and_mul(g[:, :7]), ValueError, "x: the last dim holds")]:
        with pytest.raises(error, match=message) as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("interpreted", ["1", "0"])
def test_meta_tensors_give_shapes_past_2_31_elements(interpreted, monkeypatch):
    """On the meta device every public function answers with the op's shapes (no launch on no data); x of
    2^31 + 28672 elements."""
    monkeypatch.setenv("TRITON_INTERPRET", interpreted)  # (meta needs neither a GPU nor the interpreter)
    m, d = 2**31 // 28672 + 1, 14336
    x = torch.empty(m, 2 * d, dtype=torch.bfloat16, device="meta")
    for y in (silu_and_mul(x), gelu_and_mul(x, "tanh"), silu_mul(x[:, :d], x[:, d:]), gelu_mul(x[:, :d], x[:, d:])):
        assert y.is_meta and y.shape == (m, d) and y.dtype == torch.bfloat16
    dy = torch.empty(m, d, dtype=torch.bfloat16, device="meta")
    for dx in (silu_and_mul_backward(dy, x), gelu_and_mul_backward(dy, x)):
        assert dx.is_meta and dx.shape == (m, 2 * d) and dx.dtype == torch.bfloat16
    out = torch.empty(m, d, dtype=torch.bfloat16, device="meta")
    assert silu_and_mul(x, out=out) is out
    with pytest.raises(ValueError, match=r"dy: expected shape"):
        silu_and_mul_backward(x, x)
