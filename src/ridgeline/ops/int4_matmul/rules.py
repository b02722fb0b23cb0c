"""Launch rules of `int4_matmul`: ordered tables of data, first match wins, each row with why.

Two separate choices:
1. The numeric split of K (`splits_for`): a function of (N, K) and the GPU's SM count only, never of M, so a row's
   result is the same whatever the batch (batch invariance; kernel.py). Decode needs it: at M <= 64 the N blocks
   alone (N / 64 = 64 programs for a 4096-wide layer) cannot keep 132 SMs' worth of weight loads in flight.
2. The tile config (`TILE_RULES`, by M): BLOCK_M, BLOCK_N, warps, stages, the MMA orientation (swap-AB) and groups a
   loop trip; and whether each split gets its own programs (`split_programs`: when the tiles alone are fewer than
   SPLIT_BELOW_PROGRAMS_PER_SM programs per SM).
The tiles from 33 rows were settled by scripts/device/tune_int4_matmul.py on the H200 (s20); the swapped decode
tiles (s21) come from their sm_90 SASS and await their tuning run.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUPS_PER_STEP = (1, 2, 4)


@dataclass(frozen=True)
class TileConfig:
    block_m: int = 16
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 1
    why: str = ""
    swap_ab: bool = False  # y^T = W x^T: the weight tile is the MMA's A operand (kernel.py)
    groups_per_step: int = 1  # quantization groups unrolled in one K loop trip
    # x's rows as two MMA N tiles of block_m / 2, two dots on the one unpacked weight (swap_ab only): at 16 rows the
    # 8-wide halves keep mma.sync on 4 warps, where one 16-wide dot becomes wgmma (kernel.py)
    halves: bool = False

    def describe(self) -> str:
        text = f"BM{self.block_m} BN{self.block_n} w{self.num_warps} s{self.num_stages}"
        if self.groups_per_step != 1:
            text += f" g{self.groups_per_step}"
        return text + (" swapAB" if self.swap_ab else "") + (" halves" if self.halves else "")


# (max M, config): the first row whose max M >= M. Every row to 32 swaps A and B (one instruction family, mma.sync,
# for all of decode: batch invariance, kernel.py).
TILE_RULES: tuple[tuple[int, TileConfig], ...] = (
    (8, TileConfig(8, 64, 4, 4, "decode: x^T fills mma.sync's 8-wide N tile and the unpacked weight is the A operand "
                               "as it stands (s21 SASS: 194 instructions a 64 x 128 step, s20's unswapped 288); two "
                               "groups a loop trip: 1.14-1.20x one at 1x8192x28672 / 1x57344x8192, level at 4096^2 "
                               "(h200-tune-int4_matmul-s21.json)", swap_ab=True, groups_per_step=2)),
    (16, TileConfig(16, 64, 4, 3, "9-16 rows: x's rows as two 8-wide dots on the one unpacked weight (halves), so 4 "
                                  "warps stay on mma.sync (one 16-wide dot there is wgmma, 1.5x slower), 3 stages; "
                                  "H100 s39 (tune --halves): 1.00-1.20x the 2-warp 16-wide tile at six shapes "
                                  "(16x8192x28672 67.1 against 76.7 us, 9x4096x14336 18.2 / 21.8), the same bits",
                    swap_ab=True, halves=True)),
    (32, TileConfig(32, 64, 2, 3, "small batch: still weight-bound; 32 weight rows a warp; 3 stages 1.05x 4 at "
                                  "32x4096x4096 (s21 tuning), 1.16x the unswapped 32x64 tile", swap_ab=True)),
    # (s20 tuning: git show 520522a:docs/results/h200-tune-int4_matmul-s20.json)
    (1 << 62, TileConfig(64, 128, 4, 3, "33 rows and up: one wgmma M tile per warpgroup, 128 columns halve the x "
                                        "re-reads; s20 tuning: 1.23x the 64-column tile at 64x8192x28672, 1.69x "
                                        "the 128x64 w8 tile at 1024x4096x4096")),
)

# The numeric split: aim for this many programs over N (at 64 columns each) times splits, i.e. about 2 waves of
# 4-warp programs at 4 per SM; never more than MAX_SPLITS, and each split keeps at least MIN_GROUPS_PER_SPLIT groups.
SPLIT_TARGET_PROGRAMS_PER_SM = 4
SPLIT_COLUMNS = 64
MAX_SPLITS = 8
MIN_GROUPS_PER_SPLIT = 4
# Split programs (own programs per split, fp32 partials + an ordered reduce) when the output tiles alone are fewer
# than this many programs per SM; else one program walks its splits (no workspace, no second launch).
SPLIT_BELOW_PROGRAMS_PER_SM = 2
# Split programs add their partials in the kernel (the tile's last program, behind a self-resetting counter) instead
# of a second launch, up to this many rows (the same bits either way). s28 on an H100 (tune_int4_matmul.py
# --fused-only, h100-drivers-s28-s39.json run int4_fused_s28, graph replay): 1.04-1.06x at M = 1 and 4
# (1x4096x4096 7.99 against 8.48 us, 4x4096x4096 8.10 / 8.53, 1x6144x4096 10.71 / 11.10), but 1.10-1.15x slower at
# M = 16 and 32 (16x4096x4096 10.10 against 8.77 us): there the last program reads 8 partials of 16-32 rows after its
# own tile, a serial tail longer than the second launch it saves.
FUSE_SPLIT_REDUCE_MAX_M = 8
# Output tiles the fused reduce keeps counters for (split programs run only below 2 programs an SM, so a rule's
# launch has fewer; a launch past this, through the tuning overrides, takes the second launch).
FUSED_REDUCE_MAX_TILES = 4096


def splits_for(n: int, k: int, group_size: int, sm_count: int) -> int:
    """Numeric K splits for (N, K) on a GPU of `sm_count` SMs (independent of M: batch invariance)."""
    n_groups = k // group_size
    programs_over_n = -(-n // SPLIT_COLUMNS)
    want = -(-SPLIT_TARGET_PROGRAMS_PER_SM * sm_count // programs_over_n)
    return max(1, min(want, MAX_SPLITS, n_groups // MIN_GROUPS_PER_SPLIT))


def tile_config(m: int) -> TileConfig:
    for max_m, cfg in TILE_RULES:
        if m <= max_m:
            return cfg
    return TILE_RULES[-1][1]


def split_programs(m: int, n: int, cfg: TileConfig, splits: int, sm_count: int) -> bool:
    if splits == 1:
        return False
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    return tiles < SPLIT_BELOW_PROGRAMS_PER_SM * sm_count
