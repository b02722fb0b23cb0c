"""Theoretical occupancy of a kernel from its registers, shared memory and warps (no GPU needed)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ridgeline.core.hardware import DEFAULT_SM_COUNT  # noqa: F401  (assumed SMs when no GPU says otherwise)

DEFAULT_ARCH = 90


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (CUDA programming guide, technical specifications)."""

    max_warps: int
    max_blocks: int
    regs_per_sm: int = 65536
    reg_unit: int = 256  # registers are allocated per warp in units of 256
    max_regs_per_thread: int = 255
    smem_per_sm: int = 233472  # 228 KiB
    smem_per_block: int = 232448  # 227 KiB
    smem_reserved: int = 1024  # reserved by the system per block (sm_80 and later)
    smem_unit: int = 128


ARCH_LIMITS: dict[int, ArchLimits] = {
    80: ArchLimits(64, 32, smem_per_sm=167936, smem_per_block=166912),
    86: ArchLimits(48, 16, smem_per_sm=102400, smem_per_block=101376),
    89: ArchLimits(48, 24, smem_per_sm=102400, smem_per_block=101376),
    90: ArchLimits(64, 32),
    100: ArchLimits(64, 32),
}


def occupancy(registers: int | None, shared_bytes: int | None, num_warps: int, arch: int = DEFAULT_ARCH) -> dict:
    """Theoretical blocks and warps per SM allowed by registers, shared memory, warps and the block limit."""
    lim = ARCH_LIMITS.get(arch, ARCH_LIMITS[DEFAULT_ARCH])
    warps = max(1, int(num_warps))
    by_warps = lim.max_warps // warps
    if registers:
        per_warp = math.ceil(int(registers) * 32 / lim.reg_unit) * lim.reg_unit
        by_regs = (lim.regs_per_sm // per_warp) // warps
    else:
        by_regs = lim.max_blocks
    smem = math.ceil(((shared_bytes or 0) + lim.smem_reserved) / lim.smem_unit) * lim.smem_unit
    by_smem = lim.smem_per_sm // smem if (shared_bytes or 0) <= lim.smem_per_block else 0
    limits = {"warps": by_warps, "blocks": lim.max_blocks, "registers": by_regs, "shared": by_smem}
    blocks = min(limits.values())
    # Ties name the hard limit first: 8 warps x 8 blocks with 32 registers is "warps", not "registers".
    limited_by = next(k for k in ("warps", "blocks", "registers", "shared") if limits[k] == blocks)
    out = {
        "blocks_per_sm": blocks, "warps_per_sm": blocks * warps, "occupancy": blocks * warps / lim.max_warps,
        "limited_by": limited_by, "by_registers": by_regs, "by_warps": by_warps, "by_shared": by_smem,
        "by_blocks": lim.max_blocks, "arch": arch,
    }
    if arch not in ARCH_LIMITS:
        out["note"] = f"no limits table for sm_{arch}: sm_{DEFAULT_ARCH} limits assumed"
    return out

