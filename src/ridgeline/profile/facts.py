"""Facts of one compiled Triton kernel: registers, spills, shared memory, warps, stages, occupancy and a SASS
summary; its PTX, TTGIR, cubin, SASS and ptxas log are written beside the profile."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ridgeline.profile.occupancy import DEFAULT_ARCH, occupancy
from ridgeline.profile.sass import disassemble, parse_sass, ptxas_usage, resource_usage


def meta(ck: Any, name: str, default: Any = None) -> Any:
    """A compiled kernel's metadata field (a dict or a namedtuple, depending on how it was built)."""
    md = getattr(ck, "metadata", None)
    if isinstance(md, dict):
        return md.get(name, default)
    return getattr(md, name, default)


def arch_of(ck: Any) -> int | None:
    """The compute capability a compiled kernel targets (90 for sm_90), or None."""
    target = meta(ck, "target")
    arch = getattr(target, "arch", None) if target is not None else None
    if arch is None and isinstance(target, dict):
        arch = target.get("arch")
    try:
        return int(arch) if arch is not None else None
    except (TypeError, ValueError):
        return None


def kernel_facts(ck: Any, out_dir: Path, source: str, stem: str, arch: int | None = None) -> dict[str, Any]:
    """Registers, spills, shared memory, warps, stages, occupancy and a SASS summary of one compiled kernel;
    its PTX, TTGIR, cubin, SASS and ptxas log are written to out_dir/<stem>.*"""
    out_dir.mkdir(parents=True, exist_ok=True)
    arch = arch or arch_of(ck) or DEFAULT_ARCH
    name = str(meta(ck, "name") or getattr(ck, "name", "kernel"))
    asm = getattr(ck, "asm", {}) or {}
    files: dict[str, str] = {}
    for key, ext in (("ptx", "ptx"), ("ttgir", "ttgir"), ("cubin", "cubin")):
        data = asm.get(key)
        if data:
            p = out_dir / f"{stem}.{ext}"
            if isinstance(data, bytes):
                p.write_bytes(data)
            else:
                p.write_text(str(data))
            files[key] = str(p)
    facts: dict[str, Any] = {
        "name": name, "source": source, "target": f"cuda:{arch}", "num_warps": meta(ck, "num_warps"),
        "num_stages": meta(ck, "num_stages"), "shared_bytes": meta(ck, "shared"),
        "registers": None, "spill_stores_bytes": None, "spill_loads_bytes": None, "local_bytes": None,
    }
    if "cubin" in files:
        res = resource_usage(Path(files["cubin"]))
        facts["registers"] = res.get("registers")
        facts["local_bytes"] = res.get("local_bytes")
        facts["stack_bytes"] = res.get("stack_bytes")
        facts["static_shared_bytes_cuobjdump"] = res.get("static_shared_bytes")
        sass = disassemble(Path(files["cubin"]))
        if sass:
            p = out_dir / f"{stem}.sass"
            p.write_text(sass)
            files["sass"] = str(p)
            facts["sass"] = parse_sass(sass)
    if "ptx" in files:
        pt = ptxas_usage(Path(files["ptx"]), arch)
        if pt.get("log"):
            p = out_dir / f"{stem}.ptxas.txt"
            p.write_text(pt["log"] + "\n")
            files["ptxas_log"] = str(p)
        facts["spill_stores_bytes"] = pt.get("spill_stores_bytes")
        facts["spill_loads_bytes"] = pt.get("spill_loads_bytes")
        if facts["registers"] is None:
            facts["registers"] = pt.get("registers")
        static_smem = pt.get("static_shared_bytes", 0)
    else:
        static_smem = 0
    # A kernel the driver loaded knows its own numbers; keep them beside ours as a cross-check.
    for attr, key in (("n_regs", "driver_registers"), ("n_spills", "driver_spills")):
        v = getattr(ck, attr, None)
        if isinstance(v, int):
            facts[key] = v
    if facts["registers"] is None and "driver_registers" in facts:
        facts["registers"] = facts["driver_registers"]
    if facts["num_warps"]:
        facts["occupancy"] = occupancy(facts["registers"], (facts["shared_bytes"] or 0) + static_smem,
                                       int(facts["num_warps"]), arch)
    facts["files"] = {k: os.path.basename(v) for k, v in files.items()}
    return facts

