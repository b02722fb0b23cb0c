"""Dump the Triton code torch.compile generates for the RMSNorm peer at given shapes (on the GPU), to learn how its
kernels are laid out where they beat ours. Usage: python scripts/inductor_code.py OUT_DIR MxN [MxN ...] [--fused]"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch._inductor.utils import run_and_get_code

from ridgeline.ops.rmsnorm.peers.torch_native import hf_fused_add_rms_norm, hf_rms_norm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--fused", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for shape in args.shapes:
        m, n = (int(v) for v in shape.split("x"))
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        torch._dynamo.reset()
        if args.fused:
            fn = torch.compile(hf_fused_add_rms_norm, dynamic=False)
            _, code = run_and_get_code(fn, x, torch.randn_like(x), w, 1e-6)
        else:
            fn = torch.compile(hf_rms_norm, dynamic=False)
            _, code = run_and_get_code(fn, x, w, 1e-6)
        name = f"inductor_{'fused_' if args.fused else ''}{m}x{n}.py"
        (out / name).write_text("\n\n# ----\n\n".join(code))
        print(name, sum(len(c) for c in code), "chars")


if __name__ == "__main__":
    main()
