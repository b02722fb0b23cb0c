"""The harness must catch what KernelBench-style evaluations learned to catch; each test plants one defect."""

import textwrap

import pytest
import torch

from conftest import DEVICE
from ridgeline.core import registry
from ridgeline.core.spec import Case, Impl
from ridgeline.harness.correctness import bitwise_equal, check, check_case

SPEC = registry.get_spec("rmsnorm")
CASE = Case((9, 300), torch.float32)


def impl(fn, mutates=()):
    return Impl("rmsnorm", "planted", "user", fn, mutates=mutates)


def good(x, w, eps):
    xd = x.float()
    return (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def test_a_correct_implementation_passes():
    r = check_case(SPEC, impl(good), CASE, DEVICE)
    assert r.passed, r.reasons
    assert r.outputs[0].worst_ratio < 1.0


@pytest.mark.parametrize(
    "bad, reason",
    [
        (lambda x, w, eps: good(x, w, eps) * 1.01, "exceeds atol"),
        (lambda x, w, eps: torch.zeros_like(x), "exceeds atol"),
        (lambda x, w, eps: good(x, w, eps).double(), "dtype"),
        (lambda x, w, eps: good(x, w, eps)[:, :-1], "shape"),
        # RMSNorm is scale invariant: the output stays right, only the input check can see this.
        (lambda x, w, eps: good(x.mul_(1.5), w, eps), "input x was modified"),
        (lambda x, w, eps: good(x, w, eps) + torch.rand_like(x) * 1e-7, "not deterministic"),
        (lambda x, w, eps: good(x, w, eps) + 1e-7 * x.shape[0], "not batch invariant"),
        (lambda x, w, eps: torch.nan_to_num(good(x, w, eps), nan=0.0), None),
    ],
)
def test_planted_defects_are_caught(bad, reason):
    r = check_case(SPEC, impl(bad), CASE if reason else Case((7, 769), torch.float32, "nan"), DEVICE)
    assert not r.passed
    if reason:
        assert any(reason in s for s in r.reasons), r.reasons
    else:
        assert any("NaN/inf" in s for s in r.reasons), r.reasons


def test_a_second_call_or_a_row_subset_that_differs_is_held_to_the_reference_too():
    """Nondeterminism and batch variance are order properties a peer may lack and still be timed (with a caveat):
    only if the differing answers are right. A racing second call or garbage for a small batch is a value error."""
    from ridgeline.harness.correctness import only_order_variance

    calls = []

    def racing(x, w, eps):  # right the first time, half-finished the second
        calls.append(1)
        y = good(x, w, eps)
        return y if len(calls) % 2 else y * 0.5

    def small_batch_garbage(x, w, eps):
        return good(x, w, eps) if x.shape[0] == CASE.shape[0] else torch.zeros_like(x)

    def jittery(x, w, eps):  # another summation order each call: within tolerance
        return good(x, w, eps) + torch.rand_like(x) * 1e-7

    for bad, tag in ((racing, "second run:"), (small_batch_garbage, "alone:")):
        r = check_case(SPEC, impl(bad), CASE, DEVICE)
        assert not only_order_variance(r.reasons) and any(tag in s for s in r.reasons), r.reasons
    r = check_case(SPEC, impl(jittery), CASE, DEVICE)
    assert not r.passed and only_order_variance(r.reasons), r.reasons


def test_a_row_subset_in_another_order_does_not_hide_a_wrong_one():
    """The first subset that differs bitwise (but is right) must not end the batch check: a later batch size that
    is garbage is a value error, not order variance."""
    from ridgeline.harness.correctness import only_order_variance

    def three_rows_wrong(x, w, eps):
        y = good(x, w, eps)
        if x.shape[0] == 1:
            return y * (1 + 2.0 ** -22)  # another order for one row: right values, other bits
        return torch.zeros_like(y) if x.shape[0] == 3 else y  # CASE's middle subset: rows 4:7

    r = check_case(SPEC, impl(three_rows_wrong), CASE, DEVICE)
    assert not only_order_variance(r.reasons) and any(s.startswith("rows 4:7 alone:") for s in r.reasons), r.reasons
    assert sum(s.startswith("not batch invariant") for s in r.reasons) == 1, r.reasons


def test_a_second_call_that_returns_fewer_outputs_fails():
    class PassThrough(type(SPEC)):  # a user contract's call() that returns what the function returned
        def call(self, fn, inputs):
            out = fn(inputs["x"], inputs["weight"], inputs["eps"])
            return tuple(out) if isinstance(out, tuple) else (out,)

    calls = []

    def drops_its_output(x, w, eps):  # (zip() of the two calls' outputs would compare nothing)
        calls.append(1)
        return good(x, w, eps) if len(calls) != 2 else ()

    r = check_case(PassThrough(), impl(drops_its_output), CASE, DEVICE)
    assert not r.passed and any("second run: returned 0 outputs" in s for s in r.reasons), r.reasons


def test_a_cached_result_fails_on_fresh_inputs():
    cache = {}

    def cheat(x, w, eps):
        if "y" not in cache:
            cache["y"] = good(x, w, eps)
        return cache["y"].clone()

    r = check_case(SPEC, impl(cheat), CASE, DEVICE)
    assert any(s.startswith("fresh inputs") for s in r.reasons), r.reasons


def test_an_exception_is_a_result_not_a_crash():
    def boom(x, w, eps):
        raise RuntimeError("kernel launch failed")

    r = check_case(SPEC, impl(boom), CASE, DEVICE)
    assert not r.passed and "RuntimeError" in r.reasons[0]


def test_inplace_implementations_get_private_copies():
    spec = registry.get_spec("fused_add_rmsnorm")
    ours = registry.resolve("fused_add_rmsnorm", "ridgeline-inplace")
    r = check_case(spec, ours, Case((5, 300), torch.float32), DEVICE)
    assert r.passed, r.reasons
    undeclared = Impl("fused_add_rmsnorm", "undeclared", "user", ours.fn)  # writes x without saying so
    r = check_case(spec, undeclared, Case((5, 300), torch.float32), DEVICE)
    assert any("was modified" in s for s in r.reasons)


def test_unavailable_implementation_is_reported():
    r = check_case(SPEC, Impl("rmsnorm", "missing", "peer", None, reason="foo not installed"), CASE, DEVICE)
    assert not r.passed and "foo not installed" in r.reasons[0]


def test_user_file_implementation(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent("""
        import torch
        def my_rms(x, weight, eps):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    """))
    results = check("rmsnorm", [f"{path}:my_rms"], [torch.float16], DEVICE,
                    [Case((5, 769), torch.float16), Case((3, 4100), torch.float16, "strided")])
    assert len(results) == 2 and all(r.passed for r in results), [r.reasons for r in results]
    with pytest.raises(ValueError, match="defines no .nope."):
        registry.resolve("rmsnorm", f"{path}:nope")
    with pytest.raises(ValueError, match="no such file"):
        registry.resolve("rmsnorm", f"{tmp_path}/missing.py:f")


def test_bitwise_equal_sees_nan_payloads_and_signed_zero():
    a = torch.tensor([0.0, float("nan")])
    assert bitwise_equal(a, a.clone())
    assert not bitwise_equal(a, torch.tensor([-0.0, float("nan")]))


@pytest.mark.slow  # (every edge case of the spec, each run six times, by every implementation of ours)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("op", ["rmsnorm", "fused_add_rmsnorm"])
def test_our_kernels_pass_every_edge_case(op, dtype):
    results = check(op, device=DEVICE, dtypes=[dtype])
    failed = [(r.impl, r.label, r.reasons) for r in results if not r.passed]
    assert not failed
    ours = {i.name for i in registry.implementations(op) if i.source == "ours"}
    assert {r.impl for r in results} == ours and len(results) >= 20 * len(ours)


def test_residual_out_is_checked_exactly():
    spec = registry.get_spec("fused_add_rmsnorm")
    ours = registry.resolve("fused_add_rmsnorm", "ridgeline").fn

    def truncating(x, residual, weight, eps):
        out, res = ours(x, residual, weight, eps)
        s = (x.float() + residual.float()).view(torch.int32) & -65536  # bf16 by truncation: 1 ulp off at times
        return out, s.view(torch.float32).to(torch.bfloat16)

    r = check_case(spec, Impl("fused_add_rmsnorm", "trunc", "user", truncating), Case((7, 769), torch.bfloat16),
                   DEVICE)
    assert any("residual_out max error" in s for s in r.reasons), r.reasons


def test_declared_in_place_writes_do_not_hide_undeclared_ones():
    spec = registry.get_spec("fused_add_rmsnorm")
    ours = registry.resolve("fused_add_rmsnorm", "ridgeline-inplace").fn

    def sneaky(x, residual, weight, eps):
        weight[0] = 123.0  # not declared
        return ours(x, residual, weight, eps)

    r = check_case(spec, Impl("fused_add_rmsnorm", "sneaky", "user", sneaky, mutates=("x", "residual")),
                   Case((5, 300), torch.float32), DEVICE)
    assert any("input weight was modified" in s for s in r.reasons), r.reasons


def test_a_reused_output_buffer_cannot_hide_non_determinism():
    buf = {}

    def noisy_reuse(x, w, eps):
        y = good(x, w, eps) + torch.rand_like(x) * 1e-6
        out = buf.setdefault(tuple(x.shape), torch.empty_like(x))
        return out.copy_(y)

    r = check_case(SPEC, impl(noisy_reuse), Case((1, 4096), torch.float32), DEVICE)
    assert any("not deterministic" in s for s in r.reasons), r.reasons


def test_cases_may_be_a_generator():
    cases = (Case((3, 64), d) for d in (torch.float32, torch.bfloat16))
    results = check("rmsnorm", ["ridgeline"], [torch.float32, torch.bfloat16], DEVICE, cases)
    assert sorted(r.dtype for r in results) == ["bf16", "fp32"]


def _refuses_one_row(x, w, eps=1e-6):
    if x.shape[0] == 1:
        raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED (a stand-in: this kernel needs 16 rows)")
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def test_a_peer_that_refuses_a_one_row_batch_passes_with_a_note():
    case = Case((64, 256), torch.float32)
    r = check_case(SPEC, Impl("rmsnorm", "picky", "peer", _refuses_one_row), case, DEVICE)
    assert r.passed, r.reasons
    assert r.notes and r.notes[0].startswith("batch invariance not checked: rows 0:1 alone raised RuntimeError")


def test_ours_refusing_a_one_row_batch_fails():
    case = Case((64, 256), torch.float32)
    r = check_case(SPEC, Impl("rmsnorm", "picky", "ours", _refuses_one_row), case, DEVICE)
    assert not r.passed and any("CUBLAS_STATUS_NOT_SUPPORTED" in x for x in r.reasons), r.reasons


def test_a_peer_that_raises_on_every_call_fails():
    def always(x, w, eps=1e-6):
        raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")

    r = check_case(SPEC, Impl("rmsnorm", "broken", "peer", always), Case((64, 256), torch.float32), DEVICE)
    assert not r.passed and not r.notes and any("CUBLAS_STATUS_NOT_SUPPORTED" in x for x in r.reasons), r.reasons


def test_a_peer_wrong_on_a_one_row_batch_still_fails():
    def wrong_alone(x, w, eps=1e-6):  # runs on one row, but computes it wrong there
        y = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)
        return y * 1.5 if x.shape[0] == 1 else y

    r = check_case(SPEC, Impl("rmsnorm", "picky", "peer", wrong_alone), Case((64, 256), torch.float32), DEVICE)
    assert not r.passed and not r.notes and any("not batch invariant" in x for x in r.reasons), r.reasons


def test_a_contract_whose_batch_subset_raises_is_a_harness_error_not_a_note():
    from ridgeline.core.spec import OpSpec

    class BrokenSubset(type(SPEC)):
        def batch_subset(self, inputs, index):
            raise KeyError("the contract's own bug")

    spec = BrokenSubset.__new__(BrokenSubset)
    spec.__dict__.update(SPEC.__dict__)
    assert isinstance(spec, OpSpec)
    r = check_case(spec, Impl("rmsnorm", "picky", "peer", _refuses_one_row), Case((64, 256), torch.float32), DEVICE)
    assert not r.passed and r.harness_error and not r.notes, r.reasons
