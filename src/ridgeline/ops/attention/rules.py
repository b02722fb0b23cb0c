"""Launch rules of the attention kernels (kernel.py): an ordered table of data per kernel, first match wins.

A call is a `Case` (kernel, head dim D, whether a mask bounds the key range, the CPU interpreter or not). The
config is the tile (BLOCK_M query rows x BLOCK_N keys), warps and pipeline stages. Nothing here depends on the
batch, the sequence lengths or the heads: a row's result never depends on what else is in the call (batch
invariance), and the grid is always (tiles of the longest sequence, batch x heads).

Where the numbers come from: D=128's tiles are measured (scripts/device/tune_attention.py on the H200, record
docs/results/h200-tune-attention-s17.json, B4 S4096 H32/8, full and causal); D=64's and D=256's are still the tiles
FlashAttention-2-style Triton kernels commonly use on Hopper, kept within sm_90's 228 KB of shared memory per SM and
255 registers a thread (checked with `ridgeline profile attention` on CPU), and the driver's next run must settle
them (its 100 s budget ran out after the D=128 shapes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ridgeline.lib.launch import interpreter_enabled


@dataclass(frozen=True)
class AttnConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    # Forward only: K and V tiles through device-side tensor descriptors (the TMA copy engine) instead of pointer
    # loads, where the strides allow it (launch.py checks 16-byte alignment, else pointer loads). A candidate for the
    # tuning driver: a pointer load of a 64 x 128 tile computes 8192 64-bit addresses a step (two tiles a step, about
    # as many integer instructions per thread as the step's exp2s), which the copy engine does not.
    tma: bool = False

    def describe(self) -> str:
        text = f"BLOCK_M={self.block_m} BLOCK_N={self.block_n} warps={self.num_warps} stages={self.num_stages}"
        return text + (" tma" if self.tma else "")


@dataclass(frozen=True)
class Case:
    """What the rules may look at. kernel: 'fwd', 'dkdv' or 'dq'."""

    kernel: str
    head_dim: int
    masked: bool = False  # causal or a window: the key range is bounded
    interpreted: bool = False


@dataclass(frozen=True)
class Rule:
    name: str
    when: Callable[[Case], bool]
    config: AttnConfig
    why: str


# Interpreter: the smallest tiles tl.dot takes (16), so CPU tests run few-element programs quickly.
_CPU = AttnConfig(16, 16, 4, 1)

FWD_RULES: tuple[Rule, ...] = (
    Rule("interpreter", lambda c: c.interpreted, _CPU, "CPU interpreter: 16 x 16 tiles cost the least"),
    Rule("d<=64", lambda c: c.head_dim <= 64, AttnConfig(128, 64, 4, 3),
         "small D: the S tile dominates registers; 4 warps over 128 rows, 3 stages of K/V in shared memory"),
    Rule("d128", lambda c: c.head_dim <= 128, AttnConfig(64, 64, 4, 3, tma=True),
         "measured (H200, s17): 64 x 64 tiles on 4 warps with K/V through TMA descriptors, 2.21 ms full / 1.21 ms "
         "causal (499 / 453 TFLOP/s) vs 2.50 / 1.40 ms for the old 128 x 64 w8 s3 pointer tiles (1.13x / 1.15x); "
         "128 x 128 w8 s3 TMA was second (2.30 / 1.32 ms). Pointer loads where TMA cannot read (launch.tma_readable)"),
    Rule("d256", lambda c: True, AttnConfig(64, 64, 8, 2),
         "D=256: the 64 x 256 accumulator over 8 warps (4 warps spill 52 B on sm_90); 2 stages of 64 x 256 K and "
         "V tiles (128 KB) fill shared memory"),
)

DKDV_RULES: tuple[Rule, ...] = (
    Rule("interpreter", lambda c: c.interpreted, _CPU, "CPU interpreter"),
    # Spill bytes (stores/loads) and registers below: scripts/spills_sm90.py (Triton 3.7.1's ptxas for sm_90, bf16,
    # full / causal). Beyond the 2 x BLOCK_N x D fp32 accumulators, the [BLOCK_N, BLOCK_M] score tiles (st, pt,
    # dpt, dst) live across the inner loop, so BLOCK_M is the knob that frees registers without shrinking BLOCK_N
    # (which sets how often each program re-reads Q and dO). tests/ops/attention/test_attention_spills.py pins 0
    # (D=128: the measured tile's own spills).
    Rule("d<=64", lambda c: c.head_dim <= 64, AttnConfig(32, 128, 8, 3),
         "2 x 128 x 64 fp32 accumulators over 8 warps, 32-row query tiles: 0 spills, 242/232 registers (64 x 128 "
         "s3 spilled 80/80 and 28/28 B; 64 x 64 w4: 72 B)"),
    Rule("d128", lambda c: c.head_dim <= 128, AttnConfig(32, 64, 4, 3),
         "measured (H200, s17, the whole backward): 32 x 64 on 4 warps, 8.66 ms full / 4.68 ms causal vs 13.96 / "
         "9.47 ms for the old 16 x 128 w8 s2 (1.61x / 2.0x) although it spills 412/416 B (492/496 causal) on sm_90 "
         "and the old tile spilled none; 64 x 128 w8 s2 was second (8.74 / 4.71 ms, 256/260 B); "
         "test_attention_spills.py holds the spills to these"),
    Rule("d256", lambda c: True, AttnConfig(16, 32, 8, 2),
         "D=256: 2 x 32 x 256 fp32 accumulators over 8 warps: 0 spills, 214/222 registers, but 32-key tiles run "
         "mma.sync, not wgmma (32 x 64 s2 spilled 192/188 and 196/196 B; 16 x 64 s2, on wgmma: 8/8 and 20/20 B; "
         "the tuning driver should weigh 16 x 64 against this)"),
)

DQ_RULES: tuple[Rule, ...] = (
    Rule("interpreter", lambda c: c.interpreted, _CPU, "CPU interpreter"),
    Rule("d<=64", lambda c: c.head_dim <= 64, AttnConfig(128, 64, 8, 3), "one fp32 accumulator (dQ)"),
    Rule("d128", lambda c: c.head_dim <= 128, AttnConfig(128, 64, 8, 3),
         "128 x 128 dQ accumulator plus q and do tiles in registers over 8 warps; measured (H200, s17, full): 3 "
         "stages 13.73 ms vs 2 stages 14.05 ms for the whole backward (dK/dV at its old rule)"),
    Rule("d256", lambda c: True, AttnConfig(64, 32, 8, 2), "D=256: small key tiles (k and v both stream)"),
)

_INTERPRETED = interpreter_enabled()
RULES = {"fwd": FWD_RULES, "dkdv": DKDV_RULES, "dq": DQ_RULES}
# The delta preprocess (rowsum(out * dout)) is memory-bound: rows per program, warps.
DELTA_BLOCK_M = {True: 16, False: 64}
DELTA_WARPS = 4


def rule_for(case: Case) -> Rule:
    for rule in RULES[case.kernel]:
        if rule.when(case):
            return rule
    raise AssertionError(f"no attention rule matches {case}")  # the last rule of each table matches everything


def config_for(kernel: str, head_dim: int, masked: bool = False, interpreted: bool | None = None) -> AttnConfig:
    """The config of one kernel; `interpreted` defaults to whether Triton interprets (read at import)."""
    return rule_for(Case(kernel, head_dim, masked, _INTERPRETED if interpreted is None else interpreted)).config
