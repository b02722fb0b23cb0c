"""Launch rules of paged decode attention: an ordered table of data, first match wins.

A call is a `DecodeCase`: the block table's capacity in tokens (max_blocks_per_seq * block_size: the longest context
the call can hold, known on the host without reading seq_lens), Hkv, the rows per program (G * Q: q heads per kv
head times query tokens), the head dim, the KV itemsize and the GPU's SMs. A rule's `DecodeConfig` says how to
launch: BLOCK_N tokens per loop step, num_warps, num_stages, and how to split the KV of one (sequence, kv head):
  n_splits = ceil(waves * SMs / Hkv), the splits a *lone* sequence needs to give every SM `waves` programs;
  split_tokens = max(min_split_tokens, capacity / n_splits) rounded up to a multiple of BLOCK_N;
  one split (no merge launch, the output written directly) when split_tokens >= capacity.

Why the batch size is NOT a key, though flash-decoding usually picks splits from it: the split size changes the
rounding of a sequence's result, so a rule on B would make a request's output depend on which other requests share
its batch (not batch invariant; `ridgeline check` requires ours to be). The price is paid at large batches, which
need no split for occupancy but still get one: every split writes and the merge re-reads G * Q * (D + 1) fp32 per
split, i.e. 2 * G * Q * (D + 1) * 4 / (split_tokens * 2 * D * itemsize) of the KV bytes: at G 4, Q 1, D 128, bf16,
2.0% at 512 tokens a split. `min_split_tokens` bounds it; the tuning driver times the same shapes at batch 1 and
batch 64+ for every candidate, so the lead can see what a B-dependent rule would have bought.

What is a guess (settled by scripts/device/tune_paged_attention.py on the H200): every number below. They start
from flash-decoding practice (64-token tiles, 4 warps, 2 waves at batch 1, >= 256-512 tokens a split) and the
rmsnorm lesson on this H200 that a program needs many bytes in flight (num_stages 3: two tiles ahead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NO_SPLIT = 1 << 40  # min_split_tokens that never splits


@dataclass(frozen=True)
class DecodeCase:
    capacity: int  # tokens the block table can address (max_blocks_per_seq * block_size)
    heads_kv: int
    rows: int  # G * Q
    head_dim: int
    itemsize: int = 2  # KV bytes per element (1: fp8)
    sms: int = 132


@dataclass(frozen=True)
class DecodeConfig:
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 3
    waves: float = 2.0
    min_split_tokens: int = 512
    # fp8 cache with a bf16 query: both dots in fp16 (K and V widened by the hardware's paired e4m3 -> fp16
    # conversion, q scaled per row by a power of two into fp16's range, P in fp16) instead of bf16 dots fed by the
    # integer widening (1.01-1.07x at the same tiles, s24: the fp8 rules take it); ignored for other dtypes.
    f16_dots: bool = False

    def __post_init__(self) -> None:
        if self.block_n < 16 or self.block_n & (self.block_n - 1):
            raise ValueError(f"config: block_n must be a power of two >= 16, got {self.block_n}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"config: num_warps must be a power of two from 1 to 16, got {self.num_warps}")
        if not 1 <= self.num_stages <= 6:
            raise ValueError(f"config: num_stages must be in 1..6, got {self.num_stages}")
        if self.waves <= 0 or self.min_split_tokens < 1:
            raise ValueError(f"config: waves and min_split_tokens must be positive, got {self.waves}, "
                             f"{self.min_split_tokens}")

    def describe(self) -> str:
        split = "nosplit" if self.min_split_tokens >= NO_SPLIT else f"split>={self.min_split_tokens}x{self.waves:g}w"
        return f"n{self.block_n} w{self.num_warps} s{self.num_stages} {split}" + (" f16" if self.f16_dots else "")


@dataclass(frozen=True)
class Match:
    """Conditions on a case; None: any."""

    max_capacity: int | None = None
    min_rows: int | None = None
    min_head_dim: int | None = None
    itemsize: int | None = None  # the KV cache's bytes per element (1: fp8)

    def matches(self, c: DecodeCase) -> bool:
        if self.max_capacity is not None and c.capacity > self.max_capacity:
            return False
        if self.itemsize is not None and c.itemsize != self.itemsize:
            return False
        if self.min_rows is not None and c.rows < self.min_rows:
            return False
        return self.min_head_dim is None or c.head_dim >= self.min_head_dim


@dataclass(frozen=True)
class Rule:
    when: Match
    then: DecodeConfig
    why: str


RULES: tuple[Rule, ...] = (
    Rule(Match(max_capacity=256), DecodeConfig(64, 4, 2, min_split_tokens=NO_SPLIT),
         "short contexts: at most 4 tiles a program; a split would cost a second launch (~1-2 us) for less than "
         "the KV bytes of one tile per SM (guess)"),
    Rule(Match(min_head_dim=256), DecodeConfig(32, 4, 3, min_split_tokens=256),
         "D 256: a 64-token K or V tile is 32 KiB of registers at bf16; 32-token tiles keep q, acc and two tiles "
         "within 255 registers a thread (guess)"),
    Rule(Match(min_rows=33), DecodeConfig(32, 4, 3, min_split_tokens=256),
         "GQA group x query tokens > 32 rows (e.g. 8 heads x Q 8 = 64): acc [64, D] fp32 takes 64 registers a "
         "thread at 4 warps; halve the KV tile (guess)"),
    # fp8 cache (s24 tuning, h200-tune-paged_attention-fp8kv-f16-s24.json, do_bench_cudagraph): 2 stages against 3
    # at the same splits ran 1.04-1.20x at batch 8-256 (32x32768 820 vs 956 us, 8x131072 810 vs 855, 64x4096 236 vs
    # 281, 8x4096 Q 4 40 vs 48) and 0.96-0.99x at batch 1. Stages do not change the arithmetic (the same bits). The
    # fp16 dots (f16_dots) beside the bf16 ones at the same tiles and splits: 1.01-1.07x at every shape but 1x4096
    # (0.99-1.02x, launch-bound): 32x32768 791 vs 820 us, 8x131072 768 vs 810, 1x131072 144 vs 153.
    Rule(Match(max_capacity=8192, itemsize=1), DecodeConfig(64, 4, 2, waves=2.0, min_split_tokens=256, f16_dots=True),
         "fp8 cache, contexts up to 8K: the splits of the bf16 rule below, 2 stages, fp16 dots (measured, s24)"),
    Rule(Match(itemsize=1), DecodeConfig(64, 4, 2, waves=2.0, min_split_tokens=512, f16_dots=True),
         "fp8 cache, long contexts: the splits of the bf16 rule below, 2 stages, fp16 dots (measured, s24)"),
    Rule(Match(max_capacity=8192), DecodeConfig(64, 4, 3, waves=2.0, min_split_tokens=256),
         "contexts up to 8K: a lone sequence needs many splits to fill 132 SMs with Hkv (8) heads; 256-token "
         "splits keep the partials' traffic near 4% at G 4 (guess)"),
    Rule(Match(), DecodeConfig(64, 4, 3, waves=2.0, min_split_tokens=512),
         "long contexts: splits of capacity / (2 SMs / Hkv) tokens (4K at 128K, Hkv 8), >= 512 (guess)"),
)


def choose(case: DecodeCase, rules: tuple[Rule, ...] = RULES) -> DecodeConfig:
    for rule in rules:
        if rule.when.matches(case):
            return rule.then
    raise AssertionError("the last rule matches every case")  # pragma: no cover


def split_tokens_for(cfg: DecodeConfig, capacity: int, heads_kv: int, sms: int) -> int:
    """Tokens per split (a multiple of block_n); >= capacity means one split."""
    capacity = max(capacity, 1)
    if cfg.min_split_tokens >= capacity:
        return _round_up(capacity, cfg.block_n)
    n_splits = max(1, math.ceil(cfg.waves * sms / max(heads_kv, 1)))
    tokens = max(cfg.min_split_tokens, math.ceil(capacity / n_splits))
    return _round_up(min(tokens, capacity), cfg.block_n)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def candidate_configs(itemsize: int = 2) -> list[DecodeConfig]:
    """What tune_paged_attention.py times per shape; an fp8 cache (itemsize 1) adds the fp16-dot form of the fp8
    rules' tiles."""
    out = [DecodeConfig(64, 4, 3, min_split_tokens=NO_SPLIT)]
    for block_n, warps, stages in ((32, 4, 3), (64, 4, 2), (64, 4, 3), (64, 4, 4), (64, 8, 3), (128, 8, 3)):
        for min_split in (256, 512, 1024):
            out.append(DecodeConfig(block_n, warps, stages, 2.0, min_split))
    out += [DecodeConfig(64, 4, 3, 1.0, 512), DecodeConfig(64, 4, 3, 4.0, 256), DecodeConfig(64, 4, 3, 4.0, 128)]
    if itemsize == 1:
        out += [DecodeConfig(64, 4, stages, 2.0, min_split, f16_dots=True) for stages in (2, 3)
                for min_split in (256, 512)]
        # Wider token tiles for the 8-bit cache (s29): its step is latency-bound at 64 tokens (8 KiB a tile for the
        # instructions of a 16 KiB bf16 tile, attention.md), so more bytes a step.
        out += [DecodeConfig(128, warps, stages, 2.0, min_split, f16_dots=True)
                for warps, stages in ((4, 2), (8, 2), (8, 3)) for min_split in (256, 512)]
        out.append(DecodeConfig(256, 8, 2, 2.0, 512, f16_dots=True))
    return out
