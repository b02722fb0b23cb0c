"""SASS and resource usage of a cubin with the CUDA binary tools (Triton's bundled copies first: they match the
ptxas that built the cubin); no GPU needed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ridgeline.profile.occupancy import DEFAULT_ARCH

_SASS_LINE = re.compile(
    r"^\s*/\*[0-9a-fA-F]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
)
TENSOR_CORE_OPS = ("HGMMA", "QGMMA", "IGMMA", "BGMMA", "HMMA", "IMMA", "DMMA", "QMMA", "OMMA", "UTCHMMA",
                   "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA")
ASYNC_COPY_OPS = ("LDGSTS", "UTMALDG", "UTMASTG", "UBLKCP", "UTMAPF")


def sass_opcodes(text: str) -> list[str]:
    """Full opcodes (with modifiers, e.g. LDG.E.128.CONSTANT) of every instruction in cuobjdump/nvdisasm text."""
    out = []
    for line in text.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            out.append(m.group(1))
    return out


_ADDRESSED = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+")
_BRANCH_TO = re.compile(r"\bBRA(?:\.[A-Z0-9_]+)*\s+0x([0-9a-fA-F]+)")
MAX_LOOPS = 6


def sass_loops(text: str) -> list[dict[str, Any]]:
    """The kernel's loops, found as backward branches (a BRA to a lower address, cuobjdump's hex targets): for each,
    its address range, the instructions from the target to the branch (one trip through the body, an inner loop's
    body counted once) and their histogram. Where a kernel spends its time per byte, this is the count to read;
    the whole kernel's total mixes the prologue and epilogue in. Sorted by address, at most MAX_LOOPS (the longest)."""
    rows: list[tuple[int, str, str]] = []  # (address, opcode, line), each line parsed once
    for line in text.splitlines():
        a, m = _ADDRESSED.match(line), _SASS_LINE.match(line)
        if a and m:
            rows.append((int(a.group(1), 16), m.group(1), line))
    loops = []
    for i, (addr, _, line) in enumerate(rows):
        b = _BRANCH_TO.search(line)
        if not b or int(b.group(1), 16) >= addr:
            continue
        target = int(b.group(1), 16)
        hist = Counter(op.split(".")[0] for a, op, _ in rows[: i + 1] if a >= target)
        loops.append({"start": hex(target), "end": hex(addr), "instructions": sum(hist.values()),
                      "histogram": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))[:16])})
    loops = sorted(loops, key=lambda lp: -lp["instructions"])[:MAX_LOOPS]
    return sorted(loops, key=lambda lp: int(lp["start"], 16))


def access_width(opcode: str) -> int:
    """Bits per thread of a load or store opcode: LDG.E.128 -> 128, LDG.E.U16 -> 16, LDG.E -> 32."""
    for part in opcode.split(".")[1:]:
        if part in ("64", "128", "256"):
            return int(part)
        if part in ("U8", "S8"):
            return 8
        if part in ("U16", "S16"):
            return 16
    return 32


def parse_sass(text: str) -> dict[str, Any]:
    """Instruction histogram, global load/store widths, tensor-core and local-memory instructions."""
    ops = sass_opcodes(text)
    base = [op.split(".")[0] for op in ops]
    hist = Counter(base)

    def widths(name: str) -> dict[str, int]:
        c = Counter(access_width(op) for op in ops if op.split(".")[0] == name)
        return {str(w): c[w] for w in sorted(c, reverse=True)}

    tensor = {op: hist[op] for op in TENSOR_CORE_OPS if hist.get(op)}
    return {
        "instructions": len(ops),
        "histogram": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        "global_loads": widths("LDG"),
        "global_stores": widths("STG"),
        "tensor_cores": "+".join(tensor) if tensor else "none",
        "tensor_core_ops": tensor,
        "async_copies": {op: hist[op] for op in ASYNC_COPY_OPS if hist.get(op)},
        "local_loads": hist.get("LDL", 0),
        "local_stores": hist.get("STL", 0),
        "shared_loads": hist.get("LDS", 0) + hist.get("LDSM", 0),
        "shared_stores": hist.get("STS", 0),
        "atomics": hist.get("RED", 0) + hist.get("ATOM", 0) + hist.get("ATOMG", 0),
        "loops": sass_loops(text),
    }


def tool_path(name: str, arch: int = DEFAULT_ARCH) -> str | None:
    """A CUDA binary tool (ptxas, cuobjdump, nvdisasm): Triton's bundled copy first, then the PATH and CUDA's."""
    candidates: list[str] = []
    try:
        if name == "ptxas":
            from triton.backends.nvidia.compiler import get_ptxas

            candidates.append(get_ptxas(arch).path)
        else:
            from triton import knobs

            candidates.append(getattr(knobs.nvidia, name).path)
    except Exception:  # older or newer Triton without these helpers: fall back to searching
        pass
    try:
        import triton

        candidates.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name))
    except Exception:
        pass
    candidates += [shutil.which(name) or "", f"/usr/local/cuda/bin/{name}"]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def run_tool(cmd: Sequence[str], timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess:
    """Run a tool, capturing its text output; never raises on a non-zero exit."""
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False, **kw)


def resource_usage(cubin: Path) -> dict[str, int]:
    """cuobjdump -res-usage of the cubin: REG, STACK, SHARED (static, with the reserved KiB), LOCAL."""
    tool = tool_path("cuobjdump")
    if not tool:
        return {}
    res = run_tool([tool, "-res-usage", str(cubin)])
    m = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", res.stdout)
    if not m:
        return {}
    return {"registers": int(m[1]), "stack_bytes": int(m[2]), "static_shared_bytes": int(m[3]),
            "local_bytes": int(m[4])}


def ptxas_usage(ptx: Path, arch: int) -> dict[str, Any]:
    """Re-assemble the PTX with `ptxas -v` (Triton's flags) for exact spill bytes; the log is kept verbatim."""
    tool = tool_path("ptxas", arch)
    if not tool:
        return {}
    gpu = f"sm_{arch}{'a' if arch >= 90 else ''}"
    with tempfile.TemporaryDirectory() as tmp:
        base = [tool, "-lineinfo", "-v", f"--gpu-name={gpu}", str(ptx), "-o", os.path.join(tmp, "k.cubin")]
        res = run_tool(base[:3] + ["--regAllocOptLevel=2"] + base[3:])
        if res.returncode != 0:  # an older ptxas without the option Triton 3.7 adds
            res = run_tool(base)
    log = res.stderr + res.stdout
    out: dict[str, Any] = {"log": log.strip()}
    if m := re.search(r"Used (\d+) registers", log):
        out["registers"] = int(m[1])
    if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log):
        out["stack_bytes"], out["spill_stores_bytes"], out["spill_loads_bytes"] = int(m[1]), int(m[2]), int(m[3])
    if m := re.search(r"(\d+) bytes smem", log):
        out["static_shared_bytes"] = int(m[1])
    return out


def disassemble(cubin: Path) -> str:
    """SASS text of a cubin (cuobjdump -sass, else nvdisasm); empty when neither tool is found or works."""
    for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
        path = tool_path(tool)
        if path:
            res = run_tool([path, *args, str(cubin)])
            if res.returncode == 0 and res.stdout.strip():
                return res.stdout
    return ""

