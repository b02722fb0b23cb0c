"""The warp-specialized attention forward (Gluon, kernel_ws.py) on packed batches (cu_seqlens) and sliding windows
on an sm_90 GPU: against float64 per sequence (empty and one-token sequences, lengths that cut the 128 x 128
tiles, S_q != S_k per sequence through a (cu_q, cu_k) pair, GQA, D = 64 / 128 / 256), every schedule giving the
bits of the same sequence run alone as a dense batch, keys and values of the neighbouring sequences and of the
padding past the last one that hold inf and NaN (the per-sequence views keep them out); windows of 1 key to more
than the sequence, causal and not, dense and packed, each schedule the same bits; and the public `attention`
taking it."""

from __future__ import annotations

import math

import pytest
import torch
from test_attention_ws_gpu import _assert_matches  # (the dense tests' tolerances)

from ridgeline.ops.attention.launch import attention
from ridgeline.ops.attention.launch_ws import launch_ws, ws_supported
from ridgeline.ops.attention.rules import WS_FORWARD
from ridgeline.ops.attention.spec import reference_attention

pytestmark = pytest.mark.gpu
needs_sm90 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")

SCHEDULES = ({}, {"persistent": True, "programs": 5}, {"pairs": True, "persistent": True, "programs": 7})
# packed batches run one query tile a program (rules.WS_FORWARD.schedule says why): the plain and overlapped
# loops, with and without the warpgroups' ping-pong
PACKED_FORMS = ((False, False), (True, False), (False, True), (True, True))


def _cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")


def _packed(q_lens, k_lens, h, hkv, d, dtype=torch.bfloat16, pad=3, seed=0):
    """q [T_q + pad, H, D], k and v [T_k + pad, H_kv, D] (pad tokens past the last sequence hold NaN and inf)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sum(q_lens) + pad, h, d, device="cuda", generator=g).to(dtype)
    k, v = (torch.randn(sum(k_lens) + pad, hkv, d, device="cuda", generator=g).to(dtype) for _ in range(2))
    if pad:
        q[-pad:] = float("nan")
        k[-pad:] = float("inf")
        v[-pad:] = float("nan")
    return q, k, v


def _ws_packed(q, k, v, cu_q, cu_k, causal, overlap=True, left=-1, pingpong=False):
    out = torch.full_like(q, float("nan"))  # poisoned: every token of a sequence must be written
    lse = torch.full((q.shape[1], q.shape[0]), float("nan"), device="cuda")
    max_q = int((cu_q[1:] - cu_q[:-1]).max())
    max_k = int((cu_k[1:] - cu_k[:-1]).max())
    launch_ws(q, k, v, out, lse, 1.0 / math.sqrt(q.shape[-1]), causal, True, WS_FORWARD.stages, overlap,
              pingpong=pingpong, cu_q=cu_q, cu_k=cu_k, max_q=max_q, max_k=max_k, left=left)
    return out, lse


def _each_sequence(cu_q, cu_k):
    cq, ck = cu_q.tolist(), cu_k.tolist()
    return [(slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])) for i in range(len(cq) - 1)]


def _check_against_float64_and_dense(q, k, v, cu_q, cu_k, causal, out, lse):
    for sq, sk in _each_sequence(cu_q, cu_k):
        one = {"q": q[sq][None], "k": k[sk][None], "v": v[sk][None], "causal": causal, "window": None,
               "cu_seqlens": None}
        ref, ref_lse = reference_attention(one)[:2]
        got, got_lse = out[sq][None], lse[:, sq][None]
        err = (got.double() - ref).abs()
        assert bool((err <= 2e-2 + 2e-2 * ref.abs()).all()), (sq, sk, err.max().item() if err.numel() else 0)
        assert torch.equal(torch.isinf(got_lse), torch.isinf(ref_lse)), (sq, sk)
        finite = ~torch.isinf(ref_lse)
        assert bool(((got_lse.double() - ref_lse).abs()[finite] <= 1e-3).all()), (sq, sk)
        if sq.stop > sq.start and sk.stop > sk.start:  # the same sequence alone as a dense batch: the same bits
            dense_out = torch.full_like(got, float("nan"))
            dense_lse = torch.full((1, q.shape[1], sq.stop - sq.start), float("nan"), device="cuda")
            launch_ws(q[sq][None].contiguous(), k[sk][None].contiguous(), v[sk][None].contiguous(), dense_out,
                      dense_lse, 1.0 / math.sqrt(q.shape[-1]), causal, True, WS_FORWARD.stages, True)
            assert torch.equal(dense_out, got) and torch.equal(dense_lse, got_lse), (sq, sk)


@needs_sm90
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_packed_matches_float64_and_each_sequence_alone(d, causal):
    lens = [1000, 0, 1, 300, 129, 777, 128]
    q, k, v = _packed(lens, lens, 4, 2, d, seed=d)
    cu = _cu(lens)
    out, lse = _ws_packed(q, k, v, cu, cu, causal)
    _check_against_float64_and_dense(q, k, v, cu, cu, causal, out, lse)


@needs_sm90
def test_packed_forms_give_the_same_bits():
    # bottom-right causal per sequence: S_q < S_k, S_q > S_k (rows that see no key), no keys at all, no queries
    q_lens, k_lens = [200, 1, 640, 0, 77, 50, 3], [900, 130, 640, 5, 77, 20, 0]
    q, k, v = _packed(q_lens, k_lens, 8, 2, 128, seed=5)
    cu_q, cu_k = _cu(q_lens), _cu(k_lens)
    for causal in (False, True):
        base = _ws_packed(q, k, v, cu_q, cu_k, causal, overlap=False)
        _check_against_float64_and_dense(q, k, v, cu_q, cu_k, causal, *base)
        for overlap, pingpong in PACKED_FORMS[1:]:
            got = _ws_packed(q, k, v, cu_q, cu_k, causal, overlap=overlap, pingpong=pingpong)
            assert torch.equal(got[0][:-3], base[0][:-3]) and torch.equal(got[1][:, :-3], base[1][:, :-3]), (
                overlap, pingpong)


@needs_sm90
def test_packed_never_reads_the_neighbouring_sequence():
    lens = [300, 500, 200]
    q, k, v = _packed(lens, lens, 4, 4, 128, pad=0, seed=9)
    cu = _cu(lens)
    for causal in (False, True):
        clean = _ws_packed(q, k, v, cu, cu, causal)
        bad_k, bad_v = k.clone(), v.clone()
        # the middle sequence's first keys (inside the first one's last key tile) and last keys (just before the
        # third one's): inf and NaN that neither neighbour may see
        for rows in (slice(300, 305), slice(795, 800)):
            bad_k[rows] = float("inf")
            bad_v[rows] = float("nan")
        out, lse = _ws_packed(q, bad_k, bad_v, cu, cu, causal)
        for rows in (slice(0, 300), slice(800, 1000)):
            assert torch.equal(out[rows], clean[0][rows]) and torch.equal(lse[:, rows], clean[1][:, rows]), rows


@needs_sm90
@pytest.mark.parametrize("causal", [False, True])
def test_public_attention_takes_it_for_packed_batches(causal):
    lens = [1000, 1, 333, 0, 2048]
    q, k, v = _packed(lens, lens, 8, 2, 128, pad=0, seed=2)
    cu = _cu(lens)
    assert ws_supported(q, k, v, True, -1, 0 if causal else -1)
    sch = WS_FORWARD.schedule(128, causal, max(lens), varlen=True)
    assert not (sch.pairs or sch.persistent)
    out, lse = _ws_packed(q, k, v, cu, cu, causal, overlap=sch.overlap)
    public, public_lse = attention(q, k, v, causal=causal, cu_seqlens=cu, max_seqlen=max(lens), return_lse=True)
    if WS_FORWARD.takes(128, True, -1):  # the rules take it: the same call
        assert torch.equal(public, out) and torch.equal(public_lse, lse)
    else:  # the Triton forward (64-key steps against 128: other rounding, same values)
        torch.testing.assert_close(public.float(), out.float(), atol=2e-2, rtol=2e-2)
    # strides the views cannot address (heads not back to back): the Triton forward, the same values
    wide = torch.empty(q.shape[0], 8, 2 * 128, dtype=q.dtype, device="cuda")[:, :, :128]
    wide.copy_(q)
    assert not ws_supported(wide, k, v, True, -1, 0 if causal else -1)
    torch.testing.assert_close(attention(wide, k, v, causal=causal, cu_seqlens=cu, max_seqlen=max(lens)).float(),
                               out.float(), atol=2e-2, rtol=2e-2)


def _reference_window(q, k, v, left, right, cu=None):
    res = reference_attention({"q": q, "k": k, "v": v, "causal": False, "window": (left, right), "cu_seqlens": cu})
    return res[0], res[1]


@needs_sm90
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("sq,sk", [(1000, 1000), (300, 1000), (1000, 300)])
def test_window_matches_float64_and_every_schedule_the_same_bits(d, sq, sk):
    g = torch.Generator(device="cuda").manual_seed(d + sq)
    q = torch.randn(2, sq, 4, d, device="cuda", generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, sk, 2, d, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2))
    scale = 1.0 / math.sqrt(d)
    # (left, right): right 0 keys up to the aligned position (the Mistral window), -1 all keys from the left bound
    for left, right in ((0, 0), (99, 0), (127, 0), (300, 0), (1023, 0), (5000, 0), (200, -1)):
        ref = _reference_window(q, k, v, left, right)
        base = None
        for overlap, schedule in ((False, {}), (True, {}), (True, SCHEDULES[1]), (False, SCHEDULES[2])):
            out = torch.full_like(q, float("nan"))
            lse = torch.full((2, 4, sq), float("nan"), device="cuda")
            launch_ws(q, k, v, out, lse, scale, right == 0, True, WS_FORWARD.stages, overlap, left=left, **schedule)
            if base is None:
                _assert_matches(out, lse, *ref)
                base = (out, lse)
            else:
                assert torch.equal(out, base[0]) and torch.equal(lse, base[1]), (left, right, overlap, schedule)


@needs_sm90
def test_packed_window_matches_float64():
    lens = [1000, 0, 1, 300, 129, 777]
    q, k, v = _packed(lens, lens, 8, 2, 128, pad=2, seed=4)
    cu = _cu(lens)
    for left, right in ((63, 0), (500, 0), (128, -1)):
        out, lse = _ws_packed(q, k, v, cu, cu, right == 0, left=left)
        ref, ref_lse = _reference_window(q, k, v, left, right, cu)
        _assert_matches(out[:-2], lse[:, :-2], ref[:-2], ref_lse[:, :-2])
        plain = _ws_packed(q, k, v, cu, cu, right == 0, overlap=False, left=left)
        assert torch.equal(plain[0][:-2], out[:-2]) and torch.equal(plain[1][:, :-2], lse[:, :-2]), (left, right)


@needs_sm90
@pytest.mark.parametrize("window", [256, (100, 0), (300, -1)])
def test_public_attention_takes_it_for_windows(window):
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(2, 1500, 8, 128, device="cuda", generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 1500, 2, 128, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2))
    from ridgeline.ops.attention.launch import resolve_window

    left, right = resolve_window(False, window)
    assert ws_supported(q, k, v, False, left, right)
    sch = WS_FORWARD.schedule(128, right == 0, 1500, left)
    out = torch.empty_like(q)
    lse = torch.empty(2, 8, 1500, device="cuda")
    launch_ws(q, k, v, out, lse, 1.0 / math.sqrt(128), right == 0, True, WS_FORWARD.stages, sch.overlap,
              pairs=sch.pairs, persistent=sch.persistent, left=left)
    public, public_lse = attention(q, k, v, window=window, return_lse=True)
    if WS_FORWARD.takes(128, False, left):  # the rules take it: the same call
        assert torch.equal(public, out) and torch.equal(public_lse, lse)
    else:
        torch.testing.assert_close(public.float(), out.float(), atol=2e-2, rtol=2e-2)

