"""Every launch-config knob of the RMSNorm kernel computes the same op: row pieces, two-pass order and L2 hints,
persistent grids. Small rows stand in for wide ones (the interpreter is slow); the GPU sweep times the same knobs
at real sizes (scripts/explore_rmsnorm.py) and checks each result before timing it."""

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from test_kernels import assert_close, rand, ref_rms

from conftest import DEVICE
from ridgeline.ops.rmsnorm.launch import _launch
from ridgeline.ops.rmsnorm.rules import LaunchConfig, candidate_configs, launch_config, row_pieces


def run(cfg, x, w, r=None):
    """Our kernel with an explicit config on rows of x (strided rows allowed); returns (y, residual_out)."""
    m, n = x.shape
    y = torch.full((m, n), float("nan"), device=DEVICE, dtype=x.dtype)
    ro = torch.full_like(y, float("nan")) if r is not None else None
    _launch(x, x.stride(0), r, r.stride(0) if r is not None else 0, ro, n, w, y, n, m, n, 1e-6, 0.0, cfg)
    return y, ro


def configs_for(n):
    pieces = row_pieces(n)
    out = [LaunchConfig(pieces[0], True, 2, 0, *(list(pieces[1:]) + [0, 0])[:2]),
           LaunchConfig(pieces[0], True, 1, 3, *(list(pieces[1:]) + [0, 0])[:2]),
           LaunchConfig(pieces[0], True, 2, 0, *(list(pieces[1:]) + [0, 0])[:2], loop_free=True),
           LaunchConfig(pieces[0], True, 2, 0, *(list(pieces[1:]) + [0, 0])[:2], weight_first=True)]
    for rev in (False, True):
        for hints in (False, True):
            out.append(LaunchConfig(16, False, 1, 0, reverse_pass2=rev, l2_hints=hints))
    out.append(LaunchConfig(32, False, 2, 1, reverse_pass2=True, l2_hints=True))
    out.append(LaunchConfig(16, False, 1, 0, l2_hints=True, unroll=2))
    out.append(LaunchConfig(32, False, 2, 0, l2_hints=True, loop_free=True, const_n=True))
    out.append(LaunchConfig(pieces[0], True, 2, 0, *(list(pieces[1:]) + [0, 0])[:2], weight_first=True,
                            const_n=True))
    out.append(LaunchConfig(pieces[0], True, 2, 0, *(list(pieces[1:]) + [0, 0])[:2], weight_first=True,
                            stream_hints=True))
    out.append(LaunchConfig(pieces[0], True, 2, 0, *(list(pieces[1:]) + [0, 0])[:2], weight_first=True,
                            hoist_loads=True))
    return out


@pytest.mark.parametrize("n", [21, 28, 100, 515])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_config_matches_fp64_plain_and_fused(n, dtype):
    m = 5
    x = rand(m, n + 3, dtype=dtype)[:, 3:]  # strided, unaligned rows
    r = rand(m, n, dtype=dtype)
    w = 1 + 0.5 * rand(n, dtype=dtype)
    res_ref = (x.double() + r.double()).to(dtype)
    for cfg in configs_for(n):
        y, _ = run(cfg, x, w)
        assert_close(y, ref_rms(x, w), dtype)
        out, res = run(cfg, x, w, r)
        assert torch.equal(res, res_ref), cfg.describe()
        # Same config, same arithmetic: the fused output is the plain norm of residual_out, bitwise.
        assert torch.equal(out, run(cfg, res, w)[0]), cfg.describe()
        # Batch invariance per config: a row alone gives the bits it gets in the batch.
        assert torch.equal(run(cfg, x[2:3], w)[0], y[2:3]), cfg.describe()


@pytest.mark.parametrize("fused", [False, True])
def test_knobs_that_may_follow_the_batch_size_leave_the_bits_alone(fused):
    """Grid, loop and weight timing may be chosen per batch size: they must not change a single bit."""
    n = 100
    x, w = rand(9, n, dtype=torch.bfloat16), rand(n)
    r = rand(9, n, dtype=torch.bfloat16) if fused else None
    p = row_pieces(n)
    base = run(LaunchConfig(p[0], True, 2, 0, p[1], p[2]), x, w, r)
    for knobs in ({"programs_per_sm": 1}, {"loop_free": True}, {"weight_first": True},
                  {"weight_first": True, "loop_free": True}, {"stream_hints": True},
                  {"stream_hints": True, "weight_first": True}, {"const_n": True}, {"hoist_loads": True},
                  {"hoist_loads": True, "weight_first": True, "stream_hints": True}, {"stream_loads": True},
                  {"stream_loads": True, "weight_first": True, "hoist_loads": True}):
        other = run(LaunchConfig(p[0], True, 2, piece_b=p[1], piece_c=p[2], **knobs), x, w, r)
        assert all(torch.equal(a, b) for a, b in zip(base, other) if a is not None), knobs
    block = run(LaunchConfig(128, True, 2), x, w, r)  # (one masked block: hoisting moves the weight's load up)
    for knobs in ({"hoist_loads": True}, {"hoist_loads": True, "weight_first": True}, {"weight_first": True},
                  {"stream_loads": True, "weight_first": True, "hoist_loads": True}):
        other = run(LaunchConfig(128, True, 2, **knobs), x, w, r)
        assert all(torch.equal(a, b) for a, b in zip(block, other) if a is not None), knobs
    wide = [run(LaunchConfig(16, False, 1, **k), x, w, r) for k in (
        {}, {"reverse_pass2": True}, {"l2_hints": True}, {"programs_per_sm": 2, "reverse_pass2": True},
        {"unroll": 2}, {"unroll": 4, "reverse_pass2": True}, {"l2_hints": True, "unroll": 2},
        {"const_n": True}, {"const_n": True, "reverse_pass2": True, "loop_free": True})]
    assert all(torch.equal(a[0], wide[0][0]) for a in wide)


@given(st.integers(1, 1 << 20))
def test_row_pieces_cover_the_row_with_powers_of_two(n):
    pieces = row_pieces(n)
    assert 1 <= len(pieces) <= 3
    assert all(p & (p - 1) == 0 for p in pieces)
    assert list(pieces) == sorted(pieces, reverse=True)
    assert sum(pieces[:-1]) < n <= sum(pieces)  # every piece but the last lies wholly inside the row


def test_known_splits():
    assert row_pieces(4096) == (4096,)
    assert row_pieces(5120) == (4096, 1024)
    assert row_pieces(7168) == (4096, 2048, 1024)
    assert row_pieces(4100) == (4096, 4)
    assert row_pieces(5125) == (4096, 1024, 8)


@pytest.mark.parametrize("n", [1, 64, 769, 4096, 4100, 5120, 5125, 7168, 8192, 16384, 20000, 65536, 100000])
def test_candidates_fit_the_row_and_include_the_default(n):
    cands = candidate_configs(n)
    # (the tuned knobs of a default are set on top of a swept config)
    untuned = dataclasses.replace(launch_config(n, torch.bfloat16), max_registers=0, lean_zone=(0, 0),
                                  lean_max_registers=0, stream_zone=(0, 0), two_pass_zone=(0, 0),
                                  const_n_zone=(0, 0), stream_loads_zone=(0, 1 << 40))
    assert untuned in cands or n < 128  # tiny rows: the default is below the sweep
    for cfg in cands:
        if cfg.single_pass:
            assert cfg.width() >= n
            assert not cfg.piece_b or cfg.block_n <= n


def test_a_config_that_does_not_fit_is_refused():
    x, w = rand(2, 100), rand(100)
    with pytest.raises(ValueError, match="cfg: .* does not fit a row of 100 columns"):
        run(LaunchConfig(64, True, 1), x, w)
    with pytest.raises(ValueError, match="cfg: .* does not fit"):
        run(LaunchConfig(128, True, 1, 0, 32), x, w)  # the unmasked first piece would run past the row
    with pytest.raises(ValueError, match="piece_c needs piece_b"):
        LaunchConfig(64, True, 1, 0, 0, 4)
    with pytest.raises(ValueError, match="one-pass layout"):
        LaunchConfig(64, False, 1, 0, 32)


def test_row_count_rules_change_knobs_not_arithmetic():
    """config_for may pick a lean variant for some row counts: same layout and warps, so the same bits."""
    from ridgeline.ops.rmsnorm.launch import config_for

    for n in (4096, 5120, 8192):
        base = launch_config(n, torch.bfloat16)
        for m in (1, 256, 700, 1024, 1100, 4096):
            cfg = config_for(n, torch.bfloat16, m)
            assert (cfg.block_n, cfg.piece_b, cfg.piece_c, cfg.num_warps, cfg.single_pass) == (
                base.block_n, base.piece_b, base.piece_c, base.num_warps, base.single_pass)
    assert not config_for(4096, torch.bfloat16, 1024).weight_first  # 793-1056 rows: one wave only when lean
    assert config_for(4096, torch.bfloat16, 512).weight_first


def test_a_weight_wider_than_x_is_uncapped_and_loaded_late_beyond_decode_sizes():
    """fp32 weight, bf16 x: the capped weight-first config spilled on the H200 (1.8x slower at 8192)."""
    from ridgeline.ops.rmsnorm.launch import config_for

    for n in (4096, 8192):
        cfg = config_for(n, torch.bfloat16, 4096, weight_dtype=torch.float32)
        assert not cfg.weight_first and cfg.max_registers == 0
        same = config_for(n, torch.bfloat16, 4096, weight_dtype=torch.bfloat16)
        assert (cfg.block_n, cfg.num_warps) == (same.block_n, same.num_warps)  # same arithmetic
    assert config_for(8192, torch.bfloat16, 4096, weight_dtype=torch.bfloat16).max_registers == 32
    for n in (4096, 8192):  # decode sizes: loaded with x, still uncapped
        cfg = config_for(n, torch.bfloat16, 1, weight_dtype=torch.float32)
        assert cfg.weight_first and cfg.max_registers == 0


def test_the_order_of_a_rows_sum_does_not_follow_strides_or_pointer_alignment():
    """Compiled for sm_90 (no GPU needed): the register layout of the row's sum decides its rounding order.
    It must be the same for contiguous rows, rows of other strides (more or less aligned than N) and rows whose
    data starts off a 16-byte boundary, for both ops, with and without a weight."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "scripts" / "compile_configs.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile for the GPU, not interpret
    res = subprocess.run([sys.executable, str(script), "4096", "4100", "5120", "5125", "7168", "8192", "16384", "20000",
                          "24576", "40000", "65536", "--check-layouts"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]


def test_a_config_whose_unmasked_pieces_run_past_the_row_is_refused():
    x, w = rand(2, 5000), rand(5000)
    with pytest.raises(ValueError, match="does not fit a row of 5000 columns"):
        run(LaunchConfig(4096, True, 4, 0, piece_b=2048, piece_c=1024), x, w)


@pytest.mark.parametrize("n", [700, 5120, 4100, 20000])
def test_fp8_knobs_leave_the_bits_alone(n):
    """The FP8 epilogue's knobs (weight first or loaded once after the reduction, the row's max reduced with its
    sum or after it, register cap, persistent grid, two-pass grid, L2 hints) give the same bits and scales: the row
    count may choose between them."""
    from ridgeline.ops.rmsnorm.launch import config_for

    m = 5
    x, r, w = rand(m, n) * 3, rand(m, n), rand(n)
    few = config_for(n, torch.bfloat16, 8, quant=2)
    assert few.weight_first == few.single_pass == (n <= 16384)  # (wider FP8 rows keep two passes)
    assert not config_for(n, torch.bfloat16, 100000, quant=2).weight_first  # beyond one wave: weight after
    base = config_for(n, torch.bfloat16, m, fused=True, quant=2)
    knobs = [dataclasses.replace(base, weight_first=wf, max_registers=regs, programs_per_sm=per_sm,
                                 joint_max=joint, stream_hints=stream, stream_loads=loads)
             for wf in ((False, True) if base.single_pass else (False,)) for regs in (0, 64) for per_sm in (0, 1)
             for joint in ((False, True) if wf else (False,))
             for stream, loads in ((False, False), (True, False), (False, True))]
    outs = []
    for quant, scale in ((2, torch.empty(m, device=DEVICE)), (1, torch.tensor([0.01], device=DEVICE))):
        for cfg in knobs:
            y = torch.empty(m, n, device=DEVICE, dtype=torch.float8_e4m3fn)
            ro = torch.empty_like(x)
            _launch(x, n, r, n, ro, n, w, y, n, m, n, 1e-6, 0.0, cfg, quant, scale)
            outs.append((quant, y.view(torch.uint8).clone(), scale.clone(), ro))
    for quant, y, s, ro in outs:
        first = next(o for o in outs if o[0] == quant)
        assert torch.equal(y, first[1]) and torch.equal(s, first[2]) and torch.equal(ro, first[3])


@pytest.mark.parametrize("flags", [[], ["--quant", "--fused"], ["--wdtype", "fp32"],
                                   ["--stream", "--quant", "--dtype", "fp16"],
                                   ["--const-n", "--fused", "--hoist", "--shared-out", "--stream-loads"],
                                   ["--quant", "static", "--fused", "--ab-stream-loads", "--shared-out"]])
def test_explore_script_checks_every_candidate_before_timing(tmp_path, flags):
    """scripts/explore_rmsnorm.py --dry on the CPU: every focus config runs and matches the fp64 reference."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "scripts" / "explore_rmsnorm.py"
    out = tmp_path / "explore.json"
    # On the CPU even on a GPU machine: the interpreter is a CPU tool (on the H200, CUDA tensors through the
    # interpreter failed in the two-pass loop with "only 0-dimensional arrays can be converted to Python scalars").
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run([sys.executable, str(script), str(out), "--shapes", "tiny", "--dry", "--focus", *flags],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    recs = json.loads(out.read_text())
    # (--ab-stream-loads times the default and its three hint variants, deduplicated, on the one-pass shape only)
    assert len({tuple(r["shape"]) for r in recs}) == 2 and len(recs) >= (4 if "--ab-stream-loads" in flags else 5)
    assert not [r for r in recs if "error" in r], [r["error"] for r in recs if "error" in r]
    assert sum(r["default"] for r in recs) == 2  # the shipped config is among those timed, per shape


@pytest.mark.parametrize("n", [700, 5120, 4100])
def test_fp8_joint_max_reduction(n):
    """joint_max (the row's max |x * w| reduced with its sum of squares; scale = rstd * max / 448) gives the
    reference's scales and FP8 values, with and without a weight, and forces the weight first for any row count."""
    from ridgeline.ops.rmsnorm.launch import config_for

    m, bf16 = 6, torch.bfloat16
    x, r, w = rand(m, n, dtype=bf16) * 3, rand(m, n, dtype=bf16), rand(n, dtype=bf16)
    cfg = dataclasses.replace(config_for(n, torch.bfloat16, m, fused=True, quant=2), weight_first=True,
                              joint_max=True)
    for weight in (w, None):
        y = torch.empty(m, n, device=DEVICE, dtype=torch.float8_e4m3fn)
        scales, ro = torch.empty(m, device=DEVICE), torch.empty_like(x)
        _launch(x, n, r, n, ro, n, weight, y, n, m, n, 1e-6, 0.0, cfg, 2, scales)
        ref = ref_rms(ro, weight if weight is not None else torch.ones(n, device=DEVICE))
        ref_scales = ref.abs().amax(-1) / 448
        torch.testing.assert_close(scales.double(), ref_scales, rtol=1e-5, atol=0)
        got = y.double() * scales.double()[:, None]
        assert ((got - ref).abs() <= 2.0**-9 * ref_scales[:, None] + 0.07 * ref.abs()).all()
    assert torch.equal(ro, (x.double() + r.double()).to(bf16))
    joint = dataclasses.replace(launch_config(n, torch.bfloat16, True), joint_max=True)
    import ridgeline.ops.rmsnorm.rules as k
    assert k._quant(False, False)(joint, None).weight_first
    assert not k._quant(False, False)(launch_config(n, torch.bfloat16), None).weight_first
    assert k._quant(False, True)(launch_config(n, torch.bfloat16), None).joint_max


def test_joint_max_and_stream_hints_follow_the_measured_rules():
    """Where the H200 runs measured them faster (ops/rmsnorm/rules.py, JOINT_MAX_ROWS_PER_SM, STREAM_COLUMNS):
    joint_max for the plain dynamic FP8 op up to 16 rows per SM (rows of pieces: beyond one row per SM), a weight
    no wider than x; stream hints for the plain 16-bit op at 4096-5120 and 7168 columns from 8 to 32 rows per SM
    (the lean zone, below, decides first). Nowhere else. (The zones by rows per SM, `zoned_config`: where the rows
    fit the L2, `config_for` trades stream hints for stream_loads, test_stream_loads_follow_the_l2_rule.)"""
    from ridgeline.ops.rmsnorm.rules import _sm_count_hint, zoned_config

    bf16, sms = torch.bfloat16, _sm_count_hint()
    for m in (1, 128, sms, sms + 1, 16 * sms):
        cfg = zoned_config(4096, bf16, m, quant=2)
        assert cfg.joint_max and cfg.weight_first, m
        assert not zoned_config(4096, bf16, m, fused=True, quant=2).joint_max
        assert zoned_config(5120, bf16, m, quant=2).joint_max == (m > sms)  # pieces
        assert not zoned_config(4096, bf16, m, weight_dtype=torch.float32, quant=2).joint_max
    assert not zoned_config(4096, bf16, 16 * sms + 1, quant=2).joint_max
    assert not zoned_config(4096, bf16, 1, quant=1).joint_max
    for n in (4096, 5120, 4100, 7168):
        assert zoned_config(n, bf16, 8 * sms + 1).stream_hints, n
        assert zoned_config(n, torch.float16, 32 * sms).stream_hints, n
        assert not zoned_config(n, bf16, 8 * sms).stream_hints, n
        assert not zoned_config(n, bf16, 32 * sms + 1).stream_hints, n
        assert zoned_config(n, bf16, 4096, fused=True).stream_hints == (n == 4096), n  # (the chunks of 2048)
        assert zoned_config(n, bf16, 32 * sms, fused=True).stream_hints == (n == 4096), n
        assert zoned_config(n, bf16, 4096, weight_dtype=torch.float32).stream_hints == (n == 4096), n
        for quant in (1, 2):
            assert not zoned_config(n, bf16, 4096, quant=quant).stream_hints, (n, quant)
    for n in (2048, 4095, 5125, 7167, 7169, 8192, 16384):
        assert not zoned_config(n, bf16, 4096).stream_hints, n
    # (7168 columns: the one block of 8192; where the rows fit the L2 share, stream_loads replace the hints)
    from ridgeline.ops.rmsnorm.rules import config_for
    assert config_for(7168, bf16, 2048).stream_loads and config_for(7168, bf16, 4096).stream_hints
    assert not zoned_config(4096, torch.float32, 4096).stream_hints
    # The lean zone (4096 columns: 6-8 rows per SM) ends where the stream zone starts: lean there, never both.
    lean = zoned_config(4096, bf16, 8 * sms)
    assert not lean.weight_first and not lean.stream_hints


@pytest.mark.parametrize("n", [100, 515, 1024])
def test_split_kernel_with_one_program_per_row_runs_in_the_interpreter(n):
    """The interpreter runs programs one after another, so only split=1 makes progress there: it still runs the
    split kernel's whole protocol (partial slots, counters, persistent loop over more rows than groups, the
    counter reset) and its arithmetic; the exchange between programs is tested on the GPU (test_gpu_split.py)."""
    from ridgeline.ops.rmsnorm.split import chunk_for

    m = 9
    x = rand(m, n + 3)[:, 3:]
    r = rand(m, n)
    w = 1 + 0.5 * rand(n)
    for weight_first in (False, True):
        check_split_one(n, x, r, w, LaunchConfig(chunk_for(n, 1), False, 4, split=1, weight_first=weight_first))


def check_split_one(n, x, r, w, cfg):
    from ridgeline.ops.rmsnorm.split import WORKSPACE

    y, _ = run(cfg, x, w)
    assert_close(y, ref_rms(x, w), torch.float32)
    out, res = run(cfg, x, w, r)
    assert torch.equal(res, x + r)
    assert torch.equal(out, run(cfg, res, w)[0])
    assert torch.equal(run(cfg, x[4:5], w)[0], y[4:5])
    slots, sync = WORKSPACE.get(x.device, 1, cfg.split)  # (this stream's workspace, as the launch took it)
    assert int(sync.abs().sum()) == 0 and int(slots.abs().sum()) == 0  # left at 0 for the next launch


def test_wide_rows_split_on_the_gpu_and_fall_back_where_they_cannot():
    from ridgeline.ops.rmsnorm.rules import _INTERPRETED, MAX_SPLIT, config_for, two_pass_config

    assert not launch_config(20000, torch.bfloat16).split and not launch_config(32768, torch.bfloat16).split
    for n in (40000, 65536, 100001):
        cfg = launch_config(n, torch.bfloat16)
        assert cfg.split > 1 and cfg.width() >= n > cfg.block_n * (cfg.split - 1), cfg.describe()
        # The interpreter takes the two-pass kernel; on the GPU few rows load the weight with x (same bits).
        if _INTERPRETED:
            assert config_for(n, torch.bfloat16, 8) == two_pass_config(False)
        else:
            assert config_for(n, torch.bfloat16, 8).weight_first
            assert not config_for(n, torch.bfloat16, 4096).weight_first
        # The FP8 epilogues always take two passes.
        assert not config_for(n, torch.bfloat16, 8, quant=2).split
    assert not launch_config(8192 * (MAX_SPLIT + 1), torch.bfloat16).split
    assert not launch_config(16384, torch.bfloat16).split
    x, w = rand(2, 100), rand(100)
    with pytest.raises(ValueError, match="each program needs columns"):
        run(LaunchConfig(64, False, 1, split=3), x, w)
    if _INTERPRETED:
        with pytest.raises(ValueError, match="need a GPU"):
            run(LaunchConfig(64, False, 1, split=2), x, w)
    with pytest.raises(ValueError, match="not a one-pass layout"):
        LaunchConfig(64, True, 1, split=2)


def test_rows_of_16k_to_32k_columns_take_one_pass_or_two_chunks():
    """16-bit rows of 24K-32K columns (multiples of 16 bytes): two chunks of 16384 columns and 32 warps, the hidden
    size compiled in; both ops read them in two passes beyond one row per SM and in one pass up to it (the chunks
    summed elementwise: the same bits). Rows of 16K-24K columns: three chunks of 8192 and 16 warps, one pass, the
    weight after the reduction beyond one row per SM. fp32 rows, FP8 epilogues and rows off 16 bytes keep what
    they had (pieces or two passes); a weight wider than x loads after the reduction."""
    from ridgeline.ops.rmsnorm.rules import TWO_PASS_ROWS_PER_SM, _sm_count_hint, config_for, two_pass_config

    bf16, sms = torch.bfloat16, _sm_count_hint()
    for n in (24576, 32768):
        for fused in (False, True):
            one = [config_for(n, bf16, m, fused) for m in (1, TWO_PASS_ROWS_PER_SM * sms)]
            assert {(c.single_pass, c.chunk_sum, c.block_n, c.piece_b, c.piece_c, c.num_warps, c.const_n,
                     c.weight_first) for c in one} == {(True, True, 16384, 16384, 0, 32, True, True)}, n
            two = config_for(n, bf16, TWO_PASS_ROWS_PER_SM * sms + 1, fused)
            assert (two.single_pass, two.block_n, two.num_warps, two.const_n, two.l2_hints) == (
                False, 16384, 32, True, True), n
            assert config_for(n, bf16, 100000, fused) == two
        assert not config_for(n, torch.float16, 100000).single_pass
        assert config_for(n, bf16, 8, quant=2) == dataclasses.replace(two_pass_config(False), max_registers=64)
        wide = config_for(n, bf16, 100000, weight_dtype=torch.float32)
        assert wide.single_pass and wide.chunk_sum and not wide.weight_first
        assert config_for(n, torch.float32, 8) == two_pass_config(False)
    for n in (16392, 16896, 20000, 24568):
        cfgs = [config_for(n, bf16, m, fused) for m in (1, sms, sms + 1, 4096) for fused in (False, True)]
        assert {(c.single_pass, c.chunk_sum, c.block_n, c.piece_b, c.piece_c, c.num_warps, c.const_n)
                for c in cfgs} == {(True, True, 8192, 8192, 8192, 16, True)}, n
        assert config_for(n, bf16, sms).weight_first and not config_for(n, bf16, sms + 1).weight_first
        assert config_for(n, bf16, 4096, weight_dtype=torch.float32).chunk_sum
        assert not config_for(n, bf16, 8, quant=2).single_pass and not config_for(n, bf16, 8, quant=1).single_pass
    unaligned = config_for(20001, bf16, 4096)  # (rows off 16 bytes: pieces, as before)
    assert (unaligned.block_n, unaligned.piece_b, unaligned.piece_c, unaligned.chunk_sum) == (16384, 2048, 2048, False)
    odd = config_for(24577, bf16, 4096)  # (rows off 16 bytes: one pass of 16 warps, as before)
    assert odd.single_pass and not odd.chunk_sum and odd.num_warps == 16
    assert launch_config(16384, torch.float32).single_pass  # (64 KB: the widest one-pass row)
    assert not launch_config(16384, torch.float32).chunk_sum and not launch_config(8192, bf16).chunk_sum
    assert config_for(5125, bf16, 4096).weight_first  # (the weight-after rule is for rows wider than 16384)


def test_rows_of_16384_columns_take_two_chunks_of_8192_one_pass_or_two_by_row_count():
    """16-bit rows of 16384 columns: two chunks of 8192 over 16 warps, the hidden size compiled in, one pass (weight
    first) up to 2 rows per SM for the plain op and 8 for the fused one (hoisted), two passes beyond; the FP8
    epilogues keep the one block of 16384 (their joint max sums piece by piece), and fp32 rows their one block."""
    from ridgeline.ops.rmsnorm.rules import (
        TWO_CHUNK_TWO_PASS_ROWS_PER_SM,
        _sm_count_hint,
        config_for,
        register_config,
    )

    sms = _sm_count_hint()
    for dtype in (torch.bfloat16, torch.float16):
        for fused in (False, True):
            last = TWO_CHUNK_TWO_PASS_ROWS_PER_SM[fused] * sms
            ones = [config_for(16384, dtype, m, fused) for m in (1, 128, last)]
            assert {(c.single_pass, c.chunk_sum, c.block_n, c.piece_b, c.piece_c, c.num_warps, c.const_n,
                     c.weight_first, c.hoist_loads) for c in ones} == {(True, True, 8192, 8192, 0, 16, True, True,
                                                                        fused)}
            for m in (last + 1, 100000):
                two = config_for(16384, dtype, m, fused)
                assert (two.single_pass, two.block_n, two.num_warps, two.const_n) == (False, 8192, 16, True)
        for quant in (1, 2):
            for m in (1, 4096):
                q = config_for(16384, dtype, m, quant=quant)
                assert q.single_pass and q.block_n == 16384 and not q.chunk_sum and not q.hoist_loads
                assert q.num_warps == register_config(16384, dtype).num_warps
    assert TWO_CHUNK_TWO_PASS_ROWS_PER_SM == {False: 2, True: 8}
    assert config_for(16384, torch.float32, 4096) == register_config(16384, torch.float32)


def test_the_fused_op_hoists_the_loads_of_16_bit_pieces_only():
    """`hoist_loads` (every piece's loads before the first store): the fused op's 16-bit rows of pieces and chunks
    (the chunks of 2048 at 4096 columns up to 8 rows per SM, with an fp32 weight where it is loaded first); not the
    plain op (no stores to wait for), not fp32 rows (an fp32 row of 12000 columns took 78 registers instead of 64 for
    sm_90), not one block, not the FP8 epilogues (not measured)."""
    from ridgeline.ops.rmsnorm.rules import _sm_count_hint, config_for

    bf16 = torch.bfloat16
    for n in (4100, 5120, 5125, 16388, 20000):
        for m in (1, 1024, 4096):
            assert config_for(n, bf16, m, fused=True).hoist_loads, (n, m)
            assert config_for(n, torch.float16, m, fused=True).hoist_loads, (n, m)
            assert not config_for(n, bf16, m).hoist_loads, (n, m)
            assert not config_for(n, bf16, m, fused=True, quant=2).hoist_loads, (n, m)
            assert not config_for(n, bf16, m, fused=True, quant=1).hoist_loads, (n, m)
    for n in (4100, 5120, 5125, 12000):  # (fp32 rows of pieces, one pass: 12000 = 8192 + 2048 + 2048)
        cfg = config_for(n, torch.float32, 4096, fused=True)
        assert cfg.single_pass and cfg.piece_b and not cfg.hoist_loads, n
        assert not config_for(n, bf16, 1, fused=True, weight_dtype=torch.float32).hoist_loads, n  # (fp32 weight)
    for n in (7168, 8192):
        assert not config_for(n, bf16, 4096, fused=True).hoist_loads, n
    sms = _sm_count_hint()
    for m, hoisted in ((1, True), (8 * sms, True), (8 * sms + 1, False), (4096, False)):
        assert config_for(4096, bf16, m, fused=True).hoist_loads == hoisted, m
    for m, hoisted in ((1, True), (2 * sms, True), (2 * sms + 1, False), (9 * sms, False)):  # (fp32 weight)
        assert config_for(4096, bf16, m, fused=True, weight_dtype=torch.float32).hoist_loads == hoisted, m
        assert not config_for(4096, bf16, m, weight_dtype=torch.float32).hoist_loads, m


def test_the_one_block_of_8192_columns_compiles_in_its_hidden_size_where_measured_faster():
    """const_n on the one block of 8192 16-bit columns: the fused op at every row count, the plain op from 2 rows per
    SM (graph-hot below, it cost 0.01-0.08 us); not the FP8 epilogues or an fp32 weight (not measured)."""
    from ridgeline.ops.rmsnorm.rules import _sm_count_hint, config_for

    sms = _sm_count_hint()
    for dtype in (torch.bfloat16, torch.float16):
        for m in (1, 16, 2 * sms, 2 * sms + 1, 1024, 100000):
            fused = config_for(8192, dtype, m, fused=True)
            assert fused.const_n and fused.max_registers == 32 and fused.block_n == 8192, m
            plain = config_for(8192, dtype, m)
            assert plain.const_n == (m > 2 * sms), m
            # (otherwise the same launch, but for L2 hints: the plain op's stream_loads start beyond 2 rows per SM)
            assert dataclasses.replace(plain, const_n=True, stream_loads=fused.stream_loads,
                                       stream_loads_zone=fused.stream_loads_zone) == fused
            for quant in (1, 2):
                assert not config_for(8192, dtype, m, fused=True, quant=quant).const_n
            assert not config_for(8192, dtype, m, fused=True, weight_dtype=torch.float32).const_n
            assert not config_for(8192, dtype, m, weight_dtype=torch.float32).const_n
    assert not config_for(8192, torch.float32, 4, fused=True).const_n
    assert not config_for(8192, torch.float32, 100000).const_n


def test_rows_of_4096_columns_follow_the_measured_zones():
    """4096 16-bit columns: two chunks of 2048 over 8 warps for both ops and every row count (one pass up to 32 rows
    per SM, two beyond: the same bits); the weight first up to 6 rows per SM, after it to 8, stream hints from 8 to 32;
    the hidden size compiled in for the fused op and for the plain one from 6 rows per SM; the fused op's loads
    hoisted up to 8 rows per SM. fp32 rows and the FP8 epilogues keep the one block. (`zoned_config`: before the L2
    rule.)"""
    from ridgeline.ops.rmsnorm.rules import _sm_count_hint, register_config, two_pass_of, zoned_config

    sms = _sm_count_hint()
    for dtype in (torch.bfloat16, torch.float16):
        for fused in (False, True):
            layout = launch_config(4096, dtype, fused)
            assert (layout.block_n, layout.piece_b, layout.num_warps, layout.chunk_sum) == (2048, 2048, 8, True)
            expect = {1: (True, fused, fused, False), 6 * sms: (True, fused, fused, False),
                      6 * sms + 1: (False, True, fused, False), 8 * sms: (False, True, fused, False),
                      8 * sms + 1: (True, True, False, True), 32 * sms: (True, True, False, True)}
            for m, (first, const_n, hoist, stream) in expect.items():
                cfg = zoned_config(4096, dtype, m, fused)
                assert cfg.single_pass and (cfg.block_n, cfg.piece_b, cfg.num_warps) == (2048, 2048, 8), (m, fused)
                assert (cfg.weight_first, cfg.const_n, cfg.hoist_loads, cfg.stream_hints) == (
                    first, const_n, hoist, stream), (m, fused)
            for m in (32 * sms + 1, 100000):
                assert zoned_config(4096, dtype, m, fused) == two_pass_of(layout), (m, fused)
            for quant in (1, 2):
                for m in (1, 7 * sms, 100000):
                    q = zoned_config(4096, dtype, m, fused, quant=quant)
                    assert q.block_n == 4096 and not q.chunk_sum and not q.hoist_loads, (m, fused, quant)
    assert zoned_config(4096, torch.float32, 100000) == register_config(4096, torch.float32)
    # An fp32 weight: the same zones of stream hints and two passes (the weight after the reduction from 2 rows per SM)
    wide = {m: zoned_config(4096, torch.bfloat16, m, weight_dtype=torch.float32)
            for m in (1, 7 * sms, 9 * sms, 40 * sms)}
    assert wide[1].weight_first and not wide[1].stream_hints and wide[1].chunk_sum
    assert not wide[7 * sms].weight_first and not wide[7 * sms].stream_hints
    assert wide[9 * sms].stream_hints and not wide[9 * sms].weight_first and wide[9 * sms].max_registers == 0
    assert not wide[40 * sms].single_pass and wide[40 * sms].block_n == 2048
    assert zoned_config(16384, torch.bfloat16, 40 * sms, weight_dtype=torch.float32).single_pass
    assert not wide[9 * sms].const_n  # (the plain op's: as measured, N at run time)
    fused = {m: zoned_config(4096, torch.bfloat16, m, True, weight_dtype=torch.float32) for m in (1, 9 * sms, 40 * sms)}
    assert fused[1].weight_first and fused[1].const_n and fused[1].hoist_loads
    assert fused[9 * sms].stream_hints and fused[9 * sms].const_n and not fused[9 * sms].hoist_loads
    assert fused[40 * sms] == wide[40 * sms]  # (the same two-pass kernel for both ops)


@pytest.mark.parametrize("n", [16384, 16392, 24568, 24576])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rows_at_the_edges_of_the_chunked_widths_through_the_public_ops(n, dtype):
    """The public ops where the chunked layouts begin and change (16384: two chunks of 8192; 16392: a third chunk of
    8192 holding 8 columns; 24568 / 24576: the last width of three chunks of 8192 and the first of two of 16384): right
    against float64, residual_out exact, the fused op's out the plain op's bits on it, a row alone the bits it gets in
    the batch, and a given `out` (poisoned) fully written."""
    from ridgeline import fused_add_rms_norm, rms_norm
    from ridgeline.ops.rmsnorm.rules import config_for

    assert config_for(n, dtype, 3).chunk_sum
    m = 3
    x, r, w = rand(m, n, dtype=dtype), rand(m, n, dtype=dtype), rand(n, dtype=dtype)
    y = torch.full_like(x, float("nan"))
    rms_norm(x, w, out=y)
    assert_close(y, ref_rms(x, w), dtype)
    assert torch.equal(rms_norm(x[1:2], w), y[1:2])
    out, res = fused_add_rms_norm(x, r, w)
    assert torch.equal(res, (x.double() + r.double()).to(dtype))
    assert torch.equal(out, rms_norm(res, w))


@pytest.mark.parametrize("n", [4096, 8192, 16384, 20000, 24576])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunk_sum_one_pass_gives_the_two_pass_bits(n, dtype):
    """Rows read as equal chunks (two of 2048 columns at 4096, of 4096 at 8192, of 8192 at 16384, three at 20000, two of
    16384 at 24576; the first two for the explore script only): one pass and two must give every bit alike,
    weight first or after, second pass reversed or not, the hidden size compiled in or not (`rstd_of`: a division
    by a constant N compiled otherwise than by a run-time one, on the H200), and the fused op's out the plain
    op's bits on residual_out.
    float32 rows show any change in the order of the sum in every output (bf16 outputs round most of it away): with the
    pieces reduced one by one instead (chunk_sum off) this test fails."""
    from ridgeline.ops.rmsnorm.rules import chunked_candidates

    m = 16
    x, r, w = rand(m, n, dtype=dtype), rand(m, n, dtype=dtype), rand(n, dtype=dtype)
    cands = chunked_candidates(n)
    assert {c.single_pass for c in cands} == {True, False} and all(c.const_n for c in cands[:4])
    cands.append(dataclasses.replace(cands[-1], const_n=False))
    cands += [dataclasses.replace(cands[i], hoist_loads=True) for i in (0, 1)]  # (fused: loads before stores)
    outs = [run(cfg, x, w)[0] for cfg in cands]
    assert all(torch.equal(o, outs[0]) for o in outs), [c.describe() for c, o in zip(cands, outs)
                                                        if not torch.equal(o, outs[0])]
    assert_close(outs[0], ref_rms(x, w), dtype)
    for cfg in cands:
        out, res = run(cfg, x, w, r)
        assert torch.equal(out, run(cands[0], res, w)[0]), cfg.describe()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [16384, 16896, 20000, 24576, 32768])
@pytest.mark.parametrize("m", [600, 1100])
def test_rows_of_16k_to_32k_columns_are_batch_invariant_across_the_two_pass_zone(n, m):
    """Through the public ops on the GPU: 600 and 1100 rows (two passes from 24576 columns, and at 16384 for the plain
    op from 265 rows and the fused one from 1057) give each row the bits it gets alone (one pass), and the fused op's
    out equals the plain op on its residual_out."""
    from ridgeline import fused_add_rms_norm, rms_norm

    x, r, w = rand(m, n, dtype=torch.bfloat16), rand(m, n, dtype=torch.bfloat16), rand(n, dtype=torch.bfloat16)
    full = rms_norm(x, w)
    for i in (0, 137, m - 1):
        assert torch.equal(rms_norm(x[i:i + 1], w), full[i:i + 1]), i
    out, res = fused_add_rms_norm(x, r, w)
    assert torch.equal(out, rms_norm(res, w))
    assert torch.equal(fused_add_rms_norm(x[5:6], r[5:6], w)[0], out[5:6])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rows_of_4096_columns_are_batch_invariant_across_their_zones(dtype):
    """Through the public ops on the GPU: 700 rows (the weight first), 1000 (lean), 2000 (stream hints) and 5000 (two
    passes) give each row the bits it gets alone (one pass, weight first), and the fused op's out equals the plain op
    on its residual_out; with the weight in x's dtype or in fp32."""
    from ridgeline import fused_add_rms_norm, rms_norm

    for w in (rand(4096, dtype=dtype), rand(4096, dtype=torch.float32)):
        for m in (700, 1000, 2000, 5000):
            x, r = rand(m, 4096, dtype=dtype), rand(m, 4096, dtype=dtype)
            full = rms_norm(x, w)
            assert_close(full, ref_rms(x, w), dtype)
            for i in (0, 137, m - 1):
                assert torch.equal(rms_norm(x[i:i + 1], w), full[i:i + 1]), (m, i, w.dtype)
            out, res = fused_add_rms_norm(x, r, w)
            assert torch.equal(out, rms_norm(res, w)), (m, w.dtype)
            assert torch.equal(fused_add_rms_norm(x[5:6], r[5:6], w)[0], out[5:6]), (m, w.dtype)


def _ptx_for_sm90(loop: str) -> list[str]:
    """PTX compiled ahead of time for sm_90 (no GPU needed), in a fresh process without the CPU interpreter:
    `loop` is Python that calls emit(text, launch) once per kernel (launch from compile_configs.launch_for); each
    kernel's text and PTX come back in order."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, torch; sys.path.insert(0, 'scripts')\n"
        "from compile_configs import launch_for\n"
        "from ridgeline.profile import aot_compile\n"
        "from ridgeline.ops.rmsnorm.launch import config_for, launch_config\n"
        "def emit(text, launch):\n"
        "    print(text, aot_compile(launch).asm['ptx'])\n"
        "    print('=====')\n"
        + loop
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile for the GPU, not interpret
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.split("=====")[:-1]


def test_split_kernel_publishes_its_partial_from_the_thread_that_releases_it():
    """The exchange is right only if the partial's store and the release add are issued by the same thread (PTX
    orders them by program order): compiled for sm_90, both must carry the same predicate, and the acquire spin
    must stay inside the row loop."""
    import re

    ptxs = _ptx_for_sm90("for fused in (False, True):\n"
                         "    emit(fused, launch_for(65536, launch_config(65536, torch.bfloat16, fused), fused))\n")
    assert len(ptxs) == 2
    for ptx in ptxs:
        store = re.search(r"@(%p\d+) st\.global\.b32 \[ %rd\d+ \+ 0 \], \{ %r\d+ \};\s*\n[^@]*"
                          r"@(%p\d+) atom\.global\.gpu\.release\.add", ptx)
        assert store and store.group(1) == store.group(2), "partial store and release add on different predicates"
        assert "ld.global.gpu.acquire" in ptx or "atom.global.gpu.acquire" in ptx


def test_stream_hints_reach_the_compiled_kernel():
    """The CPU interpreter ignores eviction policies, so the bit tests cannot see them: compiled for sm_90, a config
    of the stream zone loads rows evict_first and the weight evict_last and stores evict_first; one that `config_for`
    gives stream_loads (outputs that fit the L2) loads the same way and stores without a policy; one with neither
    (outputs beyond the L2 share, outside the zone) carries no policy."""
    import re

    hinted, loads, plain = _ptx_for_sm90(
        "from ridgeline.ops.rmsnorm.rules import zoned_config\n"
        "hinted = zoned_config(4096, torch.bfloat16, 4096)\n"
        "emit(hinted.stream_hints and not hinted.stream_loads, launch_for(4096, hinted, False))\n"
        "for m in (1024, 4096):\n"
        "    cfg = config_for(8192, torch.bfloat16, m)\n"
        "    emit(cfg.stream_loads and not cfg.stream_hints, launch_for(8192, cfg, False))\n")
    assert [t.strip().split()[0] for t in (hinted, loads, plain)] == ["True", "True", "False"]
    accesses = {name: set(re.findall(r"(?:ld|st)\.global[\w:.]*", ptx))
                for name, ptx in (("h", hinted), ("l", loads), ("p", plain))}
    first_load = "ld.global.L1::evict_first.L2::cache_hint.v4.b32"
    last_load = "ld.global.L1::evict_last.L2::cache_hint.v4.b32"
    assert {first_load, last_load, "st.global.L1::evict_first.L2::cache_hint.v4.b32"} <= accesses["h"], accesses["h"]
    assert {first_load, last_load} <= accesses["l"], accesses["l"]
    assert not [a for a in accesses["l"] if a.startswith("st") and "evict" in a], accesses["l"]
    assert not [a for a in accesses["p"] if "evict" in a], accesses["p"]


def test_old_interpreters_convert_loop_bounds_as_triton_3_7_does():
    """Triton 3.6's interpreter turned a loop bound into an int with int(1-element array), which NumPy 2.4
    refuses: the shim (installed when TRITON_INTERPRET is set) squeezes first, once, however often it runs."""
    import numpy as np
    from triton.runtime import interpreter

    from ridgeline.lib.launch import _scalar_loop_bounds_in_old_interpreters

    _scalar_loop_bounds_in_old_interpreters()
    patched = interpreter._patch_lang_tensor
    _scalar_loop_bounds_in_old_interpreters()
    assert interpreter._patch_lang_tensor is patched and patched.ridgeline_squeezes_index

    class Scope:  # records what the interpreter's patch scope would set, in order
        def __init__(self):
            self.attrs, self.names = {}, []

        def set_attr(self, obj, name, value):
            self.attrs[name] = value
            self.names.append(name)

    class Handle:
        data = np.array([7], dtype=np.int32)

    class Tensor:
        handle = Handle()

    scope = Scope()
    patched(Tensor, scope)
    assert scope.names.count("__index__") == 2  # Triton's own conversion, then the squeezing one over it
    assert scope.attrs["__index__"](Tensor()) == 7


def test_stream_loads_follow_the_l2_rule():
    """One pass takes stream_loads (and drops stream hints) while the rows the call reads fit in
    STREAM_LOADS_L2_SHARE of the L2, FP8 epilogues included; nothing else of the zoned config changes. Not two
    passes, split rows, beyond the share, nor the plain op's one block of 8192 up to 2 rows per SM (lost at graph-hot
    decode rows)."""
    from ridgeline.ops.rmsnorm.rules import (
        STREAM_LOADS_L2_SHARE,
        _l2_bytes_hint,
        _sm_count_hint,
        config_for,
        zoned_config,
    )

    limit, sms = STREAM_LOADS_L2_SHARE * _l2_bytes_hint(), _sm_count_hint()
    seen = set()
    for n in (4096, 4100, 5120, 5125, 7168, 8192, 16384, 20000, 32768, 65536, 700):
        for m in (1, 16, 128, 1024, 1500, 2048, 4096, 16384):
            for dtype in (torch.bfloat16, torch.float16, torch.float32):
                for fused in (False, True):
                    for wdtype, quant in ((None, 0), (torch.float32, 0), (None, 1), (None, 2)):
                        zoned = zoned_config(n, dtype, m, fused, wdtype, quant)
                        cfg = config_for(n, dtype, m, fused, wdtype, quant)
                        fits = m * n * dtype.itemsize * (2 if fused else 1) <= limit
                        # (the plain op's one block of 8192: only beyond 2 rows per SM, where decode is not)
                        zone = not (n == 8192 and not fused and dtype.itemsize == 2 and m <= 2 * sms)
                        want = zoned.single_pass and fits and zone
                        assert cfg.stream_loads == want, (n, m, dtype, fused, wdtype, quant)
                        if want:
                            assert not cfg.stream_hints
                            assert cfg == dataclasses.replace(zoned, stream_loads=True, stream_hints=False)
                        else:
                            assert cfg == zoned
                        seen.add((want, zoned.stream_hints))
    assert seen == {(True, True), (True, False), (False, True), (False, False)}  # every case was reached
    # The measured edges on the H200 (60 MiB L2): 32 MiB of outputs gained, 39-40 MiB lost.
    if _l2_bytes_hint() == 60 * 2**20:
        assert config_for(4096, torch.bfloat16, 4096).stream_loads  # 32 MiB
        assert config_for(8192, torch.bfloat16, 1024, fused=True).stream_loads  # 32 MiB
        assert not config_for(20000, torch.bfloat16, 1024).stream_loads  # 39 MiB
        assert not config_for(5120, torch.bfloat16, 2048, fused=True).stream_loads  # 40 MiB
        # FP8 (session 12): 32 MiB read gained (4096x4096, fused 2048x4096), 64 MiB read did not (fused 4096x4096)
        for quant in (1, 2):
            assert config_for(4096, torch.bfloat16, 4096, quant=quant).stream_loads
        assert config_for(4096, torch.bfloat16, 2048, fused=True, quant=2).stream_loads
        assert not config_for(4096, torch.bfloat16, 4096, fused=True, quant=2).stream_loads
        assert not config_for(8192, torch.bfloat16, 4096, quant=1).stream_loads


def test_the_rule_tables_give_the_configs_of_c371f09s_branches_in_every_golden_case():
    """tests/data/rmsnorm_rules_golden.json.gz (tests/ops/rmsnorm/rules_golden.py, generated from c371f09's rules.py,
    the 37 branches): every field of the config the tables resolve, for every case enumerated there (widths and row
    counts at every threshold of the old rules +-1, dtypes, ops, weights, FP8 epilogues, 132 and 20 SMs, GPU and
    interpreter), and every rule of every table decides at least one of them."""
    import collections

    import rules_golden as golden

    from ridgeline.ops.rmsnorm import rules

    data = golden.load()
    assert data["fields"] == [f.name for f in dataclasses.fields(LaunchConfig)]
    configs, hits, differ, cases = data["configs"], collections.Counter(), [], 0
    for sms, interp, dname, fused, wname, quant, n, ms, idx in data["groups"]:
        dtype, wdtype = golden.DTYPES[dname], golden.WEIGHTS[wname]
        for m, i in zip(ms, idx):
            case = rules.Case.of(n, dtype, m, fused, wdtype, quant, sms=sms, interpreted=interp,
                                 l2_bytes=golden.L2_BYTES)
            cfg, decided = rules.trace(case)
            cases += 1
            hits.update(r.name for r in decided)
            if golden.fields(cfg) != configs[i] and len(differ) < 10:
                differ.append((case, cfg.describe(), configs[i]))
    assert cases > 600000 and not differ, differ
    unused = [r.name for t in (rules.LAYOUTS, rules.CALLS, rules.HINTS) for r in t if not hits[r.name]]
    assert not unused, unused
