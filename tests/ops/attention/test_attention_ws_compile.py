"""The warp-specialized attention forward (Gluon, kernel_ws.py) compiles for sm_90 without a GPU, with this
Triton and (where RIDGELINE_OLDEST_TRITON names it, as in CI) the oldest one we support; and the calls it takes.
Compiled in a child process without the CPU interpreter (Gluon's API moves between Triton releases: this is what
tells a bump broke it)."""

from __future__ import annotations

import pytest
import torch

from gluon_aot_child import compile_in_child
from ridgeline.ops.attention.launch_ws import launch_ws, ws_supported


@pytest.mark.slow
@pytest.mark.parametrize("triton_path", ["this", "oldest"])
def test_ws_forward_compiles_for_sm90(triton_path):
    # (D, causal, stages, overlap, pingpong, pairs, persistent)
    cases = ((128, True, 2, False, False, False, False), (128, False, 3, True, False, False, False),
             (64, True, 2, True, False, False, False), (128, True, 2, True, False, False, False),
             (128, True, 2, False, True, False, False), (128, True, 2, True, True, False, False),
             (256, True, 2, False, False, False, False), (128, True, 2, False, False, True, True),
             (128, False, 2, True, False, False, True), (128, True, 2, True, True, True, True))
    # packed batches (per-sequence K / V views made on the device) and sliding windows: the same forms
    packed = ((128, True, 2, True, False, False, False), (128, True, 2, False, False, True, True),
              (256, False, 2, True, False, False, False))
    windows = ((128, True, 2, True, False, False, False), (64, True, 2, False, False, True, True),
               (256, True, 2, True, False, False, False))
    runs = ([(*c, False, False) for c in cases] + [(*c, True, False) for c in packed]
            + [(*c, i == 0, True) for i, c in enumerate(windows)])
    results = compile_in_child("ridgeline.ops.attention.launch_ws",
                               f"[compile_for_sm90(d, c, s, o, pingpong=pp, pairs=pa, persistent=pe, varlen=vl, "
                               f"window=wi) for d, c, s, o, pp, pa, pe, vl, wi in {runs!r}]", triton_path)
    for (d, _causal, stages, overlap, _pingpong, pairs, persistent), r in zip(cases + packed + windows, results):
        assert r["shared"] <= 227 * 1024, (d, stages, r)  # Q + STAGES x (K + V) tiles of 128 (D = 256: 64) x D
        sass = r["sass"]
        # Per key tile each MMA warpgroup issues S = QK^T and O += PV as k16 wgmmas, the load warp TMA copies of
        # Q, K and V; the warps trade registers.
        assert sass["HGMMA"] >= 2 * d // 16 and sass["UTMALDG"] >= 3 and sass["USETMAXREG"] >= 2, (d, sass)
        if not overlap:  # S, P and O of 64 rows a warpgroup fit 232 registers
            assert r["spill_stores_bytes"] == 0 and r["spill_loads_bytes"] == 0, (d, stages, r)
            assert r["ex2_under_pv"] == 0
        elif pairs or persistent:
            # a program of several tiles carries its ring and tile counts: more spills (s29: 160-260 bytes), and
            # ptxas keeps the exp2s under PV only in some forms (the timings decide; only the compile is asserted)
            assert r["spill_stores_bytes"] <= 512, (d, r)
        elif d == 128:
            # the next tile's S beside the last tile's P and O: ptxas spills a few words (s26: 44-76 bytes) and
            # keeps a tile's exp2s (64 a thread: 64 x 128 scores over 128 threads) between the wait for S and
            # the wait for PV, which is what overlap is for
            assert r["spill_stores_bytes"] <= 128, (d, stages, r)
            assert r["ex2_under_pv"] >= 64, (d, stages, r)
        else:
            # D = 64: no spills, but ptxas (Triton 3.6 and 3.7) puts the PV wait before the exp2s: no overlap
            # there (attention.md); only that it compiles is asserted. D = 256 causal, overlapped: a few words
            # (16-20 bytes, the window's left mask included)
            assert r["spill_stores_bytes"] <= (64 if d == 256 else 0), (d, stages, r)


def test_ws_supported_is_never_taken_on_the_cpu():
    q = torch.empty(2, 256, 8, 128, dtype=torch.bfloat16)
    k = torch.empty(2, 256, 2, 128, dtype=torch.bfloat16)
    # On this CPU machine it is never taken (no sm_90); the shape rules are checked where a GPU exists.
    assert not ws_supported(q, k, k, False, -1, 0)


def test_recorded_launch_names_the_gluon_forward_where_the_rules_take_it(monkeypatch):
    """A bench record's launch config must name the kernel that ran: the Gluon forward for dense batches at the
    rules' head dims on sm_90, the Triton tile for packed batches, windows, [B, H, S, D] layouts, other head dims
    and other GPUs."""
    import ridgeline.ops.attention.launch_ws as launch_ws
    from ridgeline.core.registry import get_spec
    from ridgeline.core.spec import Case
    from ridgeline.ops.attention.rules import WS_FORWARD

    monkeypatch.setattr(launch_ws, "interpreter_enabled", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    capability = [(9, 0)]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability[0])
    spec = get_spec("attention")

    def fwd(shape, variant="causal", dtype=torch.bfloat16):
        return spec.launch_info(Case(shape, dtype, variant), "cuda:0")["fwd"]

    assert fwd((4, 4096, 32, 8, 128)) == WS_FORWARD.describe(128, True, 4096)
    assert fwd((2, 2048, 8192, 32, 8, 128)) == WS_FORWARD.describe(128, True, 8192) and "overlap" in fwd(
        (2, 2048, 8192, 32, 8, 128))  # the label follows S_k's schedule
    assert "persistent" in fwd((16, 1024, 32, 32, 128)) and "pairs" in fwd((16, 1024, 32, 32, 128))
    assert fwd((4, 4096, 32, 32, 64), "full") == WS_FORWARD.describe(64)
    assert fwd((4, 4096, 16, 16, 256)) == WS_FORWARD.describe(256, True, 4096) and "128x64" in fwd(
        (4, 4096, 16, 16, 256))
    # packed batches: the schedule of the longest sequence's keys (16384 tokens: 8192 the longest); windows: the
    # schedule of the keys a row sees (the window: 1024 keys, left 1023)
    assert (fwd((16384, 32, 8, 128)) == WS_FORWARD.describe(128, True, 8192)) == WS_FORWARD.takes(128, True, -1)
    assert fwd((16384, 32, 32, 64)).startswith("gluon") == WS_FORWARD.takes(64, True, -1)
    assert (fwd((4, 4096, 32, 8, 128), "window") == WS_FORWARD.describe(128, True, 4096, 1023) ==
            WS_FORWARD.describe(128, True, 1024)) == WS_FORWARD.takes(128, False, 1023)
    assert fwd((16384, 32, 8, 128), "window").startswith("gluon") == WS_FORWARD.takes(128, True, 0)
    assert not fwd((4, 4096, 32, 8, 128), "causal+bhsd").startswith("gluon")
    assert not fwd((4, 4096, 32, 8, 128), "window+bhsd").startswith("gluon")
    capability[0] = (8, 0)
    assert not fwd((4, 4096, 32, 8, 128)).startswith("gluon")
    assert all("gluon" not in v for v in get_spec("attention_bwd").launch_info(
        Case((4, 4096, 32, 8, 128), torch.bfloat16, "causal"), "cuda:0").values())


def test_packed_batches_refuse_programs_of_several_tiles():
    q = torch.zeros(10, 2, 128, dtype=torch.bfloat16)
    cu = torch.tensor([0, 10], dtype=torch.int32)
    for form in ({"persistent": True}, {"pairs": True}):
        with pytest.raises(ValueError, match="one query tile a program"):
            launch_ws(q, q, q, q, torch.zeros(2, 10), 1.0, True, True, cu_q=cu, cu_k=cu, max_q=10, max_k=10, **form)
