"""Our attention kernels (forward and backward) against float64 on the CPU interpreter: dtypes, head dims, GQA,
causal (bottom-right for S_q != S_k), windows, packed batches with empty and length-1 sequences, [B, H, S, D]
views, rows that see no key, bad input, autograd, torch.compile, and the harness's check."""

import math

import pytest
import torch

import ridgeline
from conftest import DEVICE
from ridgeline.core.spec import Case
from ridgeline.ops.attention.launch import attention, attention_backward, resolve_window
from ridgeline.ops.attention.spec import EPS, reference_attention, varlen_lengths, visible_pairs

DTYPES = [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _seeded():
    """Each test draws the same inputs whatever ran before it in the process: unseeded, the global generator's
    state depended on the test order, and one order drew a dq element 1.06x over 4 eps (case1 bf16, a query that
    sees two keys: 1 element in 1280; none in 200 seeded draws of that case)."""
    torch.manual_seed(0)


def rand(*shape, dtype=torch.float16):
    return torch.randn(*shape, device=DEVICE).to(dtype)


def qkv(b, sq, sk, hq, hkv, d, dtype):
    return rand(b, sq, hq, d, dtype=dtype), rand(b, sk, hkv, d, dtype=dtype), rand(b, sk, hkv, d, dtype=dtype)


def ref(q, k, v, causal=False, window=None, cu=None, dout=None):
    inputs = {"q": q, "k": k, "v": v, "causal": causal, "window": window, "cu_seqlens": cu}
    return reference_attention(inputs, dout)


def close(out, expect, dtype, scale=2.0):
    eps = EPS[dtype]
    assert out.dtype == dtype and out.shape == expect.shape
    torch.testing.assert_close(out.double(), expect, atol=scale * eps, rtol=scale * eps)


CASES = [  # b, sq, sk, hq, hkv, d, causal, window
    (2, 37, 37, 4, 2, 32, False, None),
    (1, 40, 23, 2, 1, 16, True, None),   # S_q > S_k causal: the top rows see no key
    (1, 23, 40, 2, 2, 16, True, None),
    (1, 50, 50, 2, 1, 16, False, (7, 3)),
    (1, 33, 33, 1, 1, 64, False, 5),
    (1, 1, 1, 2, 2, 16, True, None),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_forward_and_backward_match_fp64(dtype, case):
    b, sq, sk, hq, hkv, d, causal, window = case
    q, k, v = qkv(b, sq, sk, hq, hkv, d, dtype)
    out, lse = attention(q, k, v, causal=causal, window=window, return_lse=True)
    dout = rand(*out.shape, dtype=dtype)
    r_out, r_lse, grads = ref(q, k, v, causal, window, dout=dout)
    close(out, r_out, dtype)
    seen = torch.isfinite(r_lse)
    torch.testing.assert_close(lse.double()[seen], r_lse[seen], atol=1e-4, rtol=1e-5)
    assert (lse[~seen] == float("-inf")).all() and (out.transpose(1, 2)[~seen] == 0).all()
    for got, want in zip(attention_backward(q, k, v, out, dout, lse, causal=causal, window=window), grads):
        close(got, want, dtype, scale=4.0)


def test_causal_is_bottom_right_and_windows_resolve():
    assert resolve_window(False, None) == (-1, -1)
    assert resolve_window(True, None) == (-1, 0)
    assert resolve_window(False, 4) == (3, 0)
    assert resolve_window(True, (5, 2)) == (5, 0)
    # S_q = 2 queries against 4 keys, causal: the last query sees all 4 keys, the first 3.
    assert visible_pairs(2, 4, -1, 0) == 7
    assert visible_pairs(4, 4, -1, 0) == 10 and visible_pairs(4, 2, -1, 0) == 3
    q, k, v = qkv(1, 2, 4, 1, 1, 16, torch.float16)
    out = attention(q, k, v, causal=True)
    close(out, ref(q, k, v, True)[0], torch.float16)
    # ... and its last row equals the unmasked attention of that row
    close(out[:, 1:], ref(q[:, 1:], k, v, False)[0], torch.float16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_packed_batches_with_empty_and_single_token_sequences(dtype, causal):
    total = 40
    lens = varlen_lengths(total)
    assert 0 in lens and 1 in lens
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    q, k, v = rand(total, 4, 16, dtype=dtype), rand(total, 2, 16, dtype=dtype), rand(total, 2, 16, dtype=dtype)
    out, lse = attention(q, k, v, causal=causal, cu_seqlens=cu, max_seqlen=max(lens), return_lse=True)
    dout = rand(*out.shape, dtype=dtype)
    r_out, r_lse, grads = ref(q, k, v, causal, None, cu, dout)
    close(out, r_out, dtype)
    torch.testing.assert_close(lse.double(), r_lse, atol=1e-4, rtol=1e-5)
    # (under a causal mask a sequence's first key collects weights summing to ~ln S + 0.58: the spec's dk/dv
    # bound; at 4 eps alone one element in 2560 came out over it, 0.0195 against 0.0156)
    grow = math.sqrt(max(1.0, math.log(max(lens)) + 0.58)) if causal else 1.0
    for got, want in zip(attention_backward(q, k, v, out, dout, lse, causal=causal, cu_seqlens=cu), grads):
        close(got, want, dtype, scale=4.0 * grow)
    # A sequence alone gives the same bits as inside the pack (batch invariance across a packed batch).
    s0 = slice(0, lens[0])
    alone = attention(q[s0], k[s0], v[s0], causal=causal, cu_seqlens=cu[:2], max_seqlen=lens[0])
    assert torch.equal(alone, out[s0])


def test_bhsd_views_are_read_in_place_and_gqa_needs_no_copies():
    q4, k4, v4 = rand(2, 4, 19, 32), rand(2, 1, 19, 32), rand(2, 1, 19, 32)  # [B, H, S, D] storage (MQA)
    q, k, v = q4.transpose(1, 2), k4.transpose(1, 2), v4.transpose(1, 2)
    out = attention(q, k, v, causal=True)
    close(out, ref(q, k, v, True)[0], torch.float16)
    assert out.is_contiguous() and out.shape == q.shape


def test_repeated_calls_agree_bitwise_and_a_batch_row_alone_too():
    q, k, v = qkv(3, 29, 29, 2, 1, 32, torch.float16)
    out, lse = attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out, attention(q, k, v, causal=True))
    assert torch.equal(out[1:2], attention(q[1:2], k[1:2], v[1:2], causal=True))
    dout = rand(*out.shape)
    g1 = attention_backward(q, k, v, out, dout, lse, causal=True)
    g2 = attention_backward(q, k, v, out, dout, lse, causal=True)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))


def test_empty_inputs_launch_nothing():
    q, k, v = qkv(0, 8, 8, 2, 2, 16, torch.float16)
    assert attention(q, k, v).shape == q.shape
    q, k, v = qkv(1, 0, 8, 2, 2, 16, torch.float16)
    out, lse = attention(q, k, v, return_lse=True)
    assert out.shape == q.shape and lse.shape == (1, 2, 0)
    dq, dk, dv = attention_backward(q, k, v, out, out, lse)
    assert dq.shape == q.shape and (dk == 0).all() and (dv == 0).all()
    q, k, v = qkv(1, 3, 0, 2, 2, 16, torch.float16)  # no keys: zeros and -inf
    out, lse = attention(q, k, v, return_lse=True)
    assert (out == 0).all() and (lse == float("-inf")).all()


def test_scale_is_folded_in():
    q, k, v = qkv(1, 17, 17, 1, 1, 16, torch.float16)
    inputs = {"q": q, "k": k, "v": v, "causal": False, "window": None, "cu_seqlens": None}
    close(attention(q, k, v, scale=0.3), reference_attention(inputs, scale=0.3)[0], torch.float16)


BAD = [
    (lambda q, k, v: attention(q.float(), k, v), TypeError, "q: expected dtype float16 or bfloat16, got float32"),
    (lambda q, k, v: attention(q, k.bfloat16(), v), TypeError, "k: expected dtype float16 (same as q)"),
    (lambda q, k, v: attention(q[0], k, v), ValueError, "q: expected 4 dims [B, S, H, D]"),
    (lambda q, k, v: attention(q[..., :8], k[..., :8], v[..., :8]), ValueError, "q: expected a head dim in"),
    (lambda q, k, v: attention(q, k[:, :, :1].expand(1, 8, 3, 16).contiguous(), v), ValueError,
     "v: expected shape"),
    (lambda q, k, v: attention(q, k[:, :, :3].repeat(1, 1, 1, 1)[:, :, :1].repeat(1, 1, 3, 1),
                               v[:, :, :1].repeat(1, 1, 3, 1)), ValueError, "k: expected a head count that divides"),
    (lambda q, k, v: attention(q, k, v, window=0), ValueError, "window: expected an int >= 1"),
    (lambda q, k, v: attention(q, k, v, window=(1, -2)), ValueError, "window: expected (left, right) ints >= -1"),
    (lambda q, k, v: attention(q, k, v, window="x"), TypeError, "window: expected None, an int or a"),
    (lambda q, k, v: attention(q, k, v, scale=-1.0), ValueError, "scale: expected a finite float > 0"),
    (lambda q, k, v: attention(q, k, v, scale=1e-40), ValueError, "scale: expected a value in [1e-30, 1e30]"),
    (lambda q, k, v: attention(q, k, v, causal=1), TypeError, "causal: expected a bool"),
    (lambda q, k, v: attention(q, k, v, max_seqlen=4), ValueError, "max_seqlen: only meaningful with cu_seqlens"),
    (lambda q, k, v: attention(q[0], k[0], v[0], cu_seqlens=torch.tensor([0, 8])), TypeError,
     "cu_seqlens: expected dtype int32"),
    (lambda q, k, v: attention(q[0], k[0], v[0], cu_seqlens=torch.zeros(2, 2, dtype=torch.int32)), ValueError,
     "cu_seqlens: expected a 1-dim [B + 1] tensor"),
    # Offsets past the packed tokens (would read out of bounds), decreasing ones, a max_seqlen that drops rows.
    (lambda q, k, v: attention(q[0], k[0], v[0], cu_seqlens=torch.tensor([0, 100], dtype=torch.int32)),
     ValueError, "cu_seqlens: expected non-decreasing offsets in [0, 8] (the packed tokens), got [0, 100]"),
    (lambda q, k, v: attention(q[0], k[0], v[0], cu_seqlens=torch.tensor([0, 100], dtype=torch.int32),
                               max_seqlen=8), ValueError, "cu_seqlens: expected non-decreasing offsets"),
    (lambda q, k, v: attention(q[0], k[0], v[0], cu_seqlens=torch.tensor([0, 6, 3], dtype=torch.int32)),
     ValueError, "cu_seqlens: expected non-decreasing offsets"),
    (lambda q, k, v: attention(q[0], k[0], v[0], cu_seqlens=(torch.tensor([0, 8], dtype=torch.int32),
                                                            torch.tensor([0, 9], dtype=torch.int32))),
     ValueError, "cu_seqlens_k: expected non-decreasing offsets in [0, 8]"),
    (lambda q, k, v: attention(q[0], k[0], v[0], cu_seqlens=torch.tensor([0, 2, 8], dtype=torch.int32),
                               max_seqlen=4), ValueError, "max_seqlen: expected at least the longest sequence, 6"),
    (lambda q, k, v: attention_backward(q, k, v, q, q, torch.zeros(1, 4, 9)), ValueError,
     "lse: expected a float32 tensor of shape (1, 4, 8)"),
    (lambda q, k, v: attention_backward(q, k, v, q[:, :4], q, torch.zeros(1, 4, 8)), ValueError,
     "out: expected shape"),
]


@pytest.mark.parametrize("bad", range(len(BAD)))
def test_bad_input_names_the_argument(bad):
    fn, error, message = BAD[bad]
    q, k, v = rand(1, 8, 4, 16), rand(1, 8, 2, 16), rand(1, 8, 2, 16)
    with pytest.raises(error) as e:
        fn(q, k, v)
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("causal", [False, True])
def test_autograd_through_the_custom_op_matches_fp64_autograd(causal):
    q, k, v = qkv(1, 21, 21, 4, 2, 16, torch.float16)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = attention(*leaves, causal=causal, return_lse=True)
    dout = rand(*out.shape)
    (out.float() * dout.float()).sum().add(lse.sum() * 0.5).backward()
    dl = [t.double().requires_grad_() for t in (q, k, v)]
    r_out, r_lse, _ = ref(*dl, causal)
    (r_out * dout.double()).sum().add(r_lse.sum() * 0.5).backward()
    for got, want in zip(leaves, dl):
        close(got.grad, want.grad, torch.float16, scale=4.0)


def test_torch_compile_fullgraph():
    q, k, v = qkv(1, 18, 18, 2, 1, 16, torch.float16)

    @torch.compile(fullgraph=True, dynamic=False)
    def f(q, k, v):
        return attention(q, k, v, causal=True) * 2

    close(f(q, k, v), 2 * ref(q, k, v, True)[0], torch.float16, scale=4.0)


def test_cost_counts_visible_pairs_exactly():
    from ridgeline.core.registry import get_spec

    spec = get_spec("attention")
    dense = spec.cost((4, 4096, 32, 8, 128), torch.bfloat16)
    assert dense.flops == 4 * 4 * 32 * 4096 * 4096 * 128 and dense.unit == "bf16"
    assert dense.bytes == 2 * (4 * 4096 * 32 * 128 * 2) + 2 * (4 * 4096 * 8 * 128 * 2)
    causal = spec.cost((4, 4096, 32, 8, 128), torch.bfloat16, "causal")
    assert causal.flops == 4 * 4 * 32 * 128 * (4096 * 4097 // 2)
    bwd = get_spec("attention_bwd").cost((4, 4096, 32, 8, 128), torch.bfloat16, "causal")
    assert bwd.flops * 2 == causal.flops * 5
    # read q, out, dout, k, v and the fp32 lse [B, H, S]; write dq, dk, dv: each tensor once
    q_bytes, kv_bytes, lse_bytes = 4 * 4096 * 32 * 128 * 2, 4 * 4096 * 8 * 128 * 2, 4 * 32 * 4096 * 4
    assert bwd.bytes == 4 * q_bytes + 4 * kv_bytes + lse_bytes
    assert spec.cost((1, 64, 1, 1, 64), torch.float16, "window").flops == 4 * 64 * visible_pairs(64, 64, 15, 0)
    assert math.isclose(spec.cost((40, 4, 2, 16), torch.float16).flops,
                        4 * 4 * 16 * sum(n * n for n in varlen_lengths(40)))


def test_harness_check_passes_on_cpu_cases():
    spec_cases = [Case((2, 37, 4, 2, 32), torch.float16, "causal"), Case((50, 2, 1, 16), torch.bfloat16, "window"),
                  Case((1, 23, 40, 2, 2, 16), torch.float16, "bhsd")]
    for op in ("attention", "attention_bwd"):
        report = ridgeline.check(op, impls="ridgeline", cases=spec_cases, device=DEVICE)
        results = report.results if hasattr(report, "results") else report
        assert results and all(r.passed for r in results), [r.reasons for r in results]


@pytest.mark.parametrize("causal", [False, True])
def test_tma_forward_candidate_matches_the_pointer_path(causal):
    """The forward's TMA candidate (K/V tiles through tensor descriptors; rows past a sequence arrive as zeros)
    gives the pointer path's bits: dense with ragged key tiles, GQA, and packed sequences bounded per sequence."""
    from ridgeline.ops.attention.launch import _forward, _prepare, tma_readable
    from ridgeline.ops.attention.rules import AttnConfig

    pointer, tma = AttnConfig(16, 16, 4, 1), AttnConfig(16, 16, 4, 1, tma=True)
    q, k, v = qkv(2, 21, 37, 4, 2, 32, torch.bfloat16)
    odd = rand(2, 37, 2, 36, dtype=torch.bfloat16)[..., :32]  # heads 72 bytes apart: not 16-byte aligned
    assert tma_readable(k, False) and not tma_readable(odd, False)
    args = _prepare(q, k, v, causal, None, None, None, None)
    out_p, lse_p = _forward(*args, cfg=pointer)
    out_t, lse_t = _forward(*args, cfg=tma)
    assert torch.equal(out_p, out_t) and torch.equal(lse_p, lse_t)
    close(out_t, ref(q, k, v, causal=causal)[0], torch.bfloat16)
    lens = [5, 0, 19, 1]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    qp, kp, vp = (rand(sum(lens), h, 32, dtype=torch.bfloat16) for h in (4, 2, 2))
    args = _prepare(qp, kp, vp, causal, None, None, cu, max(lens))
    assert torch.equal(_forward(*args, cfg=pointer)[0], _forward(*args, cfg=tma)[0])


@pytest.mark.parametrize("window", [None, (7, 3)])
@pytest.mark.parametrize("causal", [False, True])
def test_tma_backward_candidates_match_the_pointer_path(causal, window):
    """The backward's TMA candidates (dK/dV's Q and dO tiles, dQ's K and V tiles through tensor descriptors made
    per sequence and head; rows past a sequence arrive as zeros) give the pointer path's bits and float64's
    gradients: dense with ragged tiles, GQA (descriptors remade for each query head of a group), windows, packed
    sequences with empty and one-token ones, and a gradient whose rows overlap (stride 0: pointer loads)."""
    from ridgeline.ops.attention.launch import _backward, _forward, _prepare, tma_readable
    from ridgeline.ops.attention.rules import AttnConfig

    pointer, tma = AttnConfig(16, 16, 4, 1), AttnConfig(16, 16, 4, 1, tma=True)
    q, k, v = qkv(2, 21, 37, 4, 2, 32, torch.bfloat16)
    args = _prepare(q, k, v, causal, None, window, None, None)
    out, lse = _forward(*args)
    dout = rand(*out.shape, dtype=torch.bfloat16)
    bw = (q, k, v, out, dout, lse, None, *args[3:])
    by_pointer = _backward(*bw, cfgs=(pointer, pointer))
    for cfgs in [(tma, pointer), (pointer, tma), (tma, tma)]:
        assert all(torch.equal(a, b) for a, b in zip(by_pointer, _backward(*bw, cfgs=cfgs))), cfgs
    for got, want in zip(by_pointer, ref(q, k, v, causal, window, dout=dout)[2]):
        close(got, want, torch.bfloat16, scale=4.0)
    flat = rand(2, 1, 4, 32, dtype=torch.bfloat16).expand(out.shape)  # every row the same memory
    assert not tma_readable(flat, False)
    bw = (q, k, v, out, flat, lse, None, *args[3:])
    assert all(torch.equal(a, b) for a, b in zip(_backward(*bw, cfgs=(pointer, pointer)),
                                                 _backward(*bw, cfgs=(tma, tma))))
    lens = [5, 0, 19, 1]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    qp, kp, vp = (rand(sum(lens), h, 32, dtype=torch.bfloat16) for h in (4, 2, 2))
    args = _prepare(qp, kp, vp, causal, None, window, cu, max(lens))
    out, lse = _forward(*args)
    dout = rand(*out.shape, dtype=torch.bfloat16)
    bw = (qp, kp, vp, out, dout, lse, None, *args[3:])
    assert all(torch.equal(a, b) for a, b in zip(_backward(*bw, cfgs=(pointer, pointer)),
                                                 _backward(*bw, cfgs=(tma, tma))))


@pytest.mark.parametrize("case", CASES)
def test_folded_scale_forward_matches_fp64(case):
    """The forward with the softmax scale folded into the FMA (max(s) * scale as the row maximum, then
    s * scale - m; the GPU rules' causal D=128 and D<=64 tiles): every mask case of CASES, rows that see no key
    (out 0, lse -inf) included, against float64; and a packed batch with empty and length-1 sequences."""
    from ridgeline.ops.attention.launch import _forward, _prepare
    from ridgeline.ops.attention.rules import AttnConfig

    fold = AttnConfig(16, 16, 4, 1, fold=True)
    b, sq, sk, hq, hkv, d, causal, window = case
    q, k, v = qkv(b, sq, sk, hq, hkv, d, torch.bfloat16)
    for spread in (3, 64):  # wide score ranges: the row maxima move between key tiles; at 64 a row maximum taken
        qs = q * spread     # without the scale would push every exp2 below fp32's range
        want_out, want_lse, _ = ref(qs, k, v, causal=causal, window=window)
        out, lse = _forward(*_prepare(qs, k, v, causal, None, window, None, None), cfg=fold)
        close(out, want_out, torch.bfloat16)
        torch.testing.assert_close(lse.double(), want_lse, atol=1e-5 * spread, rtol=1e-5)
    lens = [5, 0, 19, 1]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    qp, kp, vp = (rand(sum(lens), h, 16, dtype=torch.bfloat16) for h in (2, 1, 1))
    out_p, _ = _forward(*_prepare(qp, kp, vp, causal, None, window, cu, max(lens)), cfg=fold)
    close(out_p, ref(qp, kp, vp, causal=causal, window=window, cu=cu)[0], torch.bfloat16)


@pytest.mark.slow
@pytest.mark.parametrize("d", [64, 256])
def test_the_gpu_tiles_match_fp64_under_the_interpreter(monkeypatch, d):
    """The tiles the GPU rules pick at D = 64 and 256 (s18: D = 256's dK/dV 64 x 64, its forward 128 x 64 through
    TMA) computed by the interpreter: ragged query and key tiles, GQA, causal, against float64."""
    from ridgeline.ops.attention import launch, rules

    monkeypatch.setattr(launch, "config_for", lambda kernel, hd, masked=False, interpreted=None:
                        rules.config_for(kernel, hd, masked, False))
    q, k, v = qkv(1, 70, 70, 2, 1, d, torch.bfloat16)
    dout = rand(1, 70, 2, d, dtype=torch.bfloat16)
    for causal in (False, True):
        want_out, _, grads = ref(q, k, v, causal=causal, dout=dout)
        out, lse = attention(q, k, v, causal=causal, return_lse=True)
        close(out, want_out, torch.bfloat16)
        # (D = 256 gradients sum 256-wide bf16 products: the old 16 x 32 dK/dV tile misses 4 eps by 5% on such
        # inputs too, s18; 8 eps bounds both)
        for got, want in zip(attention_backward(q, k, v, out, dout, lse, causal=causal), grads):
            close(got, want, torch.bfloat16, scale=4.0 if d <= 128 else 8.0)
