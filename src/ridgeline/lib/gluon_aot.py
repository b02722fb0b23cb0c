"""Compile a Gluon kernel ahead of time for sm_90 on a machine without a GPU (run without the CPU interpreter),
and read what the compile made of it: shared memory, ptxas' spill bytes and SASS opcode counts. The Gluon
kernels' compile tests and `compile_for_sm90` helpers use it (Gluon's API moves between Triton releases)."""

from __future__ import annotations

import inspect
import re
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

_SASS_OP = re.compile(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", re.M)


def nvmma_descriptor(block: list[int], dtype_name: str) -> str:
    """The signature type of a host TensorDescriptor argument: `tensordesc<bf16[128, 64],layout>`."""
    from triton.experimental.gluon import language as gl

    dtype = {"bf16": gl.bfloat16, "fp16": gl.float16, "fp8e4nv": gl.float8e4nv}[dtype_name]
    layout = gl.NVMMASharedLayout.get_default_for(block, dtype)
    return f"tensordesc<{dtype_name}[{', '.join(map(str, block))}],{layout!r}>"


def compile_sm90(kernel: Any, types: dict[str, str], consts: dict[str, Any], num_warps: int, maxnreg: int,
                 opcodes: tuple[str, ...], keep_sass: bool = False) -> dict[str, Any]:
    """Compile a @gluon.jit kernel for sm_90. types: each non-constexpr parameter's signature type ("i32",
    "*bf16", a `nvmma_descriptor`); consts: the constexpr values. Returns shared bytes, spill bytes and the counts
    of `opcodes` in the SASS (the opcode's first dotted part), and with `keep_sass` the SASS text itself."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from ridgeline.profile.sass import ptxas_usage, run_tool, tool_path

    names = list(inspect.signature(kernel.fn).parameters)
    sig = {name: "constexpr" if name in consts else types[name] for name in names}
    src = GluonASTSource(kernel, sig, {(names.index(k),): v for k, v in consts.items()})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "maxnreg": maxnreg})
    out: dict[str, Any] = {"shared": compiled.metadata.shared}
    with TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(compiled.asm["ptx"])
        cubin.write_bytes(compiled.asm["cubin"])
        usage = ptxas_usage(ptx, 90)
        out["spill_stores_bytes"] = usage.get("spill_stores_bytes")
        out["spill_loads_bytes"] = usage.get("spill_loads_bytes")
        tool = tool_path("cuobjdump")
        sass = run_tool([tool, "-sass", str(cubin)]).stdout if tool else ""
    ops = Counter(op.split(".")[0] for op in _SASS_OP.findall(sass))
    out["sass"] = {op: ops[op] for op in opcodes}
    if keep_sass:
        out["sass_text"] = sass
    return out
