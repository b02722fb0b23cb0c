"""Launch rules of `int4_matmul`: ordered tables of data, first match wins, each row with why.

Two separate choices:
1. The numeric split of K (`splits_for`): a function of (N, K) and the GPU's SM count only, never of M, so a row's
   result is the same whatever the batch (batch invariance; kernel.py). Decode needs it: at M <= 64 the N blocks
   alone (N / 64 = 64 programs for a 4096-wide layer) cannot keep 132 SMs' worth of weight loads in flight.
2. The tile config (`TILE_RULES`, by M): BLOCK_M, BLOCK_N, warps, stages; and whether each split gets its own
   programs (`split_programs`: when the tiles alone are fewer than SPLIT_BELOW_WAVES waves of the SMs).
Every number below is a first guess from the design (bytes in flight per SM, tl.dot's minimum of 16 rows, the
rmsnorm lessons on the H200: ~4 programs per SM of 4 warps saturate DRAM), to be settled by
scripts/device/tune_int4_matmul.py on the H200.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kernel bodies: "interleaved" (kernel.py, the shipped one), "split-nibbles" (kernel_split.py) and "gemv"
# (kernel_gemv.py: CUDA cores, all M <= 16 rows per program): tuning candidates for decode bandwidth that no rule
# below picks until the H200 has timed them.
LAYOUTS = ("interleaved", "split-nibbles", "gemv")
GEMV_MAX_ROWS = 16  # the gemv body takes every row of a call in one program, up to this many
GROUPS_PER_STEP = (1, 2, 4, 8)


@dataclass(frozen=True)
class TileConfig:
    # (Defaults so the gemv candidate reads TileConfig(layout="gemv", block_n=..., ...); gemv has no M tile and
    # keeps block_m at its default.)
    block_m: int = 16
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 1
    why: str = ""
    layout: str = "interleaved"
    groups_per_step: int = 1  # split-nibbles, gemv: quantization groups per K step (BLOCK_K = group * this)
    swap_ab: bool = False  # split-nibbles: y^T = W x^T (the weight tile is the MMA's M operand)

    def describe(self) -> str:
        if self.layout == "gemv":
            return f"gemv BN{self.block_n} w{self.num_warps} s{self.num_stages} g{self.groups_per_step}"
        text = f"BM{self.block_m} BN{self.block_n} w{self.num_warps} s{self.num_stages}"
        if self.layout != "interleaved":
            text += f" {self.layout} g{self.groups_per_step}" + (" swapAB" if self.swap_ab else "")
        return text


# (max M, config): the first row whose max M >= M.
TILE_RULES: tuple[tuple[int, TileConfig], ...] = (
    (16, TileConfig(16, 64, 4, 4, "decode: tl.dot's minimum of 16 rows; 64 columns x 64 bytes of K per group "
                                  "keep 4 KB of weight per program in flight, 4 stages deep")),
    (32, TileConfig(32, 64, 4, 4, "small batch: still weight-bound, the x tile grows, the weight tile does not")),
    (1 << 62, TileConfig(64, 128, 4, 3, "33 rows and up: one wgmma M tile per warpgroup, 128 columns halve the x "
                                        "re-reads; s20 tuning (h200-tune-int4_matmul-s20.json): 1.23x the 64-column "
                                        "tile at 64x8192x28672, 1.69x the 128x64 w8 tile at 1024x4096x4096")),
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
