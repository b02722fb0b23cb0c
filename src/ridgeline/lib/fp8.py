"""FP8 (e4m3) to bfloat16 in registers at the rate a memory-bound kernel needs.

Triton's `x.to(tl.bfloat16)` from e4m3 on sm_90 is two conversions: F2FP (e4m3x2 -> f16x2) and one F2F.BF16.F16
per element. F2F runs on the conversion pipe (16 results a clock per SM, the CUDA programming guide's throughput
table), and a kernel streaming fp8 at the H200's 4.8 TB/s needs ~18 elements a clock per SM: the paged decode over
an fp8 KV cache ran at 0.18-0.40 of SOL, slower than over a bf16 cache of twice the bytes (s18).

`e4m3_to_bf16` does it with integer and bf16 FMA instructions instead (10 for 4 elements, on pipes of 64-128 a
clock): each byte moves into the top of a 16-bit half (PRMT), its sign stays at bit 15 and its 7 magnitude bits
shift right by 4, which lands the 4 exponent and 3 mantissa bits in bfloat16's fields; that bfloat16 is the value
times 2^-120 (the exponent biases are 7 and 127), for the subnormals too (bfloat16 subnormals scale linearly), and
one exact multiply by 2^120 (fma.rn.bf16x2, which keeps subnormal inputs) gives the value. Exact for every code but
the two NaN codes (0x7F, 0xFF), which come out as +-480: a saturating quantizer (ours, torch's) never writes them.
Under the CPU interpreter (no inline assembly) it is the plain cast, which is exact too.
"""

import triton
import triton.language as tl

from ridgeline.lib.launch import interpreter_enabled

INTERPRETED = tl.constexpr(interpreter_enabled())

# Four e4m3 bytes in $2 -> bf16 pairs $0 = (byte 1, byte 0) and $1 = (byte 3, byte 2), low half first.
_E4M3_X4_TO_BF16 = tl.constexpr("""
{
.reg .b32 h, m, s, c, z;
mov.b32 c, 0x7B807B80;
mov.b32 z, 0x80008000;
prmt.b32 h, $2, 0, 0x1404;
shr.b32 m, h, 4;
and.b32 m, m, 0x07F007F0;
and.b32 s, h, 0x80008000;
or.b32 h, s, m;
fma.rn.bf16x2 $0, h, c, z;
prmt.b32 h, $2, 0, 0x3424;
shr.b32 m, h, 4;
and.b32 m, m, 0x07F007F0;
and.b32 s, h, 0x80008000;
or.b32 h, s, m;
fma.rn.bf16x2 $1, h, c, z;
}
""")


@triton.jit
def e4m3_to_bf16(x):
    """float8e4nv tensor -> bfloat16 tensor of the same values (NaN codes: see the module docstring)."""
    if INTERPRETED:
        return x.to(tl.bfloat16)
    return tl.inline_asm_elementwise(_E4M3_X4_TO_BF16, "=r,=r,r", [x.to(tl.uint8, bitcast=True)],
                                     dtype=tl.bfloat16, is_pure=True, pack=4)
