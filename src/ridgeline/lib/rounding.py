"""Round-to-nearest-even casts that also hold under Triton's CPU interpreter.

The interpreter (checked with triton 3.7.1) truncates float32 -> bfloat16 and its float32 -> FP8 cast is not
round-to-nearest (124.1 became 64, not 128). With EMULATE set (only under the interpreter) the mantissa is rounded
in float32 bits first, so the cast that follows is exact and CPU results equal the GPU's; on the GPU the cvt
instructions round correctly and EMULATE is False, so this compiles to the plain cast.

Also `rstd_of`: the row's 1/rms computed with the same rounding whether the hidden size is compiled in or not.
"""

import triton
import triton.language as tl


@triton.jit
def round_mantissa(v, MANT_BITS: tl.constexpr):
    """float32 rounded to MANT_BITS mantissa bits, to nearest even (normal range)."""
    SHIFT: tl.constexpr = 23 - MANT_BITS
    bits = v.to(tl.int32, bitcast=True)
    bits = bits + ((1 << (SHIFT - 1)) - 1) + ((bits >> SHIFT) & 1)
    bits = bits & (-(1 << SHIFT))
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def to_storage(v, dtype: tl.constexpr, EMULATE: tl.constexpr):
    """float32 -> dtype, rounded to nearest even on the GPU and (with EMULATE) in the interpreter."""
    if EMULATE and dtype == tl.bfloat16:
        v = round_mantissa(v, 7)
    if EMULATE and dtype == tl.float8e4nv:
        v = round_mantissa(v, 3)
    if EMULATE and dtype == tl.float8e5:
        v = round_mantissa(v, 2)
    return v.to(dtype)


@triton.jit
def rstd_of(sum_sq, inv_n, eps):
    """1 / sqrt(sum_sq / N + eps), with inv_n = 1 / N rounded once on the host (`inv_hidden`): the same bits
    whether the kernel has N compiled in (LaunchConfig.const_n) or not. `sum_sq / N` is not: ptxas folds a
    division by a constant into a multiply by the correctly rounded 1/N (fused with + eps) and sends a run-time
    divisor through the approximate MUFU.RCP, so the two differed in the last bit at hidden sizes that are not
    powers of two on the H200 (20000, 24576); dividing correctly rounded in the kernel (div_rn) instead took 128
    more instructions and spilled under the 32-register cap of 8192 columns."""
    return tl.rsqrt(sum_sq * inv_n + eps)


def inv_hidden(n: int) -> float:
    """1 / n for `rstd_of` (Triton passes it as float32: one rounding of the double, the same for every config)."""
    return 1.0 / n
