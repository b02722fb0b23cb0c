"""Launch rules of the softmax kernels (kernel.py): an ordered table of data, first match wins.

A call is a `Case` (row width N, the storage itemsize, forward or backward, rows M, the GPU's SMs, the CPU
interpreter or not). `LAYOUTS` picks the row's layout and arithmetic (one pass over one block or two pieces, rows
per program, warps, or two passes over chunks) from N, the itemsize and the direction only, never from M: a
row's result does not depend on the batch. `grid_for` then sizes the grid from M (which changes no bit).

Where the numbers come from: the RMSNorm rules measured on the same H200 (ops/rmsnorm/config.py, rules.py):
~16 columns a thread for rows of 16-byte multiples (32 for others), 1-16 warps, a row of up to 64 KB in one
program's registers without spills, power-of-two pieces for rows that would leave over a quarter of a
power-of-two block idle (4100), and two passes over 8192-column chunks beyond. The softmax backward holds two
rows (y and dy), so its one-pass limit is half. What is still a guess (not yet measured for softmax; the
tuning driver scripts/device/tune_softmax.py times the alternatives): the one-pass limit at 32768 columns (fwd,
16-bit) and 16384 (bwd), the warps there, rows packed per program below 1024 columns, the chunk width of the
two-pass kernels, and the two-pass grid's L2 budget (`L2_BUDGET_BYTES`) against one program per row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import triton

from ridgeline.lib.launch import interpreter_enabled, multiprocessor_count

# Widest row (bytes of one tensor's row in its storage dtype) held in registers by one program: forward one
# tensor, backward two (y and dy). 64 KB = 32768 16-bit columns over 16 warps (RMSNorm: 114-126 registers, no
# spills on sm_90).
MAX_ONE_PASS_BYTES = {False: 65536, True: 32768}
# Two passes: chunk bytes per tensor (8192 16-bit columns, 4096 fp32) over 16 warps: 16 bytes a thread a load.
CHUNK_BYTES = 16384
CHUNK_WARPS = 16
# Two passes: programs in flight are capped so that (programs) x (bytes each re-reads) stays within this much
# of the L2 (60 MiB on the H200, but a hot re-read stays fast only up to ~16 MiB of footprint: FACTS.md).
L2_BUDGET_BYTES = 12 * 2**20
# ... but never below this many programs per SM's worth of the GPU (a handful of SMs cannot pull DRAM bandwidth).
MIN_TWO_PASS_PROGRAMS_PER_SM = 0.25
# Two passes: resident programs of 16 warps per SM at most (64 warps per SM on Hopper: 4; 2 leaves registers).
TWO_PASS_PROGRAMS_PER_SM = 2
# Narrow rows: rows packed into one program's tile up to this many elements.
PACK_ELEMENTS = 2048
PACK_BELOW = 1024  # power-of-two blocks narrower than this pack rows


@dataclass(frozen=True)
class LaunchConfig:
    """How rows of width N are processed: a function of N, the dtype and the direction only (batch invariance)."""

    one_pass: bool
    block: int  # one pass: the (first) power-of-two block; two passes: the chunk width
    num_warps: int
    piece_b: int = 0  # one pass: a second, masked power-of-two piece after block (0: none)
    rows: int = 1  # one pass: rows per program tile
    # Persistent grid: programs per SM (0: one program per tile or row). Changes no bit.
    programs_per_sm: int = 0
    # Two passes: cap the programs in flight at l2_budget / (bytes of a row each re-reads); 0: no cap.
    l2_budget: int = 0
    reverse: bool = True  # two passes: the second pass walks the chunks last to first

    def __post_init__(self) -> None:
        if self.piece_b and not self.one_pass:
            raise ValueError("LaunchConfig: a second piece is a one-pass layout")
        if self.rows > 1 and not self.one_pass:
            raise ValueError("LaunchConfig: rows per program are a one-pass layout")

    def width(self) -> int:
        return self.block + self.piece_b

    def describe(self) -> str:
        grid = f"{self.programs_per_sm}/SM" if self.programs_per_sm else ("tile/program" if self.one_pass
                                                                             else "row/program")
        if self.l2_budget:
            grid += f" L2<={self.l2_budget // 2**20}MiB"
        if self.one_pass:
            pieces = f"{self.block}+{self.piece_b}" if self.piece_b else str(self.block)
            return f"1-pass BLOCK={pieces} rows={self.rows} warps={self.num_warps} grid={grid}"
        return f"2-pass CHUNK={self.block} warps={self.num_warps} grid={grid}" + (" reverse" if self.reverse else "")


@dataclass(frozen=True)
class Case:
    """What the rules may look at."""

    n: int
    itemsize: int
    bwd: bool = False
    m: int = 1
    sms: int = 132
    interpreted: bool = False

    @property
    def block(self) -> int:
        return triton.next_power_of_2(self.n)

    @property
    def aligned(self) -> bool:
        return (self.n * self.itemsize) % 16 == 0


def _warps_for(columns: int, aligned: bool) -> int:
    per_thread = 16 if aligned else 32
    return min(16, max(1, columns // (32 * per_thread)))


def _pieces(case: Case, warps: int) -> tuple[int, int]:
    """(first, second) power-of-two pieces covering n, the second no narrower than the program's threads (a piece
    over more threads than columns replicates them), or (block, 0) where two pieces save under a quarter."""
    first = 1 << (case.n.bit_length() - 1)
    rest = case.n - first
    if rest == 0:
        return first, 0
    second = max(triton.next_power_of_2(rest), 32 * warps)
    if (case.block - case.n) * 4 <= case.block or first + second >= case.block:
        return case.block, 0
    return first, second


def _packed(case: Case) -> LaunchConfig:
    rows = max(1, PACK_ELEMENTS // case.block)
    return LaunchConfig(True, case.block, max(1, min(4, rows * case.block // 512)), rows=rows)


def _one_pass(case: Case) -> LaunchConfig:
    warps = _warps_for(case.block, case.aligned)
    first, second = _pieces(case, warps)
    return LaunchConfig(True, first, warps, piece_b=second)


def _two_pass(case: Case) -> LaunchConfig:
    chunk = CHUNK_BYTES // case.itemsize
    return LaunchConfig(False, chunk, CHUNK_WARPS, programs_per_sm=TWO_PASS_PROGRAMS_PER_SM,
                        l2_budget=L2_BUDGET_BYTES)


def _interpreted(case: Case) -> LaunchConfig:
    """The CPU interpreter: the same layouts, smaller two-pass chunks (fewer idle lanes in tiny tests)."""
    cfg = _first_layout(replace(case, interpreted=False))
    return cfg if cfg.one_pass else replace(cfg, block=min(cfg.block, 4096))


@dataclass(frozen=True)
class Rule:
    name: str
    when: Callable[[Case], bool]
    then: Callable[[Case], LaunchConfig]
    why: str


LAYOUTS: tuple[Rule, ...] = (
    Rule("interpreter", lambda c: c.interpreted, _interpreted,
         "CPU tests: as on the GPU, with 4096-column chunks so small wide-row tests stay fast"),
    Rule("packed rows", lambda c: c.block < PACK_BELOW, _packed,
         "rows under 1024 columns: one row per program would leave most threads of a warp idle (guess: tune)"),
    Rule("one pass", lambda c: c.block * c.itemsize <= MAX_ONE_PASS_BYTES[c.bwd], _one_pass,
         "the row(s) fit one program's registers: every byte read once, written once (RMSNorm: 64 KB, no spills)"),
    Rule("two passes", lambda c: True, _two_pass,
         "too wide for registers: reduce, then re-read the row from L2 (programs in flight capped by the L2 budget)"),
)


def _first_layout(case: Case) -> LaunchConfig:
    for rule in LAYOUTS:
        if rule.when(case):
            return rule.then(case)
    raise AssertionError("the last rule matches every case")


def rule_for(case: Case) -> Rule:
    """The rule that decides a case (for `launch_info` and the tests)."""
    return next(r for r in LAYOUTS if r.when(case))


@functools.lru_cache(maxsize=4096)
def config_for(n: int, itemsize: int, bwd: bool = False) -> LaunchConfig:
    """The launch configuration of rows of n columns (itemsize bytes each): cached, a function of n, the dtype
    and the direction only."""
    return _first_layout(Case(n, itemsize, bwd, interpreted=_INTERPRETED))


_INTERPRETED = interpreter_enabled()


def grid_for(m: int, n: int, itemsize: int, cfg: LaunchConfig, device, bwd: bool = False) -> int:
    """Programs for m rows: one per tile (or row), or a persistent grid capped by programs per SM and, for two
    passes, by the L2 budget. Under the CPU interpreter at most 4 (each program instance costs ~1 ms there)."""
    tiles = triton.cdiv(m, cfg.rows)
    if tiles == 0:
        return 0
    sms = multiprocessor_count(device)
    if _INTERPRETED and getattr(device, "type", "cpu") != "cuda":
        return min(tiles, 4)
    grid = tiles
    if cfg.programs_per_sm:
        grid = min(grid, cfg.programs_per_sm * sms)
    if cfg.l2_budget:
        row_bytes = n * itemsize * (2 if bwd else 1)
        floor = max(1, int(MIN_TWO_PASS_PROGRAMS_PER_SM * sms))
        grid = min(grid, max(floor, cfg.l2_budget // max(1, row_bytes)))
    return max(1, grid)
