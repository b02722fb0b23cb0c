"""Every run, also in SQLite: a queryable history across runs (`ridgeline runs`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ridgeline.records.record import RunRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    created TEXT NOT NULL,
    finished TEXT,
    complete INTEGER NOT NULL,
    command TEXT,
    gpu TEXT,
    hostname TEXT,
    git_sha TEXT,
    path TEXT,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    op TEXT, impl TEXT, shape TEXT, dtype TEXT, variant TEXT, regime TEXT,
    median_us REAL, gbps REAL, tflops REAL, pct_of_roof REAL, pct_of_sol REAL
);
CREATE INDEX IF NOT EXISTS measurements_by_key ON measurements(op, impl, shape, dtype, regime);
"""


class Store:
    """A SQLite file of runs; each run's full JSON is kept beside the indexed columns."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path)
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put(self, record: RunRecord) -> None:
        """Insert or replace a run and its measurements (a resumed run replaces its earlier rows)."""
        d = record.to_dict()
        env = d["env"]
        with self._conn:
            self._conn.execute("DELETE FROM measurements WHERE run_id = ?", (record.run_id,))
            self._conn.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (record.run_id, record.kind, record.created, record.finished, int(record.complete), record.command,
                 env.get("gpu"), env.get("hostname"), env.get("git_sha"),
                 str(record.path) if record.path else None, json.dumps(d)),
            )
            self._conn.executemany(
                "INSERT INTO measurements VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [(record.run_id, m["op"], m["impl"], "x".join(map(str, m["shape"])), m["dtype"],
                  m.get("variant", ""), m["regime"], m.get("median_us"), m.get("gbps"), m.get("tflops"),
                  m.get("pct_of_roof"), m.get("pct_of_sol")) for m in d["measurements"]],
            )

    def list_runs(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT r.run_id, r.kind, r.created, r.complete, r.gpu, r.command, "
            "(SELECT COUNT(*) FROM measurements m WHERE m.run_id = r.run_id) "
            "FROM runs r ORDER BY r.created DESC, r.run_id DESC LIMIT ?", (limit,)
        ).fetchall()
        keys = ("run_id", "kind", "created", "complete", "gpu", "command", "measurements")
        return [dict(zip(keys, row)) for row in rows]

    def get(self, run_id: str) -> RunRecord:
        """A run by id, or by a unique prefix of its id."""
        rows = self._conn.execute(
            "SELECT run_id, path, record FROM runs WHERE run_id LIKE ? ORDER BY run_id", (run_id + "%",)
        ).fetchall()
        if not rows:
            raise ValueError(f"run: no run {run_id!r} in {self.path}")
        if len(rows) > 1 and rows[0][0] != run_id:
            raise ValueError(f"run: {run_id!r} matches {len(rows)} runs; give more of the id")
        _, path, text = rows[0]
        return RunRecord.from_dict(json.loads(text), path=Path(path) if path else None)
