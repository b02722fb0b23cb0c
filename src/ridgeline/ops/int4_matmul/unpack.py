"""Packed int4 bytes -> the two nibbles' values (q = nibble - 8) in bf16 or fp16, four bytes at a time.

Triton's own path (mask, shift, int8 subtract, sitofp) costs the shipped body ~5 instructions a weight on sm_90
(PRMT and LOP3 per 8-bit lane, s20 SASS at 1x4096x4096: 557 a loop step of 64 x 128 weights), and decode streams
~37 nibbles a clock per SM at 4.8 TB/s. Here four bytes share each instruction's 32 bits: PRMT spreads bytes 0, 1
(then 2, 3) into the low bytes of two 16-bit halves, one LOP3 masks a nibble and ORs in the bits of 128.0 (bf16,
0x4300) or 1024.0 (fp16, 0x6400), which makes the half exactly 128 + v (1024 + v), and one packed FMA subtracts 136
(1032): v - 8, exact. The high nibbles take one shift first. 12 instructions for 8 weights, no conversion pipe.
The values are the same as the integer path's, so the kernel's sums, and its bits, do not change.
"""

import triton
import triton.language as tl

# $4: four packed bytes. $0, $1: low nibbles of bytes (1, 0) and (3, 2) (low half first); $2, $3: the high ones.
# One pair of bytes: PRMT puts them in the low bytes of two halves, then per nibble LOP3 (0xEA: (a & b) | c) and FMA.
_PAIR = """prmt.b32 t, $4, 0, {sel};
lop3.b32 u, t, 0x000F000F, MAGIC, 0xEA;
fma.rn.TY ${lo}, u, one, neg;
shr.b32 u, t, 4;
lop3.b32 u, u, 0x000F000F, MAGIC, 0xEA;
fma.rn.TY ${hi}, u, one, neg;
"""
_NIBBLES_X4 = ("{\n.reg .b32 t, u, one, neg;\nmov.b32 one, ONE;\nmov.b32 neg, NEG;\n"
               + _PAIR.format(sel="0x4140", lo=0, hi=2) + _PAIR.format(sel="0x4342", lo=1, hi=3) + "}\n")
# ONE, NEG, MAGIC: the packed constants 1.0 and -(magic + 8) of the dtype, and the magic's bits.
BF16_ASM = tl.constexpr(_NIBBLES_X4.replace("ONE", "0x3F803F80").replace("NEG", "0xC308C308")
                        .replace("MAGIC", "0x43004300").replace("TY", "bf16x2"))
FP16_ASM = tl.constexpr(_NIBBLES_X4.replace("ONE", "0x3C003C00").replace("NEG", "0xE408E408")
                        .replace("MAGIC", "0x64006400").replace("TY", "f16x2"))


@triton.jit
def unpack_nibbles(wb, dtype: tl.constexpr):
    """uint8 tensor of packed bytes -> (low nibbles - 8, high nibbles - 8) as `dtype` (bf16 or fp16), on the GPU
    (inline assembly: not for the CPU interpreter)."""
    if dtype == tl.bfloat16:
        lo, hi = tl.inline_asm_elementwise(BF16_ASM, "=r,=r,=r,=r,r", [wb], dtype=(tl.bfloat16, tl.bfloat16),
                                           is_pure=True, pack=4)
    else:
        lo, hi = tl.inline_asm_elementwise(FP16_ASM, "=r,=r,=r,=r,r", [wb], dtype=(tl.float16, tl.float16),
                                           is_pure=True, pack=4)
    return lo, hi
