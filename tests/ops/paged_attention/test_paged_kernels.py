"""paged_decode_attention on the CPU interpreter: the harness on the edge/cpu cases, splits against no split,
causal spec decoding, fp8 KV, strided layouts, named errors, the launch rules, the custom op under torch.compile."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from conftest import DEVICE
from ridgeline import check
from ridgeline.core.spec import Case
from ridgeline.ops.paged_attention.launch import paged_decode_attention, plan_for
from ridgeline.ops.paged_attention.rules import NO_SPLIT, RULES, DecodeCase, DecodeConfig, choose, split_tokens_for
from ridgeline.ops.paged_attention.spec import (
    CPU,
    PagedDecodeAttentionSpec,
    attention_reference,
    seq_lens_for,
    visible_keys,
)

SPEC = PagedDecodeAttentionSpec()
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 5e-3), torch.bfloat16: (1.2e-2, 2e-2)}
SPLIT = DecodeConfig(16, 4, 2, min_split_tokens=16)  # many splits: the merge kernel runs
WHOLE = DecodeConfig(32, 4, 2, min_split_tokens=NO_SPLIT)


def _inputs(shape, dtype=torch.float32, variant="", seed=0):
    return SPEC.make_inputs(Case(shape, dtype, variant), DEVICE, seed)


def _run(inp, **kw):
    return paged_decode_attention(inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"], inp["seq_lens"],
                                  inp["scale"], inp["k_scale"], inp["v_scale"], **kw)


def _close(out, inp):
    ref = SPEC.reference(inp)[0]
    atol, rtol = TOL[inp["q"].dtype]
    err = (out.double() - ref).abs()
    assert out.shape == inp["q"].shape and out.dtype == inp["q"].dtype
    assert bool((err <= atol + rtol * ref.abs()).all()), f"max err {err.max():.3g}"


@pytest.mark.parametrize("dtype", [pytest.param("fp32", marks=pytest.mark.slow),
                                   pytest.param("fp16", marks=pytest.mark.slow), "bf16"])
def test_harness_edge_cases(dtype):
    results = check("paged_decode_attention", ["ridgeline"], dtypes=[dtype], device=DEVICE)
    bad = [(r.label, r.reasons) for r in results if not r.passed]
    assert not bad and len(results) >= 15


def test_harness_cpu_set():
    cases = [Case(s, torch.bfloat16) for s in CPU]
    results = check("paged_decode_attention", ["ridgeline"], cases=cases, device=DEVICE)
    assert all(r.passed for r in results), [(r.label, r.reasons) for r in results if not r.passed]


@pytest.mark.parametrize("cfg", [SPLIT, WHOLE, DecodeConfig(64, 4, 3, 2.0, 64)])
@pytest.mark.parametrize("shape,variant", [((3, 70, 4, 2, 32, 16), "ragged"), ((2, 45, 6, 2, 48, 16, 3), "ragged"),
                                           ((2, 33, 4, 4, 16, 32), "")])
def test_configs_agree_with_reference(cfg, shape, variant):
    inp = _inputs(shape, torch.float16, variant)
    _close(_run(inp, config=cfg), inp)


def test_split_and_whole_differ_only_by_rounding():
    inp = _inputs((2, 100, 4, 2, 32, 16), torch.float32)
    a, b = _run(inp, config=SPLIT), _run(inp, config=WHOLE)
    assert plan_for(inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"], inp["seq_lens"],
                    config=SPLIT).n_splits > 1
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-5) and not torch.equal(a, torch.zeros_like(a))


def test_spec_decode_causal_tail_and_short_sequences():
    """Q = 4 with seq_len 0, 1, 2 (< Q) and 9: rows that see no key are zeros; token i sees seq_len - Q + i + 1 keys."""
    inp = _inputs((4, 9, 2, 1, 16, 16, 4), torch.float32)
    inp["seq_lens"] = torch.tensor([0, 1, 2, 9], dtype=torch.int32)
    out = _run(inp, config=SPLIT)
    _close(out, inp)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.equal(out[1, :3], torch.zeros_like(out[1, :3])) and out[1, 3].abs().sum() > 0
    # token 3 of a 1-token sequence sees exactly key 0: its output is V[0] (one head per kv head here)
    page = int(inp["block_table"][1, 0])
    assert torch.allclose(out[1, 3], inp["v_cache"][page, 0].repeat_interleave(2, 0), atol=1e-6)


def test_block_order_matters_and_is_followed():
    inp = _inputs((1, 64, 2, 1, 16, 16), torch.float32)
    inp["seq_lens"].fill_(40)  # (a full sequence's keys in another order would give the same attention)
    out = _run(inp)
    flipped = dict(inp, block_table=inp["block_table"].flip(1).contiguous())
    other = _run(flipped)
    _close(other, flipped)
    assert not torch.allclose(out, other)


def test_fp8_kv_scales_as_floats_and_tensors():
    inp = _inputs((3, 50, 4, 2, 32, 16), torch.float16, "fp8kv")
    _close(_run(inp), inp)
    ks = torch.tensor([inp["k_scale"]], dtype=torch.float32)
    vs = torch.tensor([inp["v_scale"]], dtype=torch.float32)
    t = dict(inp, k_scale=ks, v_scale=vs)
    assert torch.equal(_run(t), _run(inp))


@pytest.mark.parametrize("shape", [(3, 50, 4, 2, 32, 16), (2, 45, 6, 2, 48, 16, 3)])
def test_fp8_kv_fp16_dots_match_the_reference(shape):
    """The fp16-dot candidate (f16_dots): a bf16 query scaled per row by a power of two into fp16's range, K and V
    widened to fp16, P in fp16. Rows of very different magnitudes (2^-20 .. 2^20, and an all-zero row) must come
    out as the reference's; split and whole; and it is the bf16-dot result up to rounding."""
    inp = _inputs(shape, torch.bfloat16, "fp8kv+ragged")
    q = inp["q"].clone()
    heads = q.shape[-2]
    q[..., 0, :] *= 2.0**20
    q[..., 1 % heads, :] *= 2.0**-20
    q[0, ..., heads - 1, :] = 0.0
    inp["q"] = q
    for cfg in (SPLIT, WHOLE):
        f16 = _run(inp, config=dataclasses.replace(cfg, f16_dots=True))
        _close(f16, inp)
        assert torch.allclose(f16.float(), _run(inp, config=cfg).float(), atol=2e-2, rtol=2e-2)


def test_scale_argument_and_strided_views():
    """q a strided view of a wider buffer; K and V views of one fused [num_blocks, 2, bs, Hkv, D] cache."""
    b, length, hq, hkv, d, bs = 3, 40, 4, 2, 32, 16
    inp = _inputs((b, length, hq, hkv, d, bs), torch.float32)
    wide = torch.randn(b, hq, d + 8)[..., :d]
    wide.copy_(inp["q"])
    kv = torch.stack((inp["k_cache"], inp["v_cache"]), 1)
    strided = dict(inp, q=wide, k_cache=kv[:, 0], v_cache=kv[:, 1], scale=0.3)
    out = _run(strided)
    ref = attention_reference(wide, kv[:, 0], kv[:, 1], inp["block_table"], inp["seq_lens"], 0.3)
    assert torch.allclose(out.double(), ref, atol=2e-5, rtol=2e-5)
    assert not torch.allclose(out, _run(inp))


def test_empty_batch_and_nan():
    inp = _inputs((0, 16, 4, 2, 32, 16))
    assert _run(inp).shape == (0, 4, 32)
    inp = _inputs((2, 30, 4, 2, 32, 16))
    inp["v_cache"][inp["block_table"][0, 0], 3, 0, 5] = float("nan")
    out = _run(inp)
    assert out[0, :2, 5].isnan().all() and not out[0, 2:].isnan().any() and not out[1].isnan().any()


def _bad(**over):
    inp = _inputs((2, 20, 4, 2, 32, 16))
    inp.update(over)
    return inp


@pytest.mark.parametrize("over,match", [
    ({"q": torch.randn(2, 4, 32).to(torch.int32)}, "q: expected dtype"),
    ({"q": torch.randn(2, 32)}, r"q: expected \[B, Hq, D\]"),
    ({"q": torch.randn(2, 3, 32)}, r"Hq \(3\) must be a multiple"),
    ({"q": torch.randn(2, 4, 16)}, "head dim 32 differs"),
    ({"q": torch.randn(2, 4, 64)[..., ::2]}, "q: the last dim must be contiguous"),
    ({"k_cache": torch.randn(7, 16, 2, 32).half()}, "k_cache: expected q's dtype"),
    ({"k_cache": torch.randn(7, 16, 64)}, r"k_cache: expected \[num_blocks"),
    ({"v_cache": torch.randn(7, 16, 2, 32)[:5]}, "v_cache: expected k_cache's shape"),
    ({"block_table": torch.zeros(2, 2, dtype=torch.int64)}, "block_table: expected int32"),
    ({"block_table": torch.zeros(3, 2, dtype=torch.int32)}, r"block_table: expected int32 \[B=2"),
    ({"seq_lens": torch.zeros(2, dtype=torch.int64)}, "seq_lens: expected contiguous int32"),
    ({"seq_lens": torch.zeros(3, dtype=torch.int32)}, "seq_lens: expected contiguous int32"),
    ({"scale": "x"}, "scale: expected a float"),
    ({"scale": float("nan")}, "scale: expected a finite"),
    ({"scale": -0.5}, r"scale: expected a finite number > 0"),  # (the custom op would read it as None)
    ({"scale": 0.0}, r"scale: expected a finite number > 0"),
    ({"k_cache": torch.randn(0, 16, 2, 32), "v_cache": torch.randn(0, 16, 2, 32)},
     "k_cache: expected at least one block for 2 sequences"),  # (read past the cache: a segfault on CPU)
    ({"k_scale": -1.0}, "k_scale: expected a positive"),
    ({"k_scale": torch.ones(2)}, "k_scale: expected a float, or a float32 tensor of one element"),
    ({"k_scale": torch.ones(1)}, "pass both as tensors"),
    ({"q": torch.randn(2, 70, 4, 32)}, r"rows per kv head exceeds 128"),
    ({"q": torch.randn(2, 4, 512)}, "head dim 512 exceeds 256"),
])
def test_errors_name_the_argument(over, match):
    inp = _bad(**over)
    if over.get("q") is not None and over["q"].shape[-1] == 512:
        inp["k_cache"] = inp["v_cache"] = torch.randn(7, 16, 2, 512)
    with pytest.raises((ValueError, TypeError), match=match):
        _run(inp)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="block_table: expected a torch.Tensor"):
        _run(_bad(block_table=[[0]]))


def test_rules_table():
    assert choose(DecodeCase(128, 8, 4, 128)).min_split_tokens == NO_SPLIT
    assert choose(DecodeCase(4096, 8, 4, 256)).block_n == 32
    assert choose(DecodeCase(4096, 8, 64, 128)).block_n == 32
    assert RULES[-1].when.matches(DecodeCase(1 << 20, 1, 1, 1))
    cfg = choose(DecodeCase(4096, 8, 4, 128))
    assert split_tokens_for(cfg, 4096, 8, 132) == 256  # 16 splits x 8 heads = 128 programs at batch 1
    long = choose(DecodeCase(131072, 8, 4, 128))
    st = split_tokens_for(long, 131072, 8, 132)
    assert st % long.block_n == 0 and 131072 // st <= 34 and st >= long.min_split_tokens
    assert split_tokens_for(WHOLE, 100, 8, 132) >= 100
    # The fp8 cache keeps the bf16 splits (the same rounding) and takes 2 stages (s23 tuning).
    for capacity in (4096, 131072):
        bf16, fp8 = choose(DecodeCase(capacity, 8, 4, 128)), choose(DecodeCase(capacity, 8, 4, 128, itemsize=1))
        assert fp8.num_stages == 2 and bf16.num_stages == 3
        assert split_tokens_for(fp8, capacity, 8, 132) == split_tokens_for(bf16, capacity, 8, 132)
    with pytest.raises(ValueError, match="block_n must be a power of two"):
        DecodeConfig(block_n=24)


def test_split_ignores_batch_size():
    """Batch invariance by construction: the plan depends on the block table's width, not on B."""
    a = _inputs((1, 700, 4, 2, 32, 16))
    b = _inputs((6, 700, 4, 2, 32, 16))
    pa = plan_for(a["q"], a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"])
    pb = plan_for(b["q"], b["k_cache"], b["v_cache"], b["block_table"], b["seq_lens"])
    assert pa.split_tokens == pb.split_tokens and pa.n_splits == pb.n_splits > 1


def test_cost_counts_what_is_read():
    c = SPEC.cost((2, 100, 8, 2, 64, 16), torch.bfloat16)
    kv = 2 * 100 * 2 * 64 * 2 * 2
    assert c.bytes == kv + 2 * 2 * 8 * 64 * 2 + 2 * 7 * 4 + 2 * 4 and c.flops == 4 * 200 * 8 * 64 and c.unit == "bf16"
    lens = seq_lens_for(5, 40, "ragged")
    assert lens[:2] == [0, 1] and all(0 <= n <= 40 for n in lens)
    assert SPEC.cost((5, 40, 4, 2, 64, 16), torch.bfloat16, "fp8kv+ragged").flops == 4 * sum(lens) * 4 * 64
    assert visible_keys(9, 4) == 6 + 7 + 8 + 9 and visible_keys(2, 4) == 1 + 2
    assert SPEC.cost((2, 9, 4, 2, 64, 16, 4), torch.float16).flops == 4 * 2 * 30 * 4 * 64


def test_reference_matches_plain_attention():
    inp = _inputs((2, 20, 4, 2, 16, 8), torch.float32)
    ref = SPEC.reference(inp)[0]
    bt = inp["block_table"].long()
    k = inp["k_cache"][bt[0]].reshape(-1, 2, 16)[:20].double()
    v = inp["v_cache"][bt[0]].reshape(-1, 2, 16)[:20].double()
    s = inp["q"][0, 3].double() @ k[:, 1].T / math.sqrt(16)
    assert torch.allclose(ref[0, 3], torch.softmax(s, 0) @ v[:, 1])


def test_torch_compile_fullgraph():
    inp = _inputs((2, 40, 4, 2, 32, 16), torch.float32)

    @torch.compile(fullgraph=True, dynamic=False)
    def f(q, k, v, bt, lens):
        return paged_decode_attention(q * 1.0, k, v, bt, lens) + 0.0

    out = f(inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"], inp["seq_lens"])
    _close(out, inp)

    @torch.compile(fullgraph=True, dynamic=False)
    def g(q, k, v, bt, lens):
        return paged_decode_attention(q, k, v, bt, lens, scale=-0.5)

    with pytest.raises(Exception, match="scale: expected a finite number > 0"):  # (not silently 1/sqrt(D))
        g(inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"], inp["seq_lens"])
