"""CPU (interpreter) tests of the GEMM: values vs float64, layouts, strided/transposed operands, edge sizes, errors,
autograd, torch.compile, the harness's check, the peers' answers."""

from __future__ import annotations

import pytest
import torch

import ridgeline.ops.matmul  # noqa: F401
from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.ops.matmul import rules
from ridgeline.ops.matmul.launch import matmul
from ridgeline.ops.matmul.spec import make_matmul_inputs, matmul_tolerance, reference_matmul


def _close(y: torch.Tensor, ref: torch.Tensor, k: int, dtype: torch.dtype) -> None:
    tol = matmul_tolerance(k, dtype)
    assert y.shape == ref.shape and y.dtype == dtype
    if y.numel():
        bad = (y.double() - ref).abs() > tol.atol + tol.rtol * ref.abs()
        assert not bad.any(), f"{int(bad.sum())} elements out of tolerance"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,variant", [((7, 9, 13), ""), ((33, 17, 70), "kn"), ((65, 40, 24), "bias"),
                                           ((3, 2, 16, 24), "wt"), ((70, 48, 80), "strided"),
                                           ((1, 40, 200), "kn+wt+bias"), ((5, 8, 0), "bias"), ((0, 16, 32), "kn")])
def test_values(dtype, shape, variant):
    ins = make_matmul_inputs(Case(shape, dtype, variant), "cpu", 0)
    y = matmul(ins["x"], ins["w"], ins["bias"], layout=ins["layout"])
    _close(y, reference_matmul(ins["x"], ins["w"], ins["bias"], ins["layout"]), shape[-1], dtype)


def test_k_zero_is_bias_and_out_dtype():
    x, w, b = torch.randn(3, 0).bfloat16(), torch.randn(5, 0).bfloat16(), torch.randn(5)
    y = matmul(x, w, b, torch.float32)
    assert y.dtype == torch.float32 and torch.equal(y, b.expand(3, 5))
    x, w = torch.randn(17, 24).half(), torch.randn(9, 24).half()
    y = matmul(x, w, out_dtype=torch.float32)
    assert y.dtype == torch.float32
    _close(y, reference_matmul(x, w, None, "nt"), 24, torch.float32)


def test_both_kernel_paths_and_pointer_fallback():
    # M <= 64 takes one tile per program with pointer loads, M > 64 the persistent (TMA) launch; K = 13 makes
    # x's row stride 26 B: TMA cannot read it, the persistent launch falls back to pointer loads.
    assert not rules.config_for(64, 64, 64, torch.bfloat16, torch.device("cpu"))[0].persistent
    assert rules.config_for(65, 64, 64, torch.bfloat16, torch.device("cpu"))[0].persistent
    for m, k in ((80, 13), (80, 64)):
        x, w = torch.randn(m, k).half(), torch.randn(40, k).half()
        _close(matmul(x, w), reference_matmul(x, w, None, "nt"), k, torch.float16)


@pytest.mark.parametrize("layout", ["nt", "kn"])
def test_one_row_runs_as_two_aliasing_rows_with_the_rows_bits(layout):
    """M = 1 launches as M = 2 with zero row strides (off Triton's slow M == 1 code): the row's values and bits are
    those of the same row in a larger call on the same tile, whatever x's layout."""
    k, n = 200, 96
    x = torch.randn(6, k).half()
    w = (torch.randn(n, k) if layout == "nt" else torch.randn(k, n)).half()
    bias = torch.randn(n).half()
    full = matmul(x[:4], w, bias, layout=layout)
    for i in range(4):
        one = matmul(x[i:i + 1], w, bias, layout=layout)
        assert torch.equal(one, full[i:i + 1])
    _close(one, reference_matmul(x[3:4], w, bias, layout), k, torch.float16)
    xt = torch.randn(k, 1).half().T  # a single row stored as a column: strides (1, 1)
    _close(matmul(xt, w, layout=layout), reference_matmul(xt, w, None, layout), k, torch.float16)


def test_single_column_weight_takes_tma_with_an_aligned_stride():
    # N = 1 (a value head) with K = 13 inside an aligned x buffer: w's row stride (26 B) belongs to a size-1 dim and
    # must not reach the descriptor (the interpreter, like the GPU, refuses an unaligned descriptor stride).
    x = torch.randn(80, 16).half()[:, :13]
    for w, layout in ((torch.randn(1, 13).half(), "nt"), (torch.randn(13, 1).half(), "kn")):
        _close(matmul(x, w, layout=layout), reference_matmul(x, w, None, layout), 13, torch.float16)
    xt = torch.randn(1, 16).half()[:, :13]  # M = 1 through the persistent launch (a config override)
    cfg = rules.INTERPRETER_RULES[-1].config
    from ridgeline.ops.matmul.launch import matmul_2d

    w = torch.randn(24, 13).half()[:, :13]
    _close(matmul_2d(xt, w, None, torch.float16, "nt", cfg), reference_matmul(xt, w, None, "nt"), 13, torch.float16)


def test_rules_shrink_block_n_to_fill_the_gpu():
    from ridgeline.ops.matmul.profile import gpu_rules

    cpu = torch.device("cpu")
    with gpu_rules(registry.get_spec("matmul"), 132):  # the H200's table
        assert rules.config_for(16, 4096, 4096, torch.bfloat16, cpu)[0].block_n == 32  # 64 -> 32, not below
        assert rules.config_for(16, 28672, 4096, torch.bfloat16, cpu)[0].block_n == 64  # 448 programs already
        assert rules.config_for(64, 28672, 4096, torch.bfloat16, cpu)[0].block_n == 128
        assert rules.config_for(128, 4096, 4096, torch.bfloat16, cpu)[0].block_n == 64  # 2 x 64 tiles, not 2 x 32
        assert rules.config_for(128, 28672, 4096, torch.bfloat16, cpu)[0].block_n == 128
        assert rules.config_for(4096, 4096, 4096, torch.bfloat16, cpu)[0].tma
        assert rules.config_for(129, 4096, 4096, torch.bfloat16, cpu)[0].block_n == 128  # no 128x64 tiles
        # a last tile row of few rows reads through pointer loads (TMA boxes mostly past M ran slow), else TMA
        tma = {m: rules.config_for(m, 4096, 4096, torch.bfloat16, cpu)[0].tma for m in (129, 159, 160, 192, 193)}
        assert tma == {129: False, 159: False, 160: True, 192: True, 193: False}
        # 128x256 tiles where they fill the SMs, 128x128 where they would leave most of them idle
        big = {m: rules.config_for(m, 4096, 4096, torch.bfloat16, cpu)[0] for m in (257, 512, 1024, 4096)}
        assert (big[257].block_n, big[512].block_n, big[1024].block_n, big[4096].block_n) == (128, 128, 256, 256)
        assert rules.config_for(1024, 28672, 4096, torch.bfloat16, cpu)[0].block_n == 256
        # the 128x128 tile's last row of < 32 rows: pointer loads on 8 warps; full-enough rows keep TMA
        few = {m: rules.config_for(m, 4096, 4096, torch.bfloat16, cpu)[0] for m in (257, 287, 288, 320, 385, 1025)}
        assert {m: (c.tma, c.num_warps) for m, c in few.items()} == {
            257: (False, 8), 287: (False, 8), 288: (True, 4), 320: (True, 4), 385: (False, 8), 1025: (True, 4)}
    rows = rules.RULES
    assert rows[-1].max_m >= 1 << 62 and rows[-1].max_n >= 1 << 62
    assert all((a.max_m, a.max_n) <= (b.max_m, b.max_n) or a.max_m < b.max_m for a, b in zip(rows, rows[1:]))
    assert rules.pointer_fallback(rows[-1].config).block_n <= 128


def test_cached_rules_follow_the_profile_hook_both_ways():
    # config_for is lru-cached: the key must carry what the profiler's hook flips (_INTERPRETED and the SM
    # count), so the interpreter's choice before the hook, the GPU's inside it and the interpreter's after all hold.
    from ridgeline.ops.matmul.profile import gpu_rules

    cpu, spec = torch.device("cpu"), registry.get_spec("matmul")
    shape = (16, 4096, 4096, torch.bfloat16, cpu)
    before = rules.config_for(*shape)
    assert before[0] == rules.INTERPRETER_RULES[0].config and "interpreter" in before[1]
    with gpu_rules(spec, 132):
        gpu = rules.config_for(*shape)
        assert gpu[0].block_k == 256 and "interpreter" not in gpu[1]
        assert rules.describe_choice(16, 4096, 4096, torch.bfloat16, cpu)["block_n"] == gpu[0].block_n
    with gpu_rules(spec, 16):  # fewer SMs: the same (M, N) fits the grid at the rule's own BLOCK_N
        assert rules.config_for(*shape)[0].block_n == 64
    with gpu_rules(spec, 4):  # the interpreter's own SM count: only the _INTERPRETED flag tells the keys apart
        assert rules.config_for(*shape)[0] == rules.RULES[1].config
    assert rules.config_for(*shape) == before


@pytest.mark.parametrize("args,kwargs,err,text", [
    ((torch.randn(4, 8), torch.randn(3, 8)), {}, TypeError, "x: expected dtype bfloat16 or float16"),
    ((torch.randn(4, 8).half(), torch.randn(3, 8).bfloat16()), {}, TypeError, "w: expected x's dtype float16"),
    ((torch.randn(4, 8).half(), torch.randn(3, 7).half()), {}, ValueError, "w: expected shape [N, 8]"),
    ((torch.randn(4, 8).half(), torch.randn(3, 8).half()), {"layout": "kn"}, ValueError, "w: expected shape [8, N]"),
    ((torch.randn(4, 8).half(), torch.randn(3, 8).half()), {"layout": "tn"}, ValueError, "layout: expected 'nt'"),
    ((torch.randn(4, 8).half(), torch.randn(3, 8).half(), torch.randn(4).half()), {}, ValueError,
     "bias: expected shape (3,)"),
    ((torch.randn(4, 8).half(), torch.randn(3, 8).half(), None, torch.int8), {}, TypeError, "out_dtype: expected"),
    ((torch.randn(4, 8).half(), torch.randn(2, 3, 8).half()), {}, ValueError, "w: expected 2 dims"),
])
def test_errors(args, kwargs, err, text):
    with pytest.raises(err, match=text.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")) as info:
        matmul(*args, **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("layout", ["nt", "kn"])
def test_autograd_matches_float64(layout):
    dtype = torch.float16
    x = torch.randn(2, 9, 24).to(dtype).requires_grad_()
    w = (torch.randn(20, 24) if layout == "nt" else torch.randn(24, 20)).to(dtype).requires_grad_()
    b = torch.randn(20).to(dtype).requires_grad_()
    dy = torch.randn(2, 9, 20).to(dtype)
    matmul(x, w, b, layout=layout).backward(dy)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    reference_matmul(xd, wd, bd, layout).backward(dy.double())
    for got, want, k in ((x.grad, xd.grad, 20), (w.grad, wd.grad, 18), (b.grad, bd.grad, 18)):
        _close(got, want, k, dtype)


def test_torch_compile_fullgraph():
    x, w = torch.randn(5, 24).half(), torch.randn(12, 24).half()
    fn = torch.compile(lambda a, b: matmul(a, b) * 2, fullgraph=True, backend="aot_eager")
    _close(fn(x, w) / 2, reference_matmul(x, w, None, "nt"), 24, torch.float16)


def test_harness_check_passes():
    from ridgeline.harness.correctness import check

    cases = [Case((7, 9, 13), torch.float16, "bias"), Case((70, 20, 40), torch.float16, "kn"),
             Case((3, 2, 16, 24), torch.bfloat16, "wt")]
    results = check("matmul", ["ridgeline"], [torch.float16, torch.bfloat16], "cpu", cases)
    assert results and all(r.passed for r in results), [r.reasons for r in results if not r.passed]


def test_spec_cost_and_tolerance():
    spec = registry.get_spec("matmul")
    c = spec.cost((128, 4096, 1024), torch.bfloat16, "bias")
    assert c.flops == 2 * 128 * 4096 * 1024 and c.unit == "bf16"
    assert c.bytes == (128 * 1024 + 4096 * 1024 + 128 * 4096) * 2 + 4096 * 2
    small = spec.tolerance_for(Case((4, 4, 64), torch.bfloat16), "y", torch.bfloat16)
    big = spec.tolerance_for(Case((4, 4, 28672), torch.bfloat16), "y", torch.bfloat16)
    assert big.atol > small.atol
    assert len(spec.shapes("sweep")) == 24


def test_peers():
    impls = {i.name: i for i in registry.implementations("matmul")}
    assert {"ridgeline", "cublas", "torch-compile", "triton-tutorial"} <= set(impls)
    x, w, b = torch.randn(20, 40).half(), torch.randn(24, 40).half(), torch.randn(24).half()
    for name in ("cublas", "triton-tutorial"):
        for layout, ww in (("nt", w), ("kn", w.T)):
            y = impls[name].fn(x, ww, b, layout=layout)
            _close(y, reference_matmul(x, ww, b, layout), 40, torch.float16)
