"""The golden launch configs of `config_for` (tests/data/rmsnorm_rules_golden.json.gz), and how they were made.

    python tests/ops/rmsnorm/rules_golden.py [OUT]   # writes the file from the checkout's rules (c371f09's, once)

The cases: hidden sizes from 1 to 600000 (widths 700-65536 in steps, every power of two and the widths around it,
each N threshold of the rules +-1), row counts from 0 to 100000 with every rows-per-SM edge of the rules +-1 (and the
L2 rule's edge per width, dtype and op), bf16/fp16/fp32 rows, plain and fused, no FP8 epilogue / static / dynamic,
no weight or one wider (16-bit rows: fp32) or narrower (fp32 rows: bf16) than x (a weight as wide as x takes the
rules of none); on a GPU of 132 SMs, and for rows wider than 32768 columns (split rows, where they differ) also on
one of 20 SMs (rows split wider than 2 programs per SM fall back) and under the CPU interpreter. Every field of each
resolved LaunchConfig is kept.

The old code is driven through its module globals (`_INTERPRETED`, `_sm_count_hint`); `resolved` is the same call
for the table of today's rules.py (`resolve(Case)`), so the test and this script enumerate alike.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import sys
from pathlib import Path

import torch

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "rmsnorm_rules_golden.json.gz"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
WEIGHTS = {"none": None, "fp32": torch.float32, "bf16": torch.bfloat16}
# (sms, interpreted): the H200, a small GPU (rows split wider than 2 programs per SM fall back), the interpreter.
MACHINES = ((132, False), (20, False), (132, True))
L2_BYTES = 60 * 2**20
STREAM_LOADS_L2_SHARE = 0.55


def widths() -> list[int]:
    ns = set(range(700, 65537, 1993)) | {1, 2, 7, 8, 16, 31, 64, 100, 257, 515, 512, 1000, 12000, 100000, 100001}
    for k in range(0, 21):
        p = 1 << k
        ns |= {p - 8, p - 1, p, p + 1, p + 8, (3 * p) // 4 - 1, (3 * p) // 4, (3 * p) // 4 + 1}
    # The N thresholds of the rules: 16-bit halves 4096, stream columns 4096-5120 and 7168, tuned 4096/5120/8192,
    # two chunks 16384, three chunks (16384, 24576), two of 16384 [24576, 32768], the one-pass limit (64 KB), the
    # narrowest split 32769, the widest split 64 * 8192, the warps' steps (512 / 1024 columns a warp doubling).
    for t in (4096, 4100, 5120, 5125, 7168, 8192, 16384, 16392, 16896, 20000, 24568, 24576, 32768, 32769, 40000,
              65536, 8192 * 64, 8192 * 65, 1024, 2048):
        ns |= {t - 8, t - 1, t, t + 1, t + 8}
    return sorted(n for n in ns if n >= 1)


def rows_for(n: int, itemsize: int, fused: bool, sms: int) -> list[int]:
    ms = {0, 1, 2, 3, 7, 8, 16, 64, 128, 256, 512, 700, 1000, 1024, 1100, 2048, 4096, 8192, 16384, 65536, 100000}
    for per_sm in (1, 2, 4, 5, 6, 8, 16, 32):
        ms |= {per_sm * sms - 1, per_sm * sms, per_sm * sms + 1}
    # The split rows' weight-first edge (m * split <= 2 or 4 programs per SM) and the L2 rule's edge.
    split = -(-n // 8192)
    for per_sm in (2, 4):
        edge = per_sm * sms // split
        ms |= {edge, edge + 1}
    edge = int(STREAM_LOADS_L2_SHARE * L2_BYTES) // (n * itemsize * (2 if fused else 1))
    ms |= {edge - 1, edge, edge + 1}
    return sorted(m for m in ms if m >= 0)


def groups():
    """(sms, interpreted, dtype, fused, weight, quant, n) -> row counts, in a fixed order."""
    for sms, interp in MACHINES:
        for dname, dtype in DTYPES.items():
            for fused in (False, True):
                for wname in (("none", "bf16") if dname == "fp32" else ("none", "fp32")):  # (the others: alike)
                    for quant in (0, 1, 2):
                        for n in widths():
                            if (sms, interp) != MACHINES[0] and n <= 32768:  # (they differ on split rows only)
                                continue
                            yield (sms, interp, dname, fused, wname, quant, n), rows_for(n, dtype.itemsize, fused, sms)


def old_resolver():
    """config_for of a checkout whose rules.py reads `_INTERPRETED` and `_sm_count_hint` as module globals."""
    from ridgeline.ops.rmsnorm import rules

    def resolved(sms, interp, dtype, fused, weight, quant, n, m):
        rules._INTERPRETED = interp
        rules._sm_count_hint = lambda: sms
        rules._l2_bytes_hint = lambda: L2_BYTES
        return rules.config_for(n, dtype, m, fused, weight, quant)

    return resolved


def fields(cfg) -> list:
    # LaunchConfig's fields are flat (ints, bools, one tuple of ints): read them directly; dataclasses.astuple's
    # deep copy took two thirds of the golden test's time.
    values = (getattr(cfg, f.name) for f in dataclasses.fields(cfg))
    return [list(v) if isinstance(v, tuple) else v for v in values]


def build(resolved) -> dict:
    configs: dict[str, int] = {}
    out = []
    for (sms, interp, dname, fused, wname, quant, n), ms in groups():
        idx = []
        for m in ms:
            cfg = resolved(sms, interp, DTYPES[dname], fused, WEIGHTS[wname], quant, n, m)
            idx.append(configs.setdefault(json.dumps(fields(cfg)), len(configs)))
        out.append([sms, interp, dname, fused, wname, quant, n, ms, idx])
    from ridgeline.ops.rmsnorm.rules import LaunchConfig

    names = [f.name for f in dataclasses.fields(LaunchConfig)]
    return {"fields": names, "configs": [json.loads(c) for c in configs], "groups": out}


def load() -> dict:
    with gzip.open(GOLDEN, "rt") as f:
        return json.load(f)


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN
    data = build(old_resolver())
    with gzip.open(path, "wt", compresslevel=9) as f:
        json.dump(data, f, separators=(",", ":"))
    cases = sum(len(g[7]) for g in data["groups"])
    print(f"{path}: {cases} cases, {len(data['configs'])} distinct configs, {path.stat().st_size} bytes")
