"""FP8 (e4m3) to bfloat16 (and to float16) in registers at the rate a memory-bound kernel needs.

Triton's `x.to(tl.bfloat16)` from e4m3 on sm_90 is two conversions: F2FP (e4m3x2 -> f16x2) and one F2F.BF16.F16
per element. F2F runs on the conversion pipe (16 results a clock per SM, the CUDA programming guide's throughput
table), and a kernel streaming fp8 at the H200's 4.8 TB/s needs ~18 elements a clock per SM: the paged decode over
an fp8 KV cache ran at 0.18-0.40 of SOL, slower than over a bf16 cache of twice the bytes (s18).

`e4m3_to_bf16` does it with integer and packed bf16 instructions instead (8 for 4 elements, on pipes of 64-128 a
clock): PRMT spreads two bytes over two 16-bit halves with their signs, a shift and a mask land each sign at bit
15 and the 4 exponent and 3 mantissa bits in bfloat16's fields; that bfloat16 is the value times 2^-120 (the
exponent biases are 7 and 127), for the subnormals too (bfloat16 subnormals scale linearly), and one exact multiply
by 2^120 (fma.rn.bf16x2 with -0, which keeps subnormal inputs) gives the value. Exact for every code but
the two NaN codes (0x7F, 0xFF), which come out as +-480: a saturating quantizer (ours, torch's) never writes them.
Under the CPU interpreter (no inline assembly) it is the plain cast, which is exact too.

`e4m3_to_f16` is the hardware's own paired conversion (cvt.rn.f16x2.e4m3x2: one F2FP for two elements), pinned to
the loaded layout the same way: cheap, but its result is fp16, so a bf16 consumer must work in fp16 (the paged
decode's f16_dots form rescales its query for that).
"""

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled

INTERPRETED = tl.constexpr(interpreter_enabled())

# Four e4m3 bytes in $2 -> bf16 pairs $0 = (byte 1, byte 0) and $1 = (byte 3, byte 2), low half first. PRMT puts
# byte i in the low byte of a half and its sign, replicated (selector bit 3), in the high byte; << 4 moves the 7
# magnitude bits to bits 4-10 and a sign copy to bit 15; the mask keeps those.
_E4M3_X4_TO_BF16 = tl.constexpr("""
{
.reg .b32 h, c, z;
mov.b32 c, 0x7B807B80;
mov.b32 z, 0x80008000;
prmt.b32 h, $2, 0, 0x9180;
shl.b32 h, h, 4;
and.b32 h, h, 0x87F087F0;
fma.rn.bf16x2 $0, h, c, z;
prmt.b32 h, $2, 0, 0xB3A2;
shl.b32 h, h, 4;
and.b32 h, h, 0x87F087F0;
fma.rn.bf16x2 $1, h, c, z;
}
""")


@triton.jit
def e4m3_to_bf16(x, IN_PLACE: tl.constexpr = False):
    """float8e4nv tensor -> bfloat16 tensor of the same values (NaN codes: see the module docstring).
    IN_PLACE: convert in the layout x was loaded in (an impure asm, which the compiler does not move past a layout
    change), not in the consumer's: for a tl.dot operand that 8-bit loads cannot give in its layout (a
    transposed one: bytes one at a time), the bf16 result goes through shared memory and ldmatrix instead."""
    if INTERPRETED:
        return x.to(tl.bfloat16)
    return tl.inline_asm_elementwise(_E4M3_X4_TO_BF16, "=r,=r,r", [x.to(tl.uint8, bitcast=True)],
                                     dtype=tl.bfloat16, is_pure=not IN_PLACE, pack=4)


# Four e4m3 bytes in $2 -> fp16 pairs $0 = (byte 1, byte 0) and $1 = (byte 3, byte 2), low half first: the hardware's
# paired conversion (F2FP, one instruction for two elements; exact: every e4m3 value is an fp16 value, NaN to NaN).
_E4M3_X4_TO_F16 = tl.constexpr("""
{
.reg .b16 lo, hi;
mov.b32 {lo, hi}, $2;
cvt.rn.f16x2.e4m3x2 $0, lo;
cvt.rn.f16x2.e4m3x2 $1, hi;
}
""")


@triton.jit
def e4m3_to_f16(x, IN_PLACE: tl.constexpr = False):
    """float8e4nv tensor -> float16 tensor of the same values, two elements an instruction. IN_PLACE as in
    `e4m3_to_bf16`: converted in the layout x was loaded in (an impure asm the compiler does not move past a
    layout change), for a dot operand that 8-bit loads reach only a byte at a time."""
    if INTERPRETED:
        return x.to(tl.float16)
    return tl.inline_asm_elementwise(_E4M3_X4_TO_F16, "=r,=r,r", [x.to(tl.uint8, bitcast=True)],
                                     dtype=tl.float16, is_pure=not IN_PLACE, pack=4)
