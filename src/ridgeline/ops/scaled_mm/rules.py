"""Launch rules of the FP8 scaled GEMM and the quantizers: ordered tables of data, first match wins.

GEMM tiles. The values below began as first guesses; the first H200 tuning run (`git show
c466aa1:docs/results/h200-tune-scaled_mm.json`, session 15, with fast FP8 accumulation) confirmed the large-M rows
(128x256x128 over 8 warps within 1-6 % of the best candidate from M = 256 in row mode; since the accumulator is
promoted every BLOCK_K that tile spills and the rule takes 256x128, see GEMM_RULES), 128x128x128 s4 the best in
block mode) and left the decode rows open: its timings of tens of microseconds disagreed by up to 2x between
near-identical candidates, too noisy to set a rule.
Where they came from: the usual Hopper FP8
points (wgmma takes 64 rows per warpgroup, K steps of 128 bytes keep the TMA boxes 128 B wide, 3-6 stages fit the
228 KB of shared memory) and two facts of FACTS.md: at M <= 64 the weight bytes are the whole cost (a full GPU
needs >= 132 tiles in flight), at M >= 1024 cuBLAS' row-wise `_scaled_mm` reaches 1074-1264 TFLOP/s, so the large
tiles must reach the tensor-core rate. `scripts/device/tune_scaled_mm.py` times `candidate_configs` per shape
and mode on the H200 (beside torch._scaled_mm) and prints the winners, to settle the table.

Batch invariance: the K loop's order is the same for every tile config with the same BLOCK_K (and one partial
product per 128-column scale group in block mode), so a row's result does not depend on M as long as the rules
keep BLOCK_K fixed per (N, K, mode) -- they do: BLOCK_K depends on the mode only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ridgeline.lib.launch import interpreter_enabled

_INTERPRETED = interpreter_enabled()
MODES = ("tensor", "row", "block")


# The Gluon kernel's registers a thread by default: 232 to each MMA warpgroup, 40 to the load warp's warpgroup.
WS_REGS = (232, 40)


@dataclass(frozen=True)
class TileConfig:
    """One GEMM launch: output tiles of block_m x block_n, K steps of block_k, grouped order over group_m row
    tiles, num_warps, num_stages of the K pipeline, TMA descriptors (else pointer loads)."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 4
    use_tma: bool = True
    defer_scale: bool = False  # block mode: scale each K step's partial one step later (a tuning candidate)
    # The Gluon kernel (kernel_ws.py): a TMA load warp and two MMA warpgroups; needs sm_90, TMA-readable operands,
    # a 16-bit output with 16-byte aligned rows, block_m 256 (two warpgroups of 128 rows) and block_k 128.
    warp_specialized: bool = False
    # Its registers a thread after the hand-over: (MMA warpgroups, load warp's warpgroup); 2 x 128 x mma + 128 x
    # load must fit an SM's 64K. ptxas places the spills by this split, not by the MMA side alone (rules below).
    ws_regs: tuple[int, int] = WS_REGS
    # 128-row Gluon tiles: the next K step's wgmma issued before this one's promotion (two partials live)
    ws_pipeline: bool = False
    # Its block scales loaded a trip (two K steps) ahead as they are and multiplied after that trip's wgmmas issue,
    # so no FMUL on a fresh load sits before a wgmma (kernel_ws.py `_pipelined_steps`)
    ws_scales_ahead: bool = False
    # Decode: the tile computed as y^T = b a^T (the weight's block_n rows on the MMA's 64-row side, a's block_m
    # rows on its narrow side, 8-32), the same bits (kernel.py SWAP_AB); Triton kernel only
    swap_ab: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k", "group_m", "num_warps"):
            v = getattr(self, name)
            if v < 1 or v & (v - 1):
                raise ValueError(f"TileConfig.{name}: expected a power of two >= 1, got {v}")
        if self.block_k < 16:
            raise ValueError(f"TileConfig.block_k: expected >= 16 (the smallest fp8 wgmma K step is 32), got "
                             f"{self.block_k}")
        if self.num_stages < 1:
            raise ValueError(f"TileConfig.num_stages: expected >= 1, got {self.num_stages}")
        if self.swap_ab and self.warp_specialized:
            raise ValueError("TileConfig.swap_ab: a Triton-kernel decode form; not with warp_specialized")
        mma, load = self.ws_regs
        if any(r % 8 or not 24 <= r <= 256 for r in (mma, load)) or 2 * 128 * mma + 128 * load > 65536:
            raise ValueError(f"TileConfig.ws_regs: expected multiples of 8 in 24..256 with 2 x 128 x mma + 128 x "
                             f"load <= 65536 (an SM's registers), got {self.ws_regs}")

    def smem_bytes(self) -> int:
        """Shared memory of the operand pipeline (1-byte operands)."""
        return (self.block_m + self.block_n) * self.block_k * self.num_stages

    def describe(self) -> str:
        load = "tma" if self.use_tma else "ptr"
        regs = f" r{self.ws_regs[0]}/{self.ws_regs[1]}" if self.warp_specialized and self.ws_regs != WS_REGS else ""
        return (f"tile {self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} w{self.num_warps} "
                f"s{self.num_stages} {load}{' defer' if self.defer_scale else ''}"
                f"{' ws' if self.warp_specialized else ''}{regs}{' pipelined' if self.ws_pipeline else ''}"
                f"{' ahead' if self.ws_scales_ahead else ''}{' swapAB' if self.swap_ab else ''}")


@dataclass(frozen=True)
class Call:
    """What a rule may look at: an M x N x K GEMM in one scale mode on a GPU with `sms` SMs."""

    m: int
    n: int
    k: int
    mode: str
    sms: int = 132
    interpreted: bool = False
    tma: bool = True  # both operands TMA-addressable (K-contiguous rows, 16-byte aligned strides and bases)
    aligned: bool = True  # every operand stride a multiple of 16 bytes (else byte-wide loads)
    ws: bool = False  # the Gluon kernel can take it: sm_90, fp8 TMA operands, a 16-bit output with 16-B rows


@dataclass(frozen=True)
class Rule:
    """(conditions -> config) with why. Conditions: None matches anything; max_m inclusive."""

    then: TileConfig
    why: str
    max_m: int | None = None
    modes: tuple[str, ...] | None = None
    interpreted: bool | None = None
    tma: bool | None = None
    aligned: bool | None = None
    ws: bool | None = None
    adjust: Callable[[TileConfig, Call], TileConfig] | None = None

    def matches(self, c: Call) -> bool:
        return ((self.max_m is None or c.m <= self.max_m) and (self.modes is None or c.mode in self.modes)
                and (self.interpreted is None or c.interpreted == self.interpreted)
                and (self.tma is None or c.tma == self.tma)
                and (self.aligned is None or c.aligned == self.aligned)
                and (self.ws is None or c.ws == self.ws))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _waves(c: Call, block_m: int, block_n: int) -> int:
    return _cdiv(_cdiv(c.m, block_m) * _cdiv(c.n, block_n), c.sms)


def fewer_waves(cfg: TileConfig, c: Call) -> TileConfig:
    """The Gluon kernel's 128-row tile instead of its 256-row one where that takes fewer waves of programs over
    the SMs, a 128-row tile counted as 0.55 of a 256-row one (it runs half the wgmmas, a little less efficiently).
    It pays where the last 256-row tile row is mostly empty and the tiles fill the SMs badly: s30 on an H100
    (h100-fp8-ws-s30-s36.json, the same bits either way) 1.11-1.29x at 1025, 2049 and 4097 rows of 4096x4096 and at
    640x28672x4096; the rule keeps 256 rows at 1100x6144x4096 (0.95x there) and at every shape of full tiles."""
    return WS_TILE_128 if 0.55 * _waves(c, 128, cfg.block_n) < _waves(c, 256, cfg.block_n) else cfg


def fewer_padded_rows(cfg: TileConfig, c: Call) -> TileConfig:
    """Block scales: the Gluon kernel's 128-row tile where it computes fewer padded rows than the 256-row one
    (M rounded up to 128 below M rounded up to 256), to 1023 rows. s30 on an H100 (h100-fp8-ws-s30-s36.json, runs
    s30q / s30s, the same bits either way): 1.26-1.63x at 300, 384 and 600 rows (300x28672x4096 111 against 182
    us), 1.26x at 65; the 256-row tile 1.04-1.12x where the padding is equal (200, 256, 400 rows), level at 512 and
    768, and 1.10-1.11x from 1024 rows (8192^3, 1024x28672x4096), where its better efficiency outweighs a last tile
    row's padding. (Row scales follow the waves instead, `fewer_waves`: their 128-row tile paid at 129 rows and lost
    at 1100.)
    Since s34 also where it takes fewer waves as `fewer_waves` counts them, and from 129 rows in its pipelined form
    (`WS_TILE_128_PIPELINED`). H100 (h100-fp8-ws-s30-s36.json, interleaved, the same bits): the pipelined 5-stage
    tile against the plain 4-stage one at the rule's 128-row shapes 300x28672x4096 107.1 / 108.6 us, 384x6144x4096
    27.7 / 31.6, 600x28672x4096 133.9 / 138.6; by waves 768x8192x8192 91.3 against 119.3 on 256 rows; where both
    criteria keep 256 rows that tile was the fastest or level (200 and 256 x 28672 x 4096, 400 and 512 x 6144 x
    4096).
    Since s35 also from 1024 rows, where the pipelined tile ran 1.04-1.06x the 256-row one at 4096^3, 8192^3,
    2048x4096x4096 and 1024x28672x4096 (h100-fp8-ws-s30-s36.json run s35a; s34a: 1.05x, level, level, 0.97x).
    From 1024 rows where K passes 8192 the pipelined tile lost to the 256-row one (1.06-1.23x at six of seven
    shapes, run s36a: 4096x4096x14336 440.0 against 469.2 us, 1024x8192x28672 417.7 / 477.9), so since s36 it takes
    its scales a trip ahead there (`WS_TILE_128_AHEAD`), 1.04-1.16x the 256-row tile and 1.06-1.14x the s35 form in
    two runs on two machines (runs s36b / s36c: 4096x4096x14336 456.8 / 457.6 against 476.5 / 477.4 on 256 rows,
    2048x4096x14336 218.6 / 254.6, 1024x8192x28672 434.8 / 484.7). At K <= 8192 that form was no better (0.89-1.10x
    the s35 form, 4096x4096x8192 0.91x and 0.94x in both runs)."""
    fewer_rows = _cdiv(c.m, 128) * 128 < _cdiv(c.m, 256) * 256
    if c.m >= 1024 or fewer_rows or 0.55 * _waves(c, 128, cfg.block_n) < _waves(c, 256, cfg.block_n):
        if c.m <= 128:
            return WS_TILE_128
        return WS_TILE_128_AHEAD if c.m >= 1024 and c.k > 8192 else WS_TILE_128_PIPELINED
    return cfg


def fewer_padded_rows_one_wave(cfg: TileConfig, c: Call) -> TileConfig:
    """Block scales: `fewer_padded_rows`, then the 128-row tile's N narrowed as row scales narrow it
    (`narrow_to_one_wave`: N tiles of 32 / 64 lie inside one 128-column weight block, one scale_b a step). H100, s32
    (h100-fp8-ws-s30-s36.json run s32b, the same bits): 128x4096x14336 34.8 us on 128x32 against 49.3 on 128x128,
    128x4096x4096 11.7 / 16.6, 128x6144x4096 13.7 on 128x64 / 17.3, 96x8192x8192 31.7 on 128x64 / 33.7: the
    fastest tile timed at each."""
    cfg = fewer_padded_rows(cfg, c)
    return narrow_to_one_wave(cfg, c) if cfg.block_m == 128 else cfg


def fill_the_gpu(cfg: TileConfig, c: Call) -> TileConfig:
    """Narrow the N tile (down to 32, or 64 for 128-row tiles) while the tiles cover fewer than half the SMs: at
    small M every SM must stream its share of the weight. (Half, not all: at M = 64, N = 8192 the H200 ran 128
    tiles of 64x64 1.49x faster than 256 tiles of 64x32, `git show
    c25cf61:docs/results/h200-tune-scaled_mm-s17.json`; narrower tiles re-read the activations and issue smaller
    wgmmas.)"""
    bn, floor = cfg.block_n, 32 if cfg.block_m <= 64 else 64
    while bn > floor and 2 * _cdiv(c.m, cfg.block_m) * _cdiv(c.n, bn) < c.sms:
        bn //= 2
    return replace(cfg, block_n=bn)


def narrow_to_one_wave(cfg: TileConfig, c: Call) -> TileConfig:
    """The Gluon 128-row tile at 65-128 rows: halve the N tile (to 32) while the halved tiling still fits one wave
    of the SMs, with 6 stages once narrowed. The weight's bytes are the cost here and each SM streams its tiles'
    rows of it: at 128x4096 the 128-wide tiles keep 32 of 132 SMs busy. H100, s31 (h100-fp8-ws-s30-s36.json run
    s31b; the same bits: BLOCK_K and the K order are unchanged): 128x4096x14336 30.0 us on 128 tiles of 32 against
    41.4 on 32 of 128 (cuBLAS 36.6), 128x4096x4096 10.7 against 14.9, 128x6144x4096 13.2 on 96 tiles of 64 against
    15.2 (its 192 tiles of 32: 17.8, two waves); 6 stages 1.03-1.07x over 5 on the 64-wide tile. The one loss:
    96x8192x8192 on 128 tiles of 64 31.2 against 30.5 on 64 of 128."""
    bn = cfg.block_n
    while bn > 32 and _cdiv(c.m, cfg.block_m) * _cdiv(c.n, bn // 2) <= c.sms:
        bn //= 2
    # (narrowed tiles run plain: pipelined they ran 0.96-1.0x, h100-fp8-ws-s30-s36.json run s34b)
    return cfg if bn == cfg.block_n else replace(cfg, block_n=bn, num_stages=6, ws_pipeline=False)


# The Gluon kernel's tile: 256 rows (two warpgroups of 128), BLOCK_K 128 (the Triton tiles' K steps: the same bits),
# 3 stages. num_warps is what the Triton kernel would take it with (the Gluon launch has its own warps).
WS_TILE = TileConfig(256, 128, 128, 8, 8, 3, warp_specialized=True)
# Its 128-row tile (one 64-row wgmma a warpgroup: one partial and one accumulator, no spills), 4 stages.
WS_TILE_128 = TileConfig(128, 128, 128, 8, 8, 4, warp_specialized=True)
# Its pipelined form (the next K step's wgmma in flight during the promotion: two partials), 5 stages: block scales
# from 129 rows where the 128-row tile is taken (`fewer_padded_rows`). (At 65-128 rows the narrowed N tiles ran
# 0.96-1.0x pipelined, h100-fp8-ws-s30-s36.json.)
WS_TILE_128_PIPELINED = replace(WS_TILE_128, num_stages=5, ws_pipeline=True)
# (s36) and its block scales loaded a trip ahead, from 1024 rows where K passes 8192 (`fewer_padded_rows`)
WS_TILE_128_AHEAD = replace(WS_TILE_128_PIPELINED, ws_scales_ahead=True)
# Block scales on the 256-row tile, 4 stages (its scales a step ahead, kernel_ws.py). (The 224 / 56 register split
# compiles it without spills but ran 0.94-0.97x at 7 of 8 shapes on an H100, h100-fp8-ws-s30-s36.json run s31a.)
WS_TILE_BLOCK = TileConfig(256, 128, 128, 8, 8, 4, warp_specialized=True)

# Block mode keeps BLOCK_K = 128 (one scale group per K step) and N tiles of at most 128: the partial product and
# the accumulator both live in registers (2 x 64 fp32 a thread at 128x128 over 8 warps).
GEMM_RULES: tuple[Rule, ...] = (
    Rule(TileConfig(32, 32, 32, 1, 4, 1, use_tma=False), "CPU interpreter: small tiles, few program instances",
         interpreted=True),
    Rule(TileConfig(64, 64, 32, 8, 4, 2, use_tma=False), "unaligned strides (K % 16 != 0): byte-wide loads; "
         "small tiles, 2 stages (64x128x64 x3 stages spilled ~1-2 KB a thread on sm_90)", aligned=False,
         adjust=fill_the_gpu),
    # (sm_90 compile check: 128x128 over 8 warps on this path spilled 2.7 KB a thread at K = 4100; 64x128 fits.)
    Rule(TileConfig(64, 128, 64, 8, 4, 3, use_tma=False), "pointer loads (odd K, N-major b, unaligned rows): "
         "small tiles keep the masked, narrow loads in registers", tma=False, adjust=fill_the_gpu),
    # Block scales (measured, H200, s17): the deferred rescale (each step's partial scaled one step later, the
    # same bits) won at every tuned shape, 1.01-1.37x; 64-row tiles over 4 warps up to M = 256.
    # Since s39 (H100, scripts/device/fp8_block_decode.py, h100-drivers-s28-s39.json run `fp8_block_decode_s39`, graph
    # timings over weight copies, the same bits): the row-wise decode rule's pointer loads and 6 stages, deferred,
    # 1.12-1.54x the old 64x128 g8 s4 TMA tile at M <= 32 (1x4096x4096 12.7 against 19.5 us, 1x8192x28672 102.5 /
    # 133.4, 32x4096x14336 38.9 / 44.1), 16x6144x4096 1.04x; at 64 rows pointer loads spill (290 us at
    # 64x28672x4096) and 6 TMA stages ran 1.01x.
    Rule(TileConfig(64, 128, 128, 1, 4, 6, use_tma=False, defer_scale=True), "block scales, decode (M <= 32): "
         "pointer loads, 6 stages, deferred (1.04-1.54x the s17 TMA tile, H100 s39)", max_m=32, modes=("block",),
         adjust=fill_the_gpu),
    Rule(TileConfig(64, 128, 128, 1, 4, 6, defer_scale=True), "block scales, M <= 64: 64x128 deferred, 6 TMA "
         "stages (1.01x 4 stages at 64x28672x4096, H100 s39; s17: 1.53x the old rule at M = 64)", max_m=64,
         modes=("block",), adjust=fill_the_gpu),
    # The warp-specialized kernel (kernel_ws.py) where it can run, block scales from 65 rows (measured on an H100 in
    # s30, h100-fp8-ws-s30-s36.json: graph timings over weight copies, the same bits as the rules' tiles). Large M (run
    # s30k): the 256-row tile with each K step's scales loaded a step ahead, 4 stages, 1.75-1.87x it without (s24's
    # rule) and 2.1-2.9x the deferred 128x128 Triton tile (4096^3 125 vs 234 vs 289 us, 8192^3 1087 vs 1904 vs
    # 2264, 1024x28672x4096 217 vs 406 vs 619, 512x6144x4096 32 vs 55 vs 92); 3 stages 1.01-1.08x slower at 3 of 4.
    # 65-768 rows (runs s30q, s30s): 1.02-2.11x the deferred Triton tiles (65x6144x4096 16.9 vs 21.6 us on 128
    # rows, 200x28672x4096 61.3 vs 129.3 on 256, 300x28672x4096 111 vs 227 on 128), the tile by `fewer_padded_rows`.
    Rule(WS_TILE_BLOCK, "block scales, M > 64, sm_90: warp-specialized (a TMA load warp, two MMA warpgroups that "
         "promote in turn): 128x128 pipelined from 1024 rows (1.04-1.06x 256x128, H100 s35; past K = 8192 "
         "with its scales a trip ahead, 1.04-1.16x 256x128, s36) and below where it pads fewer rows or takes "
         "fewer waves (s34), else 256x128 with its scales a step ahead (1.75-1.87x s24's, 1.02-2.9x the Triton "
         "tiles, H100 s30); N narrowed to fill one wave at 65-128 rows (s32)",
         modes=("block",), ws=True,
         adjust=fewer_padded_rows_one_wave),
    Rule(TileConfig(64, 128, 128, 8, 4, 4, defer_scale=True), "block scales, mid M: 64x128 over 4 warps, "
         "deferred (1.27x / 1.37x the old 128x128 w8 at M = 128 / 256)", max_m=256, modes=("block",),
         adjust=fill_the_gpu),
    Rule(TileConfig(128, 128, 128, 8, 8, 3, defer_scale=True), "block scales, large M: 128x128 keeps partial + "
         "accumulator in registers; deferred, 3 stages (4 spill 44 B): 1.01-1.02x the old rule", modes=("block",),
         adjust=fill_the_gpu),
    # Decode through pointer loads (measured, H200, s23, h200-fp8-m1-s23.json: graph timings over weight copies
    # past 256 MB): the same tiles ran 1.19-1.91x their TMA form at M = 1 and 16 (1x4096x4096 9.8 vs 18.8 us,
    # 1x8192x28672 65.4 vs 116.1, 16x28672x4096 35.8 vs 42.5), with the same bits; one row aliased as two (the
    # bf16 GEMM's M == 1 cure) was no faster here (10.2 us). The decode sweeps (h200-bench-scaled_mm-row-decode-
    # s23.json, pointer loads to M = 64, against the first one's TMA at M = 32 / 64, git show c9650d2:docs/results/
    # h200-bench-scaled_mm-row-decode-first-s23.json): pointer loads 1.09-1.35x TMA at M = 32, mixed at M = 64
    # (4096x4096 1.16x, 28672x4096 0.99x, 8192x28672 0.89x), so M = 33-64 keeps TMA.
    Rule(TileConfig(64, 128, 128, 1, 4, 6, use_tma=False), "decode (M <= 32): weight-bound; one 64-row wgmma tile, "
         "deep pipeline, pointer loads (1.09-1.91x TMA, s23)", max_m=32, adjust=fill_the_gpu),
    Rule(TileConfig(64, 128, 128, 1, 4, 6), "small batch (M <= 64): weight-bound; one 64-row wgmma tile, deep "
         "pipeline, TMA (0.89-1.16x pointer loads at M = 64, s23)", max_m=64, adjust=fill_the_gpu),
    # 65-128 rows on the Gluon kernel's 128-row tile, 5 stages (H100, s30, h100-fp8-ws-s30-s36.json run s30o, the
    # same bits): 1.07-1.23x the Triton rule below at all six timed shapes (128x4096x14336 41.4 vs 46.9 us,
    # 96x8192x8192 29.8 vs 36.7, 65x6144x4096 16.0 vs 20.5), 0.89-1.00x torch._scaled_mm; 4 stages 1.00-1.08x slower
    # at 5 of 6.
    # Narrower N tiles where the 128-wide ones leave SMs idle (`narrow_to_one_wave`, H100 s31, run s31b there).
    Rule(replace(WS_TILE_128, num_stages=5), "65-128 rows, sm_90: the warp-specialized kernel's 128-row tile, 5 "
         "stages (1.07-1.23x the Triton tile, H100 s30); N tiles of 64 / 32 over 6 stages while they fit one wave "
         "(1.15-1.39x, s31)", max_m=128, ws=True, adjust=narrow_to_one_wave),
    Rule(TileConfig(128, 128, 128, 8, 8, 4), "mid M: 128x128 tiles, 4 stages; narrower N tiles until the SMs "
         "are covered", max_m=128, adjust=fill_the_gpu),
    # Row / tensor scales on sm_90 (H100, s24, git show 1be1b79:docs/results/h100-fp8-ws-s24.json): the
    # warp-specialized kernel on 3 stages 1.17-1.59x the Triton rules at every timed shape from M = 256
    # (256x10240x8192 53 vs 79 us, 2048x4096x4096 56 vs 89, 4096^3 110 vs 143) and 0.89-1.27x torch._scaled_mm
    # (cuBLAS) beside it (0.89x at 2049 rows: a wave of 288 tiles on 132 SMs, which `fewer_waves` took to 1.00x in
    # s30), where the Triton tile made 0.72-0.89x. 3 stages and 4 were within 4 % either way at 7
    # of 9 shapes (4: 256x10240x8192 1.07x, 8192x6144x4096 1.04x; 3: 512x6144x4096 1.08x); 3 leave shared memory.
    Rule(WS_TILE, "M > 128, sm_90: warp-specialized 256x128 (a TMA load warp, two MMA warpgroups that promote in "
         "turn): 1.17-1.59x the Triton tiles, 0.89-1.27x cuBLAS (H100, s24); 128x128 where that takes fewer "
         "waves (s30)", ws=True, adjust=fewer_waves),
    Rule(TileConfig(128, 128, 128, 8, 8, 4), "mid M without the Gluon kernel: 128x128 tiles, 4 stages",
         max_m=256, adjust=fill_the_gpu),
    # With the FP8 partial promoted into fp32 every BLOCK_K (kernel: max_num_imprecise_acc), 128x256 over 8 warps
    # compiles to 255 registers and spills 208/212 B in the main loop at sm_90, and the H200 sweep lost 25-30%
    # against the fast-accumulation run it was tuned on (s16: `git show
    # 2248204:docs/results/h200-bench-scaled_mm-row-sweep.json`). 256x128 over 8 warps (two warpgroups of 128x128)
    # compiles to 252 registers, no spills; with fast accumulation it had timed within 2-5% of 128x256. Timed with
    # promotion (`git show c25cf61:docs/results/h200-tune-scaled_mm-s17.json`): 256x128 the best tile from M = 1024,
    # 4 stages 1.02-1.03x over 3; 128x256 3-4% behind. (Where the Gluon kernel runs, above, this is its fallback:
    # an fp32 output, an N whose output rows TMA cannot address, not sm_90.)
    Rule(TileConfig(256, 128, 128, 8, 8, 4), "large M: 256x128 tiles (compute-bound), 4 stages (192 KB), "
         "spill-free with the promoted accumulator (128x256 spills)"),
)


def config_for(m: int, n: int, k: int, mode: str, sms: int = 132, interpreted: bool | None = None,
               tma: bool = True, aligned: bool = True, ws: bool = False) -> TileConfig:
    """The first rule that matches the call (ws: the Gluon kernel could take it, see Call.ws)."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    call = Call(m, n, k, mode, sms, _INTERPRETED if interpreted is None else interpreted, tma, aligned, ws)
    for rule in GEMM_RULES:
        if rule.matches(call):
            return rule.adjust(rule.then, call) if rule.adjust else rule.then
    raise AssertionError("GEMM_RULES ends with a rule that matches every call")


def candidate_configs(mode: str, m: int) -> list[TileConfig]:
    """What the tuning driver times per shape: tile shapes x stages x TMA or pointer loads (block mode: N tiles
    of at most 128, BLOCK_K 128; these keep the shared memory under the 227 KB a Hopper block may take)."""
    out: list[TileConfig] = []
    if m <= 64:
        tiles = [(64, 32, 128, 4), (64, 64, 128, 4), (64, 128, 128, 4), (64, 64, 256, 4), (64, 128, 256, 4)]
        stages = (4, 6)
    elif m <= 256:
        tiles = [(64, 128, 128, 4), (128, 128, 128, 8), (64, 256, 128, 4), (128, 256, 128, 8)]
        stages = (3, 4)
    else:
        tiles = [(128, 128, 128, 8), (128, 256, 128, 8), (256, 128, 128, 8), (128, 128, 64, 4)]
        stages = (3, 4)
    for bm, bn, bk, w in tiles:
        if mode == "block" and (bn > 128 or bk > 128 or 128 % bk):
            continue
        for s in stages:
            cfg = TileConfig(bm, bn, bk, 8, w, s)
            if cfg.smem_bytes() <= 200 * 1024:
                out.append(cfg)
    out.append(replace(config_for(m, 8192, 8192, mode, interpreted=False), use_tma=False))
    if m <= 32:
        # (s40) the decode tile swapped: a's rows on the MMA's narrow side (16-32: wgmma), the weight's on its 64-row
        # side, pointer loads over 6 stages as the decode rules have them (block: deferred, as they have it too)
        rows = max(16, 1 << (m - 1).bit_length())
        out += [TileConfig(rows, bn, 128, 1, 4, 6, use_tma=False, defer_scale=mode == "block", swap_ab=True)
                for bn in (64, 128)]
    if mode == "block":
        # Block scales ran at 0.33-0.36x of row-wise on the H200 (each step's wgmma waits for its own rescale):
        # the deferred rescale of every candidate, same bits, for the driver to time. (sm_90 compile: the second
        # fp32 tile takes 128x128 over 8 warps to 255 registers; with 4 stages it spilled 44 B, with 3 none.)
        out += [replace(c, defer_scale=True) for c in out
                if c.use_tma and not (c.block_m * c.block_n >= 128 * 128 and c.num_stages > 3)]
    return out


# --- quantizers ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuantConfig:
    """Per-token: a row per program step, in BLOCK_K chunks (one_pass: the whole row at once). Per-group:
    BLOCK_M rows x GROUPS groups per program."""

    block_k: int
    num_warps: int
    one_pass: bool = True
    block_m: int = 1
    groups: int = 1

    def describe(self) -> str:
        if self.block_m > 1 or self.groups > 1:
            return f"rows {self.block_m} x {self.groups} groups w{self.num_warps}"
        return f"row block {self.block_k} {'one pass' if self.one_pass else 'two passes'} w{self.num_warps}"


# Per-token: rows up to 16384 columns stay in registers (16 fp32 a thread at 32 warps); wider rows take two passes.
PER_TOKEN_RULES: tuple[tuple[int, int], ...] = ((1024, 4), (4096, 8), (8192, 16), (16384, 32))
TWO_PASS_BLOCK = 4096


def per_token_config(k: int) -> QuantConfig:
    for max_k, warps in PER_TOKEN_RULES:
        if k <= max_k:
            return QuantConfig(max(16, 1 << (k - 1).bit_length()), warps)
    return QuantConfig(TWO_PASS_BLOCK, 8, one_pass=False)


def per_group_config(m: int, group: int) -> QuantConfig:
    """Tiles of 32 rows x 4 groups (16 KB of 16-bit input a program: enough bytes in flight per SM); fewer rows
    at decode sizes so more programs share the columns. A guess for the tuning driver to settle."""
    rows = 32 if m > 256 else (8 if m > 16 else 1)
    return QuantConfig(group, 4, block_m=rows, groups=max(1, 512 // group))
