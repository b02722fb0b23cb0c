"""The launch rules of the RMSNorm kernel: ordered tables of data, first match wins.

A call is a `Case` (hidden size N, x's itemsize, rows M, plain or fused, a weight wider than x or not, the FP8
epilogue, the GPU's SMs and L2, the CPU interpreter or not). Three tables resolve it, each a tuple of `Rule`s:
- LAYOUTS: the row's layout and arithmetic (one pass over a block or pieces, chunks, two passes, a split row) by N,
  itemsize, op and epilogue only, never by M: outputs are batch invariant (`launch_config`, `register_config`).
- CALLS: the knobs that change no bit, by rows per SM, the weight, the epilogue and the machine (`zoned_config`).
- HINTS: the L2 rule, on the config CALLS gave (`config_for`).
A rule is `Match` (conditions on the case and on the config so far; None: any) -> `then` (steps applied in order:
a dict of LaunchConfig fields, or a named function (cfg, case) -> cfg), with the run records that chose it
(`evidence`, docs/results/*.json). The measurements behind each row are in docs/perf/rmsnorm.md and in the
comments of config.py; tests/ops/rmsnorm/test_rules.py checks the tables against c371f09's branches in 670878 cases
(tests/data/rmsnorm_rules_golden.json.gz).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton

from ridgeline.lib.launch import interpreter_enabled, multiprocessor_count
from ridgeline.ops.rmsnorm.config import (  # noqa: F401  (re-exported: the config API of this package)
    CHUNK_BLOCK,
    MAX_SINGLE_PASS_BYTES,
    MAX_SPLIT,
    MIN_SPLIT_COLUMNS,
    WIDE_ONE_PASS,
    LaunchConfig,
    candidate_configs,
    row_pieces,
    split_candidates,
    two_pass_config,
    two_pass_of,
)
from ridgeline.ops.rmsnorm.split import chunk_for

# Read once: Triton decided at import whether it interprets (the CPU interpreter cannot run split rows).
_INTERPRETED = interpreter_enabled()
ALL_ROWS = 1 << 40

# Rows per SM (lo, hi] of the zones (see config.py's LaunchConfig fields and docs/perf/rmsnorm.md).
STREAM_COLUMNS = ((4096, 5120), (7168, 7168))  # the plain 16-bit one block / pieces with stream hints
STREAM_ZONE = (8, 32)
JOINT_MAX_ROWS_PER_SM = 16  # the plain dynamic FP8 op's joint max, up to
STREAM_LOADS_L2_SHARE = 0.55  # one pass: the row loads evict_first while the rows read fit this share of the L2
CHUNK_SUM_BLOCK = 16384  # 24K-32K columns: two chunks of 16384 over 32 warps ...
CHUNK_SUM_FROM = 24576
TWO_PASS_ROWS_PER_SM = 1  # ... two passes beyond one row per SM
THREE_CHUNK_BLOCK = 8192  # 16K-24K columns: three chunks of 8192 over 16 warps
TWO_CHUNK_COLUMNS = 16384  # two chunks of 8192, two passes beyond 2 (plain) or 8 (fused) rows per SM
TWO_CHUNK_TWO_PASS_ROWS_PER_SM = {False: 2, True: 8}
HALVES_COLUMNS = 4096  # two chunks of 2048 over 8 warps: weight first to 6, lean to 8, stream to 32, two passes beyond
HALVES_LEAN_ZONE = (6, 8)
HALVES_TWO_PASS_ROWS_PER_SM = 32


@dataclass(frozen=True)
class Case:
    """What the rules may look at: one call on m rows of n columns."""

    n: int
    itemsize: int
    m: int = 1
    fused: bool = False
    wide_weight: bool = False  # a weight wider than x (fp32 with 16-bit x); none or as narrow: False
    quant: int = 0  # 0 none, 1 static FP8, 2 dynamic FP8 (quant.py)
    sms: int = 132
    interpreted: bool = False
    l2_bytes: int = 60 * 2**20

    @classmethod
    def of(cls, n: int, dtype: torch.dtype, m: int = 1, fused: bool = False, weight_dtype: torch.dtype | None = None,
           quant: int = 0, **machine: Any) -> Case:
        wide = weight_dtype is not None and weight_dtype.itemsize > dtype.itemsize
        return cls(n, dtype.itemsize, m, fused, wide, quant, **machine)


def _in_rows(rows: tuple[int | None, int | None], m: int, sms: int) -> bool:
    """m rows within (lo, hi] rows per SM; None: unbounded."""
    lo, hi = rows
    return (lo is None or m > lo * sms) and (hi is None or m <= hi * sms)


def _in_zone(zone: tuple[int, int], m: int, sms: int) -> bool:
    """m rows fall in a zone of rows per SM (lo, hi] of a LaunchConfig; (0, 0) is no zone."""
    lo, hi = zone
    return bool(hi) and lo * sms < m <= hi * sms


# Properties of the config so far that a Match may ask for (`flags`).
_FLAGS: dict[str, Callable[[LaunchConfig], bool]] = {
    "pieces": lambda c: bool(c.piece_b),
    "wide": lambda c: c.width() > WIDE_ONE_PASS,  # one pass over more than 16384 columns
    "narrow": lambda c: c.width() <= WIDE_ONE_PASS,
    "chunk_sum": lambda c: c.chunk_sum,
    "hoist_loads": lambda c: c.hoist_loads,
}
_KINDS = {"split": lambda c: bool(c.split), "one-pass": lambda c: c.single_pass,
          "two-pass": lambda c: not c.single_pass and not c.split}


@dataclass(frozen=True)
class Match:
    """Conditions on a case (and on the config the earlier tables gave); None matches anything."""

    n: tuple[int, int] | None = None  # inclusive range of hidden sizes
    ns: frozenset[int] | None = None  # or a set of them
    itemsize: int | None = None
    aligned: bool | None = None  # rows a multiple of 16 bytes
    block_bytes: tuple[int, int | None] | None = None  # the row's power-of-two block in bytes, inclusive range
    fused: bool | None = None
    wide_weight: bool | None = None
    quant: tuple[int, ...] | None = None
    interpreted: bool | None = None
    rows: tuple[int | None, int | None] | None = None  # rows per SM (lo, hi]
    fits_l2: bool | None = None  # the rows the call reads within STREAM_LOADS_L2_SHARE of the L2
    kind: str | None = None  # of the config so far: split, one-pass, two-pass
    flags: tuple[str, ...] = ()  # of the config so far (_FLAGS)
    zones: tuple[str, ...] = ()  # zone fields of the config so far that the rows fall in
    when: Callable[[Case, LaunchConfig | None], bool] | None = None  # a named predicate, for what is left

    def __call__(self, case: Case, cfg: LaunchConfig | None) -> bool:
        n = case.n
        return ((self.n is None or self.n[0] <= n <= self.n[1])
                and (self.ns is None or n in self.ns)
                and (self.itemsize is None or case.itemsize == self.itemsize)
                and (self.aligned is None or ((n * case.itemsize) % 16 == 0) == self.aligned)
                and (self.block_bytes is None or _within(triton.next_power_of_2(n) * case.itemsize, self.block_bytes))
                and (self.fused is None or case.fused == self.fused)
                and (self.wide_weight is None or case.wide_weight == self.wide_weight)
                and (self.quant is None or case.quant in self.quant)
                and (self.interpreted is None or case.interpreted == self.interpreted)
                and (self.rows is None or _in_rows(self.rows, case.m, case.sms))
                and (self.fits_l2 is None or _fits_l2(case) == self.fits_l2)
                and (self.kind is None or _KINDS[self.kind](cfg))
                and all(_FLAGS[f](cfg) for f in self.flags)
                and all(_in_zone(getattr(cfg, z), case.m, case.sms) for z in self.zones)
                and (self.when is None or self.when(case, cfg)))


def _within(v: int, bounds: tuple[int, int | None]) -> bool:
    return bounds[0] <= v and (bounds[1] is None or v <= bounds[1])


def _fits_l2(case: Case) -> bool:
    return case.m * case.n * case.itemsize * (2 if case.fused else 1) <= STREAM_LOADS_L2_SHARE * case.l2_bytes


Step = dict | Callable[[LaunchConfig | None, Case], LaunchConfig]


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    then: tuple[Step, ...]
    evidence: tuple[str, ...] = ()  # run records (docs/results/), or where the rule comes from

    def apply(self, cfg: LaunchConfig | None, case: Case) -> LaunchConfig:
        for step in self.then:
            if isinstance(step, dict):
                cfg = LaunchConfig(**step) if cfg is None else dataclasses.replace(cfg, **step)
            else:
                cfg = step(cfg, case)
        return cfg


def first_rule(table: tuple[Rule, ...], case: Case, cfg: LaunchConfig | None = None) -> Rule | None:
    return next((r for r in table if r.match(case, cfg)), None)


# --- the layouts' builders (knobs computed from the case) ---------------------------------------------------------
def _split_row(cfg: None, case: Case) -> LaunchConfig:
    """A row split across cdiv(n, 8192) programs of 8 warps, each a power-of-two chunk."""
    split = triton.cdiv(case.n, CHUNK_BLOCK)
    return LaunchConfig(chunk_for(case.n, split), False, 8, split=split)


def _two_pass(cfg: LaunchConfig | None, case: Case) -> LaunchConfig:
    return two_pass_config(case.fused)


@functools.lru_cache(maxsize=1024)
def _register_layout(n: int, itemsize: int, fused: bool) -> LaunchConfig:
    """A row in one program's registers as one power-of-two block or as power-of-two pieces (when the block would
    leave over a quarter of the lanes idle), about 16 columns a thread for rows of 16-byte multiples (32 for others),
    1-16 warps, pieces no smaller than the program's threads (a piece over more threads than columns replicates
    them: wrong, nondeterministic bits for the fused op on the H200, 4100 = 4096 + 4). The fused op's 16-bit pieces
    are loaded before its first store (hoist_loads; an fp32 row of 12000 columns took 78 registers instead of 64)."""
    block = triton.next_power_of_2(n)
    per_thread = 16 if (n * itemsize) % 16 == 0 else 32
    warps = min(16, max(1, 1 << ((n // (32 * per_thread)).bit_length() - 1))) if n >= 64 * per_thread else 1
    pieces = row_pieces(n, min_piece=32 * warps)
    first, b, c = (*pieces, 0, 0)[:3] if len(pieces) > 1 and (block - n) * 4 > block else (block, 0, 0)
    return LaunchConfig(first, True, warps, 0, b, c, loop_free=True, weight_first=True,
                        hoist_loads=fused and bool(b) and itemsize == 2)


def _register(cfg: None, case: Case) -> LaunchConfig:
    return _register_layout(case.n, case.itemsize, case.fused)


def _fused_hoists(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    return dataclasses.replace(cfg, hoist_loads=case.fused)


def _wide_pieces(case: Case, cfg: None) -> bool:
    reg = _register_layout(case.n, case.itemsize, case.fused)
    return bool(reg.piece_b) and reg.width() > WIDE_ONE_PASS


def _stream_columns(case: Case, cfg: None) -> bool:
    return any(lo <= case.n <= hi for lo, hi in STREAM_COLUMNS)


_ONE_PASS = {"single_pass": True, "loop_free": True, "weight_first": True}
_16BIT_ALIGNED = {"itemsize": 2, "aligned": True, "quant": (0,)}  # (the FP8 epilogues keep the register layouts)

# Wide rows: split across programs where they may be, else two passes.
WIDE_LAYOUTS = (
    Rule("split row", Match(n=(MIN_SPLIT_COLUMNS, MAX_SPLIT * CHUNK_BLOCK)), (_split_row,),
         ("h200-explore-split-final*.json",)),
    Rule("two passes", Match(block_bytes=(MAX_SINGLE_PASS_BYTES + 1, None)), (_two_pass,),
         ("h200-explore-s5-w32k*.json",)),
)
# 16-bit rows of 16-byte multiples, no FP8 epilogue: equal chunks summed elementwise before the block reduction, the
# order of the two-pass kernel over them (so the row count may choose one pass or two: the same bits).
CHUNKED_LAYOUTS = (
    Rule("two chunks of 16384", Match(n=(CHUNK_SUM_FROM, 2 * CHUNK_SUM_BLOCK), **_16BIT_ALIGNED),
         ({"block_n": CHUNK_SUM_BLOCK, "num_warps": 32, "piece_b": CHUNK_SUM_BLOCK, **_ONE_PASS, "chunk_sum": True,
           "const_n": True, "two_pass_zone": (TWO_PASS_ROWS_PER_SM, ALL_ROWS)},),
         ("h200-ladder-s7-two-pass.json", "h200-explore-s7-zone.json", "h200-explore-s7-const-n*.json")),
    Rule("three chunks of 8192", Match(n=(2 * THREE_CHUNK_BLOCK + 1, CHUNK_SUM_FROM - 1), **_16BIT_ALIGNED),
         ({"block_n": THREE_CHUNK_BLOCK, "num_warps": 16, "piece_b": THREE_CHUNK_BLOCK,
           "piece_c": THREE_CHUNK_BLOCK, **_ONE_PASS, "chunk_sum": True, "const_n": True,
           "lean_zone": (1, ALL_ROWS)}, _fused_hoists),
         ("h200-explore-s8-w16k{,-fused}.json", "h200-explore-s9-hoist-fused.json")),
    Rule("two chunks of 8192, plain", Match(ns=frozenset({TWO_CHUNK_COLUMNS}), fused=False, **_16BIT_ALIGNED),
         ({"block_n": TWO_CHUNK_COLUMNS // 2, "num_warps": 16, "piece_b": TWO_CHUNK_COLUMNS // 2, **_ONE_PASS,
           "chunk_sum": True, "const_n": True, "two_pass_zone": (TWO_CHUNK_TWO_PASS_ROWS_PER_SM[False], ALL_ROWS)},),
         ("h200-explore-s9-w8k16k.json",)),
    Rule("two chunks of 8192, fused", Match(ns=frozenset({TWO_CHUNK_COLUMNS}), fused=True, **_16BIT_ALIGNED),
         ({"block_n": TWO_CHUNK_COLUMNS // 2, "num_warps": 16, "piece_b": TWO_CHUNK_COLUMNS // 2, **_ONE_PASS,
           "chunk_sum": True, "const_n": True, "two_pass_zone": (TWO_CHUNK_TWO_PASS_ROWS_PER_SM[True], ALL_ROWS),
           "hoist_loads": True},),
         ("h200-explore-s9-w8k16k.json", "h200-explore-s9-hoist-fused.json")),
    # (Plain: the hidden size compiled in from the lean zone on; fused: everywhere, with hoisted loads up to the
    # stream zone, where `_stream` drops them.)
    Rule("two chunks of 2048, plain", Match(ns=frozenset({HALVES_COLUMNS}), fused=False, **_16BIT_ALIGNED),
         ({"block_n": HALVES_COLUMNS // 2, "num_warps": 8, "piece_b": HALVES_COLUMNS // 2, **_ONE_PASS,
           "chunk_sum": True, "lean_zone": HALVES_LEAN_ZONE, "stream_zone": STREAM_ZONE,
           "two_pass_zone": (HALVES_TWO_PASS_ROWS_PER_SM, ALL_ROWS), "const_n_zone": (HALVES_LEAN_ZONE[0], ALL_ROWS)},),
         ("h200-explore-s10-w4k-{rows,mid}*.json", "h200-explore-s10-w4k-large-eager.json",
          "h200-explore-s10-w4k-decode-hot*.json")),
    Rule("two chunks of 2048, fused", Match(ns=frozenset({HALVES_COLUMNS}), fused=True, **_16BIT_ALIGNED),
         ({"block_n": HALVES_COLUMNS // 2, "num_warps": 8, "piece_b": HALVES_COLUMNS // 2, **_ONE_PASS,
           "chunk_sum": True, "const_n": True, "hoist_loads": True, "lean_zone": HALVES_LEAN_ZONE,
           "stream_zone": STREAM_ZONE, "two_pass_zone": (HALVES_TWO_PASS_ROWS_PER_SM, ALL_ROWS)},),
         ("h200-explore-s10-w4k-{rows,mid}*-fused.json", "h200-explore-s10-w4k-decode-hot*.json")),
)
# A row held in registers (`_register_layout`), with the zones and caps measured at some widths.
_STREAM = {"stream_zone": STREAM_ZONE}
_W8192 = {"max_registers": 32, "const_n_zone": (2, ALL_ROWS)}
REGISTER_LAYOUTS = (
    Rule("one block of 8192, fused", Match(ns=frozenset({8192}), itemsize=2, fused=True),
         (_register, {**_W8192, "stream_loads_zone": (0, ALL_ROWS), "const_n": True}),
         ("h200-explore-*-cliff.json", "h200-explore-s9-w8k-rows-fused.json", "h200-explore-s9-decode-fused-hot.json")),
    Rule("one block of 8192, plain", Match(ns=frozenset({8192}), itemsize=2),
         (_register, {**_W8192, "stream_loads_zone": (2, ALL_ROWS)}),
         ("h200-explore-*-cliff.json", "h200-explore-s10-w8k-rows.json", "h200-bench-rmsnorm-decode-s11-call6.json")),
    Rule("pieces of 5120, plain", Match(ns=frozenset({5120}), itemsize=2, fused=False),
         (_register, {**_STREAM, "lean_zone": (5, 8), "lean_max_registers": 32}),
         ("h200-explore-*-cliff.json", "h200-explore-s6-aligned-stream.json")),
    Rule("pieces of 5120, fused", Match(ns=frozenset({5120}), itemsize=2),
         (_register, {"lean_zone": (5, 8), "lean_max_registers": 32}), ("h200-explore-*-cliff.json",)),
    Rule("one block of 4096, plain", Match(ns=frozenset({4096}), itemsize=2, fused=False),
         (_register, {**_STREAM, "lean_zone": (6, 8)}),
         ("h200-explore-*-cliff.json", "h200-explore-s6-aligned-stream.json")),
    Rule("one block of 4096, fused", Match(ns=frozenset({4096}), itemsize=2),
         (_register, {"lean_zone": (6, 8)}), ("h200-explore-*-cliff.json",)),
    Rule("stream columns, plain", Match(when=_stream_columns, itemsize=2, fused=False),
         (_register, _STREAM),
         ("h200-explore-s6-stream-{odd,mid,fp16}.json", "h200-explore-s12-ab-wide-plain{,-eager}.json")),
    Rule("pieces wider than 16384", Match(when=_wide_pieces),
         (_register, {"lean_zone": (1, ALL_ROWS)}), ("h200-explore-s5-w32k*.json",)),
    Rule("registers", Match(), (_register,), ("h200-explore-s2-sweep.json", "docs/perf/rmsnorm.md")),
)
LAYOUTS = WIDE_LAYOUTS + CHUNKED_LAYOUTS + REGISTER_LAYOUTS


# --- the per-call steps (knobs that change no bit) ---------------------------------------------------------------
def _split_weight_first(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    return dataclasses.replace(cfg, weight_first=True)


def _split_not_resident(case: Case, cfg: LaunchConfig) -> bool:
    """More programs per row than can be resident (2 of 8 warps always fit an SM): a small GPU, e.g. a MIG slice."""
    return cfg.split > 2 * case.sms


def _split_few_rows(case: Case, cfg: LaunchConfig) -> bool:
    """While each program has one row (about 4 programs of 8 warps per SM, 2 of the fused op's with the weight
    first): the weight is best loaded with x (6.9 instead of 8.4 us at 1x65536)."""
    return case.m * cfg.split <= (2 if case.fused else 4) * case.sms


def _quant(one_wave: bool, joint: bool) -> Callable[[LaunchConfig, Case], LaunchConfig]:
    def step(cfg: LaunchConfig, case: Case) -> LaunchConfig:
        """FP8 outputs. Two passes: at most 64 registers. One pass: uncapped, no lean zone, the weight loaded with x
        in one wave (m <= SMs) or for joint_max (the row's max reduced with its sum), after the reduction beyond."""
        if not cfg.single_pass:
            return dataclasses.replace(cfg, max_registers=64)
        j = joint or cfg.joint_max
        return dataclasses.replace(cfg, weight_first=one_wave or j, joint_max=j, max_registers=0, lean_zone=(0, 0),
                                   lean_max_registers=0, stream_zone=(0, 0), hoist_loads=False, const_n=False)

    step.__name__ = f"quant(one_wave={one_wave}, joint={joint})"
    return step


_quant_late, _quant_one_wave, _quant_joint = _quant(False, False), _quant(True, False), _quant(False, True)


def _wide_weight(first: bool) -> Callable[[LaunchConfig, Case], LaunchConfig]:
    def step(cfg: LaunchConfig, case: Case) -> LaunchConfig:
        """A weight wider than x: uncapped, no lean or stream zone, no hoisted loads (measured with a 16-bit weight
        only); chunked rows keep their const_n, which their two-pass twins share."""
        return dataclasses.replace(cfg, weight_first=first, max_registers=0, lean_zone=(0, 0), lean_max_registers=0,
                                   stream_zone=(0, 0), const_n=cfg.const_n and cfg.chunk_sum, hoist_loads=False)

    step.__name__ = f"wide_weight(first={first})"
    return step


_wide_weight_first, _wide_weight_late = _wide_weight(True), _wide_weight(False)


def _two_pass_twin(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    return two_pass_of(cfg)


def _stream(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    # (Without hoisted loads: the fused op's chunks of 2048 were measured with stream hints unhoisted.)
    return dataclasses.replace(cfg, stream_hints=True, hoist_loads=False)


def _stream_loads(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    return dataclasses.replace(cfg, stream_loads=True, stream_hints=False)


def _hoisted(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    return dataclasses.replace(cfg, hoist_loads=True)


def _const_n(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    return dataclasses.replace(cfg, const_n=True)


def _lean(cfg: LaunchConfig, case: Case) -> LaunchConfig:
    return dataclasses.replace(cfg, weight_first=False, max_registers=cfg.lean_max_registers)


_FP8 = (1, 2)
_HALVES = {"ns": frozenset({HALVES_COLUMNS}), "quant": (0,), "wide_weight": True, "flags": ("chunk_sum",)}
# On the layout LAYOUTS gave for the case (with an FP8 epilogue: the register layouts, not the chunks).
CALLS = (
    Rule("split row, FP8: two passes", Match(kind="split", quant=_FP8), (_two_pass, _quant_late),
         ("h200-explore-quant-*.json",)),
    Rule("split row, interpreter: two passes", Match(kind="split", interpreted=True), (_two_pass,),
         ("the CPU interpreter runs programs one after another",)),
    Rule("split row, not resident: two passes", Match(kind="split", when=_split_not_resident), (_two_pass,),
         ("split.py: a row's programs must all be resident",)),
    Rule("split row, one row a program: weight first", Match(kind="split", when=_split_few_rows),
         (_split_weight_first,), ("h200-explore-split-final*.json",)),
    Rule("split row", Match(kind="split"), (), ("h200-explore-split-final*.json",)),
    Rule("FP8, one pass wider than 16384: two passes", Match(quant=_FP8, kind="one-pass", flags=("wide",)),
         (_two_pass, _quant_late), ("h200-explore-quant-*.json", "h200-ab-fp8.json")),
    Rule("dynamic FP8, pieces, one wave: weight first", Match(quant=(2,), fused=False, wide_weight=False,
                                                              flags=("pieces",), rows=(None, 1)),
         (_quant_one_wave,), ("h200-explore-s6-joint-odd.json",)),
    Rule("dynamic FP8, plain, up to 16 rows per SM: joint max", Match(quant=(2,), fused=False, wide_weight=False,
                                                                      rows=(None, JOINT_MAX_ROWS_PER_SM)),
         (_quant_joint,), ("h200-explore-s6-joint.json", "h200-explore-quant-joint.json",
                           "h200-explore-s6-joint-fused.json")),
    Rule("FP8, one wave: weight first", Match(quant=_FP8, rows=(None, 1)), (_quant_one_wave,),
         ("h200-explore-quant-*.json",)),
    Rule("FP8: weight after the reduction", Match(quant=_FP8), (_quant_late,), ("h200-explore-quant-*.json",)),
    Rule("4096 columns, fp32 weight: two passes", Match(**_HALVES, zones=("two_pass_zone",)), (_two_pass_twin,),
         ("h200-explore-s10-wfp32-large.json",)),
    Rule("4096 columns, fp32 weight: stream hints", Match(**_HALVES, zones=("stream_zone",)),
         (_wide_weight_late, _stream), ("h200-explore-s10-wfp32-large.json",)),
    Rule("4096 columns, fp32 weight, fused, up to 2 rows per SM: weight first, hoisted",
         Match(**{**_HALVES, "flags": ("chunk_sum", "hoist_loads")}, rows=(None, 2)), (_wide_weight_first, _hoisted),
         ("h200-explore-s10-w4k-{rows,decode-hot}-fused.json (16-bit weight; fp32 by likeness)",)),
    Rule("fp32 weight, up to 2 rows per SM: weight first, uncapped",
         Match(quant=(0,), wide_weight=True, kind="one-pass", flags=("narrow",), rows=(None, 2)),
         (_wide_weight_first,), ("h200-bench-rmsnorm-wfp32.json", "h200-explore-wfp32-decode.json")),
    Rule("fp32 weight: weight after the reduction, uncapped", Match(quant=(0,), wide_weight=True, kind="one-pass"),
         (_wide_weight_late,), ("h200-bench-rmsnorm-wfp32.json", "h200-explore-s5-w32k*.json")),
    Rule("two-pass zone", Match(zones=("two_pass_zone",)), (_two_pass_twin,),
         ("h200-explore-s7-zone.json", "h200-explore-s9-w8k16k.json", "h200-explore-s10-w4k-large-eager.json")),
    Rule("const-N and lean zones", Match(zones=("const_n_zone", "lean_zone")), (_const_n, _lean),
         ("h200-explore-s10-w4k-{rows,mid}*.json",)),
    Rule("const-N and stream zones", Match(zones=("const_n_zone", "stream_zone")), (_const_n, _stream),
         ("h200-explore-s10-w4k-{rows,mid}*.json",)),
    Rule("const-N zone", Match(zones=("const_n_zone",)), (_const_n,),
         ("h200-explore-s10-w8k-rows.json", "h200-explore-s10-w8k-decode-hot.json")),
    Rule("lean zone", Match(zones=("lean_zone",)), (_lean,),
         ("h200-explore-*-cliff.json", "h200-explore-s8-w16k{,-fused}.json")),
    Rule("stream zone", Match(zones=("stream_zone",)), (_stream,),
         ("h200-explore-s6-aligned-stream.json", "h200-explore-s6-stream-odd.json",
          "h200-explore-s12-ab-wide-plain.json")),
    Rule("the layout", Match(), (), ()),
)
# On the config CALLS gave.
HINTS = (
    Rule("one pass, rows that fit the L2 share: stream loads",
         Match(kind="one-pass", fits_l2=True, zones=("stream_loads_zone",)), (_stream_loads,),
         ("h200-explore-s11-ab-{plain,fused}.json", "h200-explore-s11-{plain,fused}-small.json",
          "h200-explore-s12-ab-fp8-*.json", "h200-bench-rmsnorm-decode-s11-call6.json")),
    Rule("no L2 rule", Match(), (), ()),
)

# One object per distinct config: the launcher's fast path keys its cache on id(cfg).
_INTERNED: dict[LaunchConfig, LaunchConfig] = {}


def _intern(cfg: LaunchConfig) -> LaunchConfig:
    return _INTERNED.setdefault(cfg, cfg)


def layout(case: Case) -> LaunchConfig:
    """LAYOUTS' config for a case (its n, itemsize, op and epilogue)."""
    return _layout(case.n, case.itemsize, case.fused, bool(case.quant))


@functools.lru_cache(maxsize=2048)
def _layout(n: int, itemsize: int, fused: bool, fp8: bool) -> LaunchConfig:
    case = Case(n, itemsize, fused=fused, quant=1 if fp8 else 0)
    return _intern(first_rule(LAYOUTS, case).apply(None, case))


def trace(case: Case) -> tuple[LaunchConfig, tuple[Rule, Rule, Rule]]:
    """The config a case launches and the rule of each table that decided it: (layout, call, hint)."""
    base = layout(case)
    call = first_rule(CALLS, case, base)
    zoned_cfg = _intern(call.apply(base, case))
    hint = first_rule(HINTS, case, zoned_cfg)
    return _intern(hint.apply(zoned_cfg, case)), (first_rule(LAYOUTS, case), call, hint)


def zoned(case: Case) -> LaunchConfig:
    """The config after CALLS (before the L2 rule)."""
    base = layout(case)
    return _intern(first_rule(CALLS, case, base).apply(base, case))


def resolve(case: Case) -> LaunchConfig:
    """The config a case launches: LAYOUTS, then CALLS, then HINTS, first match of each."""
    cfg = zoned(case)
    return _intern(first_rule(HINTS, case, cfg).apply(cfg, case))


def launch_config(n: int, dtype: torch.dtype, fused: bool = False) -> LaunchConfig:
    """The layout of rows of n columns (no FP8 epilogue): what decides the arithmetic, by n and the dtype only, the same
    for the plain and the fused op (`fused.out == rms_norm(residual_out)` bitwise)."""
    return _layout(n, dtype.itemsize, fused, False)


@functools.lru_cache(maxsize=1024)
def register_config(n: int, dtype: torch.dtype, fused: bool = False) -> LaunchConfig:
    """The row held in one program's registers (REGISTER_LAYOUTS): what LAYOUTS gives outside the chunked widths
    and the wide rows, and with an FP8 epilogue."""
    case = Case(n, dtype.itemsize, fused=fused)
    return _intern(first_rule(REGISTER_LAYOUTS, case).apply(None, case))


def chunked_config(n: int, fused: bool = False) -> LaunchConfig | None:
    """The chunked layout of a 16-bit row of n columns (CHUNKED_LAYOUTS), or None outside them."""
    case = Case(n, 2, fused=fused)
    rule = first_rule(CHUNKED_LAYOUTS, case)
    return _intern(rule.apply(None, case)) if rule is not None else None


def chunked_candidates(n: int) -> list[LaunchConfig]:
    """Rows read as equal chunks summed elementwise, one pass (weight first or after) and its two-pass twin (second
    pass forwards or reversed): the shipped layouts (`chunked_config`: 4096 and 16K-32K columns), and for the
    explore script two chunks of 4096 at 8192 columns (16 warps; settled, graph-cold, two passes over them were
    0.4-2.8% faster than the one block from 16 rows per SM, but the fused op's one pass 3-6% slower at 1-256 rows
    graph-hot: h200-explore-s10-w8k-*.json)."""
    shipped = chunked_config(n)
    if shipped is not None:
        one = dataclasses.replace(shipped, two_pass_zone=(0, 0), lean_zone=(0, 0), stream_zone=(0, 0),
                                  const_n_zone=(0, 0), const_n=True)
    elif n == 8192:
        one = LaunchConfig(n // 2, True, 16, 0, n // 2, loop_free=True, weight_first=True, chunk_sum=True,
                           const_n=True)
    else:
        return []
    two = two_pass_of(one)
    out = [one, dataclasses.replace(one, weight_first=False), two, dataclasses.replace(two, reverse_pass2=True)]
    if n == 4096:  # (and with a run-time hidden size: the same bits, see `rstd_of`)
        out += [dataclasses.replace(one, const_n=False), dataclasses.replace(two, const_n=False)]
    return out


def _case(n: int, dtype: torch.dtype, m: int, fused: bool, weight_dtype: torch.dtype | None, quant: int) -> Case:
    return Case.of(n, dtype, m, fused, weight_dtype, quant, sms=_sm_count_hint(), interpreted=_INTERPRETED,
                   l2_bytes=_l2_bytes_hint())


@functools.lru_cache(maxsize=4096)
def config_for(n: int, dtype: torch.dtype, m: int, fused: bool = False,
               weight_dtype: torch.dtype | None = None, quant: int = 0) -> LaunchConfig:
    """The configuration a call on m rows of n columns launches on this machine (`resolve`): `launch_config`, with the
    knobs that change no bit set for m, the weight's dtype and the FP8 epilogue (quant, see `kernel_constexprs`)."""
    return resolve(_case(n, dtype, m, fused, weight_dtype, quant))


def zoned_config(n: int, dtype: torch.dtype, m: int, fused: bool = False,
                 weight_dtype: torch.dtype | None = None, quant: int = 0) -> LaunchConfig:
    """`config_for` before its L2 rule (HINTS): the rules by rows per SM, weight and epilogue."""
    return zoned(_case(n, dtype, m, fused, weight_dtype, quant))


@functools.lru_cache(maxsize=1)
def _l2_bytes_hint() -> int:
    """L2 bytes of the current GPU (60 MiB on an H200) for the L2 rule; 60 MiB where there is none."""
    if torch.cuda.is_available() and not _INTERPRETED:
        return torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return 60 * 2**20


@functools.lru_cache(maxsize=1)
def _sm_count_hint() -> int:
    """SMs of the current GPU (132 on an H200) for the row-count rules; 132 where there is none."""
    if torch.cuda.is_available():
        return multiprocessor_count(torch.device("cuda", torch.cuda.current_device()))
    return 132
