"""Launch rules of the cross-entropy kernel: an ordered table of data, first match wins.

A call is a `Case`: vocab size V, the logits' itemsize, rows N, whether the gradient is written (the training step)
or not (forward only), and the machine (SMs, L2). `config_for(case)` walks RULES and returns the first rule's
`LaunchConfig`, then `bound_programs` applies the L2 rule (how many programs may be in flight at once).

What a row computes (one block in registers, or chunks of BLOCK walked twice) depends on V, the dtype and HAS_GRAD
only, never on N: a row's result does not depend on the batch (batch invariance). The grid (one program per row or
a persistent grid-stride loop over rows) changes no bit.

Status of the numbers: measured on the H200 (bf16, 2026-12-01; docs/results/h200-tune-cross_entropy.json, 264
candidates at 6 shapes per contract). A program per row walking 4096-column chunks with 8 warps was the fastest or
within 3% of it at every V from 32000 to 256000, for the forward and the training step: 2286-2793 GB/s forward,
2363-2473 GB/s the training step. Holding 32000 columns in registers (1711 / 2030 GB/s), 16384-column chunks and
grids capped by the L2 budget (1-4 programs per SM: 788-2456 GB/s) were all slower. The training step still reads
the logits twice (the second read mostly from DRAM): ~0.57 of speed of light; see docs/perf/cross_entropy.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import triton

# The L2 footprint the re-read of a row may use (rows in flight x row bytes), for grids capped by it (the tuner's
# candidates; no shipped rule caps the grid: capped grids were slower, see the module docstring).
L2_REREAD_BUDGET = 12 * 2**20
# Widest row held whole in one program's registers: one chunk. A 32000-column row in registers (16 warps, 64 fp32
# values a thread) ran 25% slower than 4096-column chunks on the H200 (h200-tune-cross_entropy.json).
MAX_SINGLE_COLUMNS = 4096
CHUNK = 4096  # 16 values a thread over 8 warps (measured best against 8192 and 16384)
FINISH_BLOCK = 1024


@dataclass(frozen=True)
class LaunchConfig:
    block: int  # columns per block (SINGLE: >= V)
    num_warps: int
    single: bool  # the row in registers, read once
    programs_per_sm: int = 0  # persistent grid-stride loop with this many programs per SM; 0 = a program per row
    l2_bound: bool = False  # cap the programs in flight so their rows' re-reads stay within L2_REREAD_BUDGET

    def describe(self) -> str:
        grid = f"{self.programs_per_sm}/SM" if self.programs_per_sm else "row/program"
        layout = f"1-pass BLOCK={self.block}" if self.single else f"2-pass BLOCK={self.block}"
        return f"{layout} warps={self.num_warps} grid={grid}" + (" l2-bound" if self.l2_bound else "")


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


RULES: tuple[Rule, ...] = (
    Rule("row in registers", lambda c: triton.next_power_of_2(c.n_cols) <= MAX_SINGLE_COLUMNS, _single,
         "a row of up to 4096 columns is one chunk: read once, in registers"),
    Rule("forward only, chunks", lambda c: not c.has_grad, _chunks,
         "one online (max, sum) pass over 4096-column chunks, a program per row: 2286-2793 GB/s at V = 32000 to "
         "256000 (h200-tune-cross_entropy.json; 8192-column chunks over 16 warps: 2426-2532)"),
    Rule("training step, two passes", lambda c: True, _chunks,
         "stats pass then gradient pass over 4096-column chunks, a program per row: 2363-2473 GB/s; persistent grids "
         "capped so the re-read stays in L2 (1-4 programs per SM) kept too few loads in flight: 788-2456 GB/s"),
)


def first_rule(case: Case) -> Rule:
    return next(r for r in RULES if r.when(case))


@functools.lru_cache(maxsize=4096)
def config_for(case: Case) -> LaunchConfig:
    return first_rule(case).then(case)


def grid_for(case: Case, cfg: LaunchConfig, interpreted: bool = False) -> int:
    """Programs to launch: one a row, or a persistent grid (always under the CPU interpreter: few program instances
    keep CPU tests fast), capped by the L2 rule."""
    if interpreted:
        return max(1, min(case.n_rows, 4))
    if not cfg.programs_per_sm:
        return max(1, case.n_rows)
    programs = case.sms * cfg.programs_per_sm
    if cfg.l2_bound:
        row_bytes = case.n_cols * case.itemsize
        programs = min(programs, max(case.sms // 4, L2_REREAD_BUDGET // max(1, row_bytes)))
    return max(1, min(case.n_rows, programs))


__all__ = ["LaunchConfig", "Case", "Rule", "RULES", "config_for", "grid_for", "first_rule", "L2_REREAD_BUDGET",
           "MAX_SINGLE_COLUMNS", "CHUNK", "FINISH_BLOCK"]
