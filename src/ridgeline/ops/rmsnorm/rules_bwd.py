"""Launch rules of the RMSNorm backward kernels (kernel_bwd.py): ordered tables of data, first match wins.

LAYOUTS choose the row's layout (one pass with the row in registers, or two passes over chunks), its warps and
whether the weight is held in registers, from the hidden size only: dx's bits follow the layout (the order of the
row's two sums), so no rule here looks at the row count and dx is batch invariant.
GRIDS choose the programs per SM of the persistent grid from the rows per SM: that changes only how rows are
grouped into dweight's fp32 partials (deterministic for a given M and GPU), never a bit of dx.

Rows of up to 8192 columns prefetch the program's next row before reducing this one (H200, s19,
docs/results/h200-tune-rmsnorm-bwd-s19.json: 1.16-1.25x the best config without at 4096 and 8192 columns; the s15
tuning's best had stayed under 3.6 TB/s with one row's loads in flight per program). At 16384 columns it spills:
703 us against 78 without (the sweep's record), so that layout does not prefetch. The layouts began as guesses from
the forward's rules (ops/rmsnorm/rules.py: one program of 8-16 warps per 4K-8K row) and the register budget of sm_90
(64K registers per SM; the one-pass row holds x, dy, the weight and the dweight partial: four fp32 values per column
a thread).
scripts/device/tune_rmsnorm_bwd.py times the candidates (`bwd_candidates`) on the H200 and prints the best per
shape: the lead sets these tables from that one run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import triton

# Widest power-of-two block held in registers in one pass (16384 columns over 16-32 warps: 16-32 fp32 per thread
# for each of x, dy and the partial); wider rows take two passes over CHUNK columns.
MAX_ONE_PASS_BLOCK = 16384
CHUNK = 4096
# The dweight reduction's tile: BLOCK_P partials by BLOCK_C columns per step (4 warps, 8 values a thread).
REDUCE_BLOCK_P = 16
REDUCE_BLOCK_C = 64


@dataclass(frozen=True)
class BwdConfig:
    """How a row of the backward is processed; everything but programs_per_sm depends on N only."""

    block_n: int
    single_pass: bool
    num_warps: int
    hold_weight: bool = True  # one pass: load the weight once per program (registers) rather than once per row
    programs_per_sm: int = 1  # persistent grid: programs = min(rows, SMs * this) = dweight's fp32 partials
    prefetch: bool = False  # one pass: load the program's next row before reducing this one (no bit changes)

    def describe(self) -> str:
        kind = f"1-pass BLOCK_N={self.block_n}" if self.single_pass else f"2-pass CHUNK={self.block_n}"
        hold = " w-held" if self.single_pass and self.hold_weight else ""
        pre = " prefetch" if self.single_pass and self.prefetch else ""
        return f"{kind} warps={self.num_warps}{hold}{pre} grid={self.programs_per_sm}/SM"


@dataclass(frozen=True)
class BwdRule:
    """`when(n, rows_per_sm)` -> the LaunchConfig fields in `then` (applied over the earlier tables' config)."""

    name: str
    when: Callable[[int, float], bool]
    then: dict
    why: str


def _block(n: int) -> int:
    return triton.next_power_of_2(n)


# Layout by hidden size (first match wins). Columns a thread holds per tensor = block / (32 * warps).
LAYOUTS: tuple[BwdRule, ...] = (
    BwdRule("two-pass", lambda n, r: _block(n) > MAX_ONE_PASS_BLOCK,
            {"block_n": CHUNK, "single_pass": False, "num_warps": 8},
            "rows wider than 16384 columns do not fit one program's registers with four fp32 values a column"),
    BwdRule("16k", lambda n, r: _block(n) == 16384,
            {"single_pass": True, "num_warps": 16, "hold_weight": False},
            "32 columns a thread per tensor: the weight re-read per row (L1/L2) keeps the program under ~128 "
            "registers; no prefetch (s19: the prefetched row spilled, 703 us at 2048x16384 against 77.8 without; "
            "the best config without it is this one, h200-tune-rmsnorm-bwd-s19.json)"),
    BwdRule("8k", lambda n, r: _block(n) == 8192,
            {"single_pass": True, "num_warps": 16, "hold_weight": True, "prefetch": True},
            "16 columns a thread per tensor; measured (s19 tuning, 16384x8192): the best of 52 candidates, 201.7 us "
            "(3994 GB/s) against 251.8 for the best without the prefetch"),
    BwdRule("4k", lambda n, r: _block(n) == 4096,
            {"single_pass": True, "num_warps": 8, "hold_weight": True, "prefetch": True},
            "16 columns a thread per tensor; measured (s19 tuning, 4096-65536 x 4096): within 1.5% of the best "
            "(16 warps, weight per row), 1.16-1.17x the best without the prefetch"),
    BwdRule("narrow", lambda n, r: True,
            {"single_pass": True, "num_warps": 4, "hold_weight": True, "prefetch": True},
            "up to 2048 columns: 4 warps, at most 16 columns a thread; the prefetch as at 4096 (not timed here)"),
)

# Programs per SM by rows per SM (first match wins).
GRIDS: tuple[BwdRule, ...] = (
    BwdRule("narrow", lambda n, r: _block(n) <= 4096, {"programs_per_sm": 2},
            "rows of up to 4096 columns: two programs per SM hide latency at every batch (H200, s19, "
            "h200-tune-rmsnorm-bwd-s19.json, the shipped 8-warp prefetch layout: 4096x4096 32.7 us against 37.4 at "
            "one per SM and 39.8 at four, 16384x4096 104.2 / 128.9 / 112.9, 65536x4096 391.5 / 499.2 / 404.0; s15 "
            "measured the same without the prefetch)"),
    BwdRule("default", lambda n, r: True, {"programs_per_sm": 1},
            "one program per SM (Liger's and QuACK's grid): fewest fp32 partials for dweight; at 8192 columns "
            "(s19 tuning, 16384x8192, 16 warps with the prefetch) 201.7 us against 208.2 at two per SM"),
)


def bwd_layout(n: int) -> BwdConfig:
    rule = next(r for r in LAYOUTS if r.when(n, 0.0))
    fields = {"block_n": _block(n), **rule.then}
    return BwdConfig(**fields)


def bwd_config(n: int, m: int, sms: int) -> BwdConfig:
    """The config of a backward call on m rows of n columns on a GPU of `sms` SMs."""
    cfg = bwd_layout(n)
    per_sm = m / max(1, sms)
    rule = next(r for r in GRIDS if r.when(n, per_sm))
    return dataclasses.replace(cfg, **rule.then)


def bwd_candidates(n: int) -> list[BwdConfig]:
    """Configs worth timing for hidden size n (scripts/device/tune_rmsnorm_bwd.py): warps, weight held or not,
    programs per SM; for rows that fit, also the two-pass layout (to see what one pass buys)."""
    out: list[BwdConfig] = []
    block = _block(n)
    if block <= MAX_ONE_PASS_BLOCK:
        for warps in (4, 8, 16, 32):
            per_thread = block // (32 * warps)
            if not 2 <= per_thread <= 32:
                continue
            for hold in (True, False):
                for pps in (1, 2, 4):
                    for pre in (False, True):
                        out.append(BwdConfig(block, True, warps, hold, pps, pre))
    for chunk, warps in ((2048, 4), (4096, 8)):
        if chunk < block:
            for pps in (1, 2):
                out.append(BwdConfig(chunk, False, warps, False, pps))
    return out
