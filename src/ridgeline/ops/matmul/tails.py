"""Tails: one large GEMM cut into two or three launches where its last wave of tiles would run mostly empty.

The compute-bound rule's persistent 128x256 tiles come in waves of one tile an SM. Two shapes of waste follow:
- **A partial last wave** (1024x10240x8192: 320 tiles on 132 SMs are 2.4 waves, 0.87x cuBLAS on an H100, s36): the
  columns of the full waves go to the 128x256 launch, and the columns left over to a launch of the rule's smaller
  alternative tile (128x128), whose twice as many tiles fill the last wave's SMs.
- **A last tile row of a few rows** (1025, 2049, 3073 rows: the audit's cliffs, 1.28-1.76x over their neighbours:
  one tile row of 1 valid row costs a whole wave): those rows go to their own launch on the rules for that many
  rows (the decode tiles: one more read of the weight, at copy bandwidth).
Every piece sums K in the same order of MMA steps (whatever its tile and BLOCK_K: the rules' tiles give equal bits,
`tests/ops/matmul/test_matmul_gpu.py`, contiguous operands), so a cut changes no bits and batch invariance holds.

Whether to cut is a cost model, not a measurement: a wave costs the tile's FLOPs at the tensor rate of one SM, a
row tail the weight's bytes at copy bandwidth, each extra launch LAUNCH_US; a plan is taken when it is predicted
below TAIL_GAIN of the single launch. (The constants are round figures between the H100's and the H200's probes;
scripts/device/matmul_mid.py --set tails times the plans against the single launch and cuBLAS.)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ridgeline.ops.matmul import rules
from ridgeline.ops.matmul.rules import GemmConfig, Rule, config_for_sms, rule_for

TENSOR_TFLOPS = 760.0  # bf16 dense (probes: H200 ~750-790, H100 778)
COPY_GBPS = 3600.0  # (probes: H200 4270, H100 3017)
LAUNCH_US = 3.0  # one more launch on the stream, and the ramp of its first wave
TAIL_GAIN = 0.95  # a plan must be predicted below this share of the single launch's time
TAILS_FROM_M = 513  # below this the rules' own small-M tiles and few_rows forms apply
ROW_TAIL_BELOW = 32  # a last tile row with fewer rows than this may go to its own launch


@dataclass(frozen=True)
class Piece:
    """One launch of a plan: rows [r0, r1) and columns [c0, c1) of y, on `config` (None: the rules for the piece's
    own rows and columns)."""
    r0: int
    r1: int
    c0: int
    c1: int
    config: GemmConfig | None

    def describe(self) -> str:
        tile = "rules" if self.config is None else self.config.describe()
        return f"rows {self.r0}:{self.r1} cols {self.c0}:{self.c1} {tile}"


def _wave_us(cfg: GemmConfig, k: int, sms: int, rate: float) -> float:
    return 2.0 * cfg.block_m * cfg.block_n * k / (TENSOR_TFLOPS * 1e6 / sms) / rate


def _launch_us(m: int, n: int, k: int, cfg: GemmConfig, sms: int, rate: float) -> float:
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    return -(-tiles // sms) * _wave_us(cfg, k, sms, rate)


def _rate(rule: Rule, cfg: GemmConfig) -> float:
    return rule.alternative_rate if cfg == rule.alternative else 1.0


def _columns(m: int, n: int, k: int, rule: Rule, sms: int) -> tuple[float, tuple[Piece, ...]] | None:
    """The full waves' columns on the rule's tile, the rest on its alternative; None where there is no such cut."""
    main, alt = rule.config, rule.alternative
    if alt is None or not main.persistent:
        return None
    m_tiles, n_tiles = -(-m // main.block_m), -(-n // main.block_n)
    full_waves = m_tiles * n_tiles // sms
    cols = full_waves * sms // m_tiles
    if full_waves == 0 or cols < 1 or cols >= n_tiles or (m_tiles * n_tiles) % sms == 0:
        return None
    split = cols * main.block_n
    cost = (_launch_us(m, split, k, main, sms, 1.0) + _launch_us(m, n - split, k, alt, sms, rule.alternative_rate)
            + LAUNCH_US)
    return cost, (Piece(0, m, 0, split, main), Piece(0, m, split, n, alt))


def _whole_or_columns(m: int, n: int, k: int, rule: Rule, sms: int,
                      interpreted: bool) -> tuple[float, tuple[Piece, ...]]:
    cfg = config_for_sms(m, n, sms, interpreted)
    best = (_launch_us(m, n, k, cfg, sms, _rate(rule, cfg)), (Piece(0, m, 0, n, cfg),))
    cut = _columns(m, n, k, rule, sms)
    return cut if cut is not None and cut[0] < best[0] else best


def plan(m: int, n: int, k: int, sms: int, force: bool = False) -> tuple[Piece, ...] | None:
    """The pieces of (M, N, K) on `sms` SMs, or None for one launch on the rules' tile. `force`: plan on the last
    rule even where its `tails` flag is off (the GPU timing of the cut)."""
    return _plan(m, n, k, sms, force, rules._INTERPRETED)  # (keyed on the rule set the profile hook may flip)


@functools.lru_cache(maxsize=4096)
def _plan(m: int, n: int, k: int, sms: int, force: bool, interpreted: bool) -> tuple[Piece, ...] | None:
    rule = rule_for(m, n, interpreted)
    if not (rule.tails or (force and rule.alternative is not None)) or m < TAILS_FROM_M or n == 0 or k == 0:
        return None
    cfg = config_for_sms(m, n, sms, interpreted)
    single = _launch_us(m, n, k, cfg, sms, _rate(rule, cfg))
    best = _columns(m, n, k, rule, sms)
    rows_left = m % rule.config.block_m
    if 0 < rows_left < ROW_TAIL_BELOW and m - rows_left >= TAILS_FROM_M:
        head_cost, head = _whole_or_columns(m - rows_left, n, k, rule, sms, interpreted)
        cost = head_cost + 2.0 * n * k / (COPY_GBPS * 1e3) + LAUNCH_US
        if best is None or cost < best[0]:
            best = (cost, (*head, Piece(m - rows_left, m, 0, n, None)))
    if best is None or best[0] >= TAIL_GAIN * single:
        return None
    return best[1]
