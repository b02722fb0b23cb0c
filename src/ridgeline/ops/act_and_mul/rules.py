"""Launch rules of the gated-activation kernels: an ordered table of data, first match wins.

The op is pure bandwidth (fwd: read 2d, write d per row; bwd: read 3d, write 2d), elementwise, so no knob changes a
bit: the rules may look at the row count freely (batch invariance holds for any config; tests check it). What
they choose is the tile a program owns (BLOCK_M rows x BLOCK_N columns), its warps, and an L2 hint on the loads.

Why these values (the same H200 as ops/rmsnorm, FACTS.md): a plain Triton row kernel reaches ~95% of copy
bandwidth once each thread keeps 16-byte accesses in flight and the SMs are full; decode sizes are launch-latency
bound (~1.5 us in a graph), where more, smaller programs spread one row's few KB over more SMs. The numbers below
were set from one tuning run on the H200 (`scripts/device/tune_act_and_mul.py`, its table in
docs/results/h200-tune-act_and_mul.log): each rule's `why` quotes it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import triton

from ridgeline.lib.launch import interpreter_enabled

_INTERPRETED = interpreter_enabled()


@dataclass(frozen=True)
class ActConfig:
    """One launch: tiles of block_m rows x block_n columns (powers of two), num_warps, evict_first on the loads."""

    block_m: int
    block_n: int
    num_warps: int
    evict_first: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "num_warps"):
            v = getattr(self, name)
            if v < 1 or v & (v - 1):
                raise ValueError(f"ActConfig.{name}: expected a power of two >= 1, got {v}")

    def per_thread(self) -> int:
        """Elements of each operand a thread holds."""
        return max(1, self.block_m * self.block_n // (32 * self.num_warps))

    def describe(self) -> str:
        hint = " evict_first" if self.evict_first else ""
        return f"tile {self.block_m}x{self.block_n} w{self.num_warps}{hint}"


@dataclass(frozen=True)
class Call:
    """What a rule may look at: one call on m rows of d output columns of `itemsize`-byte elements."""

    d: int
    itemsize: int
    m: int
    backward: bool = False
    interpreted: bool = False

    def out_bytes(self) -> int:
        return self.m * self.d * self.itemsize


@dataclass(frozen=True)
class Match:
    """Conditions on a call; None matches anything. Bounds are inclusive upper bounds."""

    interpreted: bool | None = None
    backward: bool | None = None
    max_row_bytes: int | None = None  # d * itemsize
    max_out_bytes: int | None = None  # m * d * itemsize (the output of the forward; dy of the backward)

    def __call__(self, c: Call) -> bool:
        return ((self.interpreted is None or c.interpreted == self.interpreted)
                and (self.backward is None or c.backward == self.backward)
                and (self.max_row_bytes is None or c.d * c.itemsize <= self.max_row_bytes)
                and (self.max_out_bytes is None or c.out_bytes() <= self.max_out_bytes))


@dataclass(frozen=True)
class Rule:
    """`match` -> tiles of `tile` elements, `block_n` columns wide (None: the whole row's power of two; never wider
    than it), `num_warps` warps; `why` is the reason, `guess` True until an H200 run has settled it."""

    name: str
    match: Match
    block_n: int | None
    tile: int
    num_warps: int
    evict_first: bool = False
    why: str = ""
    guess: bool = True

    def config(self, c: Call) -> ActConfig:
        row = triton.next_power_of_2(max(1, c.d))
        block_n = min(self.block_n or row, row)
        block_m = max(1, min(self.tile // block_n, triton.next_power_of_2(max(1, c.m))))
        return ActConfig(block_m, block_n, self.num_warps, self.evict_first)


RULES: tuple[Rule, ...] = (
    Rule("interpreter", Match(interpreted=True), block_n=4096, tile=16384, num_warps=4,
         why="the CPU interpreter pays ~1 ms per program and runs a tile as one NumPy array: few large tiles",
         guess=False),
    Rule("narrow rows", Match(max_row_bytes=2048), block_n=None, tile=4096, num_warps=4,
         why="rows of 2 KB or less: whole rows, several per program, so a program still moves >= 8 KB per "
             "operand and no lanes idle past the row's end"),
    Rule("one to four rows", Match(max_out_bytes=128 * 2**10), block_n=512, tile=512, num_warps=4,
         why="a single decode row (28 KB of output at d = 14336): the most programs per byte; on the H200 1x512 "
             "tiles ran 1.16 us against 1.39 for 1x1024 forward, 1.41 against 1.61 backward at 1x28672",
         guess=False),
    Rule("decode backward", Match(max_out_bytes=2 * 2**20, backward=True), block_n=512, tile=1024, num_warps=8,
         why="16-64 rows backward: 2x512 tiles over 8 warps ran 1.89 / 4.26 us against 2.09 / 4.42 for 1x1024 over 4 "
             "at 16 / 64 x 28672", guess=False),
    Rule("decode", Match(max_out_bytes=2 * 2**20), block_n=1024, tile=1024, num_warps=4,
         why="16-64 rows forward (output <= 2 MiB): launch-latency bound; within 2.5% of the best candidate at 16 and "
             "64 x 28672", guess=False),
    Rule("bulk backward", Match(backward=True), block_n=512, tile=1024, num_warps=8,
         why="three loads and two stores a thread, 4 columns a thread over 8 warps: 2x512 tiles ran 105.8 / 136.7 us "
             "against 107.5 / 138.7 for 1x1024 over 4 warps at 4096 x 22016 / 28672 (94-102% of copy bandwidth)",
         guess=False),
    Rule("bulk", Match(), block_n=1024, tile=2048, num_warps=8,
         why="8 columns a thread over 8 warps: 2x1024 tiles ran 22.9 / 83.4 / 322.8 us against 23.4 / 83.8 / 325.1 "
             "for 1x2048 over 4 warps at 1024 / 4096 / 16384 x 28672", guess=False),
)


def first_rule(c: Call) -> Rule:
    return next(r for r in RULES if r.match(c))


@functools.lru_cache(maxsize=4096)
def config_for(d: int, itemsize: int, m: int, backward: bool = False) -> ActConfig:
    """The config of a call (cached: the same object for the same call, which the fast launch path keys on)."""
    call = Call(d, itemsize, m, backward, _INTERPRETED)
    return first_rule(call).config(call)


def candidate_configs(d: int, itemsize: int, m: int) -> list[ActConfig]:
    """The configs the tuning driver times for a call: tiles of 512-4096 elements (never more columns or rows than
    the call has), 2-8 warps at 4-16 elements of an operand a thread (a call smaller than that: one warp),
    evict_first on or off for the tiles of 2048+ elements at 8 or 16 a thread."""
    row = triton.next_power_of_2(max(1, d))
    rows = triton.next_power_of_2(max(1, m))
    out: list[ActConfig] = []
    for tile in (512, 1024, 2048, 4096):
        for block_n in (512, 1024, 2048, 4096):
            bn = min(block_n, row)
            bm = min(max(1, tile // bn), rows, 64)
            for warps in (1, 2, 4, 8):
                cfg = ActConfig(bm, bn, warps)
                fits = (warps > 1 and 4 <= cfg.per_thread() <= 16) or (warps == 1 and bm * bn <= 128)
                if fits and cfg not in out:
                    out.append(cfg)
    out += [ActConfig(c.block_m, c.block_n, c.num_warps, True) for c in list(out)
            if c.block_m * c.block_n >= 2048 and c.per_thread() in (8, 16)]
    return out
