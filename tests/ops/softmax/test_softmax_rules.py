"""The softmax launch rules: layouts from the width, dtype and direction only; the grid from the row count."""

import torch

from ridgeline.ops.softmax import rules
from ridgeline.ops.softmax.rules import LAYOUTS, Case, LaunchConfig, grid_for


def layout(n, itemsize=2, bwd=False):
    return rules._first_layout(Case(n, itemsize, bwd))


def test_every_gpu_rule_is_reached_and_the_limits_hold():
    names = {rules.rule_for(Case(n, 2, bwd)).name for n in (1, 100, 4096, 32768, 40000) for bwd in (False, True)}
    assert names == {r.name for r in LAYOUTS} - {"interpreter"}
    assert layout(32768).one_pass and not layout(32769).one_pass  # 64 KB of 16-bit columns forward
    assert layout(16384, bwd=True).one_pass and not layout(16385, bwd=True).one_pass  # two rows backward
    assert layout(16384, 4).one_pass and not layout(16385, 4).one_pass  # fp32: 64 KB too


def test_unaligned_rows_take_two_pieces_when_they_save_lanes():
    cfg = layout(4100)
    assert (cfg.block, cfg.piece_b) == (4096, 256) and cfg.width() >= 4100
    assert layout(7168).piece_b == 0  # 4096 + 4096 saves nothing over one 8192 block
    assert layout(6000).piece_b == 2048 and layout(6500).piece_b == 0  # over a quarter idle, under
    for n in range(1025, 32768, 997):  # every layout covers its row, the second piece no narrower than its threads
        c = layout(n)
        assert c.width() >= n and (not c.piece_b or (c.piece_b >= 32 * c.num_warps and c.block < n))


def test_grid_follows_rows_and_the_l2_budget(monkeypatch):
    dev, sms = torch.device("cuda", 0), 132
    monkeypatch.setattr(rules, "multiprocessor_count", lambda d: sms)  # (no GPU here)
    monkeypatch.setattr(rules, "_INTERPRETED", False)
    one = LaunchConfig(True, 4096, 8)
    assert grid_for(5000, 4096, 2, one, dev) == 5000
    assert grid_for(0, 4096, 2, one, dev) == 0
    assert grid_for(100, 100, 2, LaunchConfig(True, 128, 4, rows=16), dev) == 7
    two = LaunchConfig(False, 8192, 16, programs_per_sm=2, l2_budget=12 * 2**20)
    assert grid_for(256, 128256, 2, two, dev) == (12 * 2**20) // (128256 * 2)  # 49 rows of 256 KB in flight
    assert grid_for(64, 262144, 2, two, dev, bwd=True) == int(0.25 * sms)  # the floor: a quarter of the SMs
    assert grid_for(100000, 2048, 2, two, dev) == 2 * sms  # narrow enough: programs per SM cap it
    assert grid_for(256, 128256, 2, LaunchConfig(False, 8192, 16), dev) == 256  # plain: one program per row


def test_config_is_cached_and_describes_itself():
    a = rules.config_for(128256, 2)
    assert a is rules.config_for(128256, 2)
    assert "2-pass" in a.describe() or "1-pass" in a.describe()
