"""The launch rules: what decides the arithmetic follows N and the itemsize only; the tables' shapes."""

import pytest
import torch

from ridgeline.ops.layernorm import rules
from ridgeline.ops.layernorm.rules import Case, bwd_candidates, fwd_candidates, row_pieces

PIECES = [(5120, 256, (4096, 1024)), (4100, 256, (4096, 256)), (768, 32, (1024, 0)), (1280, 32, (1024, 256)),
          (7168, 512, (8192, 0)), (4096, 256, (4096, 0)), (1, 32, (1, 0))]


@pytest.mark.parametrize(("n", "min_piece", "expect"), PIECES)
def test_row_pieces(n, min_piece, expect):
    a, b = row_pieces(n, min_piece)
    assert (a, b) == expect and a + b >= n


@pytest.mark.parametrize("n", [1, 7, 64, 256, 257, 768, 1024, 4096, 4100, 5120, 8192, 8193, 16384, 16385, 100000])
@pytest.mark.parametrize("itemsize", [2, 4])
def test_layouts_cover_the_row_and_ignore_the_row_count(n, itemsize):
    for table, cls in ((rules.FWD_LAYOUTS, rules.FwdConfig), (rules.BWD_LAYOUTS, rules.BwdConfig)):
        cfgs = {rules.first(table, Case(n, itemsize, m=m)).apply(None, Case(n, itemsize, m=m)) for m in (1, 7, 10**6)}
        assert len(cfgs) == 1
        cfg = cfgs.pop()
        assert isinstance(cfg, cls)
        if cfg.wide:
            assert cfg.chunk >= 32
        else:
            assert cfg.block_a + cfg.block_b >= n and (cfg.block_b == 0 or cfg.block_a < n)
            assert cfg.block_b == 0 or cfg.block_b >= 32 * cfg.num_warps  # no piece over more threads than columns


def test_every_rule_says_why_and_the_last_matches_all():
    for table in (rules.FWD_LAYOUTS, rules.FWD_GRID, rules.BWD_LAYOUTS, rules.BWD_GRID, rules.BWD_REDUCE):
        assert all(r.why for r in table)
        assert table[-1].when(Case(12345, 2))


def test_backward_grid_rules_on_the_gpu():
    """Each measured grid rule where its `why` says, and nowhere else: 2 stages only on a registers row whose
    second piece is >= 1024 columns (a chunked row has no pieces; its kernel takes no stages)."""
    def grid(n, itemsize=2):
        case = Case(n, itemsize)
        layout = rules.first(rules.BWD_LAYOUTS, case).apply(None, case)
        rule = rules.first(rules.BWD_GRID, case)
        return rule.name, rule.apply(layout, case)

    assert grid(768)[0] == "narrow rows: 4 programs per SM" and grid(768)[1].programs_per_sm == 4
    assert grid(8192)[0] == "8192 columns: 1 program per SM" and grid(8192)[1].programs_per_sm == 1
    name, cfg = grid(5120)
    assert name == "pipelined second piece" and (cfg.block_b, cfg.stages, cfg.programs_per_sm) == (1024, 2, 2)
    for n in (4096, 4100, 1025, 8193, 10240, 20480, 100000):
        name, cfg = grid(n)
        assert name == "2 programs per SM" and cfg.stages == 0 and cfg.programs_per_sm == 2, (n, name, cfg)


def test_reduce_columns_spread_over_the_sms():
    cfg = rules._reduce_columns(rules.BwdConfig(4096), Case(4096, 2, sms=132))
    assert cfg.reduce_block_c == 32
    assert rules._reduce_columns(rules.BwdConfig(8192), Case(65536, 2, sms=132)).reduce_block_c == 128


def test_candidates_include_the_rule_and_are_distinct():
    for n in (768, 4096, 4100, 8192):
        f, b = fwd_candidates(n, torch.bfloat16), bwd_candidates(n, torch.bfloat16)
        assert f[0] == rules.fwd_config(n, torch.bfloat16) and b[0] == rules.bwd_config(n, torch.bfloat16)
        assert len(set(f)) == len(f) > 3 and len(set(b)) == len(b) > 3


def test_tuning_driver_records_and_summarises(monkeypatch):
    """The device script's loop on the CPU interpreter (timing stubbed): every candidate checked, a failing one
    recorded with its reason, the summary names the best config."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "scripts" / "device" / "tune_layernorm.py"
    spec = importlib.util.spec_from_file_location("tune_layernorm", path)
    tune = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tune)
    monkeypatch.setattr(tune, "DEVICE", "cpu")
    times = iter(range(1000, 0, -1))
    monkeypatch.setattr(tune, "_time", lambda fns, rep: float(next(times)))
    wrong = rules.FwdConfig(32, 0, 1, 4)  # half the row
    monkeypatch.setattr(rules, "fwd_candidates", lambda n, d: [rules.fwd_config(n, d), wrong])
    monkeypatch.setattr(rules, "bwd_candidates", lambda n, d: [rules.bwd_config(n, d)])
    rows = tune.tune_shape(4, 64, torch.float32, 1.0)
    assert [r["dir"] for r in rows] == ["fwd", "fwd", "bwd"]
    assert "us" in rows[0] and "error" in rows[1] and "us" in rows[2]
    lines = tune.summary(rows)
    assert len(lines) == 3 and "4x64" in lines[1]


def test_forward_load_policy_follows_the_l2_share_and_changes_no_bit():
    from ridgeline.ops.layernorm.launch import _forward

    l2 = 60 * 2**20
    assert rules.fwd_load_policy(4096, 4096, 2, l2) == "evict_first"  # 32 MiB of x: within 0.55 of the L2
    assert rules.fwd_load_policy(4096, 5120, 2, l2) == "evict_last"  # 40 MiB: above
    assert rules.fwd_load_policy(16384, 1024, 2, l2) == "evict_first"
    cfg = rules.fwd_config_for_call(1000, torch.float32, "evict_last")
    assert cfg is rules.fwd_config_for_call(1000, torch.float32, "evict_last")  # cached: one object a call kind
    assert cfg.load_policy == "evict_last" and "load:evict_last" in cfg.describe()
    x, w, b = torch.randn(6, 1000), torch.randn(1000), torch.randn(1000)
    outs = [_forward(x, w, b, 1e-5, True, rules.fwd_config_for_call(1000, torch.float32, p))
            for p in ("", "evict_first", "evict_last")]
    for y, mean, rstd in outs[1:]:
        assert torch.equal(y, outs[0][0]) and torch.equal(mean, outs[0][1]) and torch.equal(rstd, outs[0][2])
    torch.testing.assert_close(outs[0][0], torch.nn.functional.layer_norm(x, (1000,), w, b), atol=1e-5, rtol=1e-5)
