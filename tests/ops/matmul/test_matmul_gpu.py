"""GPU tests of the GEMM (H200): the harness's check at real sizes, peers vs float64, >2^31 elements, determinism
and batch invariance across the kernel switch (M = 64 -> 65), the backward's transposed operands through TMA."""

from __future__ import annotations

import pytest
import torch

import ridgeline.ops.matmul  # noqa: F401
from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.ops.matmul.launch import matmul
from ridgeline.ops.matmul.spec import make_matmul_inputs, matmul_tolerance, reference_matmul

pytestmark = pytest.mark.gpu


def _close(y, ref, k, dtype):
    tol = matmul_tolerance(k, dtype)
    bad = (y.double() - ref).abs() > tol.atol + tol.rtol * ref.abs()
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} out of tolerance"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_check_edge_cases(dtype):
    from ridgeline.harness.correctness import check

    results = check("matmul", ["ridgeline"], [dtype], "cuda", None)
    bad = [(r.label, r.reasons) for r in results if not r.passed]
    assert not bad, bad


@pytest.mark.parametrize("impl", ["cublas", "triton-tutorial", "ridgeline"])
@pytest.mark.parametrize("shape,variant", [((1, 4096, 4096), ""), ((1024, 6144, 4096), "bias"),
                                           ((300, 1000, 1031), "kn")])
def test_values_vs_float64(impl, shape, variant):
    fn = registry.resolve("matmul", impl).fn
    ins = make_matmul_inputs(Case(shape, torch.bfloat16, variant), "cuda", 1)
    y = fn(ins["x"], ins["w"], ins["bias"], layout=ins["layout"])
    _close(y, reference_matmul(ins["x"], ins["w"], ins["bias"], ins["layout"]), shape[-1], torch.bfloat16)


def test_batch_invariance_across_the_kernel_switch():
    x = torch.randn(4096, 4096, device="cuda").bfloat16()
    w = (torch.randn(4096, 4096, device="cuda") / 64).bfloat16()
    full = matmul(x, w)
    for m in (1, 16, 64, 65, 129, 256, 257, 320, 385):
        assert torch.equal(matmul(x[:m], w), full[:m]), f"rows 0:{m} alone differ from the full batch"
    assert torch.equal(matmul(x, w), full)


@pytest.mark.parametrize("shape,layout", [((1024, 10240, 8192), "nt"), ((1025, 4096, 4096), "nt"),
                                          ((2049, 4096, 4096), "kn"), ((1536, 4096, 4096), "nt")])
def test_tails_give_the_single_launchs_bits(shape, layout):
    """A launch cut into pieces (tails.py: columns on two tiles, a last row on the decode rule) gives the single
    launch's bits (the same K order on every tile), with bias and an fp32 output; the cut is planned here."""
    from ridgeline.ops.matmul import tails
    from ridgeline.ops.matmul.launch import matmul_2d

    m, n, k = shape
    assert tails.plan(m, n, k, torch.cuda.get_device_properties(0).multi_processor_count, force=True)
    x = torch.randn(m, k, device="cuda").bfloat16()
    w = (torch.randn((n, k) if layout == "nt" else (k, n), device="cuda") / k**0.5).bfloat16()
    bias = torch.randn(n, device="cuda")
    for out_dtype in (torch.float32, torch.bfloat16):
        single = matmul_2d(x, w, bias, out_dtype, layout, tails=False)
        assert torch.equal(matmul_2d(x, w, bias, out_dtype, layout, tails=True), single), out_dtype
    _close(single, reference_matmul(x, w, bias, layout), k, torch.bfloat16)  # (the bf16 output's tolerance)


def test_more_than_2_31_elements():
    m, k, n = 2**31 // 4096 + 1, 4096, 256
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(n, k, device="cuda") / 64).bfloat16()
    y = matmul(x, w)
    rows = torch.tensor([0, m // 2, m - 1], device="cuda")
    _close(y[rows], reference_matmul(x[rows], w, None, "nt"), k, torch.bfloat16)


def test_backward_transposed_operands():
    x = torch.randn(512, 1024, device="cuda").bfloat16().requires_grad_()
    w = (torch.randn(768, 1024, device="cuda") / 32).bfloat16().requires_grad_()
    dy = torch.randn(512, 768, device="cuda").bfloat16()
    matmul(x, w).backward(dy)
    _close(x.grad, dy.double() @ w.double(), 768, torch.bfloat16)
    _close(w.grad, dy.double().T @ x.double(), 512, torch.bfloat16)


def test_cuda_graph_capture():
    x = torch.randn(2048, 4096, device="cuda").bfloat16()
    w = (torch.randn(4096, 4096, device="cuda") / 64).bfloat16()
    want = matmul(x, w)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = matmul(x, w)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, want)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("m", [16, 1024])  # the pointer-load launch and the TMA launch (descriptor scratch)
def test_operands_on_another_gpu_than_the_current_one(m):
    x = torch.randn(m, 4096, device="cuda:1").bfloat16()
    w = (torch.randn(1024, 4096, device="cuda:1") / 64).bfloat16()
    assert torch.cuda.current_device() == 0
    y = matmul(x, w)
    assert y.device == x.device
    _close(y, reference_matmul(x, w, None, "nt"), 4096, torch.bfloat16)


@pytest.mark.parametrize("n,k", [(4096, 4096), (28672, 4096), (4096, 14336)])
def test_gemv_candidate_at_decode_shapes(n, k):
    # The CUDA-core GEMV candidate (kernel_gemv.py) at the sweep's decode layers: values vs float64 at M = 1, 4, 8,
    # bitwise determinism, and batch invariance within the family (M = 1 and M = 4 rows equal the same rows at
    # M = 8), with the split rule and without splits.
    from ridgeline.ops.matmul import rules
    from ridgeline.ops.matmul.launch import matmul_2d

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(8, k, device="cuda", generator=g).bfloat16()
    w = (torch.randn(n, k, device="cuda", generator=g) / k**0.5).bfloat16()
    b = torch.randn(n, device="cuda", generator=g).bfloat16()
    ref = reference_matmul(x, w, b, "nt")
    for cfg in (rules.GemvConfig(32, 512, 4), rules.GemvConfig(64, 256, 8, splits=1)):
        y8 = matmul_2d(x, w, b, torch.bfloat16, "nt", cfg)
        _close(y8, ref, k, torch.bfloat16)
        assert torch.equal(y8, matmul_2d(x, w, b, torch.bfloat16, "nt", cfg))
        for m in (1, 4):
            assert torch.equal(matmul_2d(x[:m], w, b, torch.bfloat16, "nt", cfg), y8[:m]), (cfg, m)
        wkn = w.T.contiguous()
        _close(matmul_2d(x[:3], wkn, b, torch.bfloat16, "kn", cfg), ref[:3], k, torch.bfloat16)
