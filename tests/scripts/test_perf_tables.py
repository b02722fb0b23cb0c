"""scripts/perf_tables.py: a peer's empty cell says why (from the record's failures), never a blanket 'wrong'."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "perf_tables.py"
_spec = importlib.util.spec_from_file_location("perf_tables", _PATH)
perf_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf_tables)


def _record(*failures):
    return {"failures": [dict(f, shape=[8, 4096], variant="") for f in failures]}


def test_an_empty_peer_cell_names_its_cause():
    why = perf_tables._why_missing
    shape = (8, 4096)
    assert why(_record(), "flex", shape, "graph-cold") == "-"
    assert why(_record({"impl": "flex", "stage": "check", "reason": "run: y max error 3 exceeds atol"}), "flex",
               shape, "graph-cold") == "wrong"
    assert why(_record({"impl": "liger", "stage": "check", "reason": "raised RuntimeError: n exceeds"}), "liger",
               shape, "graph-cold") == "refuses"
    # Admitted on order variance, then its timing raised: the timing's failure is what the cell says.
    admitted = {"impl": "flex", "stage": "check", "reason": "not batch invariant: rows 0:1 alone differ bitwise"}
    timed = {"impl": "flex", "stage": "time", "regime": "graph-cold", "reason": "RuntimeError: no capture"}
    assert why(_record(admitted, timed), "flex", shape, "graph-cold") == "failed"
    assert why(_record(admitted), "flex", shape, "graph-cold") == "nondet."
    assert why(_record({"impl": "flex", "stage": "check", "reason": "out of memory: 64 GiB"}), "flex", shape,
               "graph-cold") == "OOM"
    # Another shape's or another peer's failure says nothing about this cell.
    assert why(_record(timed), "gather-sdpa", shape, "graph-cold") == "-"
    assert why(_record(timed), "flex", (8, 8192), "graph-cold") == "-"
    assert why(_record({"impl": "vllm", "stage": "check", "reason": "unavailable: vllm not installed"}), "vllm",
               shape, "graph-cold") == "n/a"
