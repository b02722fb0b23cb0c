"""Peers of paged_decode_attention: the PyTorch ones agree with the reference on CPU; the vendors say why not."""

from __future__ import annotations

import pytest
import torch

from conftest import DEVICE, HAS_CUDA
from ridgeline.core.registry import resolve
from ridgeline.core.spec import Case
from ridgeline.ops.paged_attention.spec import PagedDecodeAttentionSpec

SPEC = PagedDecodeAttentionSpec()


@pytest.mark.parametrize("shape,variant", [((3, 40, 4, 2, 32, 16), "ragged"), ((2, 30, 4, 1, 32, 16, 3), ""),
                                           ((2, 30, 4, 2, 32, 16), "fp8kv")])
def test_gather_sdpa_agrees(shape, variant):
    inp = SPEC.make_inputs(Case(shape, torch.float32, variant), DEVICE, 1)
    out = SPEC.call(resolve("paged_decode_attention", "gather-sdpa").fn, inp)[0]
    assert torch.allclose(out.double(), SPEC.reference(inp)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_flex_decode_agrees():
    inp = SPEC.make_inputs(Case((2, 40, 4, 2, 32, 16), torch.float32, "ragged"), DEVICE, 1)
    out = SPEC.call(resolve("paged_decode_attention", "flex-decode").fn, inp)[0]
    assert torch.allclose(out.double(), SPEC.reference(inp)[0], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name,reason", [("flashinfer", "flashinfer-python not installed"),
                                         ("vllm", "vllm not installed")])
def test_vendors_not_installed(name, reason):
    impl = resolve("paged_decode_attention", name)
    if impl.available:
        pytest.skip(f"{name} is installed here")
    assert impl.reason == reason


@pytest.mark.skipif(HAS_CUDA, reason="CPU answer")
def test_flash_contiguous_needs_cuda():
    assert "CUDA" in resolve("paged_decode_attention", "sdpa-flash-contiguous").reason
