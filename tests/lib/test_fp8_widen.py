"""lib/fp8.e4m3_to_bf16 and e4m3_to_f16 against torch's cast, every code: on the GPU the inline-assembly path (bit
for bit, in a shuffled order so that a swapped pair or half shows), under the interpreter the plain cast."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE, HAS_CUDA
from ridgeline.lib.fp8 import e4m3_to_bf16, e4m3_to_f16
from ridgeline.ops.int4_matmul.rules import tile_config

NAN_CODES = (0x7F, 0xFF)


@triton.jit
def _convert(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, e4m3_to_bf16(tl.load(x_ptr + offs)))


@triton.jit
def _convert_tile(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    """A 2-D tile transposed before the cast, as the decode kernel's K tile is (another register layout)."""
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    y = e4m3_to_bf16(tl.trans(x))
    tl.store(y_ptr + c[:, None] * R + r[None, :], y)


@triton.jit
def _convert_f16(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, e4m3_to_f16(tl.load(x_ptr + offs), False))


def _codes(repeat: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    codes = torch.arange(256, dtype=torch.int32).repeat(repeat)
    return codes[torch.randperm(codes.numel(), generator=g)].to(torch.uint8)


def _check(codes: torch.Tensor, got: torch.Tensor) -> None:
    finite = ~torch.isin(codes.cpu(), torch.tensor(NAN_CODES, dtype=torch.uint8))
    want = codes.view(torch.float8_e4m3fn).to(torch.bfloat16)
    got, want = got.cpu(), want.cpu()
    assert torch.equal(got[finite].view(torch.int16), want[finite].view(torch.int16))
    if HAS_CUDA:  # the documented exception: the NaN codes decode as +-480
        assert got[~finite].abs().eq(480).all()


def test_every_code_bit_for_bit():
    codes = _codes(4, 0).to(DEVICE)
    out = torch.full((codes.numel(),), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    _convert[(1,)](codes.view(torch.float8_e4m3fn), out, N=codes.numel())
    _check(codes, out)


def test_every_code_in_a_transposed_tile():
    codes = _codes(2, 1).to(DEVICE).view(16, 32)
    out = torch.full((32, 16), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    _convert_tile[(1,)](codes.view(torch.float8_e4m3fn), out, R=16, C=32)
    _check(codes.t().reshape(-1), out.reshape(-1))


def test_every_code_to_fp16_bit_for_bit():
    """e4m3 -> fp16 (the hardware's paired conversion on the GPU): every finite code exact, the NaN codes NaN."""
    codes = _codes(4, 2).to(DEVICE)
    out = torch.full((codes.numel(),), 7.0, dtype=torch.float16, device=DEVICE)
    _convert_f16[(1,)](codes.view(torch.float8_e4m3fn), out, N=codes.numel())
    finite = ~torch.isin(codes.cpu(), torch.tensor(NAN_CODES, dtype=torch.uint8))
    got, want = out.cpu(), codes.cpu().view(torch.float8_e4m3fn).to(torch.float16)
    assert torch.equal(got[finite].view(torch.int16), want[finite].view(torch.int16))
    if HAS_CUDA:  # (Triton's CPU interpreter decodes the NaN codes as +-480; the hardware keeps them NaN)
        assert got[~finite].isnan().all()


@pytest.mark.gpu
def test_large_random_tensor_on_gpu():
    # (clamped: torch's cast to e4m3fn gives NaN past 448, and NaN codes are the documented exception)
    x = (torch.randn(1 << 20, device="cuda") * 100).clamp(-448, 448).to(torch.float8_e4m3fn)
    out = torch.empty(x.numel(), dtype=torch.bfloat16, device="cuda")
    for off in range(0, x.numel(), 4096):
        _convert[(1,)](x[off:off + 4096], out[off:off + 4096], N=4096)
    assert torch.equal(out.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))


# --- what sm_90 compiles (ahead of time, no GPU): the instruction mix the s20 speedups came from -------------
def _aot_sass(op: str, shape: tuple, variant: str, tmp_path) -> dict:
    import ridgeline.profile as P

    if P.tool_path("ptxas") is None or P.tool_path("cuobjdump") is None or HAS_CUDA:
        pytest.skip("needs Triton's bundled ptxas/cuobjdump and no GPU (the ahead-of-time path)")
    prof = P.profile(op, "ridgeline", shape, "bf16", variant=variant, out_dir=tmp_path, kineto=False)
    kernels = {k["name"]: (k, (tmp_path / k["files"]["sass"]).read_text()) for k in prof["kernels"]}
    assert kernels, f"no kernel compiled: {prof.get('not_collected')}"  # (the reason, e.g. the child's timeout)
    return kernels


def test_fp8_cache_decode_widens_without_the_conversion_pipe(tmp_path):
    kernel, sass = _aot_sass("paged_decode_attention", (8, 4096, 32, 8, 128, 64), "fp8kv", tmp_path)[
        "_paged_decode_kernel"]
    assert "F2F.BF16" not in sass  # Triton's cast: one F2F an element
    assert "LDS.U8" not in sass  # V's transposed operand a byte at a time
    assert "LDSM.16.MT88" in sass  # V widened first, then ldmatrix.trans
    assert kernel["spill_stores_bytes"] == 0
    (step,) = kernel["sass"]["loops"]  # one 64-token step: 700 instructions at s20 (1061 with byte loads for V)
    assert step["instructions"] < 800, step


def test_fp8_cache_fp16_dots_widen_in_one_instruction_for_two(tmp_path, monkeypatch):
    """The f16_dots candidate: e4m3 -> fp16 by F2FP (one for two elements), V still through ldmatrix.trans; the s23
    compile: 515 instructions a 64-token step against the integer widening's 704."""
    import dataclasses

    from ridgeline.ops.paged_attention import launch, rules

    monkeypatch.setattr(launch, "choose", lambda case: dataclasses.replace(rules.choose(case), f16_dots=True))
    kernel, sass = _aot_sass("paged_decode_attention", (8, 4096, 32, 8, 128, 64), "fp8kv", tmp_path)[
        "_paged_decode_kernel"]
    assert "F2FP.F16.E4M3.UNPACK_B" in sass and "F2F.BF16" not in sass and "HMUL2" not in sass
    assert "LDS.U8" not in sass and "LDSM.16.MT88" in sass
    assert kernel["spill_stores_bytes"] == 0
    (step,) = kernel["sass"]["loops"]
    assert step["instructions"] < 560, step


def test_int4_decode_unpacks_words_into_mma_pairs(tmp_path):
    kernel, sass = _aot_sass("int4_matmul", (1, 4096, 4096), "", tmp_path)["_int4_mm_kernel"]
    assert "HFMA2.BF16" in sass and "I2F" not in sass and "HMMA" in sass
    step = max(kernel["sass"]["loops"], key=lambda lp: lp["instructions"])
    # No byte re-pairing left in the loop (s20's format: 48 PRMT a step) and the swapped tile: ~181 a 64 x 128 group
    # (two a trip; one a trip: 194; s20: 288; Triton's own unpack: 557).
    groups = tile_config(1).groups_per_step
    assert step["histogram"].get("PRMT", 0) <= 4 and step["instructions"] < 230 * groups, step
