"""The warp-specialized attention forward (Gluon, kernel_ws.py) on an sm_90 GPU: against float64 at shapes that
cut its 128 x 128 tiles (S not a multiple of 128, S_q != S_k both ways, rows that see no key, GQA, D = 64,
D = 256 on 64-key tiles, fp16, 3 stages), keys of the next sequence that hold inf, batch invariance, the softmax
under the previous tile's PV (`overlap`), the warpgroups' ping-pong and programs of several query tiles (causal
pairs, persistent programs) giving the same bits as the plain loop of one tile a program, and the public
`attention` taking it where the rules say (rules.WS_FORWARD) and the Triton forward elsewhere."""

from __future__ import annotations

import math

import pytest
import torch

from ridgeline.ops.attention.launch import attention
from ridgeline.ops.attention.launch_ws import launch_ws, ws_supported
from ridgeline.ops.attention.rules import WS_FORWARD
from ridgeline.ops.attention.spec import reference_attention

pytestmark = pytest.mark.gpu
needs_sm90 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


def _qkv(b, sq, sk, h, hkv, d, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, s, n, d, device="cuda", generator=g).to(dtype) for s, n in ((sq, h), (sk, hkv), (sk, hkv))]


def _ws(q, k, v, causal, stages=2, overlap=False, pingpong=False, **schedule):
    out = torch.full_like(q, float("nan"))  # poisoned: every row must be written
    lse = torch.full((q.shape[0], q.shape[2], q.shape[1]), float("nan"), device="cuda")
    launch_ws(q, k, v, out, lse, 1.0 / math.sqrt(q.shape[-1]), causal, True, stages, overlap, pingpong=pingpong,
              **schedule)
    return out, lse


def _reference(q, k, v, causal):
    """float64 (out, lse) of the contract's reference (bottom-right causal, GQA; a row with no key: 0 / -inf)."""
    res = reference_attention({"q": q, "k": k, "v": v, "causal": causal, "window": None, "cu_seqlens": None})
    return res[0], res[1]


def _assert_matches(out, lse, ref, ref_lse):
    # bf16 / fp16 output of values ~N(0, 1/n): P rounded to 16 bits before the second GEMM (as kernel.py and
    # FlashAttention do) and the output's own rounding
    err = (out.double() - ref).abs()
    assert bool((err <= 2e-2 + 2e-2 * ref.abs()).all()), f"max err {err.max().item():.3g}"
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    finite = ~torch.isinf(ref_lse)
    assert bool(((lse.double() - ref_lse).abs()[finite] <= 1e-3).all())


@needs_sm90
@pytest.mark.parametrize("shape", [(2, 1000, 1000, 4, 4, 128), (1, 300, 1000, 4, 2, 128), (1, 1000, 300, 4, 1, 128),
                                   (3, 257, 129, 8, 2, 64), (1, 1, 77, 2, 2, 128), (2, 128, 128, 2, 2, 128),
                                   (2, 1000, 1000, 4, 2, 256), (1, 300, 1000, 4, 4, 256)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("overlap", [False, True])
def test_ws_forward_matches_float64(shape, causal, overlap):
    q, k, v = _qkv(*shape, torch.bfloat16)
    assert ws_supported(q, k, v, False, -1, 0 if causal else -1)
    out, lse = _ws(q, k, v, causal, overlap=overlap)
    _assert_matches(out, lse, *_reference(q, k, v, causal))
    if overlap:  # acc * alpha + PV in the same order, only issued earlier: the same bits
        plain = _ws(q, k, v, causal)
        assert torch.equal(out, plain[0]) and torch.equal(lse, plain[1])


@needs_sm90
@pytest.mark.parametrize("shape", [(2, 1000, 1000, 4, 4, 128), (1, 300, 1000, 4, 2, 128), (3, 257, 129, 8, 2, 64),
                                   (1, 1, 77, 2, 2, 128)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("overlap", [False, True])
def test_pingpong_matches_float64_and_the_plain_bits(shape, causal, overlap):
    """The warpgroups taking turns only reorders when each issues: float64-close and the plain loop's bits, on
    3 stages too (a turn handed over wrongly deadlocks or races; both would show here)."""
    q, k, v = _qkv(*shape, torch.bfloat16, seed=5)
    out, lse = _ws(q, k, v, causal, overlap=overlap, pingpong=True)
    _assert_matches(out, lse, *_reference(q, k, v, causal))
    plain = _ws(q, k, v, causal)
    assert torch.equal(out, plain[0]) and torch.equal(lse, plain[1])
    three = _ws(q, k, v, causal, stages=3, overlap=overlap, pingpong=True)
    assert torch.equal(three[0], out) and torch.equal(three[1], lse)


SCHEDULES = [{"pairs": True}, {"persistent": True, "programs": 7}, {"pairs": True, "persistent": True, "programs": 5},
             {"persistent": True}]


@needs_sm90
@pytest.mark.parametrize("shape", [(2, 1000, 1000, 4, 4, 128), (1, 300, 1000, 4, 2, 128), (1, 1000, 300, 4, 1, 128),
                                   (3, 257, 129, 8, 2, 64), (1, 1, 77, 2, 2, 128), (2, 1000, 1000, 4, 2, 256)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_schedules_match_float64_and_the_one_tile_bits(shape, causal, schedule):
    """Programs of several query tiles (causal pairs m, n_m - 1 - m; persistent programs walking items, 5 or 7 of
    them so that each takes many, in turns that do not divide the items): float64-close and the bits of one tile a
    program, overlapped or not, on 3 stages and with the ping-pong too (the K / V ring, Q's buffer and the turns run
    on across a program's tiles: a phase off by one deadlocks or reads a stale tile, and would show here)."""
    q, k, v = _qkv(*shape, torch.bfloat16, seed=11)
    for overlap in (False, True):
        out, lse = _ws(q, k, v, causal, overlap=overlap, **schedule)
        if not overlap:
            _assert_matches(out, lse, *_reference(q, k, v, causal))
        one = _ws(q, k, v, causal, overlap=overlap)
        assert torch.equal(out, one[0]) and torch.equal(lse, one[1]), overlap
    if shape[-1] <= 128:  # (3 stages of 64 x 256 K and V tiles do not fit shared memory)
        three = _ws(q, k, v, causal, stages=3, overlap=True, pingpong=True, **schedule)
        assert torch.equal(three[0], out) and torch.equal(three[1], lse)


@needs_sm90
@pytest.mark.parametrize("schedule", SCHEDULES[1:3], ids=["persistent", "pairs-persistent"])
def test_schedules_never_read_the_next_sequence(schedule):
    q, k, v = _qkv(2, 1000, 1000, 4, 2, 128, torch.bfloat16)
    k[1, :5] = float("inf")
    v[1, :5] = float("nan")
    for causal in (False, True):
        out, lse = _ws(q, k, v, causal, overlap=True, **schedule)
        _assert_matches(out[:1], lse[:1], *_reference(q[:1], k[:1], v[:1], causal))


@needs_sm90
@pytest.mark.parametrize("overlap", [False, True])
def test_ws_forward_fp16_and_three_stages(overlap):
    q, k, v = _qkv(2, 640, 640, 4, 4, 64, torch.float16)
    out, lse = _ws(q, k, v, True, stages=3, overlap=overlap)
    _assert_matches(out, lse, *_reference(q, k, v, True))
    two = _ws(q, k, v, True, stages=2, overlap=overlap)
    assert torch.equal(out, two[0]) and torch.equal(lse, two[1])  # stages do not change the arithmetic
    plain = _ws(q, k, v, True, stages=3)
    assert torch.equal(out, plain[0]) and torch.equal(lse, plain[1])  # nor does the overlap


@needs_sm90
@pytest.mark.parametrize("overlap", [False, True])
def test_ws_forward_never_reads_the_next_sequence(overlap):
    q, k, v = _qkv(2, 1000, 1000, 4, 2, 128, torch.bfloat16)
    k[1, :5] = float("inf")
    v[1, :5] = float("nan")
    out, lse = _ws(q, k, v, False, overlap=overlap)
    _assert_matches(out[:1], lse[:1], *_reference(q[:1], k[:1], v[:1], False))


@needs_sm90
@pytest.mark.parametrize("causal", [False, True])
def test_batch_invariant_and_the_public_dispatch(causal):
    q, k, v = _qkv(4, 1000, 1000, 8, 2, 128, torch.bfloat16, seed=3)
    sch = WS_FORWARD.schedule(128, causal, k.shape[1])
    form = {"pairs": sch.pairs, "persistent": sch.persistent}
    out, lse = _ws(q, k, v, causal, WS_FORWARD.stages, sch.overlap, **form)
    for b in (1, 3):
        assert torch.equal(_ws(q[:b], k[:b], v[:b], causal, WS_FORWARD.stages, sch.overlap, **form)[0], out[:b]), b
    public, public_lse = attention(q, k, v, causal=causal, return_lse=True)
    if 128 in WS_FORWARD.head_dims:  # the rules take it: the same call
        assert torch.equal(public, out) and torch.equal(public_lse, lse)
    else:  # the Triton forward (64-key steps against 128: other rounding, same values)
        torch.testing.assert_close(public.float(), out.float(), atol=2e-2, rtol=2e-2)
    # a [B, H, S, D] tensor's transposed view: never the Gluon kernel (its launcher refuses the strides)
    bhsd = q.transpose(1, 2).contiguous().transpose(1, 2)
    assert not ws_supported(bhsd, k, v, False, -1, 0 if causal else -1)
    torch.testing.assert_close(attention(bhsd, k, v, causal=causal).float(), out.float(), atol=2e-2, rtol=2e-2)
