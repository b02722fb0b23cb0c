"""The softmax launch rules: layouts from the width, dtype and direction only; the grid and the groups of split
rows from the row count (which changes no bit)."""

import dataclasses

import pytest
import torch

from ridgeline.ops.softmax import rules
from ridgeline.ops.softmax.rules import LAYOUTS, MAX_GRID, Case, LaunchConfig, grid_for, s_block, split_plan

MiB = 2**20
WIDE = (65536, 128256, 151936, 262144)  # the H200 sweep's split rows


def layout(n, itemsize=2, bwd=False):
    return rules._first_layout(Case(n, itemsize, bwd))


def test_every_gpu_rule_is_reached_and_the_limits_hold():
    names = {rules.rule_for(Case(n, 2, bwd)).name for n in (1, 100, 4096, 32768, 40000) for bwd in (False, True)}
    assert names == {r.name for r in LAYOUTS} - {"interpreter"}
    assert layout(32768).one_pass and not layout(32769).one_pass  # 64 KB of 16-bit columns forward
    assert layout(32768, bwd=True).one_pass and not layout(32769, bwd=True).one_pass  # backward: 64 KB too (s17)
    assert layout(32768, bwd=True).num_warps == 32 and layout(16384, bwd=True).num_warps == 16
    assert layout(16384, 4).one_pass and not layout(16385, 4).one_pass  # fp32: 64 KB too


def test_split_rows_cut_16_kb_chunks_whatever_the_rows():
    for n in (32769, *WIDE):
        for itemsize in (2, 4):
            for bwd in (False, True):
                cfg = layout(n, itemsize, bwd)
                assert not cfg.one_pass and cfg.block * itemsize == rules.SPLIT_CHUNK_BYTES
                assert cfg.group_bytes == rules.SPLIT_GROUP_BYTES and cfg.reverse
                # The chunks of a row follow n only: the same for 1 row as for 10^5.
                assert {split_plan(m, n, itemsize, cfg, bwd)[0] for m in (1, 7, 64, 100000)} == {-(-n // cfg.block)}
    assert [split_plan(1, n, 2, layout(n))[0] for n in WIDE] == [8, 16, 19, 32]
    assert [s_block(n, layout(n)) for n in WIDE] == [16, 16, 32, 32]


def test_split_groups_keep_a_group_within_the_budget_and_balanced():
    assert rules.SPLIT_GROUP_BYTES == 0 and split_plan(512, 65536, 2, layout(65536)) == (8, 512)  # the rule: one
    cfg = dataclasses.replace(layout(65536), group_bytes=32 * 2**20)  # the groups the tuning driver still times
    assert split_plan(512, 65536, 2, cfg) == (8, 256)  # 64 MiB of input: two groups of 32 MiB
    def grouped(n, bwd=False):
        return dataclasses.replace(layout(n, bwd=bwd), group_bytes=32 * 2**20)

    assert split_plan(256, 128256, 2, grouped(128256)) == (16, 128)  # 62.6 MiB: two groups
    assert split_plan(128, 151936, 2, grouped(151936)) == (19, 64)  # 37.1 MiB: two groups of 64 rows, not 110 + 18
    assert split_plan(64, 262144, 2, grouped(262144)) == (32, 64)  # 32 MiB: one group
    assert split_plan(256, 128256, 2, grouped(128256, bwd=True), bwd=True) == (16, 64)  # y and dy: 125 MiB, four
    assert split_plan(3, 65536, 2, cfg) == (8, 3)
    one_group = LaunchConfig(False, 8192, 8)
    assert split_plan(10**6, 65536, 2, one_group) == (8, 10**6)
    assert split_plan(10**9, 65536, 2, one_group)[1] * 8 <= MAX_GRID  # a launch's grid stays legal
    for m in range(1, 600, 37):  # groups cover the rows, none over the budget (beyond one row)
        chunks, rows = split_plan(m, 65536, 2, cfg)
        assert rows <= m and (rows * 65536 * 2 <= cfg.group_bytes or rows == 1)


def test_grid_follows_rows(monkeypatch):
    dev = torch.device("cuda", 0)
    monkeypatch.setattr(rules, "_INTERPRETED", False)
    one = LaunchConfig(True, 4096, 8)
    assert grid_for(5000, 4096, 2, one, dev) == 5000
    assert grid_for(0, 4096, 2, one, dev) == 0
    assert grid_for(100, 100, 2, LaunchConfig(True, 128, 4, rows=16), dev) == 7
    monkeypatch.setattr(rules, "multiprocessor_count", lambda device: 132)
    persistent = LaunchConfig(True, 4096, 8, programs_per_sm=4)
    assert grid_for(5000, 4096, 2, persistent, dev) == 4 * 132  # a persistent grid walks the 5000 rows
    assert grid_for(100, 4096, 2, persistent, dev) == 100  # never more programs than rows
    assert grid_for(512, 65536, 2, layout(65536), dev) == 512 * 8  # one group (the rule): (row, chunk) each
    grouped = dataclasses.replace(layout(262144), group_bytes=32 * MiB)
    assert grid_for(64, 262144, 2, grouped, dev, bwd=True) == 32 * 32  # 64 MiB of y + dy: two groups
    assert grid_for(1, 128256, 2, layout(128256), dev) == 16  # one row still spreads over 16 programs
    assert grid_for(0, 128256, 2, layout(128256), dev) == 0


def test_config_is_checked_cached_and_describes_itself():
    a = rules.config_for(128256, 2)
    assert a is rules.config_for(128256, 2)
    assert "split" in a.describe() or "1-pass" in a.describe()
    assert layout(128256).describe() == "split CHUNK=8192 warps=8 one group reverse"
    for bad, message in ((dict(block=3000), "power of two"), (dict(piece_b=512), "one-pass layout"),
                         (dict(rows=2), "one-pass layout")):
        with pytest.raises(ValueError, match=message):
            LaunchConfig(False, **{"block": 4096, "num_warps": 4, **bad})
    with pytest.raises(ValueError, match="split-row layout"):
        LaunchConfig(True, 4096, 4, group_bytes=MiB)


def test_the_read_once_split_is_a_split_layout_without_groups():
    cfg = LaunchConfig(False, 8192, 8, coop=True)
    assert cfg.describe() == "coop CHUNK=8192 warps=8"
    assert LaunchConfig(False, 8192, 8, coop=True, prefetch=True).describe() == "coop CHUNK=8192 warps=8 prefetch"
    with pytest.raises(ValueError, match="prefetch"):
        LaunchConfig(False, 8192, 8, prefetch=True)
    with pytest.raises(ValueError, match="coop"):
        LaunchConfig(True, 8192, 8, coop=True)
    with pytest.raises(ValueError, match="group_bytes must be 0"):
        LaunchConfig(False, 8192, 8, group_bytes=MiB, coop=True)
    dev = torch.device("cpu")  # 4 SMs under the interpreter, 4 programs each assumed before a compile
    # 32 chunks a row cannot all be resident on 16 programs: the two-kernel split's grid, a program per chunk
    assert grid_for(64, 262144, 2, cfg, dev) == 64 * 32
    assert grid_for(64, 32768, 2, cfg, dev) == 4 * 4  # 4 groups of 4 chunks
    assert grid_for(2, 32768, 2, cfg, dev) == 4 * 2  # no more groups than rows
