"""GPU-only tests (skipped without CUDA): run on the H200 with `pytest -m gpu`."""

import pytest
import torch

from ridgeline import fused_add_rms_norm, rms_norm
from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.harness.correctness import check_case
from ridgeline.ops.rmsnorm.spec import HUGE

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def probed_cache(tmp_path_factory):
    """One quick probe per module, so the bench tests do not each measure the GPU again."""
    from ridgeline.harness.probe import device_profile

    path = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RIDGELINE_CACHE_DIR", str(path))
        device_profile(quick=True)
    return path


@pytest.mark.parametrize("op", ["rmsnorm", "fused_add_rmsnorm", "rmsnorm_dynamic_quant", "rmsnorm_fp8"])
def test_more_than_2_31_elements(op):
    assert HUGE[0] * HUGE[1] > 2**31
    spec = registry.get_spec(op)
    r = check_case(spec, registry.resolve(op, "ridgeline"), Case(HUGE, torch.bfloat16), "cuda")
    assert r.passed, r.reasons


@pytest.mark.parametrize("weight_like_x", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", [(4096, 4100), (1024, 5125), (64, 65536), (3, 100000), (256, 8192), (1, 8192),
                                   (4096, 8192), (4096, 5120), (600, 16384), (1100, 16384), (200, 20000)])
def test_residual_out_is_exactly_the_rounded_sum(dtype, shape, weight_like_x):
    """And the fused op's out is the plain op's bits on residual_out, where the two launch different knobs (the fused
    op's 8192-column block has N compiled in, its pieces and chunks hoist their loads, its two-pass zone at 16384
    columns starts later) or the same."""
    x = torch.randn(shape, device="cuda", dtype=dtype)
    r = torch.randn(shape, device="cuda", dtype=dtype)
    w = torch.randn(shape[-1], device="cuda", dtype=dtype if weight_like_x else torch.float32)
    out, res = fused_add_rms_norm(x, r, w)
    assert torch.equal(res, x + r)  # torch adds 16-bit floats in fp32 and rounds to nearest even, as we do
    assert torch.equal(out, rms_norm(res, w))


def check_graph_replay(m: int, n: int, replays: int = 3) -> None:
    """Both ops captured in one CUDA graph; each replay on fresh x equals eager calls, bitwise."""
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    rms_norm(x, w)
    fused_add_rms_norm(x, r, w)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = rms_norm(x, w)
        o, ro = fused_add_rms_norm(x, r, w)
    for _ in range(replays):
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, rms_norm(x, w))
        assert torch.equal(o, fused_add_rms_norm(x, r, w)[0])


def test_runs_under_cuda_graph_capture():
    check_graph_replay(64, 4096)


def test_probe_quick_is_sane():
    from ridgeline.harness.probe import measure

    p = measure(quick=True)
    assert p["copy_gbps"] > 500 and p["tflops"]["bf16"] > 50 and p["floors_us"]["graph"] < p["floors_us"]["host"]


def test_bench_every_regime_on_gpu(tmp_path, probed_cache, monkeypatch):
    from ridgeline.harness.bench import bench

    monkeypatch.setenv("RIDGELINE_CACHE_DIR", str(probed_cache))
    rec = bench("rmsnorm", ["ridgeline", "torch-F"], [(256, 4096)], [torch.bfloat16],
                regimes=["cold-eager", "graph-cold", "graph-hot", "host"], budget_s=0.3,
                json_path=tmp_path / "r.json", db=tmp_path / "db.sqlite")
    assert len(rec.measurements) == 8 and not rec.failures
    for m in rec.measurements:
        assert m["median_us"] > 0 and type(m["stable"]) is bool and m["n"] == len(m["samples_us"]) >= 2
        if m["regime"] != "host":
            assert 0 < m["pct_of_sol"] < 1.5 and m["gbps"] > 0
    cold = {m["impl"]: m for m in rec.measurements if m["regime"] == "graph-cold"}
    assert cold["ridgeline"]["input_sets"] > 1


def test_fast_launch_path_engages_and_matches_triton(monkeypatch):
    from ridgeline.ops.rmsnorm import launch as k

    x = torch.randn(300, 4100, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4100, device="cuda", dtype=torch.float32)
    monkeypatch.setenv("RIDGELINE_FAST_LAUNCH", "0")
    slow = rms_norm(x, w)
    monkeypatch.setenv("RIDGELINE_FAST_LAUNCH", "1")
    rms_norm(x, w)  # compiles/caches through Triton's own path
    before = k._LAUNCHER.fast_launches
    fast = rms_norm(x, w)
    assert k._LAUNCHER.fast_launches == before + 1
    assert torch.equal(fast, slow)
    # A misaligned view must not reuse the kernel compiled for 16-byte aligned pointers.
    xs = torch.randn(300, 4101, device="cuda", dtype=torch.bfloat16)[:, 1:]
    assert torch.equal(rms_norm(xs, w), rms_norm(xs.contiguous(), w))


def test_inductor_fullgraph_and_cuda_graphs_with_our_ops():
    from ridgeline import rms_norm_dynamic_quant

    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    s = torch.tensor([0.02], device="cuda")

    def layer(x, r):
        h, res = fused_add_rms_norm(x, r, w)
        q, scales, res2 = rms_norm_dynamic_quant(h, w, residual=res)
        return rms_norm(h, w), res, q, scales, res2, rms_norm(res2, w, out_dtype=torch.float8_e4m3fn, scale=s)

    compiled = torch.compile(layer, fullgraph=True, mode="reduce-overhead")
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    for _ in range(3):  # warm-up, record, replay
        got = compiled(x, r)
    for g, e in zip(got, layer(x, r)):
        assert g.dtype == e.dtype and torch.equal(g.view(torch.uint8), e.view(torch.uint8))


@pytest.mark.parametrize("op", ["rmsnorm_fp8", "rmsnorm_dynamic_quant", "fused_add_rmsnorm_dynamic_quant"])
def test_fp8_ops_pass_their_checks_on_the_gpu(op):
    from ridgeline.harness.correctness import check

    results = check(op, ["ridgeline"], [torch.bfloat16], "cuda")
    assert all(r.passed for r in results), [(r.label, r.reasons) for r in results if not r.passed]


def test_fp8_static_equals_torch_rounding_of_the_same_float32_values():
    from ridgeline.ops.rmsnorm.peers.torch_native import eager_rms_norm_fp8

    x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16) * 2
    w = torch.randn(4096, device="cuda", dtype=torch.float32)
    s = torch.tensor([0.01], device="cuda")
    ours = rms_norm(x, w, out_dtype=torch.float8_e4m3fn, scale=s).view(torch.uint8)
    theirs = eager_rms_norm_fp8(x, w, 1e-6, s).view(torch.uint8)
    # Both round float32 y once to e4m3 (RNE); y itself may differ in the last float32 bit (reduction order).
    assert (ours != theirs).float().mean().item() < 1e-3


def test_row_stride_of_2_31_elements_or_more():
    # Rows 2^32 elements apart (a slice of a 16 GiB buffer): the offset must not wrap in 32 bits.
    h = torch.empty((2, 2**20, 4096), device="cuda", dtype=torch.bfloat16)
    h[:, -1, :].copy_(torch.randn(2, 4096, device="cuda"))
    x = h[:, -1, :]
    assert x.stride(0) == 2**32
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(rms_norm(x, w), rms_norm(x.contiguous(), w))
    del h
    torch.cuda.empty_cache()
