"""Compare two runs: match measurements, ratio of medians NEW/BASE with a bootstrap confidence interval, verdict.

Verdicts, for a threshold t (e.g. 0.02) and the CI [lo, hi] of NEW/BASE:
  SAME    the whole CI lies within [1 - t, 1 + t]
  FASTER  the whole CI lies below 1 - t
  SLOWER  the whole CI lies above 1 + t
  UNCLEAR anything else: the noise is too large to call it at this threshold
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ridgeline.records.record import RunRecord, measurement_key

FASTER, SLOWER, SAME, UNCLEAR = "FASTER", "SLOWER", "SAME", "UNCLEAR"
MIN_SAMPLES = 3  # fewer raw samples than this give no honest interval
ENV_KEYS = ("gpu", "driver", "cuda", "torch", "triton", "device_type")


def parse_threshold(text: str | float) -> float:
    """'2%' -> 0.02, '0.02' -> 0.02; a bare number >= 1 is read as percent ('2' -> 0.02)."""
    s = str(text).strip()
    try:
        if s.endswith("%"):
            value = float(s[:-1]) / 100
        else:
            value = float(s)
            if value >= 1:  # "2" means 2%: a ratio threshold of 100% or more makes no sense
                value /= 100
    except ValueError:
        raise ValueError(f"threshold: expected a percentage such as 2% or a fraction such as 0.02, got {text!r}")\
            from None
    if not 0 <= value < 1:
        raise ValueError(f"threshold: expected 0% to 100%, got {text!r}")
    return value


def _samples(m: dict[str, Any]) -> np.ndarray:
    raw = m.get("samples_us") if isinstance(m.get("samples_us"), list) else []
    vals = np.asarray([x for x in raw if isinstance(x, (int, float)) and not isinstance(x, bool)], dtype=np.float64)
    return vals[np.isfinite(vals) & (vals > 0)]


def bootstrap_ratio(
    base: Sequence[float] | np.ndarray,
    new: Sequence[float] | np.ndarray,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """median(new) / median(base) and its percentile bootstrap CI, resampling both sample sets independently."""
    b, n = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    if b.size == 0 or n.size == 0:
        raise ValueError("bootstrap_ratio: both sample sets must be non-empty")
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    # Chunks bound memory (resamples x samples floats) for runs with thousands of samples.
    chunk = max(1, min(resamples, 4_000_000 // max(b.size, n.size)))
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        mb = np.median(b[rng.integers(0, b.size, size=(k, b.size))], axis=1)
        mn = np.median(n[rng.integers(0, n.size, size=(k, n.size))], axis=1)
        ratios[start:start + k] = mn / mb
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return float(np.median(n) / np.median(b)), float(lo), float(hi)


SUSPECT = "SUSPECT"  # one side was caught by the bench's guards (result reuse, side stream, ...)


def verdict(lo: float | None, hi: float | None, threshold: float) -> str:
    if lo is None or hi is None:
        return UNCLEAR
    if lo >= 1 - threshold and hi <= 1 + threshold:
        return SAME
    if hi < 1 - threshold:
        return FASTER
    if lo > 1 + threshold:
        return SLOWER
    return UNCLEAR


@dataclass
class Row:
    op: str
    impl: str
    shape: list[int]
    dtype: str
    variant: str
    regime: str
    base_us: float | None
    new_us: float | None
    n_base: int
    n_new: int
    ratio: float | None  # NEW / BASE of medians: below 1 is faster
    ci_lo: float | None
    ci_hi: float | None
    verdict: str
    note: str = ""


@dataclass
class Comparison:
    base_run: str
    new_run: str
    threshold: float
    confidence: float
    resamples: int
    rows: list[Row] = field(default_factory=list)
    only_base: list[tuple] = field(default_factory=list)
    only_new: list[tuple] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {FASTER: 0, SLOWER: 0, SAME: 0, UNCLEAR: 0}
        for r in self.rows:
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out

    def geomean(self, regime: str | None = None) -> float | None:
        """Geometric mean of NEW/BASE over matched rows (optionally one regime): below 1 means NEW is faster."""
        logs = [math.log(r.ratio) for r in self.rows if r.ratio and r.ratio > 0 and (regime is None or
                                                                                      r.regime == regime)]
        return math.exp(sum(logs) / len(logs)) if logs else None

    @property
    def any_slower(self) -> bool:
        return any(r.verdict == SLOWER for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_run": self.base_run, "new_run": self.new_run, "threshold": self.threshold,
            "confidence": self.confidence, "resamples": self.resamples, "counts": self.counts(),
            "geomean_ratio": self.geomean(),
            "geomean_ratio_by_regime": {g: self.geomean(g) for g in sorted({r.regime for r in self.rows})},
            "rows": [asdict(r) for r in self.rows],
            "only_base": [list(k[:2]) + [list(k[2])] + list(k[3:]) for k in self.only_base],
            "only_new": [list(k[:2]) + [list(k[2])] + list(k[3:]) for k in self.only_new],
            "warnings": self.warnings,
        }


def _as_dict(r: RunRecord | dict[str, Any]) -> dict[str, Any]:
    return r.to_dict() if isinstance(r, RunRecord) else r


def _key(m: dict[str, Any]) -> tuple | None:
    try:
        key = measurement_key(m)
        hash(key)
        return key
    except (KeyError, TypeError):
        return None  # a malformed measurement cannot be matched; it is left out rather than crash the comparison


def _order(key: tuple) -> tuple:
    return (str(key[0]), str(key[1]), tuple(key[2]), *(str(x) for x in key[3:]))


def _failed(record: dict[str, Any]) -> set[tuple]:
    out = set()
    for c in record.get("checks") or []:
        if isinstance(c, dict) and c.get("passed") is False and isinstance(c.get("shape"), list):
            out.add((c.get("op"), c.get("impl"), tuple(c["shape"]), c.get("dtype"), c.get("variant") or ""))
    return out


def _median(m: dict[str, Any], samples: np.ndarray) -> float | None:
    v = m.get("median_us")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        return float(v)
    return float(np.median(samples)) if samples.size else None


def compare_runs(
    base: RunRecord | dict[str, Any],
    new: RunRecord | dict[str, Any],
    threshold: float = 0.02,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Match measurements by (op, impl, shape, dtype, variant, regime) and judge each NEW/BASE ratio."""
    b, n = _as_dict(base), _as_dict(new)
    cmp = Comparison(str(b.get("run_id", "?")), str(n.get("run_id", "?")), threshold, confidence, resamples)
    eb, en = b.get("env") or {}, n.get("env") or {}
    for k in ENV_KEYS:
        if eb.get(k) != en.get(k):
            cmp.warnings.append(f"{k} differs: {eb.get(k)!r} (base) vs {en.get(k)!r} (new)")
    bm = {k: m for m in b.get("measurements") or [] if (k := _key(m))}
    nm = {k: m for m in n.get("measurements") or [] if (k := _key(m))}
    wrong_new, wrong_base = _failed(n), _failed(b)
    for key in sorted(set(bm) & set(nm), key=_order):
        mb, mn = bm[key], nm[key]
        sb, sn = _samples(mb), _samples(mn)
        base_us, new_us = _median(mb, sb), _median(mn, sn)
        ratio = lo = hi = None
        notes = []
        if sb.size >= MIN_SAMPLES and sn.size >= MIN_SAMPLES:
            # The ratio comes from the same samples as its interval, so the interval always contains it.
            ratio, lo, hi = bootstrap_ratio(sb, sn, resamples, confidence, seed)
        else:
            notes.append(f"too few raw samples ({sb.size} base, {sn.size} new) for an interval")
            if base_us and new_us:
                ratio = new_us / base_us
        if key[:5] in wrong_new:
            notes.append("NEW fails its check here")
        if key[:5] in wrong_base:
            notes.append("BASE failed its check here")
        judged = verdict(lo, hi, threshold)
        for side, m in (("NEW", mn), ("BASE", mb)):
            if m.get("suspect"):  # a caught measurement is never FASTER or SLOWER than anything
                notes.append(f"{side} suspect: " + "; ".join(map(str, m["suspect"])))
                judged = SUSPECT
        cmp.rows.append(Row(key[0], key[1], list(key[2]), key[3], key[4], key[5], base_us, new_us,
                            int(sb.size), int(sn.size), ratio, lo, hi, judged, "; ".join(notes)))
    cmp.only_base = sorted(set(bm) - set(nm), key=_order)
    cmp.only_new = sorted(set(nm) - set(bm), key=_order)
    return cmp
