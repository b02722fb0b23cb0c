"""Launch rules of the softmax kernels (kernel.py, kernel_split.py): an ordered table of data, first match wins.

A call is a `Case` (row width N, the storage itemsize, forward or backward, the CPU interpreter or not).
`LAYOUTS` picks the row's layout and arithmetic (one pass over one block or two pieces, rows per program, warps;
or split rows: chunk width, warps) from N, the itemsize and the direction only, never from the row count M: a
row's result does not depend on the batch. `grid_for` / `split_plan` then size the grid and the groups of rows
from M (which changes no bit).

Rows too wide for one program's registers are split: S = cdiv(N, chunk) programs per row, two kernels (chunk
statistics to a float32 workspace, then combine, re-read and write). They replace the former two-pass kernel (one
program per row, walking the row twice), whose grid had to be capped for its re-read to hit L2 and so left most
SMs idle (0.14-0.35 of speed of light on the H200 at 64K-256K columns): with one program per chunk the grid fills
the GPU at any row count and the L2 is kept for the re-read by launching the rows in groups instead.

Where the numbers come from: the RMSNorm rules measured on the same H200 (ops/rmsnorm/config.py, rules.py):
~16 columns a thread for rows of 16-byte multiples (32 for others), 1-16 warps, a row of up to 64 KB in one
program's registers without spills, power-of-two pieces for rows that would leave over a quarter of a
power-of-two block idle (4100). The softmax backward holds two rows (y and dy), so its one-pass limit is half;
the H200 sweep measured one pass at 0.87-0.96 of speed of light up to those limits (32768 16-bit columns
forward, 16384 backward), and the tuning driver (scripts/device/tune_softmax.py, s17) then measured the backward's
one pass at 32768 columns on 32 warps 1.61x faster than split rows, so both directions now hold 64 KB a row.
Measured there too: one group of rows (no L2 groups) 1.05-1.20x faster, the 16 KB chunk on 8 warps within 3% of
the best chunk at every split shape, the reverse walk level with the forward one. Still guesses: the rows packed
per program below 1024 columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import triton

from ridgeline.lib.launch import interpreter_enabled, multiprocessor_count

# Widest row (bytes of one tensor's row in its storage dtype) held in registers by one program: forward one
# tensor, backward two (y and dy). 64 KB = 32768 16-bit columns over 16 warps (RMSNorm: 114-126 registers, no
# spills on sm_90). Wider rows are split across programs.
# The backward's limit was half (two rows held); measured (H200, s17, h200-tune-softmax-s17.json) one pass at 32768
# 16-bit columns on 32 warps ran the backward 1.61x faster than split rows (61.8 vs 99.3 us at 1024 rows).
MAX_ONE_PASS_BYTES = {False: 65536, True: 65536}
# Backward rows over 32 KB a tensor take 32 warps (64 registers of y and dy a thread instead of 128).
BWD_WIDE_ONE_PASS_BYTES = 32768
# Split rows: chunk bytes per tensor (8192 16-bit columns, 4096 fp32) over 8 warps: 64 bytes a thread, four
# 16-byte loads, ~4 programs resident per SM. Guesses: the tuning driver times 4096-16384 columns and 4-16 warps.
SPLIT_CHUNK_BYTES = 16384
SPLIT_WARPS = 8
# Split rows: the rows are launched in groups (kernel 1 then kernel 2 per group) of at most this many input bytes,
# so kernel 2 re-reads its group from L2 (60 MiB on the H200; a hot copy is still ~5.8 TB/s at 16 MiB and ~4.0 at
# 24: FACTS.md). Guess: the driver times 16, 32, 48 MiB and no groups. Changes no bit (a row's chunks do not move).
# Measured (s17): one group (0) ran 1.05-1.20x faster than 32 MiB groups at 65536-262144 columns forward and
# backward (the extra launch pairs cost more than the L2 re-reads they save), so the rows go in one launch pair.
SPLIT_GROUP_BYTES = 0
# Kernel 2 combines a row's chunk statistics as one block of at least this many slots (fewer compiled variants;
# the padding adds exact zeros).
MIN_S_BLOCK = 16
# The CPU interpreter splits rows much narrower (so tiny tests take the split path, with many chunks) into 4096-
# column chunks, and groups rows by 256 KiB (so tests launch several groups).
INTERPRETER_ONE_PASS_COLUMNS = {False: 8192, True: 4096}
INTERPRETER_CHUNK = 4096
INTERPRETER_GROUP_BYTES = 256 * 2**10
# One pass: the loads' L2 eviction policy. Measured (H200, s22, h200-tune-softmax-s22.json, do_bench with the L2
# flushed): evict_last ran 1.06-1.12x evict_first at 16384x4096, 8192x8192 and 4096x4100, forward and backward
# (fwd 16384x4096: 66.9 against 72.8 us, 0.94 of copy bandwidth; bwd: 96.1 against 107.7, 0.98); no hint was
# between the two, and streamed stores (.cs, as Liger writes) gained nothing over it. Changes no bit.
ONE_PASS_LOAD_POLICY = "evict_last"
# Narrow rows: rows packed into one program's tile up to this many elements.
PACK_ELEMENTS = 2048
PACK_BELOW = 1024  # power-of-two blocks narrower than this pack rows
MAX_GRID = 2**31 - 1  # programs of one launch (the grid's x dimension)


@dataclass(frozen=True)
class LaunchConfig:
    """How rows of width N are processed: a function of N, the dtype and the direction only (batch invariance)."""

    one_pass: bool
    block: int  # one pass: the (first) power-of-two block; split rows: the chunk width (a power of two)
    num_warps: int
    piece_b: int = 0  # one pass: a second, masked power-of-two piece after block (0: none)
    rows: int = 1  # one pass: rows per program tile
    # Split rows: rows launched in groups of at most this many input bytes (0: all rows in one pair). No bit changes.
    group_bytes: int = 0
    reverse: bool = True  # split rows: kernel 2 walks the programs last to first (most recently read lines first)
    # Split rows read once (kernel_coop.py): the programs of a row hold its chunks and exchange their statistics in
    # one cooperative launch, instead of the two-kernel split that re-reads every chunk. No groups of rows.
    coop: bool = False
    # Read once: each program loads its chunk of the group's next row before it waits for this row's group.
    prefetch: bool = False
    # One pass: the loads' L2 eviction policy (ONE_PASS_LOAD_POLICY; "evict_first": read once, leave first; "":
    # no hint) and the stores' cache modifier ("": the default; ".cs": streamed). No bit changes.
    load_policy: str = ONE_PASS_LOAD_POLICY
    store_cm: str = ""
    # One pass: a persistent grid of at most this many programs per SM walking the row tiles (0: one program a
    # tile). No bit changes (a tile's rows are computed the same whichever program takes them).
    programs_per_sm: int = 0

    def __post_init__(self) -> None:
        if self.prefetch and not self.coop:
            raise ValueError("LaunchConfig: prefetch is a layout of the split rows read once (coop)")
        if self.block < 1 or self.block & (self.block - 1):
            raise ValueError(f"LaunchConfig: block must be a power of two, got {self.block}")
        if self.piece_b and not self.one_pass:
            raise ValueError("LaunchConfig: a second piece is a one-pass layout")
        if self.rows > 1 and not self.one_pass:
            raise ValueError("LaunchConfig: rows per program are a one-pass layout")
        if self.group_bytes and self.one_pass:
            raise ValueError("LaunchConfig: groups of rows are a split-row layout")
        if self.coop and self.one_pass:
            raise ValueError("LaunchConfig: coop (split rows read once) is a split-row layout")
        if self.coop and self.group_bytes:
            raise ValueError("LaunchConfig: coop launches all rows at once (group_bytes must be 0)")
        if self.load_policy not in ("evict_first", "evict_last", ""):
            raise ValueError(f"LaunchConfig: load_policy: evict_first, evict_last or '', got {self.load_policy!r}")
        if self.store_cm not in ("", ".cs", ".wb", ".cg"):
            raise ValueError(f"LaunchConfig: store_cm must be '', .cs, .wb or .cg, got {self.store_cm!r}")
        if self.programs_per_sm < 0 or (self.programs_per_sm and not self.one_pass):
            raise ValueError("LaunchConfig: programs_per_sm is a one-pass layout (>= 0)")

    def width(self) -> int:
        return self.block + self.piece_b

    def describe(self) -> str:
        if self.one_pass:
            pieces = f"{self.block}+{self.piece_b}" if self.piece_b else str(self.block)
            hints = "" if self.load_policy == ONE_PASS_LOAD_POLICY else f" load:{self.load_policy or 'default'}"
            hints += f" store:{self.store_cm}" if self.store_cm else ""
            hints += f" persistent:{self.programs_per_sm}/SM" if self.programs_per_sm else ""
            return f"1-pass BLOCK={pieces} rows={self.rows} warps={self.num_warps}{hints}"
        if self.coop:
            return f"coop CHUNK={self.block} warps={self.num_warps}" + (" prefetch" if self.prefetch else "")
        group = f"groups<={self.group_bytes / 2**20:g}MiB" if self.group_bytes else "one group"
        return f"split CHUNK={self.block} warps={self.num_warps} {group}" + (" reverse" if self.reverse else "")


@dataclass(frozen=True)
class Case:
    """What the layout rules may look at (never the row count)."""

    n: int
    itemsize: int
    bwd: bool = False
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
    if case.bwd and case.block * case.itemsize > BWD_WIDE_ONE_PASS_BYTES:
        warps = 32
    first, second = _pieces(case, warps)
    if second:  # two pieces: warps for the first piece (4100 = 4096 + 256 on 4 warps, not 8192's 8)
        warps = _warps_for(first, case.aligned)
        first, second = _pieces(case, warps)
    return LaunchConfig(True, first, warps, piece_b=second)


def _split(case: Case) -> LaunchConfig:
    return LaunchConfig(False, SPLIT_CHUNK_BYTES // case.itemsize, SPLIT_WARPS, group_bytes=SPLIT_GROUP_BYTES)


def _interpreted(case: Case) -> LaunchConfig:
    """The CPU interpreter: the GPU's one-pass layouts up to a low width, then split rows of 4096-column chunks."""
    if case.block <= INTERPRETER_ONE_PASS_COLUMNS[case.bwd]:
        return _first_layout(replace(case, interpreted=False))
    return LaunchConfig(False, INTERPRETER_CHUNK, SPLIT_WARPS, group_bytes=INTERPRETER_GROUP_BYTES)


@dataclass(frozen=True)
class Rule:
    name: str
    when: Callable[[Case], bool]
    then: Callable[[Case], LaunchConfig]
    why: str


LAYOUTS: tuple[Rule, ...] = (
    Rule("interpreter", lambda c: c.interpreted, _interpreted,
         "CPU tests: split rows from 8192 columns (4096 backward) in 4096-column chunks, so tiny tests split rows"),
    Rule("packed rows", lambda c: c.block < PACK_BELOW, _packed,
         "rows under 1024 columns: one row per program would leave most threads of a warp idle (guess: tune)"),
    Rule("one pass", lambda c: c.block * c.itemsize <= MAX_ONE_PASS_BYTES[c.bwd], _one_pass,
         "the row(s) fit one program's registers: every byte read once, written once (RMSNorm: 64 KB, no spills); "
         "backward rows over 32 KB a tensor on 32 warps (measured, s17: 1.61x split rows at 32768 columns); loads "
         "evict_last (s22: 1.06-1.12x evict_first); two pieces take the first piece's warps (s22, 4096x4100: 4 "
         "warps 1.09x / 1.03x the 8 of an 8192 block, forward / backward)"),
    Rule("split rows", lambda c: True, _split,
         "too wide for registers: one program per (row, 16 KB chunk) fills the GPU at any row count; kernel 1 writes "
         "chunk statistics, kernel 2 re-reads its chunk and writes; all rows in one launch pair (SPLIT_GROUP_BYTES "
         "= 0: measured, s17, 1.05-1.20x over 32 MiB L2 groups)"),
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


def split_plan(m: int, n: int, itemsize: int, cfg: LaunchConfig, bwd: bool = False) -> tuple[int, int]:
    """Split rows: (chunks per row, rows per group). The chunks follow n and the config only; the groups (sized so
    one group's input bytes stay within cfg.group_bytes, balanced) follow m too, and change no bit."""
    chunks = triton.cdiv(n, cfg.block)
    rows = m
    if cfg.group_bytes and m:
        groups = triton.cdiv(m * n * itemsize * (2 if bwd else 1), cfg.group_bytes)
        rows = triton.cdiv(m, groups)
    return chunks, max(1, min(rows, MAX_GRID // chunks))


def s_block(n: int, cfg: LaunchConfig) -> int:
    """Split rows: slots of kernel 2's combine of a row's chunk statistics (a function of n only)."""
    return max(MIN_S_BLOCK, triton.next_power_of_2(triton.cdiv(n, cfg.block)))


# Split rows read once: programs of the cooperative kernel assumed resident per SM before one was compiled (a
# launch captured without a GPU, `launch_info`); launch.py asks the driver for the compiled kernel's count.
COOP_PROGRAMS_PER_SM_GUESS = 4
COOP_SEEN: dict[tuple, int] = {}  # (device index, chunk, warps, bwd) -> programs per SM the driver counted


def coop_groups_bound(chunks: int, device, per_sm: int | None = None) -> int:
    """Groups of `chunks` programs that can be resident at once on device (0: a row's chunks cannot all be)."""
    sms = multiprocessor_count(device)
    return (sms * (per_sm or COOP_PROGRAMS_PER_SM_GUESS)) // chunks


def grid_for(m: int, n: int, itemsize: int, cfg: LaunchConfig, device, bwd: bool = False) -> int:
    """Programs of one launch for m rows: one pass, one per tile (at most 4 under the CPU interpreter, where each
    program instance costs ~1 ms: the kernels grid-stride); split rows, one per (row, chunk) of a group of rows."""
    if m == 0 or n == 0:
        return 0
    if cfg.coop:  # a persistent grid of groups of `chunks` programs (at most as many as are resident: launch.py)
        chunks = triton.cdiv(n, cfg.block)
        seen = COOP_SEEN.get((getattr(device, "index", None) or 0, cfg.block, cfg.num_warps, bwd))
        groups = coop_groups_bound(chunks, device, seen)
        if groups >= 1:
            return chunks * min(m, groups)
        # (a row's chunks cannot all be resident: launch.py takes the two-kernel split, sized below)
    if not cfg.one_pass:
        chunks, rows = split_plan(m, n, itemsize, cfg, bwd)
        return chunks * min(m, rows)
    tiles = triton.cdiv(m, cfg.rows)
    if _INTERPRETED and getattr(device, "type", "cpu") != "cuda":
        return min(tiles, 4)
    if cfg.programs_per_sm:
        return min(tiles, cfg.programs_per_sm * multiprocessor_count(device))
    return tiles
