"""Reading a run record for reporting: resolve RUN arguments, null-safe accessors, grouping, number formatting.

Everything here takes the record as the plain dict of its JSON (``RunRecord.to_dict()``): a report must render
whatever a run managed to write, so every field may be missing or null.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline.records import paths
from ridgeline.records.reasons import ORDER_VARIANCE
from ridgeline.records.record import RunRecord, load_record

DASH = "–"

# What each timing regime means; the report states it next to the numbers.
REGIME_TEXT = {
    "cold-eager": "eager launches, L2 flushed before every sample (launch overhead included)",
    "graph-cold": "CUDA-graph replay over rotating input sets (cold L2, launch floor of a graph node)",
    "graph-hot": "CUDA-graph replay of the same inputs (hot L2: an upper bound, not a roofline number)",
    "host": "host wall clock per call (Python dispatch and launch included)",
    "cpu": "CPU wall clock (no GPU; nothing here says anything about GPU speed)",
}

SEVERITY_ORDER = {"bad": 0, "warn": 1, "info": 2, "good": 3}


# --- resolving RUN arguments -------------------------------------------------------------------------------
def resolve_run(arg: str, db: Path | str | None = None) -> RunRecord:
    """A run JSON path, or a run id (or unique prefix) in the store at ``db`` (default ``paths.default_db()``)."""
    p = Path(arg).expanduser()
    if p.is_file() or arg.endswith(".json"):
        return load_record(p)
    db_path = Path(db) if db is not None else paths.default_db()
    if not db_path.is_file():
        raise ValueError(f"run: {arg!r} is not a file, and there is no run store at {db_path} to look it up in")
    from ridgeline.records.store import Store

    with Store(db_path) as store:
        return store.get(arg)


def as_dict(record: RunRecord | dict[str, Any]) -> dict[str, Any]:
    return record.to_dict() if isinstance(record, RunRecord) else record


# --- null-safe access --------------------------------------------------------------------------------------
def num(value: Any) -> float | None:
    """A finite float, or None for null / NaN / inf / non-numbers (bool is not a number here)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def mapping(x: Any) -> dict[str, Any]:
    """x if it is a dict, else an empty one: a field of the wrong type reads as missing."""
    return x if isinstance(x, dict) else {}


def items(x: Any) -> list[dict[str, Any]]:
    """The dicts of a list field (measurements, checks, kernels, ...); anything else reads as empty."""
    return [v for v in x if isinstance(v, dict)] if isinstance(x, list) else []


def sample_count(m: dict[str, Any]) -> int | None:
    n = num(m.get("n"))
    if n:
        return int(n)
    s = m.get("samples_us")
    return len(s) if isinstance(s, list) and s else None


def dig(d: Any, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d or d[k] is None:
            return default
        d = d[k]
    return d


def shape_of(item: dict[str, Any]) -> tuple[int, ...]:
    s = item.get("shape")
    if not isinstance(s, (list, tuple)):
        return ()
    try:
        return tuple(int(d) for d in s)
    except (TypeError, ValueError, OverflowError):
        return ()


def shape_text(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "?"


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def case_key(item: dict[str, Any]) -> tuple:
    """(op, impl, shape, dtype, variant): what checks, measurements and profiles share."""
    return (str(item.get("op", "?")), str(item.get("impl", "?")), shape_of(item), str(item.get("dtype", "?")),
            str(item.get("variant") or ""))


def noise(m: dict[str, Any]) -> float | None:
    """IQR / median: the spread of the samples relative to the reported number."""
    iqr, med = num(m.get("iqr_us")), num(m.get("median_us"))
    if iqr is None or not med:
        return None
    return iqr / med


def sm_count(record: dict[str, Any]) -> int | None:
    v = num(dig(record, "env", "sm_count")) or num(dig(record, "device", "sm_count"))
    return int(v) if v else None


def impl_order(record: dict[str, Any]) -> list[str]:
    """Ours first, then the order the run asked for, then the rest by name: stable across regenerations."""
    ms = items(record.get("measurements"))
    seen = {str(m.get("impl", "?")) for m in ms} | {str(c.get("impl", "?")) for c in items(record.get("checks"))}
    impls = dig(record, "settings", "impls")
    asked = [i for i in impls if isinstance(i, str)] if isinstance(impls, list) else []
    ours = sorted({str(m.get("impl", "?")) for m in ms if m.get("source") == "ours"})
    out: list[str] = []
    for name in [*ours, *asked, *sorted(seen)]:
        if name in seen and name not in out:
            out.append(name)
    return out


@dataclass
class Group:
    """Measurements of one op at one dtype, variant and regime: one table and one bar chart."""

    op: str
    dtype: str
    variant: str
    regime: str
    items: list[dict[str, Any]] = field(default_factory=list)

    @property
    def title(self) -> str:
        v = f" {self.variant}" if self.variant else ""
        return f"{self.op} {self.dtype}{v}, {self.regime}"

    @property
    def slug(self) -> str:
        parts = [self.op, self.dtype, self.variant, self.regime]
        return "-".join(_slug(p) for p in parts if p)

    def shapes(self) -> list[tuple[int, ...]]:
        return sorted({shape_of(m) for m in self.items}, key=lambda s: (numel(s), s))


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in text)


def groups(record: dict[str, Any]) -> list[Group]:
    order = {name: i for i, name in enumerate(impl_order(record))}
    by_key: dict[tuple, Group] = {}
    for m in items(record.get("measurements")):
        key = (str(m.get("op", "?")), str(m.get("dtype", "?")), str(m.get("variant") or ""),
               str(m.get("regime", "?")))
        by_key.setdefault(key, Group(*key)).items.append(m)
    out = [by_key[k] for k in sorted(by_key)]
    for g in out:
        g.items.sort(key=lambda m: (numel(shape_of(m)), shape_of(m), order.get(str(m.get("impl", "?")), 99)))
    return out


def failed_checks(record: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    return {case_key(c): c for c in items(record.get("checks")) if c.get("passed") is False}


def invariance_only(reasons: Any) -> bool:
    """The check's only failures are batch invariance or determinism: the values of every call were right (the
    bench times such a peer, with a caveat)."""
    rs = reasons if isinstance(reasons, list) else []
    return bool(rs) and all(str(r).startswith(ORDER_VARIANCE) for r in rs)


def wrong_checks(record: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    """Failed checks whose values were wrong (not only batch invariance or determinism): not results."""
    return {k: c for k, c in failed_checks(record).items() if not invariance_only(c.get("reasons"))}


def check_status(record: dict[str, Any]) -> dict[tuple, bool]:
    return {case_key(c): bool(c.get("passed")) for c in items(record.get("checks")) if "passed" in c}


def profiles_by_case(record: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    return {case_key(p): p for p in items(record.get("profiles"))}


def regimes(record: dict[str, Any]) -> list[str]:
    return sorted({str(m.get("regime", "?")) for m in items(record.get("measurements"))})


# --- formatting --------------------------------------------------------------------------------------------
def fmt_us(v: Any) -> str:
    f = num(v)
    if f is None:
        return DASH
    if f < 10:
        return f"{f:.2f}"
    if f < 1000:
        return f"{f:.1f}"
    return f"{f:,.0f}"


def fmt_rate(v: Any) -> str:
    """GB/s or TFLOP/s: three significant digits, no exponent."""
    f = num(v)
    if f is None:
        return DASH
    if f == 0:
        return "0"
    if abs(f) >= 100:
        return f"{f:,.0f}"
    if abs(f) >= 10:
        return f"{f:.1f}"
    if abs(f) >= 1:
        return f"{f:.2f}"
    return f"{f:.3g}"


def fmt_pct(frac: Any) -> str:
    f = num(frac)
    if f is None:
        return DASH
    p = 100 * f
    return f"{p:.0f}%" if abs(p) >= 10 else f"{p:.1f}%"


def fmt_x(v: Any) -> str:
    f = num(v)
    return DASH if f is None else f"{f:.2f}x"


def fmt_bytes(v: Any) -> str:
    f = num(v)
    if f is None:
        return DASH
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(f) >= scale:
            return f"{f / scale:.3g} {unit}"
    return f"{f:.0f} B"


def fmt_int(v: Any) -> str:
    f = num(v)
    return DASH if f is None else f"{int(f):,}"


def fmt_any(v: Any) -> str:
    if v is None or v == "":
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return fmt_rate(v)
    if isinstance(v, dict):
        return ", ".join(f"{k}={fmt_any(x)}" for k, x in v.items() if x is not None) or DASH
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_any(x) for x in v) or DASH
    return str(v)


def join_limited(items: Iterable[str], limit: int = 8) -> str:
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", … ({len(items) - limit} more)"


def retypeable(command: object) -> str:
    """A recorded command as a user retypes it; records written before command_line knew the `-c` launcher say
    "-c bench ..." (s17's H200 records): that is `ridgeline bench ...`."""
    text = str(command or "")
    return "ridgeline " + text[3:] if text.startswith("-c ") else text
