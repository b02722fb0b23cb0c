"""GPU-only tests of the gated activations (skipped without CUDA): run on the H200 with `pytest -m gpu`."""

import pytest
import torch

from ridgeline import gelu_and_mul, silu_and_mul, silu_and_mul_backward, silu_mul
from ridgeline.core import registry
from ridgeline.core.spec import Case
from ridgeline.harness.correctness import check_case
from ridgeline.ops.act_and_mul import launch
from ridgeline.ops.act_and_mul.spec import HUGE, HUGE_X, reference_forward

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("op", "shape"), [("silu_and_mul", HUGE), ("silu_and_mul_bwd", HUGE_X)])
def test_more_than_2_31_elements(op, shape):
    assert shape[0] * shape[1] > 2**31
    r = check_case(registry.get_spec(op), registry.resolve(op, "ridgeline"), Case(shape, torch.bfloat16), "cuda")
    assert r.passed, r.reasons


@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "silu_and_mul_bwd", "gelu_and_mul_bwd"])
@pytest.mark.parametrize("case", [Case((4096, 28672), torch.bfloat16), Case((1, 22016), torch.bfloat16),
                                  Case((1000, 2 * 4100), torch.float16, "strided"), Case((64, 28672), torch.float32),
                                  Case((256, 57344), torch.bfloat16, "tanh")], ids=Case.label)
def test_ours_and_the_installed_peers_agree_with_fp64(op, case):
    """Determinism, batch invariance, fresh inputs, untouched inputs: the whole check, ours and every peer here."""
    if "tanh" in case.variant and not op.startswith("gelu"):
        pytest.skip("silu has no tanh variant")
    spec = registry.get_spec(op)
    for impl in registry.implementations(op):
        if not impl.available:
            continue
        r = check_case(spec, impl, case, "cuda")
        if impl.name == "liger" and op.startswith("gelu") and "tanh" not in case.variant:
            assert not r.passed and "only the tanh GELU" in " ".join(r.reasons)
            continue
        assert r.passed or (impl.source == "peer" and all("batch invariant" in w for w in r.reasons)), \
            (impl.name, r.reasons)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_accuracy_on_the_gpu(approximate):
    """libdevice's erff on the GPU (tl.erf) and the sigmoid form of tanh-GELU, against float64 (see the CPU test)."""
    g = torch.linspace(-12, 12, 40001, device="cuda", dtype=torch.float32)
    x = torch.cat([g, torch.ones_like(g)]).reshape(1, -1)
    y = gelu_and_mul(x, approximate).double()[0]
    ref = reference_forward(x, "gelu" if approximate == "none" else "gelu_tanh")[0]
    assert ((y - ref).abs() <= 2**-23 * (32 * ref.abs() + 2 * g.double().abs())).all()


def test_graph_capture_and_the_fast_launch_path():
    x = torch.randn(64, 28672, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(64, 14336, device="cuda", dtype=torch.bfloat16)
    silu_and_mul(x)
    silu_and_mul_backward(dy, x)
    before = launch._FWD.fast_launches
    silu_and_mul(x)
    assert launch._FWD.fast_launches == before + 1, launch._FWD.fallback_reason
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = silu_and_mul(x)
        dx = silu_and_mul_backward(dy, x)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, silu_and_mul(x)) and torch.equal(dx, silu_and_mul_backward(dy, x))


def test_inductor_compile_with_autograd_on_the_gpu():
    import torch._dynamo

    def act(gate, up):
        return silu_mul(gate, up).float().sum()

    gate = torch.randn(128, 14336, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    up = torch.randn_like(gate, requires_grad=True)
    loss = torch.compile(act, fullgraph=True)(gate, up)
    grads = torch.autograd.grad(loss, (gate, up))
    exp = torch.autograd.grad(act(gate, up), (gate, up))
    assert all(torch.equal(a, b) for a, b in zip(grads, exp))
    torch._dynamo.reset()


def test_second_gpu_tensors_launch_on_their_device():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    x = torch.randn(8, 256, device="cuda:1")
    assert torch.equal(silu_and_mul(x).cpu(), silu_and_mul(x.cpu().cuda(0)).cpu())
