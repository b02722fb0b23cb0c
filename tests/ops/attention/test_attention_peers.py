"""Peers on the CPU: the ones that run here (SDPA's math backend, the mask builder) agree with the float64
reference; the vendor adapters say "not installed"; a refused case is an exception, not a crash."""

import pytest
import torch

from conftest import DEVICE, HAS_CUDA
from ridgeline.core.registry import resolve
from ridgeline.ops.attention.peers.torch_sdpa import _mask
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


def test_sdpa_flash_backward_refuses_what_it_cannot_do():
    fn = resolve("attention_bwd", "sdpa-flash").fn
    q = torch.randn(1, 8, 4, 16)
    k = torch.randn(1, 8, 2, 16)
    with pytest.raises(ValueError, match="no GQA"):
        fn(q, k, k, q, q, torch.zeros(1, 4, 8), False, None, None, None)
    with pytest.raises(ValueError, match="no window"):
        fn(q, q, q, q, q, torch.zeros(1, 4, 8), False, 3, None, None)
