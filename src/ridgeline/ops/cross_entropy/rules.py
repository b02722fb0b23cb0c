"""Launch rules of the cross-entropy kernel: an ordered table of data, first match wins.

A call is a `Case`: vocab size V, the logits' itemsize, rows N, whether the gradient is written (the training step)
or not (forward only), and the machine (SMs, L2). `config_for(case)` walks RULES and returns the first rule's
`LaunchConfig`, then `bound_programs` applies the L2 rule (how many programs may be in flight at once).

What a row computes (one block in registers, or chunks of BLOCK walked twice) depends on V, the dtype and HAS_GRAD
only, never on N: a row's result does not depend on the batch (batch invariance). The grid (one program per row or
a persistent grid-stride loop over rows) changes no bit.

Status of the numbers: measured on the H200 (bf16). Session 19
(docs/results/h200-tune-cross_entropy-lanes-back-s19.json, commit 01a5666, 410 candidates at 5 shapes per contract:
every per-lane layout and grid, and for the training step each also walking its gradient pass back): the chunked pass
keeping its (max, sum) per lane with no block reduction in the loop (`lanes`, kernel._lane_stats), a program per row,
is the fastest layout for both contracts. Forward only, 8192-column chunks over 8 warps: 2900-4246 GB/s (0.68-0.99 of
the copy rate; 0.96x the best at 1024 rows). Training step: 16384 columns over 16 warps walking back from 128256
columns (2701-2951 GB/s, the best at every such shape; +3-6% on the forward walk), 8192 over 8 at 32000 (3285 GB/s:
64 KB rows are re-read from L2; walking back there is slower). Against s16's block-reduction loop (the first lanes
run, a02050c, beside it, in git: `git show f0ced28:docs/results/h200-tune-cross_entropy-lanes-s19.json`): forward
1.45-1.63x, training step 1.12-1.35x. The training step still reads the logits twice; see docs/perf/cross_entropy.md.
Persistent grids (1-4 programs per SM, or capped so the re-read stays in L2) were slower in s16 and again with lanes
in s19.

Split rows (kernel_split.py), a candidate no shipped rule picks (RIDGELINE_XENT_SPLIT=1 turns its rule on): each row
cut into S = cdiv(V, chunk) chunks (`split_config`: 16 KB of the dtype, from V and the dtype only), a program per
(row, chunk); the training step's rows launched in groups of at most 32 MiB of logits (`split_plan`) so kernel 2's
re-read comes from L2. Timed s19 (129 candidates at 3 shapes, in git: `git show
f0ced28:docs/results/h200-tune-cross_entropy-split-s19.json`): best 2467-2634 GB/s for the training step and
3050-3734 forward, behind the lanes layouts at every shape.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

import triton

# The L2 footprint the re-read of a row may use (rows in flight x row bytes), for grids capped by it (the tuner's
# candidates; no shipped rule caps the grid: capped grids were slower, see the module docstring).
L2_REREAD_BUDGET = 12 * 2**20
# Widest row held whole in one program's registers: one chunk. A 32000-column row in registers (16 warps, 64 fp32
# values a thread) ran 25% slower than 4096-column chunks on the H200 (s16's tuning, in git:
# `git show f0ced28:docs/results/h200-tune-cross_entropy.json`).
MAX_SINGLE_COLUMNS = 4096
CHUNK = 4096  # 16 values a thread over 8 warps (s16's block-reduction loop: best against 8192 and 16384)
# Per-lane statistics (s19): forward 8192 columns over 8 warps; the training step the same for rows of at most
# LANES_WIDE_FROM bytes (measured at 64 KB: the re-read of such rows hits L2), 16384 over 16 warps above (measured
# from 256 KB; rows between are unmeasured and take the wide layout).
LANES_CHUNK, LANES_WARPS = 8192, 8
LANES_WIDE_CHUNK, LANES_WIDE_WARPS = 16384, 16
LANES_WIDE_FROM = 128 * 2**10
FINISH_BLOCK = 1024
# Split rows (the candidate): chunk bytes of logits (8192 16-bit columns, 4096 fp32) over 8 warps: 64 bytes a thread,
# four 16-byte loads; rows launched in groups of at most 32 MiB of logits so kernel 2's re-read comes from the 60 MiB
# L2 (a hot copy is ~5.8 TB/s at 16 MiB, ~4.0 at 24: FACTS.md) while it writes the gradient. Guesses, as softmax's
# split (ops/softmax/rules.py): the tuning driver times 2048-16384 columns, 4-16 warps, 16/32/48 MiB and one group.
SPLIT_CHUNK_BYTES = 16384
SPLIT_WARPS = 8
SPLIT_GROUP_BYTES = 32 * 2**20
MIN_S_BLOCK = 16  # kernel 2 combines a row's chunk partials as one block of at least this many slots
MAX_GRID = 2**31 - 1  # programs of one launch (the grid's x dimension)
# RIDGELINE_XENT_SPLIT=1 (read at import) makes the rules pick split rows for every row wider than one block: the
# whole harness (check, bench) can then run the candidate beside the shipped layout in another process.
SPLIT_ENABLED = os.environ.get("RIDGELINE_XENT_SPLIT", "0") not in ("", "0")


@dataclass(frozen=True)
class LaunchConfig:
    block: int  # columns per block (SINGLE: >= V)
    num_warps: int
    single: bool  # the row in registers, read once
    programs_per_sm: int = 0  # persistent grid-stride loop with this many programs per SM; 0 = a program per row
    l2_bound: bool = False  # cap the programs in flight so their rows' re-reads stay within L2_REREAD_BUDGET
    # Split rows (kernel_split.py, a candidate no shipped rule picks yet): `block` is the chunk width, a program per
    # (row, chunk); the rows launched in groups of at most `group_bytes` of logits (0: one group); kernel 2 walks
    # the programs last to first when `reverse`. Neither the groups nor the walk changes a bit.
    split: bool = False
    group_bytes: int = 0
    reverse: bool = True
    # Split rows read once (kernel_coop.py, the training step): the programs of a row hold its chunks and exchange
    # their statistics in one cooperative launch instead of two kernels; the forward alone keeps the split kernels.
    coop: bool = False
    # Read once: each program loads its chunk of the group's next row before it waits for this row's group.
    prefetch: bool = False
    # Chunked rows: the first pass keeps its (max, sum) per lane, reduced across the program once a row
    # (kernel._lane_stats), instead of block reductions every chunk.
    lanes: bool = False
    # Chunked rows, training step: the gradient pass walks the chunks last to first (the most recently read first:
    # more of its re-read from L2). No bit changes.
    back: bool = False

    def __post_init__(self) -> None:
        if self.back and (self.single or self.split):
            raise ValueError("LaunchConfig: back is a layout of the chunked rows (not single, not split)")
        if self.lanes and (self.single or self.split):
            raise ValueError("LaunchConfig: lanes is a layout of the chunked rows (not single, not split)")
        if self.prefetch and not self.coop:
            raise ValueError("LaunchConfig: prefetch is a layout of the split rows read once (coop)")
        if self.split and (self.single or self.programs_per_sm or self.l2_bound):
            raise ValueError("LaunchConfig: split rows take no single/programs_per_sm/l2_bound")
        if self.coop and (not self.split or self.group_bytes):
            raise ValueError("LaunchConfig: coop is a split-row layout launching all rows at once (split=True, "
                             "group_bytes=0)")
        if self.split and (self.block < 16 or self.block & (self.block - 1)):
            raise ValueError(f"LaunchConfig: the split chunk must be a power of two >= 16, got {self.block}")

    def describe(self) -> str:
        if self.coop:
            return f"coop CHUNK={self.block} warps={self.num_warps}" + (" prefetch" if self.prefetch else "")
        if self.split:
            group = f"groups {self.group_bytes >> 20} MiB" if self.group_bytes else "one group"
            return f"split CHUNK={self.block} warps={self.num_warps} {group}" + (" reverse" if self.reverse else "")
        grid = f"{self.programs_per_sm}/SM" if self.programs_per_sm else "row/program"
        layout = f"1-pass BLOCK={self.block}" if self.single else f"2-pass BLOCK={self.block}"
        return (f"{layout} warps={self.num_warps} grid={grid}" + (" l2-bound" if self.l2_bound else "")
                + (" lanes" if self.lanes else "") + (" back" if self.back else ""))


@dataclass(frozen=True)
class Case:
    n_cols: int
    itemsize: int
    n_rows: int = 1
    has_grad: bool = True
    sms: int = 132
    l2_bytes: int = 60 * 2**20


@dataclass(frozen=True)
class Rule:
    name: str
    when: Callable[[Case], bool]
    then: Callable[[Case], LaunchConfig]
    why: str


def _warps_for(block: int) -> int:
    """About 16 float32 values a thread (8 for small blocks), 1-16 warps."""
    return max(1, min(16, block // 512))


def _single(case: Case) -> LaunchConfig:
    block = triton.next_power_of_2(case.n_cols)
    return LaunchConfig(block, _warps_for(block), True)


def _chunks(case: Case) -> LaunchConfig:
    return LaunchConfig(CHUNK, 8, False)


def _lanes_forward(case: Case) -> LaunchConfig:
    return LaunchConfig(LANES_CHUNK, LANES_WARPS, False, lanes=True)


def _lanes_training(case: Case) -> LaunchConfig:
    if case.n_cols * case.itemsize <= LANES_WIDE_FROM:
        return LaunchConfig(LANES_CHUNK, LANES_WARPS, False, lanes=True)
    return LaunchConfig(LANES_WIDE_CHUNK, LANES_WIDE_WARPS, False, lanes=True, back=True)


def split_config(n_cols: int, itemsize: int, chunk: int = 0, num_warps: int = SPLIT_WARPS,
                 group_bytes: int = SPLIT_GROUP_BYTES, reverse: bool = True, coop: bool = False,
                 prefetch: bool = False) -> LaunchConfig:
    """The split-row candidate for rows of n_cols (chunk 0: SPLIT_CHUNK_BYTES of the dtype, at most the row's
    power-of-two width). From V and the dtype only: the row count never changes a chunk. `coop`: read once
    (kernel_coop.py; all rows in one launch, so no groups), `prefetch`: its next row loaded during the wait."""
    if not chunk:
        chunk = max(16, min(SPLIT_CHUNK_BYTES // itemsize, triton.next_power_of_2(n_cols)))
    return LaunchConfig(chunk, num_warps, False, split=True, group_bytes=0 if coop else group_bytes,
                        reverse=reverse, coop=coop, prefetch=prefetch)


def _split(case: Case) -> LaunchConfig:
    return split_config(case.n_cols, case.itemsize)


RULES: tuple[Rule, ...] = (
    Rule("row in registers", lambda c: triton.next_power_of_2(c.n_cols) <= MAX_SINGLE_COLUMNS, _single,
         "a row of up to 4096 columns is one chunk: read once, in registers"),
    Rule("split rows (candidate, off)", lambda c: SPLIT_ENABLED, _split,
         "only with RIDGELINE_XENT_SPLIT=1: a program per (row, 8192-column chunk), the training step's re-read "
         "from L2 in 32 MiB groups of rows; timed s19: behind the lanes layouts at every shape (module docstring)"),
    Rule("forward only, chunks", lambda c: not c.has_grad, _lanes_forward,
         "measured (H200, s19, h200-tune-cross_entropy-lanes-back-s19.json): one pass over 8192-column chunks, 8 "
         "warps, (max, sum) per lane, a program per row: 2900-4246 GB/s at V = 32000 to 256000, the best or within "
         "0.5% at 4 of 5 shapes, 0.96x the best at 1024 rows; 1.45-1.63x s16's block reductions every 4096 columns"),
    Rule("training step, two passes", lambda c: True, _lanes_training,
         "measured (H200, s19, h200-tune-cross_entropy-lanes-back-s19.json): the per-lane stats pass then the "
         "gradient pass, a program per row; 16384-column chunks over 16 warps from 128256 columns with the gradient "
         "pass last chunk first (2701-2951 GB/s, the best at all 4 such shapes, +3-6% on the forward walk), 8192 over "
         "8 for rows of <= 128 KB (3285 GB/s at 32000, the best: the re-read hits L2); persistent and L2-capped grids "
         "were slower"),
)


def first_rule(case: Case) -> Rule:
    return next(r for r in RULES if r.when(case))


@functools.lru_cache(maxsize=4096)
def config_for(case: Case) -> LaunchConfig:
    return first_rule(case).then(case)


def grid_for(case: Case, cfg: LaunchConfig, interpreted: bool = False) -> int:
    """Programs to launch: one a row, or a persistent grid (always under the CPU interpreter: few program instances
    keep CPU tests fast), capped by the L2 rule."""
    if cfg.split:
        chunks, rows = split_plan(case.n_rows, case.n_cols, case.itemsize, cfg, case.has_grad)
        return chunks * max(1, min(case.n_rows, rows))  # (the first group's kernel 1)
    if interpreted:
        return max(1, min(case.n_rows, 4))
    if not cfg.programs_per_sm:
        return max(1, case.n_rows)
    programs = case.sms * cfg.programs_per_sm
    if cfg.l2_bound:
        row_bytes = case.n_cols * case.itemsize
        programs = min(programs, max(case.sms // 4, L2_REREAD_BUDGET // max(1, row_bytes)))
    return max(1, min(case.n_rows, programs))


def lane_columns(cfg: LaunchConfig, itemsize: int) -> int:
    """Lanes of the chunked pass's per-lane statistics (0: block reductions each chunk): 16 bytes of the dtype a
    thread over the program's threads, at most the chunk, so a lane is one thread's (kernel._lane_stats)."""
    if not cfg.lanes:
        return 0
    return min(cfg.block, max(1, 16 // itemsize) * 32 * cfg.num_warps)


def split_plan(n_rows: int, n_cols: int, itemsize: int, cfg: LaunchConfig, has_grad: bool = True
               ) -> tuple[int, int]:
    """Split rows: (chunks per row, rows per group). The chunks follow V and the config only; the groups (balanced,
    each at most cfg.group_bytes of logits; one group for the forward, which re-reads nothing) follow the row count
    too and change no bit."""
    chunks = triton.cdiv(n_cols, cfg.block)
    rows = max(1, n_rows)
    if has_grad and cfg.group_bytes and n_rows:
        groups = triton.cdiv(n_rows * n_cols * itemsize, cfg.group_bytes)
        rows = triton.cdiv(n_rows, groups)
    return chunks, max(1, min(rows, MAX_GRID // chunks))


def s_block(n_cols: int, cfg: LaunchConfig) -> int:
    """Split rows: slots of kernel 2's combine of a row's chunk partials (from V and the chunk only)."""
    return max(MIN_S_BLOCK, triton.next_power_of_2(triton.cdiv(n_cols, cfg.block)))


__all__ = ["LaunchConfig", "Case", "Rule", "RULES", "config_for", "grid_for", "first_rule", "L2_REREAD_BUDGET",
           "MAX_SINGLE_COLUMNS", "CHUNK", "FINISH_BLOCK", "split_config", "split_plan", "s_block", "SPLIT_CHUNK_BYTES",
           "SPLIT_WARPS", "SPLIT_GROUP_BYTES", "SPLIT_ENABLED"]
