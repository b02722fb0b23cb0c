"""Peers on the CPU: the ones that run here (SDPA's math backend, the mask builder) agree with the float64
reference; the vendor adapters say "not installed"; a refused case is an exception, not a crash."""

import pytest
import torch

import ridgeline
from conftest import DEVICE, HAS_CUDA
from ridgeline.core.registry import resolve
from ridgeline.core.spec import Case
from ridgeline.ops.attention.peers.torch_sdpa import _mask, cudnn_bwd_args, cudnn_lse_dims, flash_bwd_args
from ridgeline.ops.attention.spec import reference_attention


def test_vendor_peers_say_not_installed():
    for name, pip in (("flash-attn", "flash-attn"), ("flashinfer", "flashinfer-python")):
        impl = resolve("attention", name)
        if not impl.available:
            assert impl.reason == f"{pip} not installed"


def test_bottom_right_mask_for_sdpa():
    mask, is_causal = _mask(2, 4, True, None, "cpu")
    assert not is_causal and mask is not None  # torch's causal_lower_right bias
    assert _mask(4, 4, True, None, "cpu") == (None, True)
    ok, _ = _mask(3, 3, False, 2, "cpu")
    assert ok.tolist() == [[True, False, False], [True, True, False], [False, True, True]]


@pytest.mark.skipif(HAS_CUDA, reason="CPU: only the math backend runs")
@pytest.mark.parametrize("causal,window,sq", [(False, None, 12), (True, None, 12), (True, None, 7), (False, 3, 12)])
def test_sdpa_math_matches_the_reference(causal, window, sq):
    fn = resolve("attention", "sdpa-math").fn
    q = torch.randn(2, sq, 4, 16, device=DEVICE)
    k, v = torch.randn(2, 12, 2, 16, device=DEVICE), torch.randn(2, 12, 2, 16, device=DEVICE)
    out = fn(q, k, v, causal, window, None, None)
    ref = reference_attention({"q": q, "k": k, "v": v, "causal": causal, "window": window, "cu_seqlens": None})[0]
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


def _meta_bwd_inputs(b=2, sq=64, sk=64, hq=32, hkv=8, d=128):
    """Backward inputs on the meta device: torch's meta kernels of the aten entry points check the arguments
    against the schema and give the output shapes, without a GPU."""
    m = {"device": "meta", "dtype": torch.bfloat16}
    q, k, v = torch.empty(b, sq, hq, d, **m), torch.empty(b, sk, hkv, d, **m), torch.empty(b, sk, hkv, d, **m)
    return q, k, v, torch.empty_like(q), torch.empty_like(q), torch.empty(b, hq, sq, device="meta")


def test_flash_backward_arguments_are_what_sdpa_autograd_passes():
    q, k, v, out, dout, lse = _meta_bwd_inputs()
    args = flash_bwd_args(q, k, v, out, dout, lse, True)
    # A dense forward leaves cum_seq_q / cum_seq_k undefined; any tensor there (the H200's float32 empties) picks
    # the varlen kernel, which raised "cu_seqlens_q must have dtype int32".
    assert args[6] is None and args[7] is None
    assert args[5] is lse and args[8:12] == (64, 64, 0.0, True)
    assert [tuple(a.shape) for a in args[:5]] == [(2, 32, 64, 128), (2, 32, 64, 128), (2, 8, 64, 128),
                                                 (2, 8, 64, 128), (2, 32, 64, 128)]
    # Which tensor goes where (k / v and out / dout have equal shapes: only identity tells a swap).
    assert [a._base for a in args[:5]] == [dout, q, k, v, out] and all(a.stride(1) == 128 for a in args[:5])
    dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(*args)
    assert dk.shape == (2, 8, 64, 128) and dq.shape == (2, 32, 64, 128)  # GQA: dK / dV per kv head


@pytest.mark.parametrize("lse_dims", [3, 4])
def test_cudnn_backward_arguments_are_what_sdpa_autograd_passes(lse_dims):
    q, k, v, out, dout, lse = _meta_bwd_inputs()
    args = cudnn_bwd_args(q, k, v, out, dout, lse, False, lse_dims)
    # No bias and no offsets: undefined tensors (a defined 1-D "none" bias was expanded with its dim 1 on the
    # H200: "IndexError: Dimension out of range (expected to be in range of [-1, 0], but got 1)").
    assert args[8] is None and args[9] is None and args[10] is None
    assert args[5].dim() == lse_dims and args[5].shape[:3] == (2, 32, 64)
    assert args[6].dtype == args[7].dtype == torch.int64 and args[11:] == (64, 64, 0.0, False)
    assert [a._base for a in args[:5]] == [dout, q, k, v, out]  # (equal shapes: only identity tells a swap)
    assert args[5] is lse or args[5]._base is lse
    dq, dk, dv = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(*args)
    assert dk.shape == (2, 8, 64, 128) and dv.shape == (2, 8, 64, 128)


def test_cudnn_lse_layout_is_read_from_the_forward():
    assert cudnn_lse_dims("meta") == torch.ops.aten._scaled_dot_product_cudnn_attention(
        *[torch.empty(1, 1, 8, 16, device="meta", dtype=torch.bfloat16)] * 3, None, True)[1].dim()


@pytest.mark.parametrize("name", ["sdpa-flash", "sdpa-cudnn"])
def test_backward_peers_run_gqa_and_refuse_what_they_cannot_express(name):
    fn = resolve("attention_bwd", name).fn
    q, k, v, out, dout, lse = _meta_bwd_inputs()
    dq, dk, dv = fn(q, k, v, out, dout, lse, True, None, None, None)  # GQA 32 / 8 heads, no refusal
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    with pytest.raises(ValueError, match="no window"):
        fn(q, k, v, out, dout, lse, False, 3, None, None)
    with pytest.raises(ValueError, match="no packed variable-length batches"):
        fn(q[0], k[0], v[0], out[0], dout[0], lse[0], False, None, torch.tensor([0, 64], dtype=torch.int32), 64)
    q2, k2, v2, out2, dout2, lse2 = _meta_bwd_inputs(sq=32, sk=64)
    with pytest.raises(ValueError, match="causal only with S_q == S_k"):
        fn(q2, k2, v2, out2, dout2, lse2, True, None, None, None)
    assert fn(q2, k2, v2, out2, dout2, lse2, False, None, None, None)[1].shape == k2.shape


def test_cudnn_forward_refuses_packed_batches_by_name():
    results = ridgeline.check("attention", impls="sdpa-cudnn", cases=[Case((50, 2, 1, 16), torch.float16, "causal")],
                              device=DEVICE)
    assert not results[0].passed
    assert any("cuDNN SDPA: no packed variable-length batches" in r for r in results[0].reasons), results[0].reasons


def test_backward_peers_allocate_no_rng_tensors_per_call():
    """The dropout-0 philox seed and offset are made once per device: a torch.zeros per call is a fill kernel the
    peer's timing would pay and SDPA's autograd does not."""
    q, k, v, out, dout, lse = _meta_bwd_inputs()
    a, b = flash_bwd_args(q, k, v, out, dout, lse, False), flash_bwd_args(q, k, v, out, dout, lse, False)
    assert a[12] is b[12] and a[13] is b[13]
    c = cudnn_bwd_args(q, k, v, out, dout, lse, False, 3)
    assert c[6] is a[12] and c[7] is a[13] and c[6].dtype == torch.int64 and c[6].device.type == "meta"


def test_a_window_mask_is_built_once_per_shape():
    first, _ = _mask(40, 64, True, 7, "cpu")
    again, _ = _mask(40, 64, True, 7, "cpu")
    assert again is first and first.shape == (40, 64)
    pos, cols = torch.arange(40)[:, None] + 24, torch.arange(64)[None, :]
    assert torch.equal(first, (cols <= pos) & (cols >= pos - 6))  # window 7: the last 7 keys, itself included
    assert _mask(40, 64, True, 3, "cpu")[0] is not first  # another window, another mask
