"""The GEMM's tails (ops/matmul/tails.py): the planner's cuts on the GPU's rule table (132 SMs), and launches cut
into pieces giving the single launch's bits under the interpreter (forced plans: the interpreter's rules never
cut)."""

from __future__ import annotations

import pytest
import torch

from ridgeline.core import registry
from ridgeline.ops.matmul import launch, rules, tails
from ridgeline.ops.matmul.launch import matmul_2d
from ridgeline.ops.matmul.profile import gpu_rules
from ridgeline.ops.matmul.spec import matmul_tolerance, reference_matmul
from ridgeline.ops.matmul.tails import Piece


def _covers_once(pieces, m: int, n: int) -> bool:
    hits = torch.zeros(m, n, dtype=torch.int32)
    for p in pieces:
        hits[p.r0:p.r1, p.c0:p.c1] += 1
    return bool((hits == 1).all())


def test_planner_cuts_on_the_gpu_rules(monkeypatch):
    with gpu_rules(registry.get_spec("matmul"), 132):
        big, alt = rules.RULES[-1].config, rules.RULES[-1].alternative
        # 320 tiles of 128x256 are 2.4 waves: 33 columns of tiles (2 waves) on them, 1792 columns on 128x128
        cut = tails.plan(1024, 10240, 8192, 132, force=True)
        assert cut == (Piece(0, 1024, 0, 8448, big), Piece(0, 1024, 8448, 10240, alt))
        # one row past a full wave: that row on the rules for one row
        for m in (1025, 2049, 3073):
            cut = tails.plan(m, 4096, 4096, 132, force=True)
            assert cut[-1] == Piece(m - 1, m, 0, 4096, None) and cut[0].r1 == m - 1, cut
        # whole waves, less than one, or below TAILS_FROM_M: one launch
        for shape in ((1024, 4096, 4096), (4096, 4096, 4096), (8192, 8192, 8192), (768, 4096, 4096),
                      (512, 4096, 4096), (1024, 28672, 4096)):
            assert tails.plan(*shape, 132, force=True) is None, shape
        # a wide weight: one more read of it costs more than the wave its extra row adds
        assert tails.plan(1025, 28672, 4096, 132, force=True) is None
        for shape in ((1024, 10240, 8192), (1025, 4096, 4096), (1281, 4096, 4096), (1536, 4096, 4096),
                      (2049, 10240, 8192), (3000, 6144, 4096)):
            cut = tails.plan(*shape, 132, force=True)
            if cut is not None:
                assert _covers_once(cut, shape[0], shape[1]), shape
        # the compute-bound rule cuts (measured, s39) and only it; the launch record names the pieces
        assert [r.tails for r in rules.RULES] == [False] * (len(rules.RULES) - 1) + [True]
        assert tails.plan(1024, 10240, 8192, 132) == tails.plan(1024, 10240, 8192, 132, force=True)
        record = rules.describe_choice(1024, 10240, 8192, torch.bfloat16, torch.device("cpu"))
        assert record["tails"] == [p.describe() for p in tails.plan(1024, 10240, 8192, 132)]
        assert "tails" not in rules.describe_choice(1024, 4096, 4096, torch.bfloat16, torch.device("cpu"))
    monkeypatch.setattr(rules, "_INTERPRETED", True)  # (as on the CPU: the interpreter's rules have nothing to cut to)
    assert tails.plan(1024, 10240, 8192, 132, force=True) is None


def _pieces(m: int, n: int, row_tail: int, mixed: bool) -> tuple[Piece, ...]:
    """Columns 0:32 and 32:n, rows past m - row_tail apart. mixed: the second column piece on a narrower tile and
    the row tail on the rules for its rows; else every piece on the single launch's tile."""
    a = rules.config_for(m, n, 1, torch.bfloat16, torch.device("cpu"))[0]
    b = rules.GemmConfig(32, 16, 32, 4, 1, 2, persistent=True, tma=True) if mixed else a
    head = m - row_tail
    out = (Piece(0, head, 0, 32, a), Piece(0, head, 32, n, b))
    return out + ((Piece(head, m, 0, n, None if mixed else a),) if row_tail else ())


@pytest.mark.parametrize("layout", ["nt", "kn"])
@pytest.mark.parametrize("mixed", [False, True])
@pytest.mark.parametrize("m,row_tail,bias,out_dtype,strided", [
    (70, 6, False, torch.bfloat16, False), (65, 1, True, torch.float32, False), (64, 0, True, torch.bfloat16, True),
    (97, 33, False, torch.float16, True)])
def test_pieces_write_their_parts(monkeypatch, layout, mixed, m, row_tail, bias, out_dtype, strided):
    """Column pieces and a row tail (one row: the aliased-rows launch), with bias, an fp32 output, either layout and
    a strided x, against float64; on the single launch's tile, its bits too. (Across tiles the bits are a GPU
    property, test_matmul_gpu.py: the interpreter's numpy dot sums a tile in an order that depends on its shape.)"""
    n, k = 48, 96
    g = torch.Generator().manual_seed(m)
    dtype = torch.float16 if out_dtype == torch.float16 else torch.bfloat16
    x = torch.randn(m, 2 * k if strided else k, generator=g).to(dtype)[:, :k]
    w = torch.randn((n, k) if layout == "nt" else (k, n), generator=g).to(dtype)
    b = torch.randn(n, generator=g) if bias else None
    single = matmul_2d(x, w, b, out_dtype, layout, tails=False)
    pieces = _pieces(m, n, row_tail, mixed)
    monkeypatch.setattr(launch, "plan_tails", lambda *a, **kw: pieces)
    cut = matmul_2d(x, w, b, out_dtype, layout, tails=True)
    tol = matmul_tolerance(k, out_dtype)
    ref = reference_matmul(x, w, b, layout)
    assert cut.dtype == out_dtype and bool(((cut.double() - ref).abs() <= tol.atol + tol.rtol * ref.abs()).all())
    if not mixed:
        assert torch.equal(cut, single)
    # an explicit config never cuts: the tuning driver's single launches stay single
    assert torch.equal(matmul_2d(x, w, b, out_dtype, layout, pieces[0].config), single)


def test_a_poisoned_output_is_fully_written(monkeypatch):
    """Every element of y comes from some piece (y is allocated with torch.empty: poison it to see)."""
    m, n, k = 70, 48, 64
    x, w = torch.randn(m, k).bfloat16(), torch.randn(n, k).bfloat16()
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: real_empty(*a, **kw).fill_(float("nan")))
    monkeypatch.setattr(launch, "plan_tails", lambda *a, **kw: _pieces(m, n, 6, True))
    y = matmul_2d(x, w, None, torch.bfloat16, "nt", tails=True)
    assert not y.isnan().any()
