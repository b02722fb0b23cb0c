"""The activation quantizers in Triton's CPU interpreter: bitwise equal to the contract's reference (float64 amax,
the scale rounded to float32, torch's e4m3 rounding of the float32 quotient), the amax = 0 guard, odd and wide
rows, strided rows, empty inputs, errors, torch.compile, and the harness' check."""

from __future__ import annotations

import pytest
import torch

import ridgeline
from ridgeline.core.registry import get_spec
from ridgeline.core.spec import Case
from ridgeline.ops.scaled_mm.launch import quantize_fp8_per_group, quantize_fp8_per_token
from ridgeline.ops.scaled_mm.peers.torch_native import eager_per_group, eager_per_token
from ridgeline.ops.scaled_mm.spec import FP8, quantize_ref

TOKEN = get_spec("quantize_fp8_per_token")
GROUP = get_spec("quantize_fp8_per_group")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(5, 300), (3, 1), (2, 4100), (1, 20000)])
def test_per_token_bitwise(dtype, shape):
    x = (torch.randn(shape) * 3).to(dtype)
    q, s = quantize_fp8_per_token(x)
    rq, rs = quantize_ref(x, 1, shape[1])
    assert q.dtype == FP8 and s.shape == (shape[0], 1) and s.dtype == torch.float32
    assert torch.equal(s, rs.reshape(-1, 1))
    assert torch.equal(_bits(q), _bits(rq))
    eq, es = eager_per_token(x)  # the peer's expression is the same numbers
    assert torch.equal(_bits(q), _bits(eq)) and torch.equal(s, es)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,group", [((5, 300), 128), ((4, 256), 128), ((3, 100), 32), ((2, 1000), 512)])
def test_per_group_bitwise(dtype, shape, group):
    x = (torch.randn(shape) * 3).to(dtype)
    q, s = quantize_fp8_per_group(x, group)
    rq, rs = quantize_ref(x, 1, group)
    assert s.shape == (shape[0], -(-shape[1] // group))
    assert torch.equal(s, rs) and torch.equal(_bits(q), _bits(rq))
    eq, es = eager_per_group(x, group)
    assert torch.equal(_bits(q), _bits(eq)) and torch.equal(s, es)


def test_rounding_at_binade_edges_and_saturation():
    """Quotients just below a power of two round up into the next binade (125.7 -> 128), 448 stays 448."""
    x = torch.tensor([[448.0, 125.7, -126.5, 31.2, 0.00390625, -447.9, 1e-6, 0.0, -1e-6, -0.0]])
    q, s = quantize_fp8_per_token(x)
    assert s.item() == 1.0
    assert torch.equal(_bits(q), _bits(x.clamp(-448, 448).to(FP8)))


def test_zero_rows_and_groups_get_scale_one():
    x = torch.randn(4, 256)
    x[1] = 0
    x[2, 128:] = 0
    q, s = quantize_fp8_per_token(x)
    assert s[1].item() == 1.0 and bool((q[1].float() == 0).all())
    qg, sg = quantize_fp8_per_group(x)
    assert sg[2, 1].item() == 1.0 and sg[1].tolist() == [1.0, 1.0] and bool((qg[2, 128:].float() == 0).all())


@pytest.mark.parametrize("group", [None, 128])
def test_nan_and_inf_follow_the_contract(group):
    """A NaN makes its row's (group's) amax NaN, so the scale is 1 and the NaN stays NaN in x_fp8 (not -448, not a
    scale that ignores it); an inf makes the scale inf: finite values quantize to (signed) zero, the inf to NaN."""
    x = torch.randn(4, 256) * 3
    x[1, 5], x[2, 200], x[3, 7] = float("nan"), float("inf"), -float("inf")
    if group is None:
        (q, s), (eq, es) = quantize_fp8_per_token(x), eager_per_token(x)
    else:
        (q, s), (eq, es) = quantize_fp8_per_group(x, group), eager_per_group(x, group)
    torch.testing.assert_close(s, es, rtol=0, atol=0, equal_nan=True)
    qf, ef = q.float(), eq.float()
    assert torch.equal(qf.isnan(), ef.isnan()) and int(qf.isnan().sum()) == 3
    keep = ~qf.isnan()
    assert torch.equal(_bits(q)[keep], _bits(eq)[keep])
    if group is None:  # the two-pass path of rows wider than 16384
        wide = torch.randn(2, 20000)
        wide[0, 19999] = float("nan")
        q, s = quantize_fp8_per_token(wide)
        assert s[0].item() == 1.0 and q[0, 19999].float().isnan() and int(q.float().isnan().sum()) == 1


def test_the_row_count_compiles_nothing_new(monkeypatch):
    """The persistent grids (a function of M) are runtime values: a serving loop's every new M must not key a
    fresh compile of the quantizer or the GEMM."""
    from ridgeline.ops.scaled_mm import launch as mod

    seen: dict[str, list] = {"token": [], "gemm": []}
    for name, launcher in (("token", mod._PER_TOKEN), ("gemm", mod._GEMM)):
        def spy(grid, args, constexprs, *rest, _orig=launcher.launch, _name=name, **kw):
            seen[_name].append((grid, dict(constexprs)))
            return _orig(grid, args, constexprs, *rest, **kw)

        monkeypatch.setattr(launcher, "launch", spy)
    b, sb = torch.randn(32, 64).to(FP8), torch.ones(32)
    for m in (3, 40):
        x = torch.randn(m, 64)
        quantize_fp8_per_token(x)
        mod.scaled_mm(x.to(FP8), b, torch.ones(m, 1), sb)
    for runs in seen.values():
        (g0, c0), (g1, c1) = runs
        assert g0 != g1 and c0 == c1


def test_strided_rows_read_in_place():
    base = torch.randn(6, 333)
    x = base[:, :300]
    for fn, args in ((quantize_fp8_per_token, ()), (quantize_fp8_per_group, (128,))):
        q, s = fn(x, *args)
        q2, s2 = fn(x.contiguous(), *args)
        assert torch.equal(_bits(q), _bits(q2)) and torch.equal(s, s2)


def test_empty():
    q, s = quantize_fp8_per_token(torch.randn(0, 64))
    assert q.shape == (0, 64) and s.shape == (0, 1)
    q, s = quantize_fp8_per_group(torch.randn(0, 300))
    assert q.shape == (0, 300) and s.shape == (0, 3)


@pytest.mark.parametrize("call,error,message", [
    (lambda: quantize_fp8_per_token(torch.randn(4, 8).double()), TypeError, "x: expected dtype"),
    (lambda: quantize_fp8_per_token(torch.randn(2, 4, 8)), ValueError, "x: expected a 2-D tensor"),
    (lambda: quantize_fp8_per_token("x"), TypeError, "x: expected a torch.Tensor"),
    (lambda: quantize_fp8_per_group(torch.randn(4, 8), 100), ValueError, "group: expected a power of two"),
    (lambda: quantize_fp8_per_group(torch.randn(4, 8), 2048), ValueError, "group: expected a power of two"),
])
def test_errors(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_torch_compile_fullgraph():
    x = torch.randn(8, 256)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(x):
        q, s = quantize_fp8_per_token(x)
        qg, sg = quantize_fp8_per_group(x, 128)
        return q, s, qg, sg

    q, s, qg, sg = f(x)
    assert torch.equal(_bits(q), _bits(quantize_fp8_per_token(x)[0])) and torch.equal(sg, quantize_fp8_per_group(x)[1])


def test_harness_check_passes():
    for op in ("quantize_fp8_per_token", "quantize_fp8_per_group"):
        cases = [Case(s, torch.bfloat16) for s in get_spec(op).shapes("cpu")]
        cases += [Case((7, 300), torch.float32, "strided"), Case((9, 4100), torch.float16, "zero-row"),
                  Case((0, 128), torch.bfloat16)]
        results = ridgeline.check(op, ["ridgeline", "torch-eager"], cases=cases, device="cpu")
        bad = [(r.op, r.impl, r.shape, r.variant, r.reasons) for r in results if not r.passed]
        assert not bad, bad


def test_costs():
    assert TOKEN.cost((4, 256), torch.bfloat16).bytes == 4 * 256 * 3 + 16
    assert GROUP.cost((4, 300), torch.float32).bytes == 4 * 300 * 5 + 4 * 4 * 3
    assert TOKEN.cost((4, 256), torch.bfloat16).unit == "fp32"
