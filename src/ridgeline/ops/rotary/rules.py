"""Launch rules of the rotary kernels: an ordered table of data, first match wins.

A call is a `RotaryCase` (tokens, q and k heads, rotated half-width, itemsize, the GPU's SMs). A rule's `Match`
says when it applies (None: any); its `RotaryConfig` says how to launch:
- split: "token" = one program per token takes all of its heads (cos/sin loaded once per token);
  "kv-group" = one program per (token, kv head): Hq / Hk q heads and one k head (a GQA group), Hk times the
  programs, for calls with too few tokens to fill the GPU. (Without k: groups of at least 4 q heads.)
- tile: elements of one register tile (BLOCK_H heads x the rotated columns, both halves);
- num_warps.
No knob changes a bit of the result: every element is the same float32 expression of the same inputs, rounded
once, whatever the grid or tile (tests check configs against each other), so the rules may look at the number of
tokens without breaking batch invariance.

What is a guess (to be settled on the H200 by scripts/device/tune_rotary.py, which times every candidate of
`candidate_configs` per shape): the edge between the two splits (TOKENS_PER_SM_SPLIT) and the tile/warps per zone.
They start from what the RMSNorm rules learned on the same H200 (ops/rmsnorm/config.py): 16-byte accesses, 4 warps
for rows of 4-8 KiB, one row per program beyond a few rows per SM, launch-bound below ~2 rows per SM.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import triton

SPLITS = ("token", "kv-group")
# A token per program takes (Hq + Hk) * rot_dim elements: 10240 at Llama-3-8B (20 KiB of bf16 read and written).
# Below this many tokens per SM the GPU is not full of programs: split each token's heads into GQA groups.
TOKENS_PER_SM_SPLIT = 4
MIN_HEADS_PER_GROUP = 4  # no k: q heads per program when split


@dataclass(frozen=True)
class RotaryCase:
    tokens: int
    heads_q: int
    heads_k: int  # 0: no k
    half: int  # rot_dim / 2
    itemsize: int = 2
    sms: int = 132


@dataclass(frozen=True)
class RotaryConfig:
    split: str = "token"
    tile: int = 4096
    num_warps: int = 4

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"cfg: split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.tile < 2 or self.tile & (self.tile - 1):
            raise ValueError(f"cfg: tile must be a power of two >= 2, got {self.tile}")
        if self.num_warps not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"cfg: num_warps must be a power of two from 1 to 32, got {self.num_warps}")

    def describe(self) -> str:
        return f"{self.split} tile{self.tile} w{self.num_warps}"


@dataclass(frozen=True)
class Match:
    """Conditions on a case; None: any."""

    max_tokens_per_sm: float | None = None  # tokens / SMs at most this
    min_itemsize: int | None = None

    def matches(self, c: RotaryCase) -> bool:
        if self.max_tokens_per_sm is not None and c.tokens > self.max_tokens_per_sm * c.sms:
            return False
        return self.min_itemsize is None or c.itemsize >= self.min_itemsize


@dataclass(frozen=True)
class Rule:
    when: Match
    then: RotaryConfig
    why: str


# Serving (in place, rot_dim columns of each head).
SERVING_RULES: tuple[Rule, ...] = (
    Rule(Match(min_itemsize=4), RotaryConfig("token", 4096, 8),
         "fp32: one layout at every token count. The kv-group split's code rounds the rotation differently and "
         "fp32 stores it unrounded: on the H200 a 16384x32x8x128 fp32 call's first row alone differed bitwise "
         "(batch invariance, test_rotary_gpu.py). Twice the bytes per tile: more warps in flight (guess)"),
    Rule(Match(max_tokens_per_sm=TOKENS_PER_SM_SPLIT), RotaryConfig("kv-group", 2048, 4),
         "decode/small batches: a token's 40 heads in one program leave most SMs idle; one program per GQA group "
         "gives Hk x the programs, each still loading cos/sin once (guess; tune_rotary.py settles it)"),
    Rule(Match(), RotaryConfig("token", 4096, 4),
         "prefill: one program per token reads its cos/sin row once and streams 20 KiB; 4 warps x 16-byte "
         "vectors cover a 4096-element tile in 4 loads per thread (rmsnorm's 4096-column rule; guess)"),
)

# Training (out of place, all D columns; dq/dk for the backward): the same zones.
TRAIN_RULES: tuple[Rule, ...] = (
    Rule(Match(min_itemsize=4), RotaryConfig("token", 4096, 8), "fp32: one layout at every token count, as in serving"),
    Rule(Match(max_tokens_per_sm=TOKENS_PER_SM_SPLIT), RotaryConfig("kv-group", 2048, 4),
         "few tokens: split the heads as in serving (guess)"),
    Rule(Match(), RotaryConfig("token", 4096, 4), "training shapes (B x S >= 4096 tokens): one program per token"),
)


def choose(rules: tuple[Rule, ...], case: RotaryCase) -> RotaryConfig:
    for rule in rules:
        if rule.when.matches(case):
            return rule.then
    raise AssertionError("the last rule of a table matches every case")  # pragma: no cover


def candidate_configs() -> list[RotaryConfig]:
    """What tune_rotary.py times per shape."""
    out = []
    for split in SPLITS:
        for tile, warps in ((1024, 2), (2048, 4), (4096, 4), (4096, 8), (8192, 8)):
            out.append(RotaryConfig(split, tile, warps))
    return out


@dataclass(frozen=True)
class LaunchPlan:
    """A config resolved for one head layout: the kernel's constexprs and the grid per token."""

    groups: int  # programs per token
    q_heads: int  # per program
    k_heads: int
    block_hq: int
    block_hk: int
    half_p: int
    num_warps: int
    config: RotaryConfig

    def grid(self, tokens: int) -> int:
        return tokens * self.groups


def _block(heads: int, tile: int, width: int) -> int:
    """Heads per register tile: a power of two, as many as the tile holds (at least 1), no more than needed."""
    fit = max(1, tile // width)
    return max(1, min(triton.next_power_of_2(max(heads, 1)), 1 << (fit.bit_length() - 1)))


@functools.lru_cache(maxsize=4096)
def resolve(cfg: RotaryConfig, heads_q: int, heads_k: int, half: int) -> LaunchPlan:
    half_p = triton.next_power_of_2(max(half, 1))
    groups = 1
    if cfg.split == "kv-group":
        if heads_k and heads_q % heads_k == 0:
            groups = heads_k
        elif not heads_k:
            groups = max(d for d in range(1, heads_q + 1) if heads_q % d == 0 and heads_q // d >= min(
                MIN_HEADS_PER_GROUP, heads_q))
    qh, kh = heads_q // groups, heads_k // groups
    width = 2 * half_p  # both halves (NeoX) or the pairs (GPT-J) of one head
    bq, bk = _block(qh, cfg.tile, width), _block(kh, cfg.tile, width)
    # No more warps than 16-byte vectors (8 elements) per thread can use on the widest tile.
    useful = max(1, (max(bq, bk) * width) // (32 * 8))
    warps = max(1, min(cfg.num_warps, 1 << math.floor(math.log2(useful))))
    return LaunchPlan(groups, qh, kh, bq, bk, half_p, warps, cfg)
