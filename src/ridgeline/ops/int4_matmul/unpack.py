"""Packed int4 words -> the weights' values (q = nibble - 8) in bf16 or fp16 register pairs, on the GPU.

Triton's own path (mask, shift, int8 subtract, sitofp) costs ~5 instructions a weight on sm_90 (PRMT and LOP3 per
8-bit lane), and decode streams ~37 nibbles a clock per SM at 4.8 TB/s. Here the 32 bits of a word of four bytes are
worked on at once: one LOP3 (0xEA: (a & b) | c) keeps one nibble of each 16-bit half and ORs in the bits of 128.0
(bf16, 0x4300) or 1024.0 (fp16, 0x6400), which makes the half exactly 128 + u (1024 + u), and one packed FMA
subtracts 136 (1032): u - 8 = q, exact. The halves that come out pair byte 0 with byte 2 and byte 1 with byte 3,
and pack.py's word order puts consecutive k there, so each result register is an MMA operand's (k, k + 1) pair as
it stands (no PRMT re-pairing: s20's format spent 32 a 64 x 128 step on it, scripts/int4_unpack_sass.py).
- bf16 (7 mantissa bits): the high nibbles are shifted down first: 3 SHF + 4 LOP3 + 4 FMA = 11 for 8 weights.
- fp16 (10 mantissa bits): a high nibble is masked in place (1024 + 16 u) and its FMA scales by 1/16 and subtracts
  72: 1 SHF + 4 LOP3 + 4 FMA = 9 for 8 weights.
The values are exact, so the kernel's sums are those of the integer path.
"""

import triton
import triton.language as tl

# $4: one word (bytes 0..3 = k (0, 2), (4, 6), (1, 3), (5, 7) as (low, high) nibbles; pack.py).
# $0, $1: k (0, 1), (2, 3); $2, $3: k (4, 5), (6, 7) (low half first).
_BF16 = """{
.reg .b32 t, u, one, neg;
mov.b32 one, 0x3F803F80;
mov.b32 neg, 0xC308C308;
lop3.b32 t, $4, 0x000F000F, 0x43004300, 0xEA;
fma.rn.bf16x2 $0, t, one, neg;
shr.b32 u, $4, 4;
lop3.b32 t, u, 0x000F000F, 0x43004300, 0xEA;
fma.rn.bf16x2 $1, t, one, neg;
shr.b32 u, $4, 8;
lop3.b32 t, u, 0x000F000F, 0x43004300, 0xEA;
fma.rn.bf16x2 $2, t, one, neg;
shr.b32 u, $4, 12;
lop3.b32 t, u, 0x000F000F, 0x43004300, 0xEA;
fma.rn.bf16x2 $3, t, one, neg;
}
"""
# fp16: 1.0 = 0x3C00, 1/16 = 0x2C00, -1032 = 0xE408, -72 = 0xD480.
_FP16 = """{
.reg .b32 t, u, one, sixteenth, neg, neg_hi;
mov.b32 one, 0x3C003C00;
mov.b32 sixteenth, 0x2C002C00;
mov.b32 neg, 0xE408E408;
mov.b32 neg_hi, 0xD480D480;
lop3.b32 t, $4, 0x000F000F, 0x64006400, 0xEA;
fma.rn.f16x2 $0, t, one, neg;
lop3.b32 t, $4, 0x00F000F0, 0x64006400, 0xEA;
fma.rn.f16x2 $1, t, sixteenth, neg_hi;
shr.b32 u, $4, 8;
lop3.b32 t, u, 0x000F000F, 0x64006400, 0xEA;
fma.rn.f16x2 $2, t, one, neg;
lop3.b32 t, u, 0x00F000F0, 0x64006400, 0xEA;
fma.rn.f16x2 $3, t, sixteenth, neg_hi;
}
"""
BF16_ASM = tl.constexpr(_BF16)
FP16_ASM = tl.constexpr(_FP16)


@triton.jit
def unpack_words(wb, dtype: tl.constexpr):
    """uint8 tensor of packed bytes [..., 4j] -> (a, b), each [..., 4j] of `dtype` (bf16 or fp16): a[..., 4i + t] =
    q at k = 8i + t, b[..., 4i + t] = q at k = 8i + 4 + t (t < 4), for word i. On the GPU only (inline assembly)."""
    if dtype == tl.bfloat16:
        a, b = tl.inline_asm_elementwise(BF16_ASM, "=r,=r,=r,=r,r", [wb], dtype=(tl.bfloat16, tl.bfloat16),
                                         is_pure=True, pack=4)
    else:
        a, b = tl.inline_asm_elementwise(FP16_ASM, "=r,=r,=r,=r,r", [wb], dtype=(tl.float16, tl.float16),
                                         is_pure=True, pack=4)
    return a, b
