"""`ridgeline audit` on the CPU: the grid, the cliff rule, a tiny run with its record, table and plot."""

from __future__ import annotations

import pytest

import ridgeline.ops.matmul  # noqa: F401
from ridgeline.harness.audit import analyse, audit, grid_values


def test_grid_values_land_on_and_off_tiles():
    v = grid_values(1, 300, "on-and-off-tiles", tiles=(128,))
    assert {1, 16, 128, 129, 256, 257, 63, 64, 65} <= set(v) and max(v) <= 300
    assert grid_values(0, 10, "every:5") == [0, 5, 10]
    assert grid_values(1, 100, "values:3,7,500") == [3, 7]
    with pytest.raises(ValueError, match="step-rule"):
        grid_values(1, 10, "zigzag")


def test_cliff_rule():
    ms = [{"shape": [m, 8, 8], "median_us": t, "sol_us": 1.0, "regime": "cpu"}
          for m, t in ((1, 1.0), (2, 1.05), (3, 1.5), (4, 1.5))]
    pts = {p["shape"][0]: p for p in analyse(ms, 0)}
    assert pts[3]["cliff"] and not pts[2]["cliff"] and not pts[4]["cliff"]
    assert abs(pts[3]["jump"] - 1.5 / 1.05) < 1e-9


def test_tiny_audit_writes_record_table_and_plot(tmp_path):
    rec = audit("matmul", "ridgeline", [(1, 32, 32)], dim="M", start=1, stop=20, step_rule="values:1,17",
                dtype="fp16", budget_s=0.01, json_path=tmp_path / "a.json", out_dir=tmp_path / "rep")
    a = rec.settings["audit"]
    assert len(a["points"]) == 2 and all(p["config"] for p in a["points"])
    assert (tmp_path / "a.json").exists() and rec.kind == "audit"
    md = (tmp_path / "rep" / "audit-matmul-ridgeline.md").read_text()
    assert "| 17x32x32 |" in md
    assert (tmp_path / "rep" / "audit-matmul-ridgeline.png").stat().st_size > 1000
    # `ridgeline report` on the audit's record: the same table (configs included) and the plot
    from ridgeline.report.build import write_report

    write_report(rec, tmp_path / "report", "all")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "### Audit" in report and "| 17x32x32 |" in report and "plots/audit.png" in report
    assert (tmp_path / "report" / "plots" / "audit.png").stat().st_size > 1000
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Audit</h2>" in page and "17x32x32" in page and a["points"][1]["config"] in page


def test_listed_values_are_not_cut_at_the_base_shape(monkeypatch):
    import ridgeline.harness.audit as mod

    seen = []
    monkeypatch.setattr(mod, "validate_plan", lambda plan, device: (seen.append(plan.shapes), 1 / 0))
    with pytest.raises(ZeroDivisionError):
        audit("matmul", "ridgeline", [(1, 32, 32)], dim="M", step_rule="values:1,17,40", dtype="fp16")
    assert seen == [[(1, 32, 32), (17, 32, 32), (40, 32, 32)]]


def test_audit_refuses_unknown_dim():
    with pytest.raises(ValueError, match="--dim"):
        audit("matmul", "ridgeline", [(1, 32, 32)], dim="Q")
    # (-1 matched no index of the grid: every point was the base shape again)
    with pytest.raises(ValueError, match="^--dim: expected a dim name"):
        audit("matmul", "ridgeline", [(1, 32, 32)], dim=-1)
    with pytest.raises(ValueError, match="^--from/--to: .* --dim"):
        audit("matmul", "ridgeline", [(1, 32, 32)], start=1, stop=20)


def test_work_normalisation_does_not_depend_on_the_first_point():
    ms = [{"shape": [1, 8, 8], "median_us": 2.0, "sol_us": 1.0, "regime": "graph-cold"}]
    ms += [{"shape": [m, 8, 8], "median_us": t, "sol_us": None, "bytes": 100, "regime": "host"}
           for m, t in ((1, 4.0), (2, 8.0))]
    pts = {(p["regime"], p["shape"][0]): p for p in analyse(ms, 0)}
    assert pts[("graph-cold", 1)]["ratio"] == 2.0
    assert pts[("host", 1)]["ratio"] == 1.0 and pts[("host", 2)]["ratio"] == 2.0 and pts[("host", 2)]["cliff"]


def test_markdown_says_which_failures_were_timed():
    """A peer failing batch invariance is timed with that caveat (the bench's rule): the audit's table must not
    call it untimed; a point that raised is."""
    from ridgeline.records.record import RunRecord
    from ridgeline.report.audit import audit_markdown

    point = {"shape": [2, 8, 8], "median_us": 3.0, "sol_us": 1.0, "ratio": 3.0, "regime": "graph-cold",
             "config": "x"}
    rec = RunRecord(kind="audit", command="", env={}, device={},
                    settings={"op": "matmul", "audit": {"impl": "peer", "points": [point], "cliffs": []}},
                    measurements=[{"shape": [2, 8, 8], "impl": "peer", "regime": "graph-cold"},
                                  {"shape": [4, 8, 8], "impl": "peer", "regime": "host"}],
                    failures=[{"shape": [2, 8, 8], "impl": "peer", "stage": "check", "regime": "",
                               "reason": "not batch invariant: rows 0:1 alone differ bitwise"},
                              {"shape": [3, 8, 8], "impl": "peer", "stage": "time", "reason": "raised"},
                              {"shape": [4, 8, 8], "impl": "peer", "stage": "time", "regime": "graph-cold",
                               "reason": "out of memory"}])
    md = audit_markdown(rec)
    assert "2x8x8 check (timed, with this caveat): not batch invariant" in md
    assert "3x8x8 time (not timed): raised" in md
    assert "4x8x8 time (not timed): out of memory" in md  # (timed in another regime only)
