"""The serving form (`rotary_embedding`, vLLM's in-place op) against a float64 reference on the CPU interpreter:
dtypes, NeoX and GPT-J, partial rotary, strided fused-qkv views, [B, S] positions, no key, configs, bad input."""

import pytest
import torch

from conftest import DEVICE
from ridgeline import check
from ridgeline.core.spec import Case
from ridgeline.ops.rotary.launch import rotary_embedding
from ridgeline.ops.rotary.rules import RotaryConfig, candidate_configs
from ridgeline.ops.rotary.spec import cos_sin_cache, rotate_reference

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# One rounding of the float32 result (relative, round to nearest): what ours must meet, far inside the contract.
ONE_ROUNDING = {torch.float32: 1e-6, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEVICE).to(dtype)


def make(t, hq, hk, d, r=None, dtype=torch.float32, cache_dtype=None, max_pos=64):
    r = r or d
    pos = torch.randint(0, max_pos, (t,), device=DEVICE)
    return pos, rand(t, hq * d, dtype=dtype), rand(t, hk * d, dtype=dtype), cos_sin_cache(
        max_pos, r, cache_dtype or dtype, DEVICE)


def ref(pos, x, cache, d, neox):
    half = cache.shape[1] // 2
    p = pos.reshape(-1)
    return rotate_reference(x, cache[p, :half], cache[p, half:], d, neox)


def assert_one_rounding(out, expect, dtype):
    err = (out.double() - expect).abs()
    assert out.dtype == dtype
    # (+ 1e-6: float32 cancellation in x cos - y sin, which one rounding to 16 bits dwarfs)
    assert bool((err <= ONE_ROUNDING[dtype] * expect.abs() + 1e-6).all()), float(err.max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("shape", [(3, 4, 2, 64), (5, 7, 1, 80), (4, 6, 3, 96, 24), (2, 4, 4, 128, 64), (1, 1, 1, 2)])
def test_matches_fp64_within_one_rounding(dtype, neox, shape):
    pos, q, k, cache = make(*shape, dtype=dtype)
    d = shape[3]
    rq, rk = ref(pos, q, cache, d, neox), ref(pos, k, cache, d, neox)
    out_q, out_k = rotary_embedding(pos, q, k, d, cache, neox)
    assert out_q is q and out_k is k, "works in place and returns the tensors it was given"
    assert_one_rounding(q, rq, dtype)
    assert_one_rounding(k, rk, dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float32_cache_with_16_bit_q(dtype):
    pos, q, k, cache = make(4, 4, 2, 64, dtype=dtype, cache_dtype=torch.float32)
    rq, rk = ref(pos, q, cache, 64, True), ref(pos, k, cache, 64, True)
    rotary_embedding(pos, q, k, 64, cache, True)
    assert_one_rounding(q, rq, dtype)
    assert_one_rounding(k, rk, dtype)


def test_partial_rotary_leaves_the_rest_of_each_head_untouched():
    pos, q, k, cache = make(3, 4, 2, 96, 24, dtype=torch.bfloat16)
    q0, k0 = q.clone(), k.clone()
    rotary_embedding(pos, q, k, 96, cache, False)
    assert torch.equal(q.view(3, 4, 96)[..., 24:], q0.view(3, 4, 96)[..., 24:])
    assert torch.equal(k.view(3, 2, 96)[..., 24:], k0.view(3, 2, 96)[..., 24:])
    assert not torch.equal(q.view(3, 4, 96)[..., :24], q0.view(3, 4, 96)[..., :24])


@pytest.mark.parametrize("neox", [True, False])
def test_strided_views_of_a_fused_qkv_buffer(neox):
    t, hq, hk, d = 5, 4, 2, 64
    qkv = rand(t, (hq + 2 * hk) * d + 8, dtype=torch.bfloat16)  # + 8: a row stride that is not (Hq + 2Hk) * D
    q, k = qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]
    v_before = qkv[:, (hq + hk) * d :].clone()
    pos = torch.randint(0, 64, (t,), device=DEVICE)
    cache = cos_sin_cache(64, d, torch.bfloat16, DEVICE)
    rq, rk = ref(pos, q, cache, d, neox), ref(pos, k, cache, d, neox)
    rotary_embedding(pos, q, k, d, cache, neox)
    assert q.stride(0) != hq * d
    assert_one_rounding(q, rq, torch.bfloat16)
    assert_one_rounding(k, rk, torch.bfloat16)
    assert torch.equal(qkv[:, (hq + hk) * d :], v_before), "wrote outside q and k"


def test_heads_3d_batch_seq_positions_and_no_key():
    pos2 = torch.randint(0, 64, (2, 3), device=DEVICE)
    q = rand(2, 3, 4 * 64)
    cache = cos_sin_cache(64, 64, torch.float32, DEVICE)
    expect = ref(pos2, q.view(6, -1), cache, 64, True).view(2, 3, -1)
    q_out, k_out = rotary_embedding(pos2, q, None, 64, cache, True)
    assert k_out is None and q_out is q
    assert_one_rounding(q, expect, torch.float32)
    q3 = rand(6, 4, 64)[:, :3]  # [T, H, D] with a head count short of the buffer's: token stride 256
    expect3 = ref(pos2.view(-1), q3, cache, 64, True)
    rotary_embedding(pos2.view(-1), q3, None, 64, cache, True)
    assert_one_rounding(q3, expect3, torch.float32)


def test_positions_as_a_strided_view_and_int32():
    pos = torch.randint(0, 64, (2, 8), device=DEVICE)[:, ::2]
    q, k = rand(2, 4, 2 * 64), rand(2, 4, 64)
    cache = cos_sin_cache(64, 64, torch.float32, DEVICE)
    rq, rk = ref(pos, q.view(8, -1), cache, 64, True), ref(pos, k.view(8, -1), cache, 64, True)
    rotary_embedding(pos.to(torch.int32), q, k, 64, cache, True)
    assert_one_rounding(q.view(8, -1), rq, torch.float32)
    assert_one_rounding(k.view(8, -1), rk, torch.float32)


def test_every_candidate_config_gives_the_same_bits():
    pos, q, k, cache = make(6, 8, 2, 64, dtype=torch.bfloat16)
    outs = []
    for cfg in candidate_configs() + [RotaryConfig("token", 128, 1), RotaryConfig("kv-group", 64, 1)]:
        qc, kc = q.clone(), k.clone()
        rotary_embedding(pos, qc, kc, 64, cache, True, config=cfg)
        outs.append((qc, kc))
    for qc, kc in outs[1:]:
        assert torch.equal(qc, outs[0][0]) and torch.equal(kc, outs[0][1])


def test_batch_invariance_and_determinism():
    pos, q, k, cache = make(20, 4, 2, 64, dtype=torch.bfloat16)
    full_q, full_k = q.clone(), k.clone()
    rotary_embedding(pos, full_q, full_k, 64, cache, True)  # 20 tokens: the "token" split under the interpreter
    again_q, again_k = q.clone(), k.clone()
    rotary_embedding(pos, again_q, again_k, 64, cache, True)
    assert torch.equal(full_q, again_q) and torch.equal(full_k, again_k)
    for sl in (slice(0, 1), slice(7, 10)):  # few tokens: the "kv-group" split
        qs, ks = q[sl].clone(), k[sl].clone()
        rotary_embedding(pos[sl], qs, ks, 64, cache, True)
        assert torch.equal(qs, full_q[sl]) and torch.equal(ks, full_k[sl])


def test_out_of_range_positions_give_nan_not_another_row():
    pos, q, k, cache = make(3, 2, 1, 64, 32)
    pos[1] = 64  # == max_position
    pos[2] = -1
    q0 = q.clone()
    rotary_embedding(pos, q, k, 64, cache, True)
    heads = q.view(3, 2, 64)
    assert heads[1:, :, :32].isnan().all() and not heads[0].isnan().any()
    assert torch.equal(heads[..., 32:], q0.view(3, 2, 64)[..., 32:])


def test_nan_and_inf_stay_in_their_pair():
    pos, q, k, cache = make(2, 2, 1, 16)
    q[0, 3] = float("nan")
    k[1, 0] = float("inf")
    rq, rk = ref(pos, q, cache, 16, True), ref(pos, k, cache, 16, True)
    rotary_embedding(pos, q, k, 16, cache, True)
    assert torch.equal(q.isnan(), rq.isnan()) and torch.equal(k.isnan(), rk.isnan())
    assert torch.equal(k.isinf(), rk.isinf())


def test_a_validated_layout_is_reused_and_a_new_stride_is_validated_again():
    from ridgeline.ops.rotary import launch

    pos, q, k, cache = make(4, 2, 1, 16)
    rotary_embedding(pos, q, k, 16, cache, True)
    n = len(launch._CALLS)
    rotary_embedding(pos.clone(), q.clone(), k.clone(), 16, cache, True)
    assert len(launch._CALLS) == n, "same signature: no second validation"
    with pytest.raises(ValueError, match="query: tokens overlap"):
        rotary_embedding(pos, q[:1].expand(4, 32), k, 16, cache, True)


def test_empty_tokens_launch_nothing():
    pos = torch.empty(0, dtype=torch.int64, device=DEVICE)
    q, k = rand(0, 4 * 64), rand(0, 2 * 64)
    assert rotary_embedding(pos, q, k, 64, cos_sin_cache(8, 64, torch.float32, DEVICE), True) == (q, k)


FAST_CASES = [((0, 4, 2, 64), ""), ((1, 1, 1, 2), ""), ((5, 7, 1, 80), "gptj"), ((4, 6, 3, 96, 24), "gptj+fused-qkv"),
              ((3, 4, 2, 64), "heads-3d"), ((5, 7, 1, 80), "nan"), ((8, 4, 2, 64), "cache-fp32")]


def test_check_passes_the_harness_on_cpu_cases():
    cases = [Case(s, torch.bfloat16, v) for s, v in FAST_CASES]
    cases += [Case(s, d, v) for d in (torch.float32, torch.float16) for s, v in FAST_CASES[2:4]]
    results = check("rotary_embedding", ["ridgeline"], cases=cases, device=DEVICE)
    assert len(results) == len(cases) and all(r.passed for r in results), [
        (r.label, r.reasons) for r in results if not r.passed]


@pytest.mark.slow
def test_check_passes_every_edge_case_of_every_dtype():
    results = check("rotary_embedding", ["ridgeline"], device=DEVICE)
    assert results and all(r.passed for r in results), [(r.label, r.reasons) for r in results if not r.passed]


# --- bad input: one line naming the argument ------------------------------------------------------------------
def _args():
    pos, q, k, cache = make(2, 4, 2, 64)
    return [pos, q, k, 64, cache, True]


@pytest.mark.parametrize("index, value, error, match", [
    (0, [0, 1], TypeError, "positions: expected a torch.Tensor"),
    (0, torch.zeros(2, device=DEVICE), TypeError, "positions: expected dtype int64 or int32"),
    (0, torch.zeros(1, 1, 2, dtype=torch.int64, device=DEVICE), ValueError, r"positions: expected shape \[T\]"),
    (1, torch.zeros(2, 256, dtype=torch.int32, device=DEVICE), TypeError, "query: expected dtype"),
    (1, torch.zeros(3, 256, device=DEVICE), ValueError, "query: leading dims"),
    (1, torch.zeros(2, 250, device=DEVICE), ValueError, "query: last dim 250 is not a positive multiple"),
    (1, torch.zeros(256, 2, device=DEVICE).t(), ValueError, "query: the last dim must be contiguous"),
    (1, torch.zeros(2, 4, 60, device=DEVICE), ValueError, r"query: expected \[..., heads, head_size=64\]"),
    (1, torch.zeros(1, 256, device=DEVICE).expand(2, 256), ValueError, "query: tokens overlap"),
    (2, torch.zeros(2, 128, dtype=torch.float16, device=DEVICE), TypeError, r"key: expected dtype float32 \(query's\)"),
    (2, torch.zeros(2, 100, device=DEVICE), ValueError, "key: last dim 100"),
    (3, 64.0, TypeError, "head_size: expected an int"),
    (3, 1, ValueError, "head_size: expected an int >= 2"),
    (4, torch.zeros(8, 63, device=DEVICE), ValueError, "cos_sin_cache: rot_dim"),
    (4, torch.zeros(8, 66, device=DEVICE), ValueError, "cos_sin_cache: rot_dim"),
    (4, torch.zeros(8, device=DEVICE), ValueError, r"cos_sin_cache: expected shape \[max_position >= 1, rot_dim\]"),
    (4, torch.zeros(8, 64, dtype=torch.int64, device=DEVICE), TypeError, "cos_sin_cache: expected dtype"),
    (4, torch.zeros(64, 8, device=DEVICE).t(), ValueError, "cos_sin_cache: the last dim must be contiguous"),
    (5, "yes", TypeError, "is_neox: expected a bool"),
])
def test_bad_input_names_the_argument(index, value, error, match):
    args = _args()
    args[index] = value
    with pytest.raises(error, match=match):
        rotary_embedding(*args)


def test_config_of_the_wrong_type_is_one_line():
    with pytest.raises(TypeError, match=r"^config: expected a RotaryConfig \(rules.py\) or None, got str$"):
        rotary_embedding(*_args(), config="token")  # (failed deep in resolve with an AttributeError)


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    import ridgeline.lib.launch as lib
    import ridgeline.ops.rotary.launch as launch

    monkeypatch.setattr(lib, "interpreter_enabled", lambda: False)
    monkeypatch.setattr(launch, "_CALLS", {})  # validated layouts are cached: validate afresh
    if DEVICE == "cpu":
        with pytest.raises(ValueError, match="query is on cpu: ridgeline's Triton kernels need a CUDA tensor"):
            rotary_embedding(*_args())
