"""The run record: one JSON document per run, written as results come so a killed run loses nothing.

Top-level keys: schema, run_id, kind, created, finished, complete, command, env, device, settings,
checks, measurements, failures, profiles. Each measurement holds at least op, impl, shape (list of ints), dtype,
regime, samples_us (raw), median_us, gbps, tflops, pct_of_roof, pct_of_sol.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA = "ridgeline.run/1"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def measurement_key(m: dict[str, Any]) -> tuple:
    """Identity of a measurement within a run (what --resume skips and compare matches on, plus regime)."""
    return (m["op"], m["impl"], tuple(m["shape"]), m["dtype"], m.get("variant", ""), m["regime"])


def check_key(c: dict[str, Any]) -> tuple:
    return (c["op"], c["impl"], tuple(c["shape"]), c["dtype"], c.get("variant", ""))


@dataclass
class RunRecord:
    kind: str
    command: str
    env: dict[str, Any]
    device: dict[str, Any]
    settings: dict[str, Any]
    run_id: str = field(default_factory=new_run_id)
    created: str = field(default_factory=now_iso)
    finished: str | None = None
    complete: bool = False
    stopped: str | None = None  # why an unfinished run stopped early on purpose (a time limit), else None
    checks: list[dict[str, Any]] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    profiles: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "run_id": self.run_id,
            "kind": self.kind,
            "created": self.created,
            "finished": self.finished,
            "complete": self.complete,
            **({"stopped": self.stopped} if self.stopped else {}),
            "command": self.command,
            "env": self.env,
            "device": self.device,
            "settings": self.settings,
            "checks": self.checks,
            "measurements": self.measurements,
            "failures": self.failures,
            "profiles": self.profiles,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], path: Path | None = None) -> RunRecord:
        validate_record(d, path)
        return cls(
            kind=d["kind"], command=d["command"], env=d["env"], device=d["device"], settings=d["settings"],
            run_id=d["run_id"], created=d["created"], finished=d.get("finished"), complete=d.get("complete", False),
            stopped=d.get("stopped") if isinstance(d.get("stopped"), str) else None,
            checks=d.get("checks", []), measurements=d.get("measurements", []), failures=d.get("failures", []),
            profiles=d.get("profiles", []), path=path,
        )

    # --- incremental writing -------------------------------------------------------------------------------
    def save(self, path: Path | str | None = None) -> Path:
        """Write atomically (temp file + rename): a reader or a kill never sees half a document."""
        if path is not None:
            self.path = Path(path)
        if self.path is None:
            raise ValueError("run record: no path to save to")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".run-", suffix=".json", dir=self.path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_dict(), f, indent=1, allow_nan=True)
            f.write("\n")
        os.replace(tmp, self.path)
        return self.path

    def add_check(self, check: dict[str, Any]) -> None:
        self.checks = [c for c in self.checks if check_key(c) != check_key(check)] + [check]
        self._autosave()

    def add_measurement(self, m: dict[str, Any]) -> None:
        self.measurements = [x for x in self.measurements if measurement_key(x) != measurement_key(m)] + [m]
        self._autosave()

    def add_failure(self, failure: dict[str, Any]) -> None:
        self.failures.append(failure)
        self._autosave()

    def finish(self) -> None:
        self.complete = True
        self.stopped = None
        self.finished = now_iso()
        self._autosave()

    def _autosave(self) -> None:
        if self.path is not None:
            self.save()

    # --- lookups -------------------------------------------------------------------------------------------
    def has_measurement(self, key: tuple) -> bool:
        return any(measurement_key(m) == key for m in self.measurements)

    def find_check(self, key: tuple) -> dict[str, Any] | None:
        return next((c for c in self.checks if check_key(c) == key), None)

    def has_failure(self, key: tuple, stage: str) -> bool:
        return any(
            f.get("stage") == stage and (f["op"], f["impl"], tuple(f["shape"]), f["dtype"], f.get("variant", ""),
                                         f.get("regime", "")) == key
            for f in self.failures
        )


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "kind": str, "command": str, "env": dict, "device": dict, "settings": dict, "run_id": str, "created": str}
_LISTS = ("checks", "measurements", "failures", "profiles")
_MEASUREMENT_KEYS: dict[str, type | tuple[type, ...]] = {
    "op": str, "impl": str, "shape": list, "dtype": str, "regime": str, "median_us": (int, float)}


def validate_record(d: Any, path: Path | str | None = None) -> None:
    """Raise ValueError (one line, naming the file and the first problem) unless `d` is a run record."""
    where = f"{path}: " if path is not None else ""
    if not isinstance(d, dict):
        raise ValueError(f"run record: {where}expected a JSON object, got a {type(d).__name__}")
    if d.get("schema") != SCHEMA:
        raise ValueError(f"run record: {where}expected schema {SCHEMA!r}, got {d.get('schema')!r} "
                         "(not a record `ridgeline bench` wrote)")
    for key, kind in _REQUIRED.items():
        if not isinstance(d.get(key), kind):
            raise ValueError(f"run record: {where}{key!r} is missing or not a {_kind(kind)}")
    for key in _LISTS:
        if key in d and not (isinstance(d[key], list) and all(isinstance(x, dict) for x in d[key])):
            raise ValueError(f"run record: {where}{key!r} must be a list of objects")
    for i, m in enumerate(d.get("measurements", [])):
        for key, kind in _MEASUREMENT_KEYS.items():
            if not isinstance(m.get(key), kind) or isinstance(m.get(key), bool):
                raise ValueError(f"run record: {where}measurement {i} has no valid {key!r} ({_kind(kind)})")


def _kind(kind: type | tuple[type, ...]) -> str:
    names = {dict: "object", list: "list", str: "string", int: "number", float: "number"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def load_record(path: Path | str) -> RunRecord:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ValueError(f"run record: no such file {p}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"run record: {p} is not valid JSON ({e})") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise ValueError(f"run record: cannot read {p}: {type(e).__name__}") from None
    return RunRecord.from_dict(data, path=p)
