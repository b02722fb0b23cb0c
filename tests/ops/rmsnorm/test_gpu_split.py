"""Rows split across programs (kernels/rmsnorm_split.py) on the GPU: the CPU interpreter cannot run them (its
programs run one after another), so every property of the exchange is checked here."""

import pytest
import torch

from ridgeline import fused_add_rms_norm, rms_norm
from ridgeline.ops.rmsnorm.launch import config_for
from ridgeline.ops.rmsnorm.split import WORKSPACE

pytestmark = pytest.mark.gpu

WIDE = [40000, 65536, 100001, 131072]


def reference(x: torch.Tensor, w: torch.Tensor | None, eps: float = 1e-6) -> torch.Tensor:
    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    return y * w.double() if w is not None else y


def counters_are_zero() -> bool:
    torch.cuda.synchronize()
    return all(int(sync.abs().sum()) == 0 and int(slots.abs().sum()) == 0
               for slots, sync in WORKSPACE._by_stream.values() if slots.is_cuda)


@pytest.mark.parametrize("n", WIDE)
def test_split_rows_match_reference_and_are_batch_invariant(n):
    assert config_for(n, torch.bfloat16, 300).split > 1
    x = torch.randn(300, n, device="cuda", dtype=torch.bfloat16) * 3
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = rms_norm(x, w)
    err = (y.double() - reference(x, w)).abs()
    assert err.max().item() < 0.05 * reference(x, w).abs().max().item()
    for i in (0, 137, 299):  # a row's bits do not depend on the batch around it
        assert torch.equal(rms_norm(x[i : i + 1].clone(), w), y[i : i + 1])
    assert torch.equal(rms_norm(x, w), y)  # deterministic
    assert counters_are_zero()


@pytest.mark.parametrize("n", [40000, 65536, 100001])
def test_split_fused_equals_plain_on_residual_out(n):
    x = torch.randn(257, n, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.randn(n, device="cuda", dtype=torch.float32)
    out, res = fused_add_rms_norm(x, r, w)
    assert torch.equal(res, x + r)
    assert torch.equal(out, rms_norm(res, w))
    assert counters_are_zero()


def test_split_many_rows_per_group_and_every_batch_size():
    n = 40000
    x = torch.randn(5000, n, device="cuda", dtype=torch.float16)
    y = rms_norm(x, None)
    assert (y.double() - reference(x, None)).abs().max().item() < 5e-3 * 8
    for m in (1, 2, 7, 131, 264, 1000):  # fewer rows than groups, and more
        assert torch.equal(rms_norm(x[:m], None), y[:m])
    assert counters_are_zero()


def test_split_strided_rows_weight_offset_and_fp32():
    n = 65536
    buf = torch.randn(64, n + 64, device="cuda", dtype=torch.float32)
    x = buf[:, 8 : 8 + n]
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = torch.full((64, n + 128), float("nan"), device="cuda")[:, :n]
    rms_norm(x, w, weight_offset=1.0, out=out)
    ref = reference(x, None) * (w.double() + 1.0)
    assert (out.double() - ref).abs().max().item() < 1e-4 * ref.abs().max().item()
    assert torch.equal(out, rms_norm(x.contiguous(), w, weight_offset=1.0))


def test_split_under_cuda_graph_capture_and_replay():
    from test_gpu import check_graph_replay

    check_graph_replay(512, 65536)
    assert counters_are_zero()


def test_split_on_two_streams_at_once():
    n = 65536
    xs = [torch.randn(2048, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    expect = [rms_norm(x, w) for x in xs]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in range(2)]
    outs = [[], []]
    for _ in range(10):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                outs[i].append(rms_norm(xs[i], w))
    torch.cuda.synchronize()
    for i in range(2):
        assert all(torch.equal(o, expect[i]) for o in outs[i])
    assert counters_are_zero()


@pytest.mark.parametrize("fused", [False, True])
def test_every_split_candidate_launches_resident_and_right(fused):
    """Every config the explore script times: the grid sized from the driver's occupancy is accepted by the
    cooperative launch, the result is right, and the weight's timing (chosen by row count) changes no bit."""
    from ridgeline.ops.rmsnorm.launch import _launch
    from ridgeline.ops.rmsnorm.rules import split_candidates

    n, m = 65536, 600
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x) if fused else None
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    outs = {}
    for cfg in split_candidates(n):
        y = torch.full_like(x, float("nan"))
        ro = torch.full_like(x, float("nan")) if fused else None
        _launch(x, n, r, n, ro, n, w, y, n, m, n, 1e-6, 0.0, cfg)
        base = ro if fused else x
        assert (y.double() - reference(base, w)).abs().max().item() < 0.1, cfg.describe()
        y1 = torch.full_like(x[:1], float("nan"))
        _launch(base[7:8].clone(), n, None, 0, None, 0, w, y1, n, 1, n, 1e-6, 0.0, cfg)
        assert torch.equal(y1, y[7:8]), cfg.describe()
        outs[(cfg.block_n, cfg.num_warps, cfg.weight_first)] = y
    for (chunk, warps, first), y in outs.items():
        if first:
            assert torch.equal(y, outs[(chunk, warps, False)])
    assert counters_are_zero()
