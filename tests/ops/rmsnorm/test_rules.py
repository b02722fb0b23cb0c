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
    # (one width of each kind: a power of two, 4 and 5 off one, a wide odd row, the two-pass widths; s40 dropped
    # four more of the same kinds to keep the suite's time)
    res = subprocess.run([sys.executable, str(script), "4096", "4100", "5125", "8192", "20000", "40000", "65536",
                          "--check-layouts"],
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
