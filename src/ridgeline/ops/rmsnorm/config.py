"""Launch configurations of the RMSNorm kernel (ops/rmsnorm/kernel.py): the `LaunchConfig` knobs, the row pieces,
the candidates the explore script times and the two-pass fallbacks. The measured rules that pick one per call are
the table in rules.py. Pure Python: no kernel here.

What decides a row's arithmetic (layout, warps, passes) depends on the hidden size and dtypes only, never on the
row count, so outputs are batch invariant; the knobs `config_for` sets per row count change no bit
(tests/ops/rmsnorm/test_rules.py checks both).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import triton

# Widest row held whole in one program's registers (64 KB: 32768 16-bit columns over 16 warps, 114-126
# registers, no spills for sm_90); wider rows are split across programs in chunks of CHUNK_BLOCK columns (or,
# where that cannot run, loop over them twice).
MAX_SINGLE_PASS_BYTES = 65536
# One pass over more columns than this: the FP8 epilogues keep two passes (their max needs more registers;
# not measured in one pass), as does a weight wider than x loaded with it (it would not fit 128 registers).
WIDE_ONE_PASS = 16384
# Rows of pieces wider than WIDE_ONE_PASS (rows off 16 bytes and fp32 rows: aligned 16-bit rows are chunked since
# session 8) load the weight after the reduction beyond one row per SM. Loaded with x, it takes a program's
# registers past 64 for one op or the other (sm_90: fused 16388 72, 18000 80; plain
# 20000 79; fused 20000 90), which leaves one program of 16 warps per SM instead of two: 134.0 vs 94.4 us at
# 4096x20000 (fused 218.3 vs 166.9). Where it fits (16896: 64 for both) the weight first was 2-4% faster at 2048
# rows (43.3 vs 44.9 us, fused 70.0 vs 71.0): the smaller loss (h200-explore-s5-w32k*.json).
CHUNK_BLOCK = 8192
# Programs sharing one row at most: all of a row's programs must be resident at once (H200: 264 of 16 warps).
MAX_SPLIT = 64
# Narrowest row split across programs. At 32768 columns the two-pass kernel was faster from 128 rows up on the
# H200 (9.9 vs 11.2 us at 128 rows, 152.7 vs 158.9 at 4096); at 65536 the split row won at 1, 64 and 2048 rows
# (6.9 vs 16.1, 11.2 vs 14.9, 155.7 vs 178.6 us), fused too (h200-explore-split-final*.json).
MIN_SPLIT_COLUMNS = 32769


@dataclass(frozen=True)
class LaunchConfig:
    """How a row of hidden size N is processed; a function of N and dtypes only (batch invariance)."""

    block_n: int
    single_pass: bool
    num_warps: int
    # Programs per SM of the persistent grid-stride loop; 0 launches one program per row. Either way a row's
    # arithmetic is the same, so this may depend on M without breaking batch invariance.
    programs_per_sm: int = 0
    # One pass: further power-of-two pieces of the row after the first block_n columns (0 = none); with
    # pieces, block_n <= N and only the last piece is masked.
    piece_b: int = 0
    piece_c: int = 0
    # Two passes: the second pass walks the chunks last to first; L2 eviction hints on the two passes.
    reverse_pass2: bool = False
    l2_hints: bool = False
    # With one program per row: no grid-stride loop around the row (a persistent grid always loops).
    loop_free: bool = False
    # One pass: load the weight with x, before the reduction (latency-bound small batches gain a memory round
    # trip; large ones lose occupancy to the registers it holds). Neither changes the arithmetic.
    weight_first: bool = False
    # Register cap per thread for ptxas (0 = its choice): trades a few spills for more programs per SM.
    max_registers: int = 0
    # Rows per SM (lo, hi] where `config_for` launches the lean variant instead (no weight first, registers
    # capped at lean_max_registers): where the weight's registers would cost a second wave of programs.
    lean_zone: tuple[int, int] = (0, 0)
    lean_max_registers: int = 0
    # Dynamic FP8, one pass: reduce max |x * w| with the sum of squares (one block reduction instead of two; needs
    # the weight first). The scale is then rstd * max |x * w|, which equals max |y| bitwise because y is
    # (x * w) * rstd for this op (`_y_piece`), so it changes no bit and may follow the row count. Ignored by the
    # other ops.
    joint_max: bool = False
    # Wide rows: this many programs share a row, each holding block_n columns (a chunk) in registers, and they
    # exchange partial sums (kernels/rmsnorm_split.py). programs_per_sm then caps the programs per SM (0: as
    # many as fit). The CPU interpreter cannot run it: `config_for` takes `two_pass_config` there.
    split: int = 0
    # Two passes: unroll each pass's loop over chunks this many times (0/1: not), so that many chunks' loads are
    # in flight together; changes no bit (the same additions in the same order).
    unroll: int = 0
    # One pass: L2 eviction hints for rows that are read and written once (x, residual, y, residual_out:
    # evict_first) and for the weight every row reads (evict_last). Changes no bit.
    stream_hints: bool = False
    # Rows per SM (lo, hi] where `config_for` sets stream_hints.
    stream_zone: tuple[int, int] = (0, 0)
    # One pass: evict_first on the loads of x and the residual only (the weight evict_last, the stores without a
    # hint), as inductor's kernels load rows they read once: the outputs, which the next kernel reads, are not the
    # first to leave L2. Ignored under stream_hints. Changes no bit.
    stream_loads: bool = False
    # Rows per SM (lo, hi] where `config_for` may set stream_loads (its L2 rule decides within).
    stream_loads_zone: tuple[int, int] = (0, 1 << 40)
    # The hidden size compiled in as a constant (one kernel per hidden size): the two-pass loops then unroll, with
    # every chunk's loads in flight at once, and loads the masks switch off wholly drop out.
    const_n: bool = False
    # One pass over two or three pieces of block_n (piece_b == block_n, piece_c 0 or block_n): summed elementwise
    # before the block reduction, the order of the two-pass kernel over chunks of block_n with the same warps, so
    # the two give the same bits and the row count may choose between them (`two_pass_zone`).
    chunk_sum: bool = False
    # Rows per SM (lo, hi] where `config_for` launches the two-pass equivalent of a chunk_sum config instead.
    two_pass_zone: tuple[int, int] = (0, 0)
    # Rows per SM (lo, hi] where `config_for` compiles the hidden size in (const_n), on top of the lean and stream
    # zones. (Only with a weight as narrow as x and no FP8 epilogue: those paths return before the zones.)
    const_n_zone: tuple[int, int] = (0, 0)
    # Fused op, one pass: every piece's x and residual (and the weight, when first) loaded before the first
    # residual_out store (piece by piece, a later load waits for the earlier store: the compiler cannot prove the
    # tensors apart; with one block, the weight's load waits for it). Not set on one block by any rule (measured in
    # session 10: 1x4096 graph-hot 1.61-1.68 us vs 1.65, no gain). Changes no bit (the same additions, stores and
    # sums). `launch_config` sets it for the fused op's 16-bit pieces, its chunks of 8192 (16384-24568 columns; not
    # the two chunks of 16384 from 24576, not measured there) and of 2048 (4096 columns, up to 8 rows per SM:
    # `_stream` clears it, see `chunked_config`), with a 16-bit weight (at 4096 columns also an fp32 one loaded first,
    # `config_for`): graph-cold on the H200 (h200-explore-s9-hoist-fused.json) 1x20000 3.73 vs 4.40 us, 2048x16896
    # 69.42 vs 70.48, 4096x4100 34.78 vs 35.97, 4096x5125 50.52 vs 51.85, 4096x5120 41.85 vs 42.51, 1024x5120 11.73
    # vs 11.86 (and 1x5120 2.28 vs 2.69, h200-explore-s8-hoist-fused.json). Not with FP8 epilogues (not measured
    # there).
    hoist_loads: bool = False

    def __post_init__(self) -> None:
        if self.piece_c and not self.piece_b:
            raise ValueError("LaunchConfig: piece_c needs piece_b")
        if (self.piece_b or self.piece_c) and not self.single_pass:
            raise ValueError("LaunchConfig: row pieces are a one-pass layout")
        if self.split and self.single_pass:
            raise ValueError("LaunchConfig: a split row is not a one-pass layout")
        if self.chunk_sum and not (self.single_pass and self.piece_b == self.block_n
                                   and self.piece_c in (0, self.block_n)):
            raise ValueError("LaunchConfig: chunk_sum needs one pass over two or three pieces of block_n")


    def width(self) -> int:
        """Columns one pass covers: rows up to this wide fit (one pass, split rows), or the chunk width (two
        passes)."""
        return self.block_n * max(1, self.split) + self.piece_b + self.piece_c

    def describe(self) -> str:
        grid = f"{self.programs_per_sm}/SM" if self.programs_per_sm else "row/program"
        if self.loop_free:
            grid += " no-loop"
        if self.weight_first:
            grid += " w-first"
        if self.max_registers:
            grid += f" regs<={self.max_registers}"
        if self.joint_max:
            grid += " joint-max"
        if self.stream_hints:
            grid += " stream"
        elif self.stream_loads:
            grid += " stream-loads"
        if self.const_n:
            grid += " const-N"
        if self.chunk_sum:
            grid += " chunk-sum"
        if self.hoist_loads:
            grid += " hoist"
        if self.split:
            grid = f"{self.programs_per_sm}/SM" if self.programs_per_sm else "resident"
            return f"split {self.split}x{self.block_n} warps={self.num_warps} grid={grid}" + (
                " w-first" if self.weight_first else "")
        if self.single_pass:
            pieces = "+".join(str(p) for p in (self.block_n, self.piece_b, self.piece_c) if p)
            return f"1-pass BLOCK_N={pieces} warps={self.num_warps} grid={grid}"
        extra = "".join((" reverse" if self.reverse_pass2 else "", " l2hints" if self.l2_hints else "",
                         f" unroll={self.unroll}" if self.unroll > 1 else ""))
        return f"2-pass BLOCK_N={self.block_n} warps={self.num_warps} grid={grid}{extra}"


def row_pieces(n: int, max_pieces: int = 3, min_piece: int = 1) -> tuple[int, ...]:
    """Split a row of n columns into power-of-two pieces, largest first: 5120 -> (4096, 1024), 7168 -> (4096,
    2048, 1024); the last piece is rounded up (masked) when n has more set bits than max_pieces allows, and to
    at least min_piece (pieces no smaller than a program's threads: 4100 -> (4096, 128) with 4 warps)."""
    pieces: list[int] = []
    rest = n
    while rest > 0:
        p = 1 << (rest.bit_length() - 1)
        if len(pieces) == max_pieces - 1 or p < min_piece:
            pieces.append(max(triton.next_power_of_2(rest), min_piece if pieces else 1))
            break
        pieces.append(p)
        rest -= p
    return tuple(pieces)


def candidate_configs(n: int) -> list[LaunchConfig]:
    """The configs worth timing for hidden size n (scripts/explore_rmsnorm.py sweeps them): warps around the
    current choice, the row as one masked power-of-two block or as exact power-of-two pieces, and for wide or
    unaligned rows two-pass variants (chunk width, warps, persistent grid, second pass reversed, L2 hints)."""
    from ridgeline.ops.rmsnorm.rules import chunked_candidates  # (the shipped chunked layouts are rules)

    out = []
    block = triton.next_power_of_2(n)
    # (up to 32768 16-bit columns in one pass, no spills for sm_90: 16 warps 114-126 registers, 32 warps 61-64)
    if block * 2 <= MAX_SINGLE_PASS_BYTES:
        for warps in (1, 2, 4, 8, 16, 32):
            layouts = [(block, 0, 0)]
            pieces = row_pieces(n, min_piece=32 * warps)
            if len(pieces) > 1 and pieces[0] != block:
                layouts.append((*pieces, 0, 0)[:3])
            for first, b, c in layouts:
                per_thread = first // (32 * warps)
                if 2 <= per_thread <= 64:
                    for loop_free in (False, True):
                        for w_first in (False, True):
                            out.append(LaunchConfig(first, True, warps, 0, b, c, loop_free=loop_free,
                                                    weight_first=w_first))
    out += split_candidates(n)
    unaligned = (n * 2) % 16 != 0
    if not unaligned:
        out += chunked_candidates(n)
    orders = ((False, False), (True, False), (True, True), (False, True))
    if block > 16384:  # wide rows: two passes only
        for chunk, warps in ((8192, 16), (4096, 8)):
            for per_sm in (0, 2):
                for rev, hints in orders:
                    out.append(LaunchConfig(chunk, False, warps, per_sm, reverse_pass2=rev, l2_hints=hints))
    elif unaligned and n >= 2048:
        for chunk in (1024, 2048):
            for rev, hints in orders[:2]:
                out.append(LaunchConfig(chunk, False, 8, 0, reverse_pass2=rev, l2_hints=hints))
    elif n >= 16384:
        for rev, hints in orders:
            out.append(LaunchConfig(8192, False, 16, 0, reverse_pass2=rev, l2_hints=hints))
    return out


def split_candidates(n: int) -> list[LaunchConfig]:
    """Rows of 16K columns and more split across programs: chunk widths and warps, the weight loaded with x or
    after the wait (as many programs per SM as fit: one per SM was 1.3-3x slower at 2048x65536 on the H200)."""
    out = []
    if n < 16384:
        return out
    for chunk, warps in ((4096, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16)):
        split = triton.cdiv(n, chunk)
        if 2 <= split <= MAX_SPLIT:
            for weight_first in (False, True):
                out.append(LaunchConfig(chunk, False, warps, split=split, weight_first=weight_first))
    return out


@functools.lru_cache(maxsize=64)
def two_pass_of(cfg: LaunchConfig) -> LaunchConfig:
    """The two-pass kernel that sums a row in the order of the chunk_sum config `cfg` (same chunks and warps):
    one program per row, L2 hints (the second pass re-reads the row from L2), the hidden size compiled in."""
    return LaunchConfig(cfg.block_n, False, cfg.num_warps, 0, l2_hints=True, loop_free=True, const_n=True)


def two_pass_config(fused: bool) -> LaunchConfig:
    """Rows too wide for one program, where a split row cannot run (CPU interpreter, FP8 epilogues, rows split
    more than MAX_SPLIT ways): two passes over 8K-column chunks, the second re-reading the row from L2."""
    if fused:
        return LaunchConfig(CHUNK_BLOCK, False, 16, reverse_pass2=True, l2_hints=True)
    return LaunchConfig(CHUNK_BLOCK, False, 16, programs_per_sm=2, l2_hints=True)
