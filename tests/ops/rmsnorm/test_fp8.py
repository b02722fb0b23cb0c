"""RMSNorm fused with FP8 quantization: static per-tensor and dynamic per-token scales."""

import pytest
import torch

from conftest import DEVICE
from ridgeline import check, rms_norm, rms_norm_dynamic_quant
from ridgeline.ops.rmsnorm.launch import config_for

E4M3 = torch.float8_e4m3fn


def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32).to(dtype)


def y64(x, w, eps=1e-6):
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def assert_fp8_close(q, ref):
    # Half an e4m3 ulp (2^-4 relative) plus a margin, and the subnormal spacing.
    assert q.dtype == E4M3
    assert ((q.double() - ref).abs() <= 2.0**-9 + 0.07 * ref.abs()).all()


@pytest.mark.parametrize("shape", [(1, 1), (7, 769), (3, 4100), (2, 3, 64)])
def test_static_scale_matches_reference_and_saturates(shape):
    x, w = rand(*shape) * 3, rand(shape[-1], dtype=torch.float32)
    q = rms_norm(x, w, out_dtype=E4M3, scale=0.004)
    ref = (y64(x, w) / 0.004).clamp(-448, 448)
    assert_fp8_close(q, ref)
    if x.numel() > 100:
        assert (q.float().abs() == 448).any(), "scale 0.004 must saturate the largest |y|"


def test_static_scale_as_tensor_and_e5m2():
    x, w = rand(4, 300), rand(300)
    s = torch.tensor([0.02], device=DEVICE)
    assert torch.equal(rms_norm(x, w, out_dtype=E4M3, scale=s).view(torch.uint8),
                       rms_norm(x, w, out_dtype=E4M3, scale=0.02).view(torch.uint8))
    q = rms_norm(x, w, out_dtype=torch.float8_e5m2, scale=0.02)
    ref = (y64(x, w) / 0.02).clamp(-57344, 57344)
    assert q.dtype == torch.float8_e5m2
    assert ((q.double() - ref).abs() <= 2.0**-16 + 0.13 * ref.abs()).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dynamic_per_token_scales(dtype):
    x, w = rand(2, 5, 777, dtype=dtype), rand(777, dtype=dtype)
    q, scales, res = rms_norm_dynamic_quant(x, w)
    assert res is None and scales.shape == (2, 5, 1) and scales.dtype == torch.float32
    y = y64(x, w)
    ref_scales = y.abs().amax(-1, keepdim=True) / 448
    torch.testing.assert_close(scales.double(), ref_scales, rtol=1e-5, atol=0)
    assert_fp8_close(q, y / ref_scales)
    assert (q.float().abs().amax(-1) == 448).all(), "each row's largest |y| maps to the FP8 maximum"


def test_dynamic_with_residual_is_a_pure_fusion():
    x, r, w = rand(9, 1000), rand(9, 1000), rand(1000)
    q, s, res = rms_norm_dynamic_quant(x, w, residual=r)
    q2, s2, _ = rms_norm_dynamic_quant(res, w)
    assert torch.equal(q.view(torch.uint8), q2.view(torch.uint8)) and torch.equal(s, s2)
    torch.testing.assert_close(res.double(), (x.double() + r.double()).to(torch.bfloat16).double(), rtol=0, atol=0)


def test_all_zero_row_gets_the_minimum_scale():
    x = rand(3, 64)
    x[1] = 0
    q, s, _ = rms_norm_dynamic_quant(x)
    assert s[1].item() == pytest.approx(1 / (448 * 512)) and (q[1].float() == 0).all()


def test_fp8_bad_input():
    x = rand(2, 64)
    with pytest.raises(ValueError, match="scale: out_dtype FP8 needs a static"):
        rms_norm(x, out_dtype=E4M3)
    with pytest.raises(ValueError, match="out_dtype: a static scale needs an FP8"):
        rms_norm(x, scale=0.1)
    with pytest.raises(TypeError, match="out_dtype: expected one of"):
        rms_norm(x, out_dtype=torch.int8, scale=0.1)
    with pytest.raises(ValueError, match="scale: expected a positive"):
        rms_norm(x, out_dtype=E4M3, scale=-1.0)
    with pytest.raises(ValueError, match="scale: expected one per-tensor scale"):
        rms_norm(x, out_dtype=E4M3, scale=torch.ones(2, device=DEVICE))
    with pytest.raises(TypeError, match="quant_dtype: expected one of"):
        rms_norm_dynamic_quant(x, quant_dtype=torch.float16)
    with pytest.raises(ValueError, match="residual: expected shape"):
        rms_norm_dynamic_quant(x, residual=rand(2, 65))
    with pytest.raises(TypeError, match=r"out: expected dtype torch.float8_e4m3fn \(out_dtype\)"):
        rms_norm(x, out_dtype=E4M3, scale=0.1, out=torch.empty(2, 64, device=DEVICE, dtype=torch.float8_e5m2))
    with pytest.raises(ValueError, match=r"out: expected shape \(2, 64\)"):
        rms_norm(x, out_dtype=E4M3, scale=0.1, out=torch.empty(2, 63, device=DEVICE, dtype=E4M3))
    with pytest.raises(ValueError, match="scale: expected a positive finite scale"):
        rms_norm(x, out_dtype=E4M3, scale=float("inf"))
    with pytest.raises(TypeError, match="scale: expected a float32, float16 or bfloat16 tensor"):
        rms_norm(x, out_dtype=E4M3, scale=torch.ones(1, device=DEVICE, dtype=torch.int8))
    with pytest.raises(TypeError, match="scale: expected a positive float or a one-element float tensor, got str"):
        rms_norm(x, out_dtype=E4M3, scale="0.1")


@pytest.mark.parametrize("n", [5120, 4100, 20000])
def test_row_layouts_pieces_and_two_passes(n):
    # 5120 and 4100 run as power-of-two pieces (the last one masked at 4100); 20000 in two passes, whose dynamic
    # scale comes from max|x * w| in the first pass.
    cfg = config_for(n, torch.bfloat16, 3, quant=2)
    assert (cfg.single_pass, bool(cfg.piece_b)) == {5120: (True, True), 4100: (True, True), 20000: (False, False)}[n]
    x, r, w = rand(3, n) * 2, rand(3, n), rand(n)
    q, s, res = rms_norm_dynamic_quant(x, w, residual=r)
    y = y64(res, w)
    ref_scales = y.abs().amax(-1, keepdim=True) / 448
    torch.testing.assert_close(s.double(), ref_scales, rtol=1e-5, atol=0)
    assert_fp8_close(q, y / ref_scales)
    assert (q.float().abs().amax(-1) >= 416).all(), "each row's largest |y| maps to (about) the FP8 maximum"
    qs = rms_norm(x, w, out_dtype=E4M3, scale=0.01)
    assert_fp8_close(qs, (y64(x, w) / 0.01).clamp(-448, 448))


@pytest.mark.parametrize("offset, width", [(0, 320), (16, 336), (10, 320), (0, 303)])
def test_static_out_may_be_strided_rows(offset, width, monkeypatch):
    # Aligned rows are written in place; rows off 16 bytes (offset 10, stride 303) through an aligned buffer:
    # the same bits either way.
    x, w = rand(5, 300), rand(300)
    buf = torch.full((5, width), 7.0, device=DEVICE).to(E4M3)
    out = buf[:, offset:offset + 300]
    from ridgeline.ops.rmsnorm import launch as k

    written = []
    real_launch = k._launch
    monkeypatch.setattr(k, "_launch", lambda *a, **kw: (written.append(a[7].data_ptr()), real_launch(*a, **kw)))
    got = rms_norm(x, w, out_dtype=E4M3, scale=0.02, out=out)
    assert got is out
    # Rows off 16 bytes go through an aligned buffer (the kernel never writes them in place).
    assert (written == [out.data_ptr()]) == (offset % 16 == 0 and width % 16 == 0), (written, out.data_ptr())
    monkeypatch.undo()
    assert torch.equal(out.view(torch.uint8), rms_norm(x, w, out_dtype=E4M3, scale=0.02).view(torch.uint8))
    assert (buf[:, :offset].float() == 7).all() and (buf[:, offset + 300:].float() == 7).all(), "wrote outside"


@pytest.mark.slow  # (every edge case of the op's spec, each run six times, by ours and the eager peer)
@pytest.mark.parametrize("op", ["rmsnorm_fp8", "rmsnorm_dynamic_quant", "fused_add_rmsnorm_dynamic_quant"])
def test_harness_checks_ours_and_the_eager_peer(op):
    results = check(op, ["ridgeline", "torch-eager"], [torch.bfloat16], DEVICE)
    ours = [r for r in results if r.impl == "ridgeline"]
    assert ours and all(r.passed for r in ours), [(r.label, r.reasons) for r in ours if not r.passed]
    # The eager baseline must compute the right values; on a GPU its reductions follow the batch size (cuda
    # kernels pick their split by shape), so batch invariance is the only property it may miss.
    peer = [r for r in results if r.impl == "torch-eager"]
    assert peer
    for r in peer:
        assert all(reason.startswith("not batch invariant") for reason in r.reasons), (r.label, r.reasons)


def test_fp8_ops_trace_under_fullgraph_compile():
    import torch._dynamo

    w = 1 + 0.5 * rand(300)
    scale = torch.tensor([0.01], device=DEVICE)

    def layer(x, r):
        q, s, res = rms_norm_dynamic_quant(x, w, residual=r)
        q2, s2, none = rms_norm_dynamic_quant(res * 2.0, w)
        return q, s, res, q2, s2, none, rms_norm(x, w, out_dtype=E4M3, scale=scale), rms_norm(x, w, out_dtype=E4M3,
                                                                                             scale=0.02)

    x, r = rand(6, 300), rand(6, 300)
    got = torch.compile(layer, fullgraph=True, backend="aot_eager")(x, r)
    exp = layer(x, r)
    assert got[5] is None and exp[5] is None
    for g, e in zip(got[:5] + got[6:], exp[:5] + exp[6:]):
        assert g.dtype == e.dtype and torch.equal(g.view(torch.uint8), e.view(torch.uint8))

    def into(x, out):
        return rms_norm(x, w, out_dtype=E4M3, scale=scale, out=out)

    out = torch.empty(6, 300, device=DEVICE, dtype=E4M3)
    torch.compile(into, fullgraph=True, backend="aot_eager")(x, out)
    assert torch.equal(out.view(torch.uint8), exp[6].view(torch.uint8))
    torch._dynamo.reset()
    # A wrong out is refused under compile too, naming the argument.
    with pytest.raises(Exception, match=r"out: expected dtype torch.float8_e4m3fn"):
        torch.compile(into, fullgraph=True, backend="aot_eager")(x, torch.empty(6, 300, device=DEVICE,
                                                                                dtype=torch.float8_e5m2))
    torch._dynamo.reset()
