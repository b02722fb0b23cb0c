"""Rows off 16-byte boundaries read as shifted aligned spans (LaunchConfig.shift): values, bits and edges.

The kernel reads each row's 16-byte-aligned span (up to 7 columns of the neighbouring rows on either side) and
gathers the row's columns into place. These tests poison the neighbours, cover every shift of a row against
16 bytes, views starting off 16 bytes, and check that the bits depend on neither the row's address nor the batch.
They run under the CPU interpreter and, on the GPU machine, on the device (where the span really is read whole).
"""

import dataclasses

import pytest
import torch

from conftest import DEVICE
from ridgeline.kernels.rmsnorm import _launch, config_for

# Odd hidden sizes (every row at another 2-byte offset), one 8-byte-aligned (4100) and tiny ones.
SIZES = [5125, 4100, 4097, 769, 37, 9]


def shifted(n: int, dtype: torch.dtype, m: int, fused: bool):
    return dataclasses.replace(config_for(n, dtype, m, fused), shift=True)


def ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()


def run(x, x_stride, w, cfg, r=None, r_stride=0):
    m, n = x.shape[0], x.shape[-1]
    y = torch.full((m, n), float("nan"), device=x.device, dtype=x.dtype)
    ro = torch.full((m, n), float("nan"), device=x.device, dtype=x.dtype) if r is not None else None
    _launch(x, x_stride, r, r_stride, ro, n, w, y, n, m, n, 1e-6, 0.0, cfg)
    return y, ro


def poisoned_rows(m: int, n: int, dtype: torch.dtype, lead: int, pad: int) -> tuple[torch.Tensor, int]:
    """Rows of n random values inside a NaN-filled buffer: `lead` NaNs before the first row, `pad` after each."""
    buf = torch.full((lead + m * (n + pad) + 16,), float("nan"), device=DEVICE, dtype=dtype)
    rows = buf[lead:lead + m * (n + pad)].view(m, n + pad)[:, :n]
    rows.copy_(torch.randn(m, n, device=DEVICE).to(dtype))
    return rows, n + pad


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_shifted_rows_match_fp64_and_ignore_their_neighbours(n, dtype):
    m = 9  # with an odd row stride the rows start at every 2-byte offset against 16 bytes
    x, stride = poisoned_rows(m, n, dtype, lead=3, pad=1)
    w = 1 + 0.5 * torch.randn(n, device=DEVICE)
    y, _ = run(x, stride, w.to(dtype), shifted(n, dtype, m, False))
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(y.double(), ref(x, w.to(dtype)), atol=tol, rtol=tol)


@pytest.mark.parametrize("n", [5125, 4100, 37])
def test_shifted_bits_ignore_the_rows_address_and_the_batch(n):
    dtype, m = torch.bfloat16, 12
    w = (1 + 0.5 * torch.randn(n, device=DEVICE)).to(dtype)
    x0 = torch.randn(m, n, device=DEVICE).to(dtype)
    cfg = shifted(n, dtype, m, False)
    want, _ = run(x0, n, w, cfg)
    for lead in range(8):  # the same values starting at each 2-byte offset
        for pad in (0, 1, 3):
            x, stride = poisoned_rows(m, n, dtype, lead, pad)
            x.copy_(x0)
            got, _ = run(x, stride, w, cfg)
            assert torch.equal(got, want), f"lead={lead} pad={pad}"
    for rows in (slice(0, 1), slice(3, 8), slice(11, 12)):
        got, _ = run(x0[rows], n, w, shifted(n, dtype, rows.stop - rows.start, False))
        assert torch.equal(got, want[rows]), f"rows {rows}"


@pytest.mark.parametrize("n", [5125, 4100, 769])
def test_shifted_fused_equals_plain_on_residual_out(n):
    dtype, m = torch.bfloat16, 7
    w = (1 + 0.5 * torch.randn(n, device=DEVICE)).to(dtype)
    x, xs = poisoned_rows(m, n, dtype, lead=1, pad=3)
    r, rs = poisoned_rows(m, n, dtype, lead=5, pad=1)
    y, ro = run(x, xs, w, shifted(n, dtype, m, True), r, rs)
    assert torch.equal(ro, (x.double() + r.double()).to(dtype)) or DEVICE == "cpu"  # (CPU: bf16 truncation)
    plain, _ = run(ro, n, w, shifted(n, dtype, m, False))
    assert torch.equal(y, plain)


def test_shifted_inplace_fused_reads_before_it_writes():
    dtype, m, n = torch.bfloat16, 6, 5125
    w = (1 + 0.5 * torch.randn(n, device=DEVICE)).to(dtype)
    x, r = torch.randn(m, n, device=DEVICE).to(dtype), torch.randn(m, n, device=DEVICE).to(dtype)
    cfg = shifted(n, dtype, m, True)
    y_want, ro_want = run(x, n, w, cfg, r, n)
    xi, ri = x.clone(), r.clone()
    _launch(xi, n, ri, n, ri, n, w, xi, n, m, n, 1e-6, 0.0, cfg)
    assert torch.equal(xi, y_want) and torch.equal(ri, ro_want)


@pytest.mark.skipif(DEVICE == "cpu", reason="an aligned copy is made for CUDA views only (the interpreter reads "
                    "exactly the row's columns)")
def test_shifted_view_off_16_bytes_is_read_from_an_aligned_copy():
    dtype, m, n = torch.bfloat16, 5, 5125
    w = (1 + 0.5 * torch.randn(n, device=DEVICE)).to(dtype)
    base = torch.randn(m * n + 8, device=DEVICE).to(dtype)
    x = base[3:3 + m * n].view(m, n)  # starts 6 bytes off 16
    assert x.data_ptr() % 16
    want, _ = run(x.clone(), n, w, shifted(n, dtype, m, False))
    got, _ = run(x, n, w, shifted(n, dtype, m, False))
    assert torch.equal(got, want)
