"""Launch rules of wide rows: the split kernel (rows over 32768 columns), the chunked widths (16K-32K), the one
block of 8192 and the 4096 zones, through the kernels and the public ops (CPU interpreter, and GPU-marked)."""

import dataclasses

import pytest
import torch
from test_kernels import assert_close, rand, ref_rms
from test_rules import configs_for, run  # noqa: F401  (shared helpers)

from ridgeline.ops.rmsnorm.rules import LaunchConfig, launch_config


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
