"""scaled_mm in Triton's CPU interpreter (3.7 runs fp8 loads and dots there): every scale mode against the float64
reference of the dequantized operands, odd sizes, bias, output dtypes, strided and N-major operands, empty inputs,
each bad argument's one-line error, torch.compile of the custom op, and the harness' check on the CPU cases."""

from __future__ import annotations

import pytest
import torch

import ridgeline
from ridgeline.core.registry import get_spec
from ridgeline.core.spec import Case
from ridgeline.ops.scaled_mm.launch import launch_scaled_mm, scale_mode, scaled_mm
from ridgeline.ops.scaled_mm.rules import TileConfig
from ridgeline.ops.scaled_mm.spec import FP8, parse_variant

SPEC = get_spec("scaled_mm")


def _run(shape, variant, seed=0):
    case = Case(shape, FP8, variant)
    inputs = SPEC.make_inputs(case, "cpu", seed)
    (y,) = SPEC.call(scaled_mm, inputs)
    (ref,) = SPEC.reference(inputs)
    return case, inputs, y, ref


def _assert_close(case, y, ref):
    tol = SPEC.tolerance_for(case, "y", y.dtype)
    err = (y.double() - ref).abs()
    bound = tol.atol + tol.rtol * ref.abs()
    assert bool((err <= bound).all()), f"{case.label()}: max err {err.max().item():.3g}, ref max {ref.abs().max()}"


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("shape", [(37, 45, 300), (64, 64, 256), (1, 1, 16), (130, 20, 129)])
def test_modes_match_float64(mode, shape):
    case, inputs, y, ref = _run(shape, mode)
    assert y.shape == (shape[0], shape[1]) and y.dtype == torch.bfloat16
    _assert_close(case, y, ref)


def test_block_scales_apply_per_k_block():
    """A tolerance that cannot tell: make the K blocks' scales differ by 2^10 and compare against using one."""
    case = Case((16, 32, 256), FP8, "block")
    inputs = SPEC.make_inputs(case, "cpu", 1)
    inputs["scale_a"][:, 1] *= 1024.0
    (y,) = SPEC.call(scaled_mm, inputs)
    (ref,) = SPEC.reference(inputs)
    rel = ((y.double() - ref).norm() / ref.norm()).item()
    assert rel < 1e-2
    flat = dict(inputs, scale_a=inputs["scale_a"][:, :1].expand(16, 2).contiguous())
    assert ((SPEC.reference(flat)[0] - ref).norm() / ref.norm()).item() > 0.5


def test_block_scales_apply_per_n_block():
    """The weight's 128x128 blocks along N: N = 200 spans two, the second's scales made 2^10 larger; a kernel
    that indexes scale_b by another block size (or row) than n // 128 is off by that factor on some columns."""
    case = Case((8, 200, 256), FP8, "block+fp32")
    inputs = SPEC.make_inputs(case, "cpu", 6)
    inputs["scale_b"][1] *= 1024.0
    (y,) = SPEC.call(scaled_mm, inputs)
    (ref,) = SPEC.reference(inputs)
    for cols in (slice(0, 128), slice(128, 200)):  # (each block against its own scale: fp32 output, K = 256)
        assert ((y[:, cols].double() - ref[:, cols]).norm() / ref[:, cols].norm()).item() < 1e-6


@pytest.mark.parametrize("variant", ["row+bias", "block+fp16", "tensor+fp32", "row+strided", "block+nmajor",
                                     "row+nmajor", "block+bias+fp32"])
def test_variants(variant):
    case, inputs, y, ref = _run((37, 45, 300), variant)
    assert y.dtype == parse_variant(variant)["out_dtype"]
    _assert_close(case, y, ref)


def test_fp16_operands_run_the_same_kernel():
    """The same kernel on fp16 copies of the fp8 values (exactly representable): the same result bit for bit
    in fp32 output (the products and sums are the same numbers)."""
    inputs = SPEC.make_inputs(Case((33, 47, 300), FP8, "block+fp32"), "cpu", 2)
    y8 = launch_scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], torch.float32)
    y16 = launch_scaled_mm(inputs["a"].half(), inputs["b"].half(), inputs["scale_a"], inputs["scale_b"],
                           torch.float32, allow_fp16=True)
    assert torch.equal(y8, y16)


def test_explicit_tile_config_and_pointer_path():
    inputs = SPEC.make_inputs(Case((40, 70, 200), FP8, "row"), "cpu", 3)
    ref = SPEC.reference(inputs)[0]
    cfg = TileConfig(16, 64, 64, 2, 4, 2, use_tma=False)
    y = launch_scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], cfg=cfg)
    _assert_close(Case((40, 70, 200), FP8, "row"), y, ref)


def test_batch_invariance_rows_do_not_depend_on_m():
    inputs = SPEC.make_inputs(Case((64, 32, 256), FP8, "block"), "cpu", 4)
    full = scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"])
    part = scaled_mm(inputs["a"][:5], inputs["b"], inputs["scale_a"][:5], inputs["scale_b"])
    assert torch.equal(full[:5], part)


@pytest.mark.parametrize("shape,mode", [((0, 64, 128), "row"), ((5, 0, 128), "block"), ((5, 7, 0), "tensor")])
def test_empty(shape, mode):
    case, inputs, y, ref = _run(shape, mode)
    assert y.shape == (shape[0], shape[1])
    assert torch.equal(y.double(), ref)


def test_k_zero_with_bias_is_the_bias():
    _, inputs, y, ref = _run((3, 5, 0), "row+bias")
    assert torch.equal(y, inputs["bias"].expand(3, 5))


def test_scale_mode_from_shapes():
    assert scale_mode(torch.ones(()), torch.ones(1, 1), 4, 5, 300) == "tensor"
    assert scale_mode(torch.ones(4, 1), torch.ones(5), 4, 5, 300) == "row"
    assert scale_mode(torch.ones(4), torch.ones(1, 5), 4, 5, 300) == "row"
    assert scale_mode(torch.ones(4, 3), torch.ones(1, 3), 4, 5, 300) == "block"


def _ok():
    a = torch.zeros(4, 256).to(FP8)
    b = torch.zeros(8, 256).to(FP8)
    return a, b, torch.ones(4, 1), torch.ones(8)


@pytest.mark.parametrize("change,error,message", [
    (lambda a, b, sa, sb: (a.float(), b, sa, sb, {}), TypeError, "a: expected dtype float8_e4m3fn"),
    (lambda a, b, sa, sb: (a, b[:, :128], sa, sb, {}), ValueError, "b: expected [N, 256]"),
    (lambda a, b, sa, sb: (a[None], b, sa, sb, {}), ValueError, "a: expected a 2-D tensor"),
    (lambda a, b, sa, sb: (a, b, sa.double(), sb, {}), TypeError, "scale_a: expected float32 scales"),
    (lambda a, b, sa, sb: (a, b, torch.ones(3, 1), sb, {}), ValueError, "scale_a, scale_b: expected per-tensor"),
    (lambda a, b, sa, sb: (a, b, sa, sb, {"out_dtype": torch.int8}), TypeError, "out_dtype: expected one of"),
    (lambda a, b, sa, sb: (a, b, sa, sb, {"bias": torch.ones(7)}), ValueError, "bias: expected shape [8]"),
    (lambda a, b, sa, sb: (a, b, sa, sb, {"bias": torch.ones(8, dtype=torch.int32)}), TypeError, "bias: expected"),
    (lambda a, b, sa, sb: (a, "b", sa, sb, {}), TypeError, "b: expected a torch.Tensor"),
])
def test_errors_name_the_argument(change, error, message):
    a, b, sa, sb, kw = change(*_ok())
    with pytest.raises(error) as e:
        scaled_mm(a, b, sa, sb, **kw)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_block_config_must_divide_the_scale_group():
    a, b, _, _ = _ok()
    with pytest.raises(ValueError, match="BLOCK_K dividing 128"):
        launch_scaled_mm(a, b, torch.ones(4, 2), torch.ones(1, 2), cfg=TileConfig(16, 16, 256, 1, 4, 1, False))


def test_torch_compile_fullgraph():
    inputs = SPEC.make_inputs(Case((16, 32, 128), FP8, "row+bias"), "cpu", 5)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(a, b, sa, sb, bias):
        return ridgeline_scaled_mm(a, b, sa, sb, torch.bfloat16, bias) * 2

    ridgeline_scaled_mm = scaled_mm
    y = f(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], inputs["bias"])
    assert torch.equal(y, scaled_mm(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"],
                                    torch.bfloat16, inputs["bias"]) * 2)


def test_harness_check_passes_on_cpu_cases():
    cases = [Case(s, FP8, m) for s in SPEC.shapes("cpu") for m in ("tensor", "row", "block")]
    cases += [Case((7, 13, 33), FP8, "block+bias"), Case((0, 64, 128), FP8, "row"), Case((5, 7, 0), FP8, "block")]
    results = ridgeline.check("scaled_mm", ["ridgeline", "torch-eager"], cases=cases, device="cpu")
    bad = [(r.impl, r.shape, r.variant, r.reasons) for r in results if not r.passed]
    assert not bad, bad


def test_batch_subset_slices_the_row_scales_of_every_mode():
    """The harness' batch-invariance runs take rows of a with their scales; K = 0 leaves block scales empty."""
    for shape, mode in (((5, 7, 0), "block"), ((6, 7, 300), "block"), ((6, 7, 64), "row"), ((6, 7, 64), "tensor")):
        inputs = SPEC.make_inputs(Case(shape, FP8, mode), "cpu", 0)
        sub = SPEC.batch_subset(inputs, slice(2, 4))
        assert sub["a"].shape[0] == 2
        want = inputs["scale_a"] if mode == "tensor" else inputs["scale_a"][2:4]
        assert torch.equal(sub["scale_a"], want) and sub["scale_b"] is inputs["scale_b"]
        (y,) = SPEC.call(scaled_mm, sub)
        assert y.shape == (2, shape[1])


def test_costs():
    c = SPEC.cost((4, 8, 256), FP8, "block+bias")
    assert c.flops == 2 * 4 * 8 * 256 and c.unit == "fp8"
    assert c.bytes == 4 * 256 + 8 * 256 + 4 * (4 * 2 + 1 * 2) + 4 * 8 * 2 + 8 * 2
    assert SPEC.cost((4, 8, 256), FP8, "tensor").bytes == 4 * 256 + 8 * 256 + 8 + 4 * 8 * 2
    assert SPEC.cost((4, 8, 256), FP8, "row+fp32").bytes == 4 * 256 + 8 * 256 + 4 * 12 + 4 * 8 * 4


def test_tolerance_grows_with_k():
    small = SPEC.tolerance_for(Case((1, 1, 256), FP8, "row"), "y", torch.bfloat16)
    big = SPEC.tolerance_for(Case((1, 1, 16384), FP8, "row"), "y", torch.bfloat16)
    assert big.atol > 8 * small.atol
