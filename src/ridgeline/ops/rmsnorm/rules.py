"""Launch configurations of the RMSNorm kernel (ops/rmsnorm/kernel.py): the `LaunchConfig` knobs, the candidates the
explore script times, and the measured rules that pick one per call (`launch_config` by hidden size and dtype,
`config_for` by row count, op and output). Pure Python: no kernel here.

What decides a row's arithmetic (layout, warps, passes) depends on the hidden size and dtypes only, never on the
row count, so outputs are batch invariant; the knobs `config_for` sets per row count change no bit
(tests/test_rmsnorm_configs.py checks both).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton

from ridgeline.lib.launch import interpreter_enabled, multiprocessor_count
from ridgeline.ops.rmsnorm.quant import QUANT_DYNAMIC
from ridgeline.ops.rmsnorm.split import chunk_for

# Read once: Triton decided at import whether it interprets (the CPU interpreter cannot run split rows).
_INTERPRETED = interpreter_enabled()

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


@functools.lru_cache(maxsize=1024)
def launch_config(n: int, dtype: torch.dtype, fused: bool = False) -> LaunchConfig:
    """The launch configuration for rows of n columns (docs/perf/rmsnorm.md has the sweeps behind each rule).

    What decides the arithmetic (row layout, warps, one pass or two) depends on n and the dtype only, and is the
    same for the plain and the fused op: outputs are batch invariant and `fused.out == rms_norm(residual_out)`
    bitwise. The other knobs change no bit and may follow the op (and, in `config_for`, the row count).
    - Rows up to 64 KB (32768 16-bit columns) stay in registers (one pass), loaded with the weight before the
      reduction, one program per row without a loop. Rows whose power-of-two block would leave over a quarter
      of the lanes idle are split into power-of-two pieces (5120 = 4096 + 1024, 5125 = 4096 + 1024 + 128).
    - 16-bit rows of 4096 columns: two chunks of 2048 over 8 warps, summed in the two-pass order (one pass for few
      rows, two for many: the same bits).
    - 16-bit rows of 16K-32K columns (multiples of 16 bytes): equal chunks (two of 8192 over 16 warps at 16384
      columns, three of 8192 over 16 warps above, from 24576 columns two of 16384 over 32 warps), the hidden size
      compiled in, summed in the two-pass kernel's order, so `config_for` may read them in one pass (few rows) or
      two (many) with the same bits (`chunked_config`).
    - Warps: about 16 columns a thread for rows that are a multiple of 16 bytes (16-byte vectors), 32 for the
      others (narrower vectors need more of them in flight), between 1 and 16 warps.
    - Wider rows: split across programs of 8192 columns and 8 warps that exchange partial sums
      (kernels/rmsnorm_split.py), every byte read once. Where a split row cannot run (and fp32 rows of 16K-32K
      columns): two passes over 8K-column chunks, 16 warps, with L2 eviction hints so the second pass finds the
      row in L2; the plain op runs 2 programs per SM, the fused one walks the second pass backwards.
    """
    block = triton.next_power_of_2(n)
    if block * dtype.itemsize > MAX_SINGLE_PASS_BYTES:
        split = triton.cdiv(n, CHUNK_BLOCK)
        if MIN_SPLIT_COLUMNS <= n and split <= MAX_SPLIT:
            return LaunchConfig(chunk_for(n, split), False, 8, split=split)
        return two_pass_config(fused)
    chunked = chunked_config(n, fused) if dtype.itemsize == 2 and (n * 2) % 16 == 0 else None
    if chunked is not None:
        return chunked
    return register_config(n, dtype, fused)


@functools.lru_cache(maxsize=1024)
def register_config(n: int, dtype: torch.dtype, fused: bool = False) -> LaunchConfig:
    """A row of n columns held in one program's registers as one power-of-two block or as power-of-two pieces (what
    `launch_config` picks outside the chunked widths and the wide rows; the FP8 epilogues keep it at 4096 and 16384
    columns).
    The fused op loads every 16-bit piece's x and residual before its first store (`hoist_loads`; no bit changes)."""
    block = triton.next_power_of_2(n)
    per_thread = 16 if (n * dtype.itemsize) % 16 == 0 else 32
    warps = min(16, max(1, 1 << ((n // (32 * per_thread)).bit_length() - 1))) if n >= 64 * per_thread else 1
    # Pieces no smaller than the program's threads: a piece spread over more threads than it has columns
    # replicates them, and the fused op gave wrong, nondeterministic bits that way on the H200 (4100 = 4096 + 4).
    pieces = row_pieces(n, min_piece=32 * warps)
    if len(pieces) > 1 and (block - n) * 4 > block:
        first, b, c = (*pieces, 0, 0)[:3]
    else:
        first, b, c = block, 0, 0
    # (Hoisted only for 16-bit rows, where it was measured: an fp32 row of 12000 columns went from 64 to 78 registers,
    # one program of 16 warps per SM instead of two, for sm_90.)
    cfg = LaunchConfig(first, True, warps, 0, b, c, loop_free=True, weight_first=True,
                       hoist_loads=fused and bool(b) and dtype.itemsize == 2)
    if b and cfg.width() > WIDE_ONE_PASS:
        cfg = dataclasses.replace(cfg, lean_zone=(1, 1 << 40))
    if not fused and dtype.itemsize == 2 and any(lo <= n <= hi for lo, hi in STREAM_COLUMNS):
        cfg = dataclasses.replace(cfg, stream_zone=STREAM_ZONE)
    tuned = {**_TUNED.get((n, dtype.itemsize), {}), **(_TUNED_FUSED.get((n, dtype.itemsize), {}) if fused else {})}
    return dataclasses.replace(cfg, **tuned) if tuned else cfg


# 16-bit rows of 16K-32K columns (multiples of 16 bytes) are held as equal chunks summed elementwise before the block
# reduction (`chunk_sum`), the hidden size compiled in: the summation order of the two-pass kernel over the same
# chunks and warps, so the row count may choose one pass or two without changing a bit.
# - 24K-32K columns: two chunks of 16384, 32 warps. Both ops read them in two passes beyond TWO_PASS_ROWS_PER_SM
#   rows per SM and in one pass below. Measured on the H200 (graph-cold): torch.compile's lead there was its
#   constant hidden size (two passes with it 97.3 us at 4096x24576, without it 128.4; torch.compile 96.8:
#   h200-ladder-s7-two-pass.json); with it our two passes beat our one pass from 256 rows (plain 256x32768 11.33
#   vs 12.49 us, 4096x24576 97.5 vs 114.4: h200-explore-s7-zone.json; fused 4096x24576 196.8 vs 197.3, 4096x32768
#   259.8 vs 261.4: h200-explore-s7-const-n-fused.json) and lost 4-10% at 1-128 rows (plain 1x32768 4.36 vs 3.94,
#   128x32768 7.76 vs 7.49; fused 1x32768 5.59 vs 5.32: h200-explore-s7-const-n*.json).
# - 16K-24K columns: three chunks of 8192, 16 warps, one pass at every row count, the weight loaded with x up to
#   one row per SM and after the reduction beyond (held with x it takes 79-82 registers). Against session 5's one
#   pass of 16 warps over pieces (16384+2048+2048, 16384+512), graph-cold (h200-explore-s8-w16k{,-fused}.json):
#   plain 1x20000 3.17 vs 3.64 us, 1024x20000 23.63 vs 28.16, 4096x20000 82.63 vs 95.22 (two passes over the same
#   chunks 81.85), 2048x16896 36.78 vs 44.95, 4096x16896 69.26 vs 83.71; fused 1x20000 4.53 vs 4.92, 4096x20000
#   163.88 vs 166.90, 2048x16896 70.80 vs 71.25, except 1x16896 4.16 vs 3.97. Two passes gain at most 1% (plain
#   4096x20000) and lose elsewhere (fused 2048x16896 76.3), so none here. The fused op's one pass hoists its loads
#   (`hoist_loads`, session 9). Hoisted, the weight first was also faster at 4096x20000 (159.52 vs 162.08 us, though
#   at 84 registers one program per SM): not taken, as no row count between 1 and 16 rows per SM was measured.
CHUNK_SUM_BLOCK = 16384
CHUNK_SUM_FROM = 24576
TWO_PASS_ROWS_PER_SM = 1
THREE_CHUNK_BLOCK = 8192
# - 16384 columns: two chunks of 8192, 16 warps, weight first, one pass up to a few rows per SM and two beyond (plain
#   op from 2 rows per SM, fused from 8). Measured against the one block of 16384 it replaces, graph-cold
#   (h200-explore-s9-w8k16k.json, h200-explore-s9-hoist-fused.json): plain one pass 1x 2.86 vs 2.90 us, 128x 4.79 vs
#   4.83, 256x 6.48 vs 6.58; two passes 1024x 19.11 vs 20.65, 4096x 65.53 vs 68.79. Fused, one pass hoisted: 1x 3.41
#   vs 3.34, 128x 6.22 vs 6.30, 1024x 34.48 vs 35.26 (two passes 35.64); two passes 4096x 130.84 vs 131.80. Not at
#   8192 columns: two passes over chunks of 4096 gained 1-2.5% only from 8 rows per SM, and their one pass was
#   1.2-2.2% slower at 16-256 rows graph-hot (h200-explore-s9-w8k{16k,-decode-hot}.json; that record's one-row
#   figures came first in their process and carry the first-timing bias, see harness/timing.py).
TWO_CHUNK_COLUMNS = 16384
TWO_CHUNK_TWO_PASS_ROWS_PER_SM = {False: 2, True: 8}
# - 4096 columns (session 10): two chunks of 2048, 8 warps, for both ops (the same bits in one pass and two). One
#   pass with the weight first up to 6 rows per SM, after it in the lean zone (6-8 rows per SM, where the weight's
#   registers would cost a second wave), with stream hints from 8 to 32 (both ops), two passes beyond. Against the
#   one block of 4096 it replaces, graph-cold (h200-explore-s10-w4k-{rows,mid}*.json): plain 512x 4.05 vs 4.14 us,
#   2048x 9.87 vs 10.12, 4096x 17.46 vs 17.77, two passes 16384x 65.03 vs 66.54, 65536x 252.30 vs 259.53 (and
#   cold-eager 67.97 vs 70.62, 253.89 vs 261.07: h200-explore-s10-w4k-large-eager.json); fused 1x 2.27 vs 2.31, 256x
#   3.93 vs 3.97, 1024x 9.80 vs 10.19, 2048x 17.76 vs 18.60, 4096x 33.40 vs 34.85, two passes 16384x 129.46 vs
#   133.54, 65536x 509.47 vs 524.26 (cold-eager 510.40 vs 524.13). Decode rows graph-hot (h200-explore-s10-w4k-
#   decode-hot*.json): plain 1x 1.56 vs 1.53, 16x 1.63 vs 1.61, 256x 2.27 vs 2.28; fused 1x 1.65 both, 256x 2.46 vs
#   2.57. The plain op's one pass keeps a run-time hidden size below the lean zone (compiled in, 256x 2.36 graph-hot);
#   the fused op's keeps it everywhere (without it, hoisted, 1x 2.33 graph-cold) and hoists its loads up to 8 rows per
#   SM (not hoisted, 1x 2.67; hoisted, 0.7-0.8% slower at 31 rows per SM, 34.49 vs 34.21-34.25, and 2.7% at 124-496,
#   16384x 133.41 vs 129.92). The FP8 epilogues keep the one block of 4096 (`register_config`; joint_max needs it).
#   (HALVES_LEAN_ZONE is the one block's lean zone, `_TUNED[(4096, 2)]`: the chunks with the weight first hold as
#   many registers, 38, so the same rows per SM take a second wave.)
HALVES_COLUMNS = 4096
HALVES_LEAN_ZONE = (6, 8)
HALVES_TWO_PASS_ROWS_PER_SM = 32


def chunked_config(n: int, fused: bool = False) -> LaunchConfig | None:
    """The chunked layout of a 16-bit row of n columns (a multiple of 16 bytes), or None outside 4096 and 16K-32K
    columns: two chunks of 16384 over 32 warps from 24576 columns (one pass up to TWO_PASS_ROWS_PER_SM rows per SM, its
    two-pass twin `two_pass_of` beyond), three chunks of 8192 over 16 warps below (one pass, the weight after the
    reduction beyond one row per SM), two chunks of 8192 over 16 warps at 16384 (one pass, then two passes beyond
    TWO_CHUNK_TWO_PASS_ROWS_PER_SM), two chunks of 2048 over 8 warps at 4096 (one pass, two beyond
    HALVES_TWO_PASS_ROWS_PER_SM). The same layout for both ops; the fused op's one pass over chunks of 2048 and 8192
    loads every chunk before its first store (`hoist_loads`; not measured on the chunks of 16384)."""
    if CHUNK_SUM_FROM <= n <= 2 * CHUNK_SUM_BLOCK:
        return LaunchConfig(CHUNK_SUM_BLOCK, True, 32, 0, CHUNK_SUM_BLOCK, loop_free=True, weight_first=True,
                            chunk_sum=True, const_n=True, two_pass_zone=(TWO_PASS_ROWS_PER_SM, 1 << 40))
    if 2 * THREE_CHUNK_BLOCK < n < CHUNK_SUM_FROM:
        return LaunchConfig(THREE_CHUNK_BLOCK, True, 16, 0, THREE_CHUNK_BLOCK, THREE_CHUNK_BLOCK, loop_free=True,
                            weight_first=True, chunk_sum=True, const_n=True, lean_zone=(1, 1 << 40),
                            hoist_loads=fused)
    if n == TWO_CHUNK_COLUMNS:
        return LaunchConfig(n // 2, True, 16, 0, n // 2, loop_free=True, weight_first=True, chunk_sum=True,
                            const_n=True, two_pass_zone=(TWO_CHUNK_TWO_PASS_ROWS_PER_SM[fused], 1 << 40),
                            hoist_loads=fused)
    if n == HALVES_COLUMNS:
        # (Plain: the hidden size compiled in from the lean zone on; fused: everywhere, with hoisted loads up to the
        # stream zone, where `_stream` drops them.)
        return LaunchConfig(n // 2, True, 8, 0, n // 2, loop_free=True, weight_first=True, chunk_sum=True,
                            const_n=fused, hoist_loads=fused, lean_zone=HALVES_LEAN_ZONE, stream_zone=STREAM_ZONE,
                            two_pass_zone=(HALVES_TWO_PASS_ROWS_PER_SM, 1 << 40),
                            const_n_zone=(0, 0) if fused else (HALVES_LEAN_ZONE[0], 1 << 40))
    return None


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


# The plain op's rows of 4096-5120 16-bit columns take L2 stream hints (`stream_hints`) from 8 to 32 rows per SM.
# Measured (bf16, graph-cold, H200): 3-5% faster at 4096 rows (31 per SM) of 4096, 4100 and 5120 columns
# (4096x4096 17.69 vs 18.41 us, 4096x5120 21.86 vs 22.59, 4096x4100 18.75 vs 19.71; h200-explore-s6-aligned-
# stream.json, h200-explore-s6-stream-odd.json), 0.4-1% at 16384-65536 rows; but after an L2 flush (cold-eager)
# they cost 5-6% there (16384x4096 74.4 vs 71.0 us, 65536x4096 278.8 vs 263.2; h200-bench-rmsnorm-sweep-s6.json
# against session 2's sweep), so not beyond 32 rows per SM. Within the zone also 1-6% faster at 12-23 rows per SM
# (1536x4096 8.15 vs 8.27 us, 2048x5120 12.26 vs 12.95, 3072x4100 14.87 vs 15.87) and 4-5% in fp16 (4096x4096
# 17.63 vs 18.57; h200-explore-s6-stream-{mid,fp16}.json); below 8 the lean zone decides at these widths. Not
# wider (4096x8192 lost 3%: 35.73 vs 34.59; 5125 even), not narrower (not measured), not the fused op's one block
# (within +-1% at 4096 columns, 3-4% slower at 8192 and 16384). Since session 10 rows of 4096 are chunks of 2048
# (`chunked_config`) with their own stream zone, for both ops and an fp32 weight (measured there); this rule now
# reaches the one block of 4096 only through the FP8 epilogues, which drop it (`_quant`).
# The one block of 7168 joined in session 12: beyond the L2 rule's share (2414 rows) and up to 32 rows per SM,
# graph-cold with shared outputs (as the bench writes them), stream hints beat no hint in two runs (3072x7168 23.26 vs
# 24.02 us, 4096x7168 30.04 vs 30.84, h200-explore-s12-ab-wide-plain.json; 4096x7168 29.89 vs 30.76 in session 11's
# h200-explore-s11-ab-plain.json) and cost 0.3-1.2% cold-eager (27.42 vs 27.09, 34.46 vs 34.37: h200-explore-s12-ab-
# wide-plain-eager.json). Not at 8192 (graph-cold +1.4-2.0%, cold-eager -2.4-4.4%), not beyond 32 rows per SM
# (cold-eager -3-8%: 16384x7168 124.75 vs 117.63), not the fused op (within 0.4%, same records).
STREAM_COLUMNS = ((4096, 5120), (7168, 7168))
STREAM_ZONE = (8, 32)
# The plain dynamic FP8 op reduces a row's max with its sum (joint_max, weight first) up to 16 rows per SM: faster
# at every measured row count up to 2048 (1024x4096 5.96 vs 6.93 us, 2048x8192 17.10 vs 19.04), even at 4096
# (18.04 vs 18.03), slower from 16384 (64.3 vs 58.9; h200-explore-s6-joint.json, h200-explore-quant-joint.json).
# Rows of pieces take it beyond one row per SM (1024x4100 6.53 vs 7.11 us, 2048x5125 16.81 vs 17.63; at 128 rows
# 4100 and 5125 lost 7-9%, 5120 gained 2%: h200-explore-s6-joint-odd.json). The fused dynamic op gains nothing
# from it (within +-2% up to 2048 rows, h200-explore-s6-joint-fused.json). Measured on bf16 rows of 4096, 4100,
# 5120, 5125 and 8192 columns; other widths and fp16 take it by likeness (the same one-pass kernel: one block
# reduction instead of two). A weight wider than x does not: held through the reduction its registers double,
# which cost occupancy (and, capped, spills) in the "fp32 weight" measurements.
JOINT_MAX_ROWS_PER_SM = 16

# Measured on the H200 (triton 3.6, sm_90; scripts/explore_rmsnorm.py --shapes cliff --focus, records
# docs/results/h200-explore-*-cliff.json). Weight-first holds more registers: at 4096 columns 38 instead of 32
# (6 programs of 8 warps per SM instead of 8), so 793-1056 rows take two waves instead of one; at 5120, 48
# (5 per SM) against 32 for the lean variant capped at 32 registers (8 per SM). At 8192 a 32-register cap keeps
# weight-first at 4 programs per SM without spilling (39 registers: 3).
_TUNED: dict[tuple[int, int], dict] = {
    (4096, 2): {"lean_zone": (6, 8)},
    (5120, 2): {"lean_zone": (5, 8), "lean_max_registers": 32},
    (8192, 2): {"max_registers": 32, "const_n_zone": (2, 1 << 40), "stream_loads_zone": (2, 1 << 40)},
}
# The fused op's one block of 8192 16-bit columns with the hidden size compiled in (const_n: masks fold away; no bit
# changes since session 8's host-side 1/N). Graph-cold on the H200 (h200-explore-s9-w8k-rows-fused.json): faster at
# every row count, 1x 2.57 vs 2.62 us, 128x 4.09 vs 4.29, 256x 5.69 vs 6.03, 1024x 17.92 vs 18.92, 4096x 66.63 vs
# 67.38; graph-hot at decode rows (h200-explore-s9-decode-fused-hot.json) 1x 2.12 both, 16x 2.18 vs 2.26, 256x 3.50
# vs 3.57. The plain op's one block of 8192 has it from 2 rows per SM (session 10, settled, graph-cold,
# h200-explore-s10-w8k-rows.json: 512x 5.92 vs 6.10 us, 1024x 10.91 vs 11.18, 2048x 18.46 vs 18.81, 4096x 34.67 vs
# 34.76; below, graph-hot, it cost 0.01-0.08 us, 1x 1.97 vs 1.91, 256x 3.05 vs 2.97: h200-explore-s10-w8k-decode-
# hot.json). The fused op's one block keeps it at every row count. (Two chunks of 4096 at 8192 columns, the
# 4096-column rule's layout, gained 0-2.8% from 16 rows per SM for both ops but cost the fused op 3-6% at decode
# rows graph-hot, 1x 2.19 vs 2.11, 16x 2.30 vs 2.17: not taken.)
_TUNED_FUSED: dict[tuple[int, int], dict] = {
    (8192, 2): {"const_n": True, "stream_loads_zone": (0, 1 << 40)},  # (the plain op's zone: see config_for)
}


# One pass: the row loads evict_first (`stream_loads`) while the rows the call reads (x, and the residual) take at most
# this share of the L2. Measured (session 11, 16-bit outputs, graph-cold with every call writing the same outputs, as
# the bench's and a serving graph's calls do; h200-explore-s11-ab-{plain,fused}.json, against no hint): rows up to
# 32 MiB gained 2-10% (plain 256x4096 2.69 vs 2.86 us, 4096x4096 16.92 vs 18.41, 2048x8192 17.14 vs 18.48; fused
# 256x4096 3.27 vs 3.58, 1024x8192 17.52 vs 18.19; and against the defaults, h200-explore-s11-{plain,fused}-small.json:
# plain 128x4096 2.16 vs 2.45, fused 16x4096 2.00 vs 2.26), 1024x5125 even; from 39-40 MiB they cost 0.4-14% (plain
# 1024x20000 23.95 vs 23.51, 4096x8192 36.08 vs 34.67; fused 2048x5120 22.95 vs 22.36, 4096x5125 57.89 vs 50.77).
# With 16-bit outputs the bytes written equal the bytes read; the FP8 epilogues (session 12, h200-explore-s12-ab-
# fp8-*.json) write half (the fused op three quarters) and place the edge at the bytes read, not written: up to 32 MiB
# read they gained 3-10% (static 16x4096 1.97 vs 2.17 us, 2048x8192 14.90 vs 16.29, 4096x4096 15.01 vs 15.91;
# dynamic 16x4096 2.00 vs 2.21, 4096x4096 16.78 vs 17.65; fused dynamic 16x4096 2.49 vs 2.76, 2048x4096 16.90 vs
# 18.05, 1024x8192 17.85 vs 19.15; 1024x4096 even), at 64 MiB read (32-48 MiB written) -1.6%..+5% (static 4096x8192
# 29.46 vs 29.16, fused 8192x4096 62.15 vs 59.28), at 128 MiB -1..-6%. Inside the plain op's stream zone it
# replaces stream_hints (4096x4096 16.92 vs 17.43 us, 4096x4100 18.09 vs 18.53; 2048x5120 11.01 vs 10.87).
# Graph-hot decode rows even (fused 1x4096 1.62 both, 1x8192 2.05 vs 2.11; h200-explore-s11-decode-hot-fused.json);
# cold-eager within -3%/+1% at these sizes (h200-explore-s11-ab-*-eager.json; FP8: -3%/+9%, h200-explore-s12-ab-
# fp8-*-eager.json). Not the plain op's one block of 8192 up to 2 rows per SM (its stream_loads_zone): graph-hot
# decode rows there lost 3-8% (16x8192 2.17 vs 1.99 us, 32x 2.23 vs 2.06, 256x 3.13 vs 3.00; h200-bench-rmsnorm-
# decode-s11-call6.json against session 10's), while the fused op's decode rows held (18/18, within -3%/+2%).
STREAM_LOADS_L2_SHARE = 0.55


def config_for(n: int, dtype: torch.dtype, m: int, fused: bool = False,
               weight_dtype: torch.dtype | None = None, quant: int = 0) -> LaunchConfig:
    """The configuration a call on m rows of n columns launches: `launch_config`, with the knobs that change no
    bit set for m, the weight's dtype and the FP8 epilogue (quant, see `kernel_constexprs`)."""
    cfg = zoned_config(n, dtype, m, fused, weight_dtype, quant)
    rows_read = m * n * dtype.itemsize * (2 if fused else 1)
    if (cfg.single_pass and rows_read <= STREAM_LOADS_L2_SHARE * _l2_bytes_hint()
            and _in_zone(cfg.stream_loads_zone, m, _sm_count_hint())):
        return _stream_loads(cfg)
    return cfg


def zoned_config(n: int, dtype: torch.dtype, m: int, fused: bool = False,
                 weight_dtype: torch.dtype | None = None, quant: int = 0) -> LaunchConfig:
    """`config_for` before its L2 rule (STREAM_LOADS_L2_SHARE): the rules by rows per SM, weight and epilogue."""
    cfg = launch_config(n, dtype, fused)
    sms = _sm_count_hint()
    if cfg.split:
        # (A row's programs must all be resident: at least 2 of 8 warps fit per SM, so up to 2 per SM always do;
        # a small GPU, e.g. a MIG slice, takes two passes for rows split wider than that.)
        if quant or _INTERPRETED or cfg.split > 2 * sms:
            return _quant(two_pass_config(fused), False, False) if quant else two_pass_config(fused)
        # While each program has one row (about 4 programs of 8 warps fit per SM, 2 of the fused op's with the
        # weight first), the weight is best loaded with x (its latency hidden): 6.9 instead of 8.4 us at 1x65536;
        # beyond, after the wait (fewer registers, more programs): fused 64x65536 15.6 instead of 17.4 us.
        per_sm = 2 if fused else 4
        return _split_weight_first(cfg) if m * cfg.split <= per_sm * sms else cfg
    if quant:
        if cfg.single_pass and cfg.width() > WIDE_ONE_PASS:
            return _quant(two_pass_config(fused), False, False)
        if cfg.chunk_sum:  # (4096, 16384 columns: the FP8 epilogues were measured on one block; joint_max needs it)
            cfg = register_config(n, dtype, fused)
        joint = (quant == QUANT_DYNAMIC and not fused and (sms < m or not cfg.piece_b)
                 and m <= JOINT_MAX_ROWS_PER_SM * sms
                 and (weight_dtype is None or weight_dtype.itemsize <= dtype.itemsize))
        return _quant(cfg, m <= sms, joint)
    if weight_dtype is not None and weight_dtype.itemsize > dtype.itemsize and cfg.single_pass:
        # A weight wider than x (fp32 weight, bf16 x) held through the reduction doubles its registers: under
        # the 32-register cap of 8192 columns that spilled, 1.8x slower on the H200
        # (h200-bench-rmsnorm-wfp32.json). Uncapped; loaded with x up to two rows per SM (decode: 1.56 instead
        # of 1.67 us at 1x4096, 1.96 instead of 2.18 at 1x8192, graph-hot, h200-explore-wfp32-decode.json),
        # after the reduction beyond.
        # Rows of 4096 columns keep their two-pass and stream zones (graph-cold, plain op, fp32 weight:
        # h200-explore-s10-wfp32-large.json, 4096x 17.78 vs 19.00 us with stream hints, two passes 16384x 65.62 vs
        # 67.66, 65536x 252.79 vs 260.86); the fused op takes them by likeness (not measured with an fp32 weight).
        # The chunks of 8192 at 16384 columns lost 1.8% in two passes (1024x 20.94 vs 20.57), so not there.
        first = m <= 2 * sms and cfg.width() <= WIDE_ONE_PASS
        if n == HALVES_COLUMNS and cfg.chunk_sum:
            if _in_zone(cfg.two_pass_zone, m, sms):
                return two_pass_of(cfg)
            if _in_zone(cfg.stream_zone, m, sms):
                return _stream(_wide_weight(cfg, False))
            if first and cfg.hoist_loads:
                # The fused op's chunks of 2048 with the weight first keep their hoisted loads (48 registers with an
                # fp32 weight, no spill). Not measured with an fp32 weight; unhoisted, with a 16-bit weight, they
                # lost 7-19% to hoisted at 1-256 rows (h200-explore-s10-w4k-{rows,decode-hot}-fused.json).
                return _hoisted(_wide_weight(cfg, True))
        return _wide_weight(cfg, first)
    if _in_zone(cfg.two_pass_zone, m, sms):
        return two_pass_of(cfg)
    if _in_zone(cfg.const_n_zone, m, sms):
        cfg = _const_n(cfg)
    if _in_zone(cfg.lean_zone, m, sms):
        return _lean(cfg)
    if _in_zone(cfg.stream_zone, m, sms):
        return _stream(cfg)
    return cfg


def _in_zone(zone: tuple[int, int], m: int, sms: int) -> bool:
    """m rows fall in a zone of rows per SM (lo, hi]; (0, 0) is no zone."""
    lo, hi = zone
    return bool(hi) and lo * sms < m <= hi * sms


@functools.lru_cache(maxsize=256)
def _split_weight_first(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, weight_first=True)


@functools.lru_cache(maxsize=256)
def _wide_weight(cfg: LaunchConfig, first: bool) -> LaunchConfig:
    # (The fused op's const_n at 8192 columns and its hoisted loads were measured with a 16-bit weight only: not taken
    # here. Chunked rows keep their const_n, which their two-pass twins share.)
    return dataclasses.replace(cfg, weight_first=first, max_registers=0, lean_zone=(0, 0), lean_max_registers=0,
                               stream_zone=(0, 0), const_n=cfg.const_n and cfg.chunk_sum, hoist_loads=False)


@functools.lru_cache(maxsize=256)
def _quant(cfg: LaunchConfig, one_wave: bool, joint: bool) -> LaunchConfig:
    """FP8 outputs (measured on the H200: h200-explore-quant-*.json, h200-ab-fp8.json). One pass: no register cap
    and no lean zone (both tuned for 16-bit outputs); the weight loaded with x while the rows fit on the GPU at
    once (one row per SM or fewer: 0.3-0.4 us saved per call) or where joint_max needs it (the plain dynamic op up
    to 16 rows per SM), after the reduction beyond (weight first cost 5-10% at large M: 214 vs 203 us at
    65536x4096, static). Two passes: at most 64 registers (the first pass also
    holds the weight and a running max: 92 registers, one program per SM; capped, the fused op at 2048x65536
    took 302 instead of 372 us). The row's max reduced with its sum (joint_max) won in one wave (plain 1x4096
    1.94 instead of 2.20 us, 128x4096 2.73 instead of 2.89, h200-explore-quant-joint.json) and lost from 16384
    rows (64.3 vs 58.9 us): `config_for` asks for it (joint) where it won (JOINT_MAX_ROWS_PER_SM)."""
    if not cfg.single_pass:
        return dataclasses.replace(cfg, max_registers=64)
    # (joint_max gives the bits of the separate max: by construction, and tested on the CPU and the H200. It needs
    # the weight first; a config asking for it keeps it.)
    joint = joint or cfg.joint_max
    return dataclasses.replace(cfg, weight_first=one_wave or joint, joint_max=joint, max_registers=0,
                               lean_zone=(0, 0), lean_max_registers=0, stream_zone=(0, 0), hoist_loads=False,
                               const_n=False)


@functools.lru_cache(maxsize=256)
def _stream(cfg: LaunchConfig) -> LaunchConfig:
    # (Without hoisted loads: the fused op's chunks of 2048 were measured with stream hints unhoisted, and hoisted
    # they lost 0.7-0.8% at 31 rows per SM and 2.7% at 124-496, h200-explore-s10-w4k-rows-fused.json.)
    return dataclasses.replace(cfg, stream_hints=True, hoist_loads=False)


@functools.lru_cache(maxsize=256)
def _stream_loads(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, stream_loads=True, stream_hints=False)


@functools.lru_cache(maxsize=256)
def _hoisted(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, hoist_loads=True)


@functools.lru_cache(maxsize=256)
def _const_n(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, const_n=True)


@functools.lru_cache(maxsize=256)
def _lean(cfg: LaunchConfig) -> LaunchConfig:
    return dataclasses.replace(cfg, weight_first=False, max_registers=cfg.lean_max_registers)


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

