"""Launch rules of the LayerNorm kernels: ordered tables of data, first match wins.

What decides a row's arithmetic (one block or two pieces, warps, rows per tile, one pass or chunks) is looked up by
the hidden size N and x's itemsize only, never by the row count M: outputs are batch invariant (LAYOUT tables).
What changes no bit of a row (the grid: one program per tile or a persistent loop; the backward's programs per SM)
may follow M (GRID tables). The backward's programs per SM do change dweight/dbias's bits (they are sums over
the programs' partials), which are deterministic for a given M but, being sums over the batch, never batch invariant.

Where a rule is a guess, its `why` says so: scripts/device/tune_layernorm.py times the candidates
(`fwd_candidates`, `bwd_candidates`) on the H200 and prints the best per shape. The measured rules come from its
run over the bench sweep's shapes (docs/results/h200-tune-layernorm-s17.json, bf16, 768 to 8192 columns).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton

from ridgeline.lib.launch import interpreter_enabled

_INTERPRETED = interpreter_enabled()

# Widest row the forward holds in registers: 16384 columns over 16 warps is 32 float32 a thread (x centred in
# place); wider rows take three passes over chunks. The backward holds five float32 a column (x, dy, w and two
# partial sums): 8192 columns over 16 warps is 80 registers a thread before temporaries, so it goes chunked beyond.
MAX_FWD_COLUMNS = 16384
MAX_BWD_COLUMNS = 8192
WIDE_CHUNK = 4096
H200_SMS = 132


@dataclass(frozen=True)
class FwdConfig:
    """How the forward processes rows of N columns (a function of N and the itemsize only)."""

    block_a: int  # the first (or only) power-of-two piece of a row
    block_b: int = 0  # a second piece after it (0: none); only the last piece is masked
    rows: int = 1  # rows per program tile
    num_warps: int = 4
    wide: bool = False  # rows too wide for registers: three passes over chunks of `chunk`
    chunk: int = 0
    loop: bool = False  # persistent grid-stride loop over tiles (set by the grid rules, changes no bit)
    programs_per_sm: int = 0  # with loop: resident programs per SM
    load_policy: str = ""  # one pass: the L2 eviction policy of x's loads ("", "evict_first", "evict_last"); no bit

    def describe(self) -> str:
        if self.wide:
            return f"fwd 3-pass CHUNK={self.chunk} warps={self.num_warps}"
        pieces = "+".join(str(p) for p in (self.block_a, self.block_b) if p)
        grid = f"loop {self.programs_per_sm}/SM" if self.loop else "tile/program"
        hint = f" load:{self.load_policy}" if self.load_policy else ""
        return f"fwd 1-pass BLOCK={pieces} rows={self.rows} warps={self.num_warps} grid={grid}{hint}"


@dataclass(frozen=True)
class BwdConfig:
    """How the backward processes rows of N columns; `programs_per_sm` sizes the grid (a function of M allowed)."""

    block_a: int
    block_b: int = 0
    num_warps: int = 4
    programs_per_sm: int = 2
    stages: int = 0  # software pipelining of the row loop (0: none)
    wide: bool = False  # two passes over chunks per row
    chunk: int = 0
    reduce_block_p: int = 32  # the partial-sum reduction: rows of partials per step ...
    reduce_block_c: int = 32  # ... and columns per program
    reduce_warps: int = 4

    def describe(self) -> str:
        body = (f"bwd 2-pass CHUNK={self.chunk}" if self.wide
                else "bwd 1-pass BLOCK=" + "+".join(str(p) for p in (self.block_a, self.block_b) if p))
        return (f"{body} warps={self.num_warps} programs={self.programs_per_sm}/SM stages={self.stages} "
                f"reduce={self.reduce_block_p}x{self.reduce_block_c}")


@dataclass(frozen=True)
class Case:
    """What the rules may look at."""

    n: int
    itemsize: int
    m: int = 1
    sms: int = H200_SMS
    interpreted: bool = False


@dataclass(frozen=True)
class Rule:
    name: str
    when: Callable[[Case], bool]
    then: dict[str, Any] | Callable[[Any, Case], Any]
    why: str

    def apply(self, cfg: Any, case: Case) -> Any:
        return self.then(cfg, case) if callable(self.then) else dataclasses.replace(cfg, **self.then)


def first(table: tuple[Rule, ...], case: Case) -> Rule:
    return next(r for r in table if r.when(case))


def row_pieces(n: int, min_piece: int) -> tuple[int, int]:
    """A row as one power-of-two block, or as two pieces when the block would leave over a quarter of its lanes
    idle: the largest power of two <= n, then the rest rounded up to a power of two of at least `min_piece` (a
    piece over more threads than columns would replicate them). 5120 -> (4096, 1024), 4100 -> (4096, 256 with
    8 warps), 1280 -> (1024, 256), 768 -> (1024, 0) (a quarter idle), 7168 -> (8192, 0)."""
    block = triton.next_power_of_2(n)
    if (block - n) * 4 <= block:
        return block, 0
    a = block // 2
    b = max(triton.next_power_of_2(n - a), min_piece)
    return (a, b) if a + b < block else (block, 0)


def _warps(n: int, itemsize: int, per_thread: int) -> int:
    """About `per_thread` columns a thread, 1 to 16 warps (powers of two)."""
    if (n * itemsize) % 16:
        per_thread *= 2  # rows off 16 bytes cannot use 16-byte vectors: fewer, wider threads
    w = n // (32 * per_thread)
    return min(16, max(1, 1 << (w.bit_length() - 1))) if w >= 1 else 1


def _registers_fwd(cfg: None, case: Case) -> FwdConfig:
    warps = _warps(case.n, case.itemsize, 32)
    a, b = row_pieces(case.n, 32 * warps)
    return FwdConfig(a, b, 2 if case.n <= 1024 else 1, warps)


def _registers_bwd(cfg: None, case: Case) -> BwdConfig:
    warps = _warps(case.n, case.itemsize, 16)
    a, b = row_pieces(case.n, 32 * warps)
    return BwdConfig(a, b, warps)


def _reduce_columns(cfg: BwdConfig, case: Case) -> BwdConfig:
    """Columns per program of the partial-sum reduction: about one program per SM, 32-128 columns (128-512 bytes
    of a partials row: whole cache lines)."""
    per = max(1, case.n // case.sms)
    per = max(32, min(128, 1 << (per.bit_length() - 1)))
    return dataclasses.replace(cfg, reduce_block_c=per)


# --- forward ----------------------------------------------------------------------------------------------------
FWD_LAYOUTS: tuple[Rule, ...] = (
    Rule("wide rows: three passes over chunks", lambda c: c.n > MAX_FWD_COLUMNS,
         lambda cfg, c: FwdConfig(0, wide=True, chunk=WIDE_CHUNK, num_warps=8),
         "over 16384 columns the centred row no longer fits 32 float32 a thread; chunk and warps are a guess"),
    Rule("narrow rows: four rows a tile", lambda c: c.n <= 256,
         lambda cfg, c: FwdConfig(*row_pieces(c.n, 32), rows=4, num_warps=1),
         "a warp per 4 rows of up to 256 columns (one row would leave most lanes of a warp on a few columns); guess"),
    Rule("registers", lambda c: True, _registers_fwd,
         "the row in registers, ~32 columns a thread (64 off 16-byte rows), pieces where a block idles >25% lanes, "
         "two rows a tile up to 1024 columns; measured (H200, s17): the best of 5-15 candidates at all six tuned "
         "widths, 1.24x the old 16-a-thread one-row rule at 768 columns, 1.15x at 5120, 1.07x at 8192, level at "
         "4096 and 4100"),
)
FWD_GRID: tuple[Rule, ...] = (
    Rule("interpreter: persistent loop", lambda c: c.interpreted, {"loop": True, "programs_per_sm": 1},
         "few program instances keep CPU tests fast"),
    Rule("wide rows: persistent loop", lambda c: c.n > MAX_FWD_COLUMNS, {"loop": True, "programs_per_sm": 2},
         "the three-pass kernel always loops over rows"),
    Rule("one program per tile", lambda c: True, {},
         "no loop: every tile's loads in flight at once, the hardware schedules the programs (rmsnorm: loop_free)"),
)

# --- backward ---------------------------------------------------------------------------------------------------
BWD_LAYOUTS: tuple[Rule, ...] = (
    Rule("wide rows: two passes over chunks", lambda c: c.n > MAX_BWD_COLUMNS,
         lambda cfg, c: BwdConfig(0, wide=True, chunk=WIDE_CHUNK, num_warps=8),
         "over 8192 columns x, dy, w and two partial sums no longer fit a thread's registers; guess"),
    Rule("registers", lambda c: True, _registers_bwd,
         "the row in registers, ~16 columns a thread (half the forward's: five float32 a column), pieces by the "
         "forward's rule (row_pieces) over these warps, so 4100 is 4096 + 128 here, 4096 + 64 forward; warps a "
         "guess for the tuning driver"),
)
BWD_GRID: tuple[Rule, ...] = (
    Rule("interpreter: 4 programs", lambda c: c.interpreted, {"programs_per_sm": 1},
         "the interpreter counts 4 SMs (lib.launch.multiprocessor_count): 4 program instances"),
    Rule("narrow rows: 4 programs per SM", lambda c: c.n <= 1024, {"programs_per_sm": 4},
         "short rows leave a 1-warp program latency-bound: measured (H200, s17) 1.18x over 2 per SM at 768 columns"),
    Rule("8192 columns: 1 program per SM", lambda c: 8192 <= c.n <= MAX_BWD_COLUMNS, {"programs_per_sm": 1},
         "16 warps a program already fill an SM: measured 1.10x over 2 per SM at 8192 columns"),
    # (Registers rows only: a chunked row has no pieces, and its kernel takes no STAGES.)
    Rule("pipelined second piece",
         lambda c: c.n <= MAX_BWD_COLUMNS and row_pieces(c.n, 32 * _warps(c.n, c.itemsize, 16))[1] >= 1024,
         {"programs_per_sm": 2, "stages": 2},
         "a row of two pieces with a large second one (5120 = 4096 + 1024): 2 stages measured 1.12x (52.5 vs "
         "58.8 us); they cost 5-7% at 4096 and 4100 columns, so only here"),
    Rule("2 programs per SM", lambda c: True, {"programs_per_sm": 2},
         "two resident programs hide one's reduction behind the other's loads; the partials buffer (8 bytes per "
         "column per program) stays a few % of the traffic; measured best (of 1/2/4, stages 0/2) at 4096 and 4100"),
)
BWD_REDUCE: tuple[Rule, ...] = (
    Rule("about one program per SM", lambda c: True, _reduce_columns,
         "the partials reduction reads programs x N float32 twice (dweight, dbias): spread it over the SMs"),
)


def _resolve(tables: tuple[tuple[Rule, ...], ...], case: Case) -> Any:
    """Each table in turn, first match of each, on the config the earlier ones gave."""
    cfg = None
    for table in tables:
        cfg = first(table, case).apply(cfg, case)
    return cfg


def _sms() -> int:
    if torch.cuda.is_available() and not _INTERPRETED:
        from ridgeline.lib.launch import multiprocessor_count

        return multiprocessor_count(torch.device("cuda", torch.cuda.current_device()))
    return H200_SMS


@functools.lru_cache(maxsize=4096)
def fwd_config(n: int, dtype: torch.dtype) -> FwdConfig:
    """The forward's launch config for rows of n columns of dtype (the same for any row count)."""
    return _resolve((FWD_LAYOUTS, FWD_GRID), Case(n, dtype.itemsize, interpreted=_INTERPRETED))


# The forward's x loads (an L2 hint: no bit changes, so the row count may decide it): evict_first while x fits
# FWD_STREAM_L2_SHARE of the L2 (the rows read once leave it first; y, written at the same addresses call after call
# in a serving loop, stays), evict_last above. Measured on the H200 in s22 (graph replay over inputs 3x the L2,
# beside the plain loads; `git show 8f83e7c:docs/results/h200-tune-layernorm-fwd-s22.json`): evict_first 1.04-1.05x
# at 4096x1024, 16384x1024 and 4096x4096 (8-34 MB of x; evict_last 1.00-1.03x there); evict_last 1.02x / 1.01x at
# 4096x5120 / 4096x8192 (42 / 67 MB, where evict_first was 1.00x / 0.99x). RMSNorm's L2 rule uses the same share.
FWD_STREAM_L2_SHARE = 0.55


def fwd_load_policy(m: int, n: int, itemsize: int, l2_bytes: int) -> str:
    """The forward's eviction policy for x's loads in a call of m rows (one-pass layouts)."""
    return "evict_first" if m * n * itemsize <= FWD_STREAM_L2_SHARE * l2_bytes else "evict_last"


@functools.lru_cache(maxsize=4096)
def fwd_config_for_call(n: int, dtype: torch.dtype, policy: str) -> FwdConfig:
    """fwd_config with the call's load policy (`fwd_load_policy`); one cached object per (n, dtype, policy)."""
    cfg = fwd_config(n, dtype)
    return cfg if cfg.wide else dataclasses.replace(cfg, load_policy=policy)


@functools.lru_cache(maxsize=4096)
def bwd_config(n: int, dtype: torch.dtype) -> BwdConfig:
    """The backward's launch config for rows of n columns of dtype."""
    return _resolve((BWD_LAYOUTS, BWD_GRID, BWD_REDUCE), Case(n, dtype.itemsize, sms=_sms(), interpreted=_INTERPRETED))


def trace(n: int, dtype: torch.dtype, backward: bool = False) -> tuple[str, ...]:
    """The names of the rules that decided a config (for launch records and the tests)."""
    case = Case(n, dtype.itemsize, sms=_sms(), interpreted=_INTERPRETED)
    tables = (BWD_LAYOUTS, BWD_GRID, BWD_REDUCE) if backward else (FWD_LAYOUTS, FWD_GRID)
    return tuple(first(t, case).name for t in tables)


def fwd_candidates(n: int, dtype: torch.dtype) -> list[FwdConfig]:
    """Configs worth timing for the forward at n columns (the tuning driver): the rule's with L2 hints on x's loads,
    warps around the rule's, one block or pieces, rows per tile, and the chunked kernel near the register limit."""
    base = fwd_config(n, dtype)
    out: list[FwdConfig] = [base]
    if not base.wide:
        out += [dataclasses.replace(base, load_policy=p) for p in ("evict_last", "evict_first")]  # L2 hints on x
        block = triton.next_power_of_2(n)
        for warps in (1, 2, 4, 8, 16, 32):
            layouts = {(block, 0), row_pieces(n, 32 * warps)}
            for a, b in sorted(layouts):
                if 2 <= a // (32 * warps) <= 64 and (b == 0 or b >= 32 * warps):
                    for rows in ((1, 2, 4) if n <= 2048 else (1,)):
                        out.append(FwdConfig(a, b, rows, warps))
    for chunk, warps in ((2048, 4), (4096, 8), (8192, 16)):
        if n > 4096:
            out.append(FwdConfig(0, wide=True, chunk=chunk, num_warps=warps, loop=True, programs_per_sm=2))
    return list(dict.fromkeys(out))


def bwd_candidates(n: int, dtype: torch.dtype) -> list[BwdConfig]:
    """Configs worth timing for the backward at n columns: warps (half, the rule's, double), programs per SM,
    pipelining stages, and the chunked kernel."""
    base = bwd_config(n, dtype)
    out: list[BwdConfig] = [base]
    if not base.wide:
        for warps in sorted({max(1, base.num_warps // 2), base.num_warps, min(16, base.num_warps * 2)}):
            a, b = row_pieces(n, 32 * warps)
            if a // (32 * warps) < 1 or (b and b < 32 * warps):
                continue
            for pps in (1, 2, 4):  # (a run-time grid: no recompile)
                for stages in (0, 2):
                    out.append(dataclasses.replace(base, block_a=a, block_b=b, num_warps=warps, programs_per_sm=pps,
                                                   stages=stages))
    if n > 2048:
        for chunk, warps in ((2048, 4), (4096, 8)):
            out.append(dataclasses.replace(base, block_a=0, block_b=0, wide=True, chunk=chunk, num_warps=warps,
                                           stages=0))
    return list(dict.fromkeys(out))
