"""Launch rules of the GEMM: an ordered table from (M, N, K) to a tile configuration, first match wins.

Two kernels share one body (kernel.py): a one-tile-per-program launch for small M (the weight streams once; the
grid must cover the SMs, so BLOCK_N shrinks with N) and a persistent launch (one program per SM walking tiles in
grouped order) for large M, where the operands come through TMA. Everything marked "guess" is for
scripts/device/tune_matmul.py to settle on the H200 (one call times every candidate of CANDIDATES per class).
"""

from __future__ import annotations

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
class Rule:
    max_m: int  # the rule applies for M <= max_m (the first matching row wins)
    config: GemmConfig
    why: str
    shrink_n: bool = False  # pick BLOCK_N from N so that the grid covers TILE_WAVES programs per SM


# Programs per SM a one-tile-per-program launch aims for (two resident programs hide each other's latency).
TILE_WAVES = 2

RULES: tuple[Rule, ...] = (
    Rule(16, GemmConfig(16, 64, 256, 4, 4, 1, persistent=False, tma=False),
         "decode: bandwidth-bound on the weight; wide K steps keep 16 rows x 512 B of w in flight per stage, "
         "pointer loads (cp.async) need no descriptor scratch and launch through the cached launcher (guess)",
         shrink_n=True),
    Rule(64, GemmConfig(64, 64, 128, 4, 4, 1, persistent=False, tma=False),
         "small batch: still the weight's bytes; one 64-row tile covers every token (guess)", shrink_n=True),
    Rule(256, GemmConfig(64, 128, 64, 4, 4, 8, persistent=True, tma=True),
         "mid M: the 128x256 tile would leave most SMs idle; 64x128 gives N/128 x M/64 tiles (guess)"),
    Rule(1 << 62, GemmConfig(128, 256, 64, 8, 3, 8, persistent=True, tma=True),
         "compute-bound: the largest tile that fits 3 stages of TMA buffers (147 KiB) and a 128x256 fp32 "
         "accumulator in two warpgroups; grouped order keeps a band of w in L2 (tutorial 09's H100 choice, guess)"),
)

# Under the interpreter: small tiles (each program is interpreted in Python; masks and loops still exercised).
INTERPRETER_RULES: tuple[Rule, ...] = (
    Rule(16, GemmConfig(16, 32, 32, 4, 1, 1, persistent=False, tma=False), "interpreter: decode path", True),
    Rule(64, GemmConfig(32, 32, 32, 4, 1, 1, persistent=False, tma=False), "interpreter: small batch", True),
    Rule(1 << 62, GemmConfig(32, 32, 32, 4, 1, 2, persistent=True, tma=True), "interpreter: persistent path"),
)

# What the tuning driver times per shape class (scripts/device/tune_matmul.py): (class, M list, configs).
CANDIDATES: dict[str, list[GemmConfig]] = {
    "decode": [GemmConfig(16, bn, bk, w, s, 1, persistent=False, tma=False)
               for bn in (16, 32, 64) for bk in (128, 256, 512) for w, s in ((4, 4), (4, 6), (8, 4))],
    "small": [GemmConfig(bm, bn, bk, w, s, 1, persistent=False, tma=t)
              for bm in (32, 64) for bn in (32, 64, 128) for bk in (64, 128, 256) for w, s in ((4, 4),)
              for t in (False,)],
    "mid": [GemmConfig(bm, bn, bk, w, s, 8, persistent=p, tma=True)
            for bm, bn, w in ((64, 128, 4), (64, 256, 4), (128, 128, 8), (128, 128, 4))
            for bk, s in ((64, 4), (64, 5), (128, 3)) for p in (True, False)],
    "large": [GemmConfig(bm, bn, bk, w, s, g, persistent=p, tma=True)
              for bm, bn, w in ((128, 256, 8), (128, 128, 8), (256, 128, 8))
              for bk, s in ((64, 3), (64, 4), (128, 2)) for g in (8,) for p in (True, False)],
}


def rules() -> tuple[Rule, ...]:
    return INTERPRETER_RULES if _INTERPRETED else RULES


def _shrunk_block_n(n: int, cfg: GemmConfig, sms: int) -> int:
    """The widest BLOCK_N <= the rule's whose grid still gives TILE_WAVES programs per SM (16 at least: tl.dot)."""
    bn = cfg.block_n
    while bn > 16 and -(-n // bn) < TILE_WAVES * sms:
        bn //= 2
    return bn


def config_for(m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> tuple[GemmConfig, str]:
    """The first rule matching M (with BLOCK_N fitted to N where the rule says so), and its why."""
    for rule in rules():
        if m <= rule.max_m:
            cfg = rule.config
            if rule.shrink_n:
                cfg = replace(cfg, block_n=_shrunk_block_n(n, cfg, multiprocessor_count(device)))
            return cfg, rule.why
    raise AssertionError("the last rule matches every M")  # pragma: no cover


def pointer_fallback(cfg: GemmConfig) -> GemmConfig:
    """The tile for a layout TMA cannot read (an operand stride not 16-byte aligned): pointer loads of the
    128x256x64 tile took 255 registers and spilled 636 B in the sm_90 compile check; 128x128x32 does not."""
    return replace(cfg, block_n=min(cfg.block_n, 128), block_k=min(cfg.block_k, 32), tma=False)


def grid_for(m: int, n: int, cfg: GemmConfig, device: torch.device) -> int:
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    return min(tiles, multiprocessor_count(device)) if cfg.persistent else tiles


def describe_choice(m: int, n: int, k: int, dtype: torch.dtype, device: torch.device) -> dict[str, Any]:
    """The launch record of a case (the bench stores it beside each measurement of ours)."""
    cfg, why = config_for(m, n, k, dtype, torch.device(device))
    grid = grid_for(m, n, cfg, torch.device(device)) if m and n and k else 0
    return {"config": cfg.describe(), **cfg.key(), "grid": grid, "why": why,
            "note": "tma falls back to pointer loads where an operand's strides are not 16-byte aligned"}
