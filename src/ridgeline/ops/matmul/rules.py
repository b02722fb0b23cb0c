"""Launch rules of the GEMM: an ordered table from (M, N, K) to a tile configuration, first match wins.

Two kernels share one body (kernel.py): a one-tile-per-program launch for small M (the weight streams once; the
grid must cover the SMs, so BLOCK_N shrinks with N) and a persistent launch (one program per SM walking tiles in
grouped order) for large M, where the operands come through TMA. Everything marked "guess" is for
scripts/device/tune_matmul.py to settle on the H200 (one call times every candidate of CANDIDATES per class).
A third candidate, the CUDA-core GEMV of kernel_gemv.py for M <= 8 (GemvConfig, gemv_splits), is reachable only
through the config override until the H200 has timed it (tune_matmul.py --only-gemv).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import torch

from ridgeline.lib.launch import interpreter_enabled, multiprocessor_count

_INTERPRETED = interpreter_enabled()  # (the profile hook flips it to record the GPU's choice)


@dataclass(frozen=True)
class GemmConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int = 8
    persistent: bool = True  # False: one tile per program (grid = tiles)
    tma: bool = True  # operands through tensor descriptors (the wrapper turns it off for unaligned layouts)

    def describe(self) -> str:
        kind = "persistent" if self.persistent else "tiles"
        feed = "tma" if self.tma else "ptr"
        return (f"{kind}/{feed} {self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"
                f" g{self.group_m}")

    def key(self) -> dict[str, Any]:
        return {"block_m": self.block_m, "block_n": self.block_n, "block_k": self.block_k,
                "num_warps": self.num_warps, "num_stages": self.num_stages, "group_m": self.group_m,
                "persistent": self.persistent, "tma": self.tma}



@dataclass(frozen=True)
class GemvConfig:
    """The decode GEMV candidate (kernel_gemv.py, M <= 8, CUDA cores): accepted through matmul_2d's `config`
    override (the tuning driver); no rule below picks it until the H200 has timed it. `splits` None: the numeric
    K split of gemv_splits(N, K, SMs); an int forces that many (1: no split programs, no partials)."""
    block_n: int
    block_k: int
    num_warps: int
    splits: int | None = None

    def describe(self) -> str:
        sp = "auto" if self.splits is None else str(self.splits)
        return f"gemv {self.block_n}x{self.block_k} w{self.num_warps} splits={sp}"

    def key(self) -> dict[str, Any]:
        return {"gemv": True, "block_n": self.block_n, "block_k": self.block_k, "num_warps": self.num_warps,
                "splits": self.splits}


GEMV_MAX_M = 8  # kernel_gemv.MAX_ROWS: every row of a call in each program
# The split rule (guesses for the tuning run): enough (column block, split) programs for GEMV_PROGRAMS_PER_SM per
# SM, counting column blocks at GEMV_SPLIT_COLUMNS wide whatever BLOCK_N is (so the count depends on (N, K) and the
# SM count only), each split at least GEMV_MIN_K_PER_SPLIT of K, at most GEMV_MAX_SPLITS.
GEMV_SPLIT_COLUMNS = 32
GEMV_PROGRAMS_PER_SM = 2
GEMV_MIN_K_PER_SPLIT = 1024
GEMV_MAX_SPLITS = 16


def gemv_splits(n: int, k: int, sm_count: int) -> int:
    """Numeric K splits of the GEMV candidate for (N, K) on `sm_count` SMs (independent of M: batch invariance).
    N = 4096, K = 4096 on 132 SMs: 128 column blocks of 32 -> 3 splits wanted, 4 allowed by K -> 3."""
    blocks = -(-n // GEMV_SPLIT_COLUMNS)
    want = -(-GEMV_PROGRAMS_PER_SM * sm_count // blocks)
    return max(1, min(want, GEMV_MAX_SPLITS, k // GEMV_MIN_K_PER_SPLIT))


def check_gemv(cfg: GemvConfig) -> GemvConfig:
    """One-line errors for a bad GEMV config."""
    def pow2(v: object, lo: int, hi: int) -> bool:
        return isinstance(v, int) and lo <= v <= hi and v & (v - 1) == 0

    if not pow2(cfg.block_n, 1, 1024):
        raise ValueError(f"cfg: block_n must be a power of two in 1..1024 for the gemv config; got {cfg.block_n!r}")
    if not pow2(cfg.block_k, 16, 4096):
        raise ValueError(f"cfg: block_k must be a power of two in 16..4096 for the gemv config; got {cfg.block_k!r}")
    if cfg.num_warps not in (1, 2, 4, 8, 16):
        raise ValueError(f"cfg: num_warps must be 1, 2, 4, 8 or 16; got {cfg.num_warps!r}")
    if cfg.splits is not None and not (isinstance(cfg.splits, int) and 1 <= cfg.splits <= 256):
        raise ValueError(f"cfg: splits must be None (the rule) or an int in 1..256; got {cfg.splits!r}")
    return cfg


def gemv_plan(m: int, n: int, k: int, cfg: GemvConfig, sm_count: int) -> dict[str, int]:
    """Grid and split geometry of a GEMV launch: K cut into `splits` chunks of whole BLOCK_K steps (the last may
    be shorter; a split count that would leave an empty chunk is lowered to the chunks that exist)."""
    want = cfg.splits if cfg.splits is not None else gemv_splits(n, k, sm_count)
    steps = -(-k // cfg.block_k)
    chunk = -(-steps // max(1, min(want, steps))) * cfg.block_k
    splits = -(-k // chunk)
    return {"blocks": -(-n // cfg.block_n), "splits": splits, "k_chunk": chunk}


@dataclass(frozen=True)
class Rule:
    max_m: int  # the rule applies for M <= max_m and N <= max_n (the first matching row wins)
    config: GemmConfig
    why: str
    shrink_n: bool = False  # halve BLOCK_N (not below min_block_n) until the grid covers TILE_WAVES programs/SM
    max_n: int = 1 << 62
    min_block_n: int = 32
    # A second tile for when the first leaves SMs idle: the one with fewer waves x tile area / rate wins, `rate`
    # being the alternative's measured throughput per SM relative to the config's.
    alternative: GemmConfig | None = None
    alternative_rate: float = 1.0
    # The tile for a last row of tiles holding fewer than `few_rows_below` rows, where the chosen tile has this
    # one's shape and reads through TMA: a TMA box mostly past M ran 1.2-1.7x slower on the H200 (s23: 129 and 193
    # rows 22.9 / 22.0 us against 17.7 at 192 on the same 64-row tiles; 257 and 385 rows on 128-row tiles), pointer
    # loads do not (the same bits: one K order; h200-matmul-mid-s23.json and, for the 128-row tiles, git show
    # a9a53b5:docs/results/h200-matmul-cliffs-s23.json).
    few_rows: GemmConfig | None = None
    few_rows_below: int = 0
    few_rows_max_m: int = 1 << 62  # and only up to this M
    # Cut a launch whose last wave would run mostly empty into pieces (tails.py): the full waves' columns on
    # `config`, the rest on `alternative`; a last tile row of a few rows on the rules for those rows (measured on an
    # H100, s39: the audit from 512 to 4096 rows 1.02-1.31x at every cut point, `gemm.md`; matmul_2d's `tails`
    # argument forces it on or off).
    tails: bool = False


# Programs per SM a one-tile-per-program launch aims for when it shrinks BLOCK_N. The H200 tuning run
# (docs/results/h200-tune-matmul.json) preferred one wave of 32-wide tiles to two waves of 16-wide ones.
TILE_WAVES = 1

# Set from the H200 tuning run (h200-tune-matmul.json: the best of 16-27 candidates per shape, timed against
# cuBLAS in the same process); the figures in each why are that run's.
RULES: tuple[Rule, ...] = (
    Rule(4, GemmConfig(16, 32, 512, 4, 4, 1, persistent=False, tma=False),
         "decode GEMV: 32 weight rows x 512 K a stage, four stages in flight per program; best at 1x4096x4096 "
         "(13.8 us vs 14.5 at K-steps of 256) and 1x8192x28672 (123.6 us, 0.90x cuBLAS)"),
    Rule(16, GemmConfig(16, 64, 256, 4, 4, 1, persistent=False, tma=False),
         "decode batch: 64-wide tiles, K-steps of 256 (best at 16x28672x4096: 60.7 us, 0.94x cuBLAS); narrower "
         "weights shrink BLOCK_N to keep one program per SM", shrink_n=True),
    Rule(64, GemmConfig(64, 32, 128, 4, 4, 1, persistent=False, tma=False),
         "small batch, narrow weight: 32-wide tiles give N/32 programs (best at 64x4096x4096: 10.1 us)",
         max_n=8192),
    Rule(64, GemmConfig(64, 128, 64, 4, 4, 1, persistent=False, tma=False),
         "small batch, wide weight: 128-wide tiles (best at 64x28672x4096: 61.6 us, 0.99x cuBLAS)", shrink_n=True),
    # Mid M, measured (H200, s23, h200-matmul-mid-s23.json: graph timings over weight copies past 256 MB, so every
    # call reads its weight from DRAM; the tuning run before timed warm weights with do_bench_cudagraph and only
    # TMA tiles here). One tile per program with BLOCK_K 128, the shape of torch.compile's templates at these M in
    # the s23 audit; every candidate gave the rule's bits (one K order: the same MMA steps in the same order).
    Rule(128, GemmConfig(64, 64, 128, 4, 5, 8, persistent=False, tma=False),
         "mid M to 128 rows, N <= 8192 (where 64x128 tiles would cover fewer than the SMs): 64x64x128 pointer tiles, "
         "5 stages, one tile a program (measured s23: 128x4096x4096 13.6 us against 19.2 for the old persistent "
         "64x64x64 TMA rule, cuBLAS 13.5; 65x4096x4096 15.0 against 24.9; 128x4096x14336 40.7 against 57.3, "
         "cuBLAS 38.5)", max_n=8192),
    Rule(128, GemmConfig(128, 128, 64, 8, 5, 8, persistent=False, tma=False),
         "mid M to 128 rows, weight wider than 8192: one 128-row tile over all the rows (the weight streams once, "
         "N / 128 programs), 128x128x64 pointer tiles on 8 warps, 5 stages (measured on the H200 in s23: "
         "128x28672x4096 69.4 us against 80.8 for the s23 rule's 64x128x128 tiles, cuBLAS 67.8; on an H100 in s33, "
         "h100-drivers-s28-s39.json: 128x10240x8192 65.5 against 80.1, cuBLAS 62.7; 65 / 96 / 128 rows x 28672x4096 "
         "1.06-1.09x, level at 128x16384x4096 and 128x57344x8192; the same bits)"),
    Rule(256, GemmConfig(64, 128, 128, 4, 4, 8, persistent=False, tma=True),
         "mid M to 256 rows: 64x128x128 TMA tiles, 4 stages, one tile a program (measured s23: 256x4096x4096 17.8 "
         "us against 25.6 for the old persistent 128x128x64 rule, cuBLAS 16.4; 129x4096x4096 20.8 against 27.7; "
         "256x10240x8192 91.9 against 100.3, cuBLAS 63.2); never narrower than 128 (a 128x64 tile took 42.4 us at "
         "129x4096x4096 in the s15 audit); pointer loads where the last tile row holds < 32 rows (18.5 us at "
         "129x4096x4096 against 20.8-22.9 through TMA)",
         few_rows=GemmConfig(64, 128, 128, 4, 4, 8, persistent=False, tma=False), few_rows_below=32),
    Rule(1 << 62, GemmConfig(128, 256, 64, 8, 3, 8, persistent=True, tma=True),
         "compute-bound: 128x256 tiles, 3 stages of TMA buffers (147 KiB), a 128x256 fp32 accumulator over two "
         "warpgroups, grouped order (best at 4096x4096x4096: 199.9 us, 0.99x cuBLAS); where its tiles leave most SMs "
         "idle (M = 257..512 at N = 4096: 48-64 tiles, a flat 43.5-44 us in the audit) the 128x128 tile takes over "
         "by waves x area / rate (rate 0.83: 16384 outputs per 26.5 us against 32768 per 44 us per wave at K = 4096; "
         "this choice is inferred from those two measurements, not yet timed itself)",
         alternative=GemmConfig(128, 128, 64, 4, 5, 8, persistent=True, tma=True), alternative_rate=0.83,
         # Where that 128x128 tile's last row holds < 32 rows, up to 512 rows: its pointer form on 8 warps (s23:
         # 257 / 385 rows 29.2 / 29.9 us against 34.4 / 38.6 through TMA, the same bits; on 4 warps 34-37 us; with
         # full last rows TMA stays ahead, 25.8 against 28.3 at 320; git show
         # a9a53b5:docs/results/h200-matmul-cliffs-s23.json). In the s24 audit (graph-cold) 257 / 385 rows ran
         # 29.4 / 29.6 us (TMA in the s23 audit: 29.3 / 37.6) but 1025 rows 84.8 against 74.8, 1281 83.7 against
         # 87.6: past one wave of tiles TMA's pipeline wins back more than its short boxes cost.
         few_rows=GemmConfig(128, 128, 64, 8, 5, 8, persistent=True, tma=False), few_rows_below=32,
         few_rows_max_m=512, tails=True),
)

ANY_TAILS = any(rule.tails for rule in RULES)  # (matmul_2d plans cuts only where some rule may take one)

# Under the interpreter: small tiles (each program is interpreted in Python; masks and loops still exercised).
INTERPRETER_RULES: tuple[Rule, ...] = (
    Rule(16, GemmConfig(16, 32, 32, 4, 1, 1, persistent=False, tma=False), "interpreter: decode path", True,
         min_block_n=16),
    Rule(64, GemmConfig(32, 32, 32, 4, 1, 1, persistent=False, tma=False), "interpreter: small batch", True,
         min_block_n=16),
    Rule(1 << 62, GemmConfig(32, 32, 32, 4, 1, 2, persistent=True, tma=True), "interpreter: persistent path"),
)

# What the tuning driver times per shape class (scripts/device/tune_matmul.py): (class, M list, configs).
CANDIDATES: dict[str, list[GemmConfig]] = {
    "decode": [GemmConfig(16, bn, bk, w, s, 1, persistent=False, tma=False)
               for bn in (16, 32, 64) for bk in (128, 256, 512) for w, s in ((4, 4), (4, 6), (8, 4))],
    "small": [GemmConfig(bm, bn, bk, w, s, 1, persistent=False, tma=t)
              for bm in (32, 64) for bn in (32, 64, 128) for bk in (64, 128, 256) for w, s in ((4, 4),)
              for t in (False,)],
    # (mid also tries the 128x256 tile: at M = 128 every row fits one tile, so the weight streams once; in the
    # first run's sweep 64x128 tiles took 86.5 us at 128x28672x4096 against cuBLAS' 67.6)
    "mid": [GemmConfig(bm, bn, bk, w, s, 8, persistent=p, tma=True)
            for bm, bn, w in ((64, 128, 4), (64, 256, 4), (128, 128, 8), (128, 128, 4), (128, 256, 8))
            for bk, s in ((64, 4), (64, 5), (128, 3)) for p in (True, False)
            if (bm + bn) * bk * 2 * s <= 200 * 1024],
    "large": [GemmConfig(bm, bn, bk, w, s, g, persistent=p, tma=True)
              for bm, bn, w in ((128, 256, 8), (128, 128, 8), (256, 128, 8))
              for bk, s in ((64, 3), (64, 4), (128, 2)) for g in (8,) for p in (True, False)],
}

# The GEMV candidate's grid (scripts/device/tune_matmul.py --only-gemv times each at M = 1, 4, 8): BLOCK_N x BLOCK_K
# x warps with the split rule, and the same tiles with no split (splits=1) at 4 warps.
GEMV_CANDIDATES: list[GemvConfig] = (
    [GemvConfig(bn, bk, w) for bn in (16, 32, 64) for bk in (128, 256, 512) for w in (2, 4, 8)]
    + [GemvConfig(bn, bk, 4, splits=1) for bn in (16, 32, 64) for bk in (256, 512)]
)


def _shrunk_block_n(m: int, n: int, rule: Rule, sms: int) -> int:
    """The widest BLOCK_N <= the rule's whose tiles still give TILE_WAVES programs per SM (min_block_n at least)."""
    cfg = rule.config
    bn, m_tiles = cfg.block_n, -(-m // cfg.block_m)
    while bn > rule.min_block_n and m_tiles * -(-n // bn) < TILE_WAVES * sms:
        bn //= 2
    return bn


def _wave_cost(m: int, n: int, cfg: GemmConfig, sms: int, rate: float) -> float:
    """Time of a persistent launch in units of one tile-area per SM: waves of tiles x the tile's area / rate."""
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    return -(-tiles // sms) * cfg.block_m * cfg.block_n / rate


def config_for(m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> tuple[GemmConfig, str]:
    """The first rule matching (M, N) (with BLOCK_N fitted to N where the rule says so), and its why."""
    # Cached: walking the table and fitting the tile took ~11 us of Python per call, on a path whose whole host
    # time the H200's cold-eager sweep measured at 45-133 us (h200-bench-matmul-sweep-cold-eager.json).
    return _config_cached(m, n, multiprocessor_count(device), _INTERPRETED)


@functools.lru_cache(maxsize=4096)
def _config_cached(m: int, n: int, sms: int, interpreted: bool) -> tuple[GemmConfig, str]:
    rule = rule_for(m, n, interpreted)
    cfg = rule.config
    if rule.shrink_n:
        cfg = replace(cfg, block_n=_shrunk_block_n(m, n, rule, sms))
    if rule.alternative is not None and (
            _wave_cost(m, n, rule.alternative, sms, rule.alternative_rate) < _wave_cost(m, n, cfg, sms, 1.0)):
        cfg = rule.alternative
    few = rule.few_rows
    if (few is not None and cfg.tma and (cfg.block_m, cfg.block_n) == (few.block_m, few.block_n)
            and 0 < m % cfg.block_m < rule.few_rows_below and m <= rule.few_rows_max_m):
        cfg = few
    return cfg, rule.why


def rule_for(m: int, n: int, interpreted: bool | None = None) -> Rule:
    """The first rule matching (M, N) in the interpreter's table or the GPU's (default: as the profile hook set)."""
    for rule in INTERPRETER_RULES if (_INTERPRETED if interpreted is None else interpreted) else RULES:
        if m <= rule.max_m and n <= rule.max_n:
            return rule
    raise AssertionError("the last rule matches every M")  # pragma: no cover


def config_for_sms(m: int, n: int, sms: int, interpreted: bool) -> GemmConfig:
    """config_for on a GPU of `sms` SMs (tails.py's cost model plans for a given SM count)."""
    return _config_cached(m, n, sms, interpreted)[0]


def pointer_fallback(cfg: GemmConfig) -> GemmConfig:
    """The tile for a layout TMA cannot read (an operand stride not 16-byte aligned): pointer loads of the
    128x256x64 tile took 255 registers and spilled 636 B in the sm_90 compile check; 128x128x32 does not."""
    return replace(cfg, block_n=min(cfg.block_n, 128), block_k=min(cfg.block_k, 32), tma=False)


def grid_for(m: int, n: int, cfg: GemmConfig, device: torch.device) -> int:
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    return min(tiles, multiprocessor_count(device)) if cfg.persistent else tiles


def describe_choice(m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> dict[str, Any]:
    """The launch record of a case (the bench stores it beside each measurement of ours)."""
    from ridgeline.ops.matmul.tails import plan  # (tails.py builds on this module)

    cfg, why = config_for(m, n, k, dtype, torch.device(device))
    grid = grid_for(m, n, cfg, torch.device(device)) if m and n and k else 0
    record = {"config": cfg.describe(), **cfg.key(), "grid": grid, "why": why,
              "note": "tma falls back to pointer loads where an operand's strides are not 16-byte aligned"}
    pieces = plan(m, n, k, multiprocessor_count(torch.device(device))) if m and n and k else None
    if pieces:
        record["tails"] = [p.describe() for p in pieces]
    return record
