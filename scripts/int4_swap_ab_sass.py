"""The int4 unpack's loop step with and without swap-AB, compiled ahead of time for sm_90 (no GPU needed).

Usage: python scripts/int4_swap_ab_sass.py
A minimal body of int4_matmul's decode loop (one 128-wide quantization group a step, 4 warps, 4 stages, bf16 x,
`ops/int4_matmul/unpack.py`, no splits or scales): y = x W^T with the weight tile as mma.sync's B operand (as the
shipped kernel does), and y^T = W x^T with the weight as wgmma's register A operand over 64 and 128 weight rows.
Prints each variant's loop: instructions one trip takes and its most frequent opcodes (what `docs/perf/gemm.md`
quotes: 256 as shipped, 291 swapped, 508 for 128 x 128 weights with 128 rows).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from ridgeline.ops.int4_matmul.unpack import unpack_nibbles  # noqa: E402
from ridgeline.profile.sass import disassemble, sass_loops  # noqa: E402


@triton.jit
def _step(x_ptr, w_ptr, y_ptr, n_groups, stride_xm, stride_wn,
          GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr):
    offs_m = tl.arange(0, BM)
    offs_n = tl.program_id(0) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, GROUP)
    offs_b = tl.arange(0, GROUP // 2)
    acc = tl.zeros([BN, BM] if SWAP else [BM, BN], tl.float32)
    for g in range(0, n_groups):
        xt = tl.load(x_ptr + offs_m[:, None] * stride_xm + g * GROUP + offs_k[None, :])
        wb = tl.load(w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn + g * (GROUP // 2) + offs_b[None, :])
        lo, hi = unpack_nibbles(wb, tl.bfloat16)
        w = tl.reshape(tl.join(lo, hi), (BN, GROUP))
        if SWAP:
            acc += tl.dot(w, tl.trans(xt))
        else:
            acc += tl.dot(xt, tl.trans(w))
    if SWAP:
        tl.store(y_ptr + offs_m[None, :] * 4096 + offs_n[:, None], acc)
    else:
        tl.store(y_ptr + offs_m[:, None] * 4096 + offs_n[None, :], acc)


def main() -> int:
    sig = {"x_ptr": "*bf16", "w_ptr": "*u8", "y_ptr": "*fp32", "n_groups": "i32", "stride_xm": "i32",
           "stride_wn": "i32", "GROUP": "constexpr", "BM": "constexpr", "BN": "constexpr", "SWAP": "constexpr"}
    div16 = [["tt.divisibility", 16]]
    attrs = {(i,): div16 for i in (0, 1, 2, 4, 5)}
    with tempfile.TemporaryDirectory() as tmp:
        for swap, bn in ((False, 64), (True, 64), (True, 128)):
            src = triton.compiler.ASTSource(fn=_step, signature=sig, attrs=attrs,
                                            constexprs={"GROUP": 128, "BM": 16, "BN": bn, "SWAP": swap})
            ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 4})
            cubin = Path(tmp) / f"step_{swap}_{bn}.cubin"
            cubin.write_bytes(ck.asm["cubin"])
            step = max(sass_loops(disassemble(cubin)), key=lambda lp: lp["instructions"])
            top = ", ".join(f"{op} {c}" for op, c in list(step["histogram"].items())[:8])
            label = f"{'swap-AB' if swap else 'as shipped'}, {bn} weight rows"
            print(f"{label:28s} {step['instructions']:4d} instructions a step ({bn} x 128 weights): {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
