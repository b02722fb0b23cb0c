"""GPU-only rotary tests (skipped without CUDA): run on the H200 with `pytest tests/ops/rotary -m gpu`."""

import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.harness.correctness import check, check_case
from ridgeline.ops.rotary import spec as serving_spec
from ridgeline.ops.rotary import spec_train
from ridgeline.ops.rotary.launch import rotary_embedding
from ridgeline.ops.rotary.launch_train import apply_rotary, apply_rotary_backward
from ridgeline.ops.rotary.rules import candidate_configs

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("op, shape", [("rotary_embedding", serving_spec.HUGE), ("rotary_train", spec_train.HUGE),
                                       ("rotary_train_bwd", spec_train.HUGE)])
def test_more_than_2_31_elements(op, shape):
    r = check_case(registry.get_spec(op), registry.resolve(op, "ridgeline"), Case(shape, torch.bfloat16), "cuda")
    assert r.passed, r.reasons
    torch.cuda.empty_cache()


@pytest.mark.parametrize("op", ["rotary_embedding", "rotary_train", "rotary_train_bwd"])
def test_edge_cases_of_every_dtype_on_the_gpu(op):
    spec = registry.get_spec(op)
    huge = (serving_spec.HUGE, spec_train.HUGE)  # (checked above, once)
    cases = [c for d in spec.dtypes for c in spec.edge_cases(d, "cuda") if c.shape not in huge]
    results = check(op, ["ridgeline"], device="cuda", cases=cases)
    assert len(results) == len(cases) and all(r.passed for r in results), [
        (r.label, r.reasons) for r in results if not r.passed]


@pytest.mark.parametrize("op, cases", [
    ("rotary_embedding", [Case((4096, 32, 8, 128), torch.bfloat16), Case((256, 28, 4, 128, 64), torch.bfloat16,
                                                                         "fused-qkv+gptj")]),
    ("rotary_train", [Case((4, 2048, 32, 8, 128), torch.bfloat16), Case((2, 512, 28, 4, 128), torch.float16,
                                                                        "contiguous")]),
    ("rotary_train_bwd", [Case((4, 2048, 32, 8, 128), torch.bfloat16)]),
])
@pytest.mark.parametrize("peer", ["torch-eager", "torch-compile", "liger", "vllm", "flashinfer", "sglang"])
def test_peers_agree_with_the_reference_on_the_gpu(op, cases, peer):
    impl = next((i for i in registry.implementations(op) if i.name == peer), None)
    if impl is None or not impl.available:
        pytest.skip(f"{peer}: {impl.reason if impl else 'no adapter for ' + op}")
    if peer in ("flashinfer", "sglang"):
        cases = [Case(c.shape, c.dtype, "+".join(filter(None, [c.variant, "cache-fp32"]))) for c in cases]
    for case in cases:
        r = check_case(registry.get_spec(op), impl, case, "cuda")
        assert r.passed or all("batch invariant" in x for x in r.reasons), (case.label(), r.reasons)


def test_configs_agree_bitwise_on_the_gpu():
    """No launch knob changes a bit (FMA contraction and all), so the rules may look at the token count."""
    pos = torch.randint(0, 4096, (300,), device="cuda")
    q = torch.randn(300, 32 * 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(300, 8 * 128, device="cuda", dtype=torch.bfloat16)
    cache = serving_spec.cos_sin_cache(4096, 128, torch.bfloat16, "cuda")
    outs = []
    for cfg in candidate_configs():
        qc, kc = q.clone(), k.clone()
        rotary_embedding(pos, qc, kc, 128, cache, True, config=cfg)
        outs.append((qc, kc))
    assert all(torch.equal(a, outs[0][0]) and torch.equal(b, outs[0][1]) for a, b in outs)
    qt, kt = q.view(1, 300, 32, 128).transpose(1, 2), k.view(1, 300, 8, 128).transpose(1, 2)
    cos, sin = spec_train.hf_cos_sin(torch.arange(300, device="cuda")[None], 128, torch.bfloat16)
    base = apply_rotary(qt, kt, cos, sin)
    for cfg in candidate_configs():
        other = apply_rotary(qt, kt, cos, sin, config=cfg)
        assert torch.equal(other[0], base[0]) and torch.equal(other[1], base[1])


def test_graph_capture_and_fast_launch():
    from ridgeline.ops.rotary import launch as lz

    pos = torch.randint(0, 4096, (16,), device="cuda")
    qkv = torch.randn(16, 48 * 128, device="cuda", dtype=torch.bfloat16)
    q, k = qkv[:, : 32 * 128], qkv[:, 32 * 128 : 40 * 128]
    cache = serving_spec.cos_sin_cache(4096, 128, torch.bfloat16, "cuda")
    start = qkv.clone()
    rotary_embedding(pos, q, k, 128, cache, True)
    before = lz._LAUNCHER.fast_launches
    rotary_embedding(pos, q, k, 128, cache, True)
    assert lz._LAUNCHER.fast_launches == before + 1, lz._LAUNCHER.fallback_reason
    expect = qkv.clone()
    qkv.copy_(start)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        rotary_embedding(pos, q, k, 128, cache, True)
    qkv.copy_(start)
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(qkv, expect)


def test_token_stride_of_2_31_elements_or_more():
    big = torch.empty((2, 2**24, 256), device="cuda", dtype=torch.bfloat16)  # 16 GiB
    q = big[:, -1, :]  # two tokens 2^32 elements apart
    q.copy_(torch.randn(2, 256, device="cuda"))
    assert q.stride(0) == 2**32
    pos = torch.tensor([3, 4000], device="cuda")
    cache = serving_spec.cos_sin_cache(4096, 128, torch.bfloat16, "cuda")
    dense = q.contiguous()
    rotary_embedding(pos, dense, None, 128, cache, True)
    rotary_embedding(pos, q, None, 128, cache, True)
    assert torch.equal(q, dense)
    del big, q
    torch.cuda.empty_cache()


def test_head_offsets_past_2_31_elements():
    """Heads far apart (a contiguous [B, H, S, D] tensor puts them S * D apart): head * head stride must not wrap
    at 2^31 in either kernel (the training kernel's head 2 here starts 2^31 + 256 elements in)."""
    stride = 2**30 + 128
    big = torch.empty(3 * stride, device="cuda", dtype=torch.bfloat16)  # 6 GiB
    q = big.as_strided((1, 3, 2, 128), (3 * stride, stride, 128, 1))
    q.copy_(torch.randn(1, 3, 2, 128, device="cuda"))
    k = torch.randn(1, 1, 2, 128, device="cuda", dtype=torch.bfloat16)
    cos, sin = spec_train.hf_cos_sin(torch.tensor([[5, 900]], device="cuda"), 128, torch.bfloat16)
    for fn in (apply_rotary, apply_rotary_backward):
        got, want = fn(q, k, cos, sin), fn(q.contiguous(), k, cos, sin)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), fn.__name__
    qs = big.as_strided((1, 3, 128), (3 * stride, stride, 1))  # serving: one token, heads `stride` apart
    dense = qs.contiguous()
    pos = torch.tensor([3000], device="cuda")
    cache = serving_spec.cos_sin_cache(4096, 128, torch.bfloat16, "cuda")
    rotary_embedding(pos, dense, None, 128, cache, True)
    rotary_embedding(pos, qs, None, 128, cache, True)
    assert torch.equal(qs, dense)
    del big, q, qs
    torch.cuda.empty_cache()


def test_compiled_training_step_with_cuda_graphs():
    q = torch.randn(2, 256, 32, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
    k = torch.randn(2, 256, 8, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
    cos, sin = spec_train.hf_cos_sin(torch.arange(256, device="cuda")[None].expand(2, -1), 128, torch.bfloat16)

    def step(q, k):
        qo, ko = apply_rotary(q, k, cos, sin)
        return qo.float().square().sum() + ko.float().sum()

    compiled = torch.compile(step, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        q.grad = k.grad = None
        compiled(q, k).backward()
    qo, _ = apply_rotary(q.detach(), k.detach(), cos, sin)
    expect_q, expect_k = apply_rotary_backward(2 * qo.float().to(q.dtype), torch.ones_like(k), cos, sin)
    torch.testing.assert_close(q.grad, expect_q, atol=2e-2, rtol=2e-2)
    assert torch.equal(k.grad, expect_k)
