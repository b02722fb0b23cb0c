"""Launch rules of the attention kernels (kernel.py): an ordered table of data per kernel, first match wins.

A call is a `Case` (kernel, head dim D, whether a mask bounds the key range, the CPU interpreter or not). The
config is the tile (BLOCK_M query rows x BLOCK_N keys), warps and pipeline stages. Nothing here depends on the
batch, the sequence lengths or the heads: a row's result never depends on what else is in the call (batch
invariance), and the grid is always (tiles of the longest sequence, batch x heads).

Where the numbers come from: the H200 tuning driver (scripts/device/tune_attention.py: every candidate tile timed with
triton.testing.do_bench, the backward kernels as the whole backward with the other kernel at its rule). D=128: record
docs/results/h200-tune-attention-s17.json, B4 S4096 H32/8, full and causal. D=64 and D=256: record
docs/results/h200-tune-attention-d64-d256-s18.json (commit e7399ea, `--head-dims 64 256 --budget-s 100`), causal
only, B4 S4096 H32/32 D64 (all three kernels) and H16/16 D256 (the forward); D=256's dK/dV from
h200-tune-attention-d256-bwd-s18.json and its dQ from h200-tune-attention-d256-dq-s19.json. Every tile is checked
against sm_90's 228 KB of shared memory per SM and 255 registers a thread (scripts/spills_sm90.py, on CPU);
D=16/32 take D=64's tiles untimed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ridgeline.lib.launch import interpreter_enabled
from ridgeline.ops.attention.launch_ws import BLOCK_M as WS_BLOCK_M
from ridgeline.ops.attention.launch_ws import block_n


@dataclass(frozen=True)
class AttnConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    # The tiles each loop step streams (the forward's and dQ's K and V, dK/dV's Q and dO) through device-side tensor
    # descriptors (the TMA copy engine) instead of pointer loads, where the strides allow it (launch.tma_readable:
    # 16-byte alignment, else pointer loads). A pointer load of a 64 x 128 tile computes 8192 64-bit addresses a step
    # (two tiles a step, about as many integer instructions per thread as the step's exp2s); the copy engine does not.
    tma: bool = False
    # Forward only: the softmax scale applied after the row maximum, so that s * scale - m is one FMA an element
    # instead of a multiply and a subtract.
    fold: bool = False

    def describe(self) -> str:
        text = f"BLOCK_M={self.block_m} BLOCK_N={self.block_n} warps={self.num_warps} stages={self.num_stages}"
        return text + (" tma" if self.tma else "") + (" fold" if self.fold else "")


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
    # fold (the softmax scale applied after the row maximum, one FMA an element; s23, three pairs a shape: git show
    # c9650d2:docs/results/h200-tune-attention-{knobs,fold}-s23.json): causal D=128 1.6-3.8% faster in all three,
    # D=64 causal 0-3.5%, D=128 full -2.6 to +0.3% and D=256 -1.0 to +0.7% (within the runs' spread): on where it
    # won (D<=64 timed causal only; its full attention takes it too, untimed).
    Rule("d<=64", lambda c: c.head_dim <= 64, AttnConfig(128, 64, 8, 3, fold=True),
         "measured (H200, s18, B4 S4096 H32/32 D64 causal, h200-tune-attention-d64-d256-s18.json): 128 x 64 on 8 "
         "warps, 3 stages, pointer loads, 0.748 ms (367 TFLOP/s) vs 0.795 ms (346) for the old 128 x 64 w4 s3 "
         "(1.06x); 128 x 64 w8 s4 was second (0.761 ms, 361), 64 x 64 w4 s3 TMA third (0.771 ms), this tile through "
         "TMA 0.805 ms. sm_90: 128/123 registers, 0 spills. Not timed: full attention, D=16/32"),
    Rule("d128 masked", lambda c: c.head_dim <= 128 and c.masked, AttnConfig(64, 64, 4, 3, tma=True, fold=True),
         "the d128 tile below with the scale folded into the FMA (s23: 1.6-3.8% faster causal)"),
    Rule("d128", lambda c: c.head_dim <= 128, AttnConfig(64, 64, 4, 3, tma=True),
         "measured (H200, s17): 64 x 64 tiles on 4 warps with K/V through TMA descriptors, 2.21 ms full / 1.21 ms "
         "causal (499 / 453 TFLOP/s) vs 2.50 / 1.40 ms for the old 128 x 64 w8 s3 pointer tiles (1.13x / 1.15x); "
         "128 x 128 w8 s3 TMA was second (2.30 / 1.32 ms). Pointer loads where TMA cannot read (launch.tma_readable)"),
    Rule("d256", lambda c: True, AttnConfig(128, 64, 8, 2, tma=True),
         "measured (H200, s18, B4 S4096 H16/16 D256 causal, h200-tune-attention-d64-d256-s18.json): 128 x 64 on 8 "
         "warps, 2 stages, K/V through TMA descriptors, 1.18 ms (468 TFLOP/s) vs 2.45 ms (224) for the old 64 x 64 "
         "w8 s2 pointer tile (2.09x; the old tile through TMA: 2.21 ms); 64 x 64 w4 s3 TMA was second (1.26 ms, 438); "
         "3-stage 128-row tiles are out of shared memory. sm_90: 255/249 registers, 0 spills, 192 KB shared. Not "
         "timed: full attention, and this tile's pointer loads (the fallback where launch.tma_readable refuses: "
         "255 registers, 4/4 B spills causal on sm_90)"),
)

# The backward's per-step tiles through TMA descriptors made per sequence and head (AttnConfig.tma; dK/dV: Q and
# dO, dQ: K and V), as the forward does, since s39. It frees registers on sm_90 (scripts/spills_sm90.py, full /
# causal, stores): D=128 dK/dV spills 412/492 B by pointer loads, 20/44 B through TMA; D=256 548/572 -> 136/184 B
# (loads 232/292); D=64 244 -> 205 registers. Measured on an H100 (s39, tune_attention.py --tma-bwd,
# h100-drivers-s28-s39.json run `tma_bwd_s39`, the whole backward at the rules' tiles, both kernels through TMA against
# both by pointers): D=256 causal 5.36 against 6.18 ms (1.15x), D=128 GQA full 7.43 / 8.39 (1.13x), causal 4.27 /
# 4.49 (1.05x); D=64 causal dQ alone through TMA 2.66 / 2.73 ms, dK/dV through TMA 2.77 (so D=64's dK/dV keeps
# pointer loads). The same bits as the pointer path (test_attention_gpu.py). Pointer loads remain where
# launch.tma_readable refuses a tensor.
DKDV_RULES: tuple[Rule, ...] = (
    Rule("interpreter", lambda c: c.interpreted, _CPU, "CPU interpreter"),
    # Spill bytes (stores/loads) and registers below: scripts/spills_sm90.py (Triton 3.7.1's ptxas for sm_90, bf16,
    # full / causal). Beyond the 2 x BLOCK_N x D fp32 accumulators, the [BLOCK_N, BLOCK_M] score tiles (st, pt,
    # dpt, dst) live across the inner loop, so BLOCK_M is the knob that frees registers without shrinking BLOCK_N
    # (which sets how often each program re-reads Q and dO). tests/ops/attention/test_attention_spills.py pins 0
    # for all three kernels' rule tiles at D=64/128/256 (D=128 dK/dV: the measured tile's own spills).
    Rule("d<=64", lambda c: c.head_dim <= 64, AttnConfig(32, 64, 4, 3),
         "measured (H200, s18, B4 S4096 H32/32 D64 causal, the whole backward with dQ at its old rule, "
         "h200-tune-attention-d64-d256-s18.json): 32 x 64 on 4 warps, 3 stages, 2.94 ms (234 TFLOP/s) vs 3.31 ms "
         "(208) for the old 32 x 128 w8 s3 (1.12x); 64 x 64 w4 s3 was second (2.97 ms, 232) but spills 352/352 B "
         "on sm_90; this tile: 0 spills, 244/238 registers. Not timed: full attention, beside the new dQ tile"),
    Rule("d128", lambda c: c.head_dim <= 128, AttnConfig(32, 64, 4, 3, tma=True),
         "measured (H200, s17, the whole backward): 32 x 64 on 4 warps, 8.66 ms full / 4.68 ms causal vs 13.96 / "
         "9.47 ms for the old 16 x 128 w8 s2 (1.61x / 2.0x); 64 x 128 w8 s2 was second (8.74 / 4.71 ms). Q and dO "
         "through TMA since s39 (H100, with dQ's K and V: 1.13x full GQA, 1.05x causal; spills 412/492 B by "
         "pointers, 20/44 B through TMA); test_attention_spills.py holds the spills to these"),
    Rule("d256", lambda c: True, AttnConfig(64, 64, 8, 2, tma=True),
         "measured (H200, s18, B4 S4096 H16/16 D256 causal, the whole backward, h200-tune-attention-d256-bwd-s18.json"
         "): 64 x 64 on 8 warps, 2 stages, 9.35 ms vs 21.1 ms for the old 16 x 32 w8 s2 (2.26x); 64 x 32 w8 s2 was "
         "second (11.1 ms), 16 x 64 w8 s2 third (13.3 ms); 64 x 128 and 128 x 64 do not fit shared memory. Q and dO "
         "through TMA since s39 (H100, with dQ's K and V: 5.36 against 6.18 ms causal, 1.15x; through TMA 64 x 32 "
         "6.83 ms, 32 x 64 7.33): spills 548/592 B by pointers, 136/232 B through TMA (causal 572/624, 184/292). "
         "Full attention not timed. test_attention_spills.py holds the spills to these"),
)

DQ_RULES: tuple[Rule, ...] = (
    Rule("interpreter", lambda c: c.interpreted, _CPU, "CPU interpreter"),
    Rule("d<=64", lambda c: c.head_dim <= 64, AttnConfig(64, 64, 4, 3, tma=True),
         "measured (H200, s18, B4 S4096 H32/32 D64 causal, the whole backward with dK/dV at its old rule, "
         "h200-tune-attention-d64-d256-s18.json): 64 x 64 on 4 warps, 3 stages, 3.08 ms (223 TFLOP/s) vs 3.31 ms "
         "(208) for the old 128 x 64 w8 s3 (1.07x); 128 x 32 w8 s3 was second (3.14 ms, 219). sm_90: 153/146 "
         "registers, 0 spills. K and V through TMA since s39 (H100: 2.66 against 2.73 ms, the whole backward). Not "
         "timed: full attention, beside the new dK/dV tile"),
    Rule("d128", lambda c: c.head_dim <= 128, AttnConfig(128, 64, 8, 3, tma=True),
         "128 x 128 dQ accumulator plus q and do tiles in registers over 8 warps; measured (H200, s17, full): 3 "
         "stages 13.73 ms vs 2 stages 14.05 ms for the whole backward (dK/dV at its old rule). K and V through TMA "
         "since s39 (H100, the whole backward: 8.19 against 8.39 ms full GQA with dK/dV by pointers)"),
    Rule("d256", lambda c: True, AttnConfig(128, 32, 8, 3, tma=True),
         "measured (H200, s19, B4 S4096 H16/16 D256 causal, the whole backward with dK/dV at its s18 rule, "
         "h200-tune-attention-d256-dq-s19.json): 128 x 32 on 8 warps, 3 stages, 6.26 ms (220 TFLOP/s) vs 9.37 ms "
         "(147) for the old 64 x 32 w8 s2 (1.50x); 64 x 32 w4 s2 was second (7.35 ms). sm_90: 245/248 registers, "
         "0 spills, 224 KB of shared memory. K and V through TMA since s39 (H100: 6.04 against 6.18 ms, the whole "
         "backward with dK/dV by pointers). Not timed: full attention"),
)


@dataclass(frozen=True)
class WsSchedule:
    """How the Gluon forward runs a kind of call: each warpgroup's softmax under its previous tile's PV
    (`overlap`), causal query tiles m and n_m - 1 - m in one program (`pairs`), one program an SM walking the work
    (`persistent`). None changes the bits. Applies at `head_dims`, full or causal (`causal`), S_k <= max_seq_k."""

    head_dims: tuple[int, ...]
    causal: bool
    max_seq_k: int
    overlap: bool
    pairs: bool
    persistent: bool
    why: str


@dataclass(frozen=True)
class WsForward:
    """Where the warp-specialized Gluon forward (kernel_ws.py) takes a call its launcher accepts (sm_90, dense
    [B, S, H, D] or packed [T, H, D] with heads and tokens back to back, full, causal or a sliding window, 16-bit):
    the head dims it runs at, its K/V pipeline depth, whether the warpgroups take turns issuing their wgmmas
    (`pingpong`), and per kind of call its schedule (first match wins; packed batches by their longest sequence,
    windows by the keys a row sees)."""

    head_dims: tuple[int, ...]
    stages: int
    schedules: tuple[WsSchedule, ...]
    why: str
    pingpong: bool = False
    packed_head_dims: tuple[int, ...] = ()  # packed batches (cu_seqlens) at these head dims
    windows: bool = False  # sliding windows of dense batches
    packed_windows: bool = False  # sliding windows of packed batches (at packed_head_dims)

    def takes(self, head_d: int, varlen: bool, left: int) -> bool:
        """Whether the rules send this kind of call to the Gluon forward (where its launcher accepts the tensors)."""
        if head_d not in self.head_dims:
            return False
        if varlen:
            return head_d in self.packed_head_dims and (left < 0 or self.packed_windows)
        return left < 0 or self.windows

    def schedule(self, head_d: int, causal: bool, seq_k: int, left: int = -1, varlen: bool = False) -> WsSchedule:
        """`left` >= 0 (a sliding window): a row sees at most left + 1 keys, which is what the schedules go by.
        `varlen` (packed batches): one tile a program, as for long keys: each program makes its sequence's K / V
        views in its own global scratch, which a persistent program would rewrite while its last item's TMA
        copies may still read them."""
        if left >= 0:
            seq_k = min(seq_k, left + 1)
        if varlen:
            seq_k = 1 << 62
        for rule in self.schedules:
            if head_d in rule.head_dims and rule.causal == causal and seq_k <= rule.max_seq_k:
                return rule
        return WsSchedule((head_d,), causal, 1 << 62, False, False, False, "no rule: the plain loop")

    def describe(self, head_d: int, causal: bool = False, seq_k: int = 1 << 30, left: int = -1,
                 varlen: bool = False) -> str:
        sch = self.schedule(head_d, causal, seq_k, left, varlen)
        return (f"gluon ws {WS_BLOCK_M}x{block_n(head_d)} s{self.stages}" + (" overlap" if sch.overlap else "")
                + (" pingpong" if self.pingpong else "") + (" pairs" if sch.pairs else "")
                + (" persistent" if sch.persistent else ""))


# s28 (scripts/device/attn_ws.py, graph-timed on the H200, git show 4dd3f25:docs/results/h200-attn-ws-s28.json): at
# D = 128 the overlapped Gluon forward ran 1.22-1.34x the Triton forward at S >= 4096 (B4 S4096 full 1723 against
# 2306 us, causal 954 against 1223) and 1.13x at B16 S1024, 0.93-0.96x cuDNN; at D = 64 the plain Gluon loop 1.04x
# the Triton forward causal (699 against 726 us), the overlapped one level (ptxas hoists the PV wait there: no
# overlap in the SASS). 3 stages within 6 % of 2, either way; the ping-pong from 4 % faster to 8 % slower: both off.
# s29 (the same driver on an H100, h100-attn-ws-s29.json): D = 256 on 64-key tiles, overlapped, 1.26x the
# Triton forward causal and 1.32x full at B4 S4096 H16 (921 / 1631 against 1157 / 2146 us; 0.93x cuDNN); and the
# schedules below. Persistent programs pay where a program's work is short (its next tile's Q and K / V load under
# the last tile's PV and stores): full attention at S <= 2048 1.08x (B8 S2048 GQA 925 against 1000 us, B16 S1024
# 501 / 541), not at 4096 (1733 against 1688); causal pairs on persistent programs 1.12x at B16 S1024 (351 against
# 394), 1.06x at B8 S2048 (547 / 581), 1.01-1.02x at S 4096 (945 / 964, GQA 937 / 951), 0.98x at S 8192; with
# them the overlap is lost (ptxas moves the PV wait up in those forms; the plain loop runs as fast or faster). At
# D = 64 causal S 4096 the pairs' persistent programs 1.07x (653 against 698 us). D = 256 keeps one tile a program
# (its persistent forms 0.99x causal, 0.96x full).
WS_FORWARD = WsForward(
    (64, 128, 256), 2,
    (WsSchedule((128,), False, 2048, True, False, True, "full, short keys: persistent, overlapped (s29)"),
     WsSchedule((64, 128), True, 4096, False, True, True, "causal to 4K keys: pairs on persistent programs (s29)"),
     WsSchedule((128, 256), False, 1 << 62, True, False, False, "full: one tile a program, overlapped (s28)"),
     WsSchedule((128, 256), True, 1 << 62, True, False, False, "causal, long: one tile a program, overlapped (s28)")),
    "a TMA load warp and two MMA warpgroups of 64 rows, 128-row query tiles, P from registers (FlashAttention-3's "
    "split); s28-s29: 1.13-1.34x the Triton forward at D = 128, 1.04-1.11x at D = 64, 1.26-1.32x at D = 256",
    # s37 (plan s37-packed on an H100, cold-eager, docs/results/h100-bench-attention-window-s37.json and run
    # bench_attention_packed_s37 of h100-drivers-s28-s39.json; the Triton forward beside every Gluon form): packed
    # batches at D = 128 / 256 one tile a program, overlapped, 1.12-1.26x the Triton forward (16384 tokens, H32/8
    # D128 full 2508 against 3154 us, causal 1457 / 1633; H16 D256 2396 / 2927, 1351 / 1580); at D = 64 0.93-1.00x
    # (the plain loop 1740 / 1740 full, 1035 / 982 causal): not taken. Windows of dense batches (a 1024-key window,
    # or S / 4) 1.02-1.19x on the rules' schedule (B4 S4096 H32/8 D128 574 against 643 us, S16384 608 / 705, B8 S2048
    # 429 / 440, D256 522 / 621, D64 394 / 403); a packed batch's window 0.98x (729 against 712): not taken.
    packed_head_dims=(128, 256), windows=True, packed_windows=False)

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
