"""Profile one implementation at one shape: compile facts, SASS summary, occupancy, Nsight Compute, Kineto.

What is collected where:
- Triton kernels, on a CUDA GPU: the op runs once and every kernel it compiled through ``triton.jit`` is read
  from the JIT caches (ours, and a Triton peer such as Liger alike).
- Triton kernels ridgeline knows how to launch (ours), without a GPU: compiled ahead of time for sm_90 (or
  ``arch``) with ``triton.compile``, with the same launch configuration and specialization the runtime would
  pick for torch-allocated (16-byte aligned) tensors. Triton bundles ptxas, cuobjdump and nvdisasm, so registers,
  spills, PTX and SASS need no GPU.
- Nsight Compute (``ncu`` on the PATH and a GPU): DRAM bytes, time, throughput and achieved occupancy of one
  call, in a child process, against the spec's ideal bytes. Always ``--clock-control none``.
- torch profiler (Kineto) chrome trace of a few calls, on a GPU.
Everything that is not collected is listed with the reason, in the returned dict and in the report.
"""

from __future__ import annotations

import csv
import functools
import gc
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROFILE_SCHEMA = "ridgeline.profile/1"
DEFAULT_ARCH = 90
DEFAULT_SM_COUNT = {90: 132, 80: 108, 100: 148}  # assumed SMs for the grid when no GPU says otherwise
CHILD_CODE = "import sys; from ridgeline.harness.profile import _child_main; sys.exit(_child_main(sys.argv[1:]))"
RESULT_MARK = "RIDGELINE-PROFILE-RESULT "


# --- occupancy ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (CUDA programming guide, technical specifications)."""

    max_warps: int
    max_blocks: int
    regs_per_sm: int = 65536
    reg_unit: int = 256  # registers are allocated per warp in units of 256
    max_regs_per_thread: int = 255
    smem_per_sm: int = 233472  # 228 KiB
    smem_per_block: int = 232448  # 227 KiB
    smem_reserved: int = 1024  # reserved by the system per block (sm_80 and later)
    smem_unit: int = 128


ARCH_LIMITS: dict[int, ArchLimits] = {
    80: ArchLimits(64, 32, smem_per_sm=167936, smem_per_block=166912),
    86: ArchLimits(48, 16, smem_per_sm=102400, smem_per_block=101376),
    89: ArchLimits(48, 24, smem_per_sm=102400, smem_per_block=101376),
    90: ArchLimits(64, 32),
    100: ArchLimits(64, 32),
}


def occupancy(registers: int | None, shared_bytes: int | None, num_warps: int, arch: int = DEFAULT_ARCH) -> dict:
    """Theoretical blocks and warps per SM allowed by registers, shared memory, warps and the block limit."""
    lim = ARCH_LIMITS.get(arch, ARCH_LIMITS[DEFAULT_ARCH])
    warps = max(1, int(num_warps))
    by_warps = lim.max_warps // warps
    if registers:
        per_warp = math.ceil(int(registers) * 32 / lim.reg_unit) * lim.reg_unit
        by_regs = (lim.regs_per_sm // per_warp) // warps
    else:
        by_regs = lim.max_blocks
    smem = math.ceil(((shared_bytes or 0) + lim.smem_reserved) / lim.smem_unit) * lim.smem_unit
    by_smem = lim.smem_per_sm // smem if (shared_bytes or 0) <= lim.smem_per_block else 0
    limits = {"warps": by_warps, "blocks": lim.max_blocks, "registers": by_regs, "shared": by_smem}
    blocks = min(limits.values())
    # Ties name the hard limit first: 8 warps x 8 blocks with 32 registers is "warps", not "registers".
    limited_by = next(k for k in ("warps", "blocks", "registers", "shared") if limits[k] == blocks)
    out = {
        "blocks_per_sm": blocks, "warps_per_sm": blocks * warps, "occupancy": blocks * warps / lim.max_warps,
        "limited_by": limited_by, "by_registers": by_regs, "by_warps": by_warps, "by_shared": by_smem,
        "by_blocks": lim.max_blocks, "arch": arch,
    }
    if arch not in ARCH_LIMITS:
        out["note"] = f"no limits table for sm_{arch}: sm_{DEFAULT_ARCH} limits assumed"
    return out


# --- SASS --------------------------------------------------------------------------------------------------
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
    }


# --- CUDA binary tools (Triton's bundled copies first: they match the ptxas that built the cubin) -------------
def tool_path(name: str, arch: int = DEFAULT_ARCH) -> str | None:
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


def _run(cmd: Sequence[str], timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False, **kw)


def resource_usage(cubin: Path) -> dict[str, int]:
    """cuobjdump -res-usage of the cubin: REG, STACK, SHARED (static, with the reserved KiB), LOCAL."""
    tool = tool_path("cuobjdump")
    if not tool:
        return {}
    res = _run([tool, "-res-usage", str(cubin)])
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
        res = _run(base[:3] + ["--regAllocOptLevel=2"] + base[3:])
        if res.returncode != 0:  # an older ptxas without the option Triton 3.7 adds
            res = _run(base)
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
    for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
        path = tool_path(tool)
        if path:
            res = _run([path, *args, str(cubin)])
            if res.returncode == 0 and res.stdout.strip():
                return res.stdout
    return ""


# --- compiled kernels --------------------------------------------------------------------------------------
def _meta(ck: Any, name: str, default: Any = None) -> Any:
    md = getattr(ck, "metadata", None)
    if isinstance(md, dict):
        return md.get(name, default)
    return getattr(md, name, default)


def _arch_of(ck: Any) -> int | None:
    target = _meta(ck, "target")
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
    arch = arch or _arch_of(ck) or DEFAULT_ARCH
    name = str(_meta(ck, "name") or getattr(ck, "name", "kernel"))
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
        "name": name, "source": source, "target": f"cuda:{arch}", "num_warps": _meta(ck, "num_warps"),
        "num_stages": _meta(ck, "num_stages"), "shared_bytes": _meta(ck, "shared"),
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


def _compiled_in(fn: Any) -> list[Any]:
    """Compiled kernels in a JITFunction's caches (device_caches in triton >= 3.2, .cache before)."""
    found: list[Any] = []
    caches = getattr(fn, "device_caches", None)
    if isinstance(caches, dict):
        for entry in list(caches.values()):
            cache = entry[0] if isinstance(entry, tuple) and entry else entry
            if isinstance(cache, dict):
                found += list(cache.values())
    else:
        cache = getattr(fn, "cache", None)
        if isinstance(cache, dict):
            for per_device in cache.values():
                found += list(per_device.values()) if isinstance(per_device, dict) else [per_device]
    return [k for k in found if hasattr(k, "asm")]


def _jit_functions() -> list[Any]:
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return []
    with warnings.catch_warnings():  # isinstance on some lazily deprecated torch objects warns
        warnings.simplefilter("ignore")
        return [o for o in gc.get_objects() if isinstance(o, JITFunction)]


def jit_snapshot() -> set[int]:
    return {id(k) for fn in _jit_functions() for k in _compiled_in(fn)}


def jit_new_kernels(before: set[int]) -> list[Any]:
    """Kernels compiled (or loaded from Triton's disk cache) since `before`, in a stable order."""
    new = [k for fn in _jit_functions() for k in _compiled_in(fn) if id(k) not in before]
    return sorted(new, key=lambda k: str(_meta(k, "name") or ""))


# --- the launches our wrappers make, recorded instead of run ---------------------------------------------
@dataclass(frozen=True)
class TensorArg:
    """Stands in for a tensor argument: its dtype and whether its address is 16-byte aligned."""

    dtype: Any
    aligned: bool = True


@dataclass
class TritonLaunch:
    """One `kernel[grid](*args, **kwargs)` call: every parameter by name, and the compile options."""

    kernel: Any
    args: dict[str, Any]
    num_warps: int
    grid: int
    config: str
    num_stages: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"grid": self.grid, "block_threads": self.num_warps * 32, "config": self.config}


@dataclass(frozen=True)
class KernelFamily:
    """Where an op's Triton wrappers live, and how to build inputs on the meta device (shape and strides only:
    a launch can be recorded for any size without memory or a GPU)."""

    module: str
    meta_inputs: Callable[[str, tuple[int, ...], Any, str], dict[str, Any]]
    # (shape, dtype, weight dtype or None) -> the config's description / the grid a CUDA device would get
    describe: Callable[[tuple[int, ...], Any, Any], str] | None = None
    grid: Callable[[tuple[int, ...], Any, int, Any], int] | None = None


def _rmsnorm_meta_inputs(op: str, shape: tuple[int, ...], dtype: Any, variant: str) -> dict[str, Any]:
    import torch

    from ridgeline.ops.rmsnorm.spec import EPS, STRIDE_PAD

    n = shape[-1]

    def rows() -> Any:  # the spec's layouts: contiguous rows, or rows inside a buffer STRIDE_PAD wider
        if "strided" in variant:
            return torch.empty((*shape[:-1], n + STRIDE_PAD), dtype=dtype, device="meta")[..., :n]
        return torch.empty(shape, dtype=dtype, device="meta")

    wdtype = torch.float32 if "w-fp32" in variant else dtype
    inputs = {"x": rows(), "weight": torch.empty((n,), dtype=wdtype, device="meta"), "eps": EPS}
    if op == "fused_add_rmsnorm":
        inputs["residual"] = rows()
    return inputs


def _quant_of(op: str) -> int:
    """The kernel's QUANT epilogue for an op of the RMSNorm family (0: none, 1: static FP8, 2: dynamic FP8)."""
    return {"rmsnorm_fp8": 1, "rmsnorm_dynamic_quant": 2, "fused_add_rmsnorm_dynamic_quant": 2}.get(op, 0)


def _rmsnorm_describe(shape: tuple[int, ...], dtype: Any, weight_dtype: Any = None, fused: bool = False,
                      quant: int = 0) -> str:
    from ridgeline.ops.rmsnorm import kernel as K

    with _patched(_family_modules(K.__name__), {"_INTERPRETED": False}):  # the GPU's config, as the capture takes it
        return K.config_for(shape[-1], dtype, _numel(shape[:-1]), fused, weight_dtype, quant).describe()


def _rmsnorm_grid(shape: tuple[int, ...], dtype: Any, sm_count: int, weight_dtype: Any = None, fused: bool = False,
                  quant: int = 0) -> int:
    import torch

    from ridgeline.ops.rmsnorm import kernel as K

    with _patched(_family_modules(K.__name__), {"multiprocessor_count": lambda device: sm_count,
                                                 "_INTERPRETED": False}):
        cfg = K.config_for(shape[-1], dtype, _numel(shape[:-1]), fused, weight_dtype, quant)
        return int(K._grid(_numel(shape[:-1]), cfg, torch.device("cuda", 0)))


def _quant_meta_inputs(op: str, shape: tuple[int, ...], dtype: Any, variant: str) -> dict[str, Any]:
    import torch

    base = "fused_add_rmsnorm" if op.startswith("fused_add") else "rmsnorm"
    inputs = _rmsnorm_meta_inputs(base, shape, dtype, variant)
    if op == "rmsnorm_fp8":
        inputs["scale"] = torch.empty((1,), dtype=torch.float32, device="meta")
    return inputs


def _rmsnorm_family(op: str) -> KernelFamily:
    fused, quant = op.startswith("fused_add"), _quant_of(op)
    meta = _quant_meta_inputs if quant else _rmsnorm_meta_inputs
    return KernelFamily("ridgeline.ops.rmsnorm.kernel", meta,
                        functools.partial(_rmsnorm_describe, fused=fused, quant=quant),
                        functools.partial(_rmsnorm_grid, fused=fused, quant=quant))


# op -> its Triton kernel family; every implementation of source "ours" of these ops is profiled through it.
FAMILIES: dict[str, KernelFamily] = {
    op: _rmsnorm_family(op) for op in ("rmsnorm", "fused_add_rmsnorm", "rmsnorm_fp8", "rmsnorm_dynamic_quant",
                                       "fused_add_rmsnorm_dynamic_quant")
}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_kernel(obj: Any) -> bool:
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    return isinstance(obj, JITFunction) or type(obj).__name__ == "InterpretedFunction"


class _Recorder:
    """Takes a kernel's place: `rec[grid](*args, **kwargs)` records the call and launches nothing."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.calls: list[tuple[Any, tuple, dict]] = []

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.calls.append((grid, args, kwargs))

        return launch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)


class _patched:
    """Set attributes of an object (or of each of a list of objects) for the duration of a `with` block (only
    those it has)."""

    def __init__(self, objs: Any, values: dict[str, Any]) -> None:
        self.objs = objs if isinstance(objs, list) else [objs]
        self.values, self.old = values, []

    def __enter__(self) -> None:
        for obj in self.objs:
            for k, v in self.values.items():
                if hasattr(obj, k):
                    self.old.append((obj, k, getattr(obj, k)))
                    setattr(obj, k, v)

    def __exit__(self, *exc: object) -> None:
        for obj, k, v in reversed(self.old):
            setattr(obj, k, v)


def _family_modules(name: str) -> list[types.ModuleType]:
    """A kernel module and its loaded helper modules (`<name>_config`, `<name>_split`, ...): the launch rules the
    capture must see as on the GPU may live in any of them."""
    return [sys.modules[m] for m in sorted(sys.modules) if m == name or m.startswith(name + "_")]


def _kernel_slots(module: Any) -> list[tuple[Any, str, Any]]:
    """Where the module keeps kernels: its globals, and the `.fn` of launcher objects among them."""
    slots = []
    for name, obj in list(vars(module).items()):
        if _is_kernel(obj):
            slots.append((module, name, obj))
        elif not isinstance(obj, (type, types.ModuleType)):
            try:
                inner = getattr(obj, "fn", None)
            except Exception:  # a global whose attribute access fails is not a launcher
                continue
            if _is_kernel(inner):
                slots.append((obj, "fn", inner))
    return slots


def capture_launches(op: str, impl: str, shape: Sequence[int], dtype: Any, variant: str = "",
                     inputs: dict[str, Any] | None = None, sm_count: int = 132) -> list[TritonLaunch]:
    """Call our implementation the way the harness does, with its Triton kernels replaced by recorders, and
    return the launches it made: exactly the arguments, constexprs and num_warps the library picks. Inputs
    default to meta-device tensors (no GPU, no memory); real CUDA inputs give the exact grid and alignment."""
    import importlib

    import torch

    from ridgeline.core.registry import get_spec, resolve

    fam = FAMILIES.get(op)
    implementation = resolve(op, impl)
    if fam is None or implementation.source != "ours":
        raise ValueError(f"profile: {op}/{impl} is not a Triton kernel of ridgeline's (known: ours of "
                         f"{', '.join(FAMILIES)})")
    if not implementation.available:
        raise ValueError(f"profile: {op}/{impl} is unavailable: {implementation.reason}")
    shape = tuple(int(d) for d in shape)
    on_meta = inputs is None
    if inputs is None:
        inputs = fam.meta_inputs(op, shape, dtype, variant)
    module = importlib.import_module(fam.module)
    recorders: list[_Recorder] = []
    restore: list[tuple[Any, str, Any]] = []
    env_old = os.environ.get("RIDGELINE_FAST_LAUNCH")
    try:
        os.environ["RIDGELINE_FAST_LAUNCH"] = "0"  # the fast path would launch a cached kernel past the recorder
        for obj, attr, kernel in _kernel_slots(module):
            rec = _Recorder(kernel)
            recorders.append(rec)
            restore.append((obj, attr, kernel))
            setattr(obj, attr, rec)
        # The launch a GPU gets, even under the CPU interpreter (which picks its own configs for wide rows).
        patches = {"require_runnable_device": lambda *a, **k: None, "multiprocessor_count": lambda device: sm_count,
                   "_INTERPRETED": False}
        with _patched(_family_modules(module.__name__), patches):
            get_spec(op).call(implementation.fn, inputs)
    finally:
        for obj, attr, kernel in reversed(restore):
            setattr(obj, attr, kernel)
        if env_old is None:
            os.environ.pop("RIDGELINE_FAST_LAUNCH", None)
        else:
            os.environ["RIDGELINE_FAST_LAUNCH"] = env_old
    launches = []
    weight_dtype = getattr(inputs.get("weight"), "dtype", None)  # (an fp32 weight changes the config)
    for rec in recorders:
        for grid, args, kwargs in rec.calls:
            launch = _launch_from_call(rec.kernel, grid, args, kwargs, torch.Tensor)
            if fam.describe is not None:
                launch.config = fam.describe(shape, dtype, weight_dtype)
            if on_meta and fam.grid is not None:
                try:  # on the meta device the wrapper computes a CPU grid; ask for the CUDA one
                    launch.grid = fam.grid(shape, dtype, sm_count, weight_dtype)
                except Exception:
                    pass
            launches.append(launch)
    if not launches:
        raise ValueError(f"profile: calling {op}/{impl} at {shape} launched no Triton kernel (an empty shape?)")
    return launches


def _launch_from_call(kernel: Any, grid: Any, args: tuple, kwargs: dict[str, Any], tensor_type: type) -> TritonLaunch:
    jit = _as_jit(kernel)
    names = [p.name for p in jit.params]
    bound: dict[str, Any] = dict(zip(names, args))
    options: dict[str, Any] = {}
    for k, v in kwargs.items():
        (bound if k in names else options)[k] = v
    for p in jit.params:
        if p.name not in bound and p.has_default:
            bound[p.name] = p.default
    for k, v in list(bound.items()):
        if isinstance(v, tensor_type):
            aligned = v.device.type == "meta" or v.data_ptr() % 16 == 0
            bound[k] = TensorArg(v.dtype, aligned)
    g = grid(bound) if callable(grid) else grid
    g0 = int(g[0]) if isinstance(g, (tuple, list)) else int(g)
    num_warps = int(options.pop("num_warps", 4))
    num_stages = options.pop("num_stages", None)
    consts = " ".join(f"{p.name}={bound.get(p.name)}" for p in jit.params if p.is_constexpr)
    return TritonLaunch(kernel, bound, num_warps, g0, f"{consts} warps={num_warps}", num_stages, options)


def specialization(kernel: Any, args: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any], dict]:
    """Signature, constexprs and attributes the Triton runtime derives from these arguments: ints equal to 1
    become constants, ints divisible by 16 and 16-byte aligned pointers get tt.divisibility 16."""
    names = [p.name for p in kernel.params]
    if set(names) != set(args):
        raise ValueError(f"profile: kernel {getattr(kernel, '__name__', kernel)} takes {names}, the launch gives "
                         f"{sorted(args)}")
    sig: dict[str, str] = {}
    consts: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list] = {}
    div16 = [["tt.divisibility", 16]]
    for i, p in enumerate(kernel.params):
        v = args[p.name]
        dns = getattr(p, "do_not_specialize", False)
        if p.is_constexpr:
            sig[p.name], consts[p.name] = "constexpr", v
        elif isinstance(v, TensorArg):
            sig[p.name] = "*" + _tl_type(v.dtype)
            if v.aligned and not getattr(p, "do_not_specialize_on_alignment", False):
                attrs[(i,)] = div16
        elif isinstance(v, bool):
            sig[p.name] = "u1"
        elif isinstance(v, int):
            if v == 1 and not dns:
                sig[p.name], consts[p.name] = "constexpr", 1
                continue
            sig[p.name] = "i32" if -(2**31) <= v < 2**31 else "i64"
            if v % 16 == 0 and not dns:
                attrs[(i,)] = div16
        elif isinstance(v, float):
            sig[p.name] = "fp32"
        elif v is None:
            sig[p.name], consts[p.name] = "constexpr", None
        else:
            raise ValueError(f"profile: cannot specialize argument {p.name}={v!r}")
    return sig, consts, attrs


def _tl_type(dtype: Any) -> str:
    import torch

    names = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float8_e4m3fn: "fp8e4nv",
             torch.float8_e5m2: "fp8e5", torch.int32: "i32", torch.int64: "i64", torch.int8: "i8",
             torch.uint8: "u8", torch.bool: "i1"}
    if dtype not in names:
        raise ValueError(f"profile: no Triton pointer type for {dtype}")
    return names[dtype]


def _as_jit(kernel: Any) -> Any:
    """The JITFunction behind a kernel (under TRITON_INTERPRET=1 kernels are InterpretedFunctions)."""
    from triton.runtime.jit import JITFunction

    if isinstance(kernel, JITFunction):
        return kernel
    fn = getattr(kernel, "fn", None)
    if fn is None:
        raise ValueError(f"profile: {kernel!r} is not a Triton kernel")
    return JITFunction(fn)


def _interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def aot_compile(launch: TritonLaunch, arch: int = DEFAULT_ARCH) -> Any:
    """triton.compile for a CUDA target; no GPU needed (Triton's bundled ptxas builds the cubin)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = _as_jit(launch.kernel)
    sig, consts, attrs = specialization(kernel, launch.args)
    options: dict[str, Any] = {**launch.options, "num_warps": launch.num_warps}
    if launch.num_stages is not None:
        options["num_stages"] = launch.num_stages
    return triton.compile(ASTSource(kernel, sig, consts, attrs), target=GPUTarget("cuda", arch, 32),
                          options=options)


def aot_kernel_facts(op: str, impl: str, shape: tuple[int, ...], dtype_name: str, variant: str, arch: int,
                     out_dir: Path, sm_count: int | None = None) -> dict[str, Any]:
    """Record the launches our implementation makes, compile each for `arch` ahead of time, collect the facts.
    Where Triton's interpreter is on (it swaps triton.language for Python) this runs in a clean child process."""
    if _interpreter_on():
        return _in_child(["aot", op, impl, "x".join(map(str, shape)), dtype_name, variant, str(arch),
                          str(out_dir), str(sm_count or 0)])
    from ridgeline.core.spec import parse_dtype

    sms = sm_count or DEFAULT_SM_COUNT.get(arch, 132)
    launches = capture_launches(op, impl, shape, parse_dtype(dtype_name), variant, sm_count=sms)
    return {"kernels": compile_launches(launches, arch, out_dir), "launch": launches[0].describe() | {"sm_count": sms}}


def compile_launches(launches: list[TritonLaunch], arch: int, out_dir: Path) -> list[dict[str, Any]]:
    """Compile recorded launches for `arch` and collect each kernel's facts."""
    kernels = []
    for i, launch in enumerate(launches):
        ck = aot_compile(launch, arch)
        name = str(_meta(ck, "name") or "kernel")
        facts = kernel_facts(ck, out_dir, "aot", name if len(launches) == 1 else f"{name}-{i}", arch)
        _, consts, _ = specialization(_as_jit(launch.kernel), launch.args)
        facts["constexprs"] = {k: v for k, v in consts.items() if isinstance(v, (int, float, bool, str))}
        kernels.append(facts)
    return kernels


def _child_env(clean_interpreter: bool) -> dict[str, str]:
    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])  # .../src: the child imports this same ridgeline
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if clean_interpreter:
        env.pop("TRITON_INTERPRET", None)
    return env


def _in_child(argv: list[str], timeout: float = 300) -> dict[str, Any]:
    res = _run([sys.executable, "-c", CHILD_CODE, *argv], timeout=timeout, env=_child_env(True))
    for line in res.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    tail = (res.stderr or res.stdout).strip().splitlines()[-15:]
    raise RuntimeError(f"profile child ({argv[0]}) failed with exit code {res.returncode}:\n" + "\n".join(tail))


# --- Nsight Compute ----------------------------------------------------------------------------------------
NCU_METRICS = {
    "dram__bytes_read.sum": "dram_bytes_read",
    "dram__bytes_write.sum": "dram_bytes_write",
    "gpu__time_duration.sum": "time_us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "launch__registers_per_thread": "registers",
}
_UNIT_SCALE = {
    "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 1024.0, "mibyte": 1024.0**2, "gibyte": 1024.0**3,
    "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,  # times in microseconds
}


def ncu_command(ncu: str, report_base: Path, child_argv: Sequence[str]) -> list[str]:
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--metrics", ",".join(NCU_METRICS), "--export", str(report_base), "--force-overwrite",
            sys.executable, "-c", CHILD_CODE, *child_argv]


def _number(text: str, unit: str) -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v * _UNIT_SCALE.get(unit.strip().lower(), 1.0)


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of `ncu --import R --csv --page raw`: one dict per kernel launch, metrics in bytes / µs / %."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header, data = rows[0], rows[1:]
    units = [""] * len(header)
    if data and data[0] and data[0][0] == "":  # the units row under the header
        units = data.pop(0) + [""] * len(header)
    col = {h: i for i, h in enumerate(header)}
    out = []
    for row in data:
        def get(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i] if i is not None and i < len(row) else ""

        k: dict[str, Any] = {"name": get("Kernel Name") or get("Function Name") or "?"}
        for metric, key in NCU_METRICS.items():
            if metric not in col:
                continue
            raw = get(metric)
            if key in ("grid", "block"):
                k[key] = raw or None
            else:
                v = _number(raw, units[col[metric]])
                k[key] = int(v) if key == "registers" and v is not None else v
        out.append(k)
    return out


def run_ncu(op: str, impl: str, shape: tuple[int, ...], dtype_name: str, variant: str, out_dir: Path,
            ideal_bytes: int, timeout: float = 600) -> dict[str, Any]:
    ncu = shutil.which("ncu")
    if not ncu:
        return {"available": False, "reason": "ncu is not on the PATH"}
    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / "ncu"
    child = ["ncu", op, impl, "x".join(map(str, shape)), dtype_name, variant]
    cmd = ncu_command(ncu, base, child)
    try:
        res = _run(cmd, timeout=timeout, env=_child_env(True))
    except subprocess.TimeoutExpired:
        return {"available": False, "command": " ".join(cmd), "reason": f"ncu took longer than {timeout:.0f} s"}
    (out_dir / "ncu.log").write_text(" ".join(cmd) + "\n\n" + res.stdout + "\n" + res.stderr)
    rep = Path(f"{base}.ncu-rep")
    if res.returncode != 0 or not rep.is_file():
        tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-4:])
        return {"available": False, "command": " ".join(cmd),
                "reason": f"ncu exited with {res.returncode} (see ncu.log): {tail}"}
    imp = _run([ncu, "--import", str(rep), "--csv", "--page", "raw"], timeout=timeout)
    (out_dir / "ncu-raw.csv").write_text(imp.stdout)
    kernels = parse_ncu_csv(imp.stdout)
    if not kernels:
        return {"available": False, "command": " ".join(cmd), "report": rep.name,
                "reason": "ncu profiled no kernel in the range (see ncu.log)"}
    return summarize_ncu(kernels, ideal_bytes) | {"command": " ".join(cmd), "report": rep.name}


def summarize_ncu(kernels: list[dict[str, Any]], ideal_bytes: int | None) -> dict[str, Any]:
    total_bytes = sum((k.get("dram_bytes_read") or 0) + (k.get("dram_bytes_write") or 0) for k in kernels)
    total_time = sum(k.get("time_us") or 0 for k in kernels)
    out: dict[str, Any] = {
        "available": True, "kernels": kernels, "ideal_bytes": ideal_bytes,
        "total": {"dram_bytes": total_bytes, "time_us": total_time},
        "cache_control": "caches flushed before each kernel (ncu default)",
    }
    if ideal_bytes:
        out["dram_vs_ideal"] = total_bytes / ideal_bytes
    return out


# --- torch profiler ----------------------------------------------------------------------------------------
def summarize_trace(path: Path) -> list[dict[str, Any]]:
    """GPU kernels in a chrome trace from the torch profiler: calls and device time per kernel name."""
    data = json.loads(Path(path).read_text())
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    per: dict[str, list[float]] = {}
    for ev in events:
        if isinstance(ev, dict) and str(ev.get("cat", "")).lower() == "kernel" and "dur" in ev:
            per.setdefault(str(ev.get("name", "?")), []).append(float(ev["dur"]))
    rows = [{"name": n, "calls": len(d), "device_us_total": sum(d), "device_us_avg": sum(d) / len(d)}
            for n, d in per.items()]
    return sorted(rows, key=lambda r: (-r["device_us_total"], r["name"]))


def run_kineto(spec: Any, fn: Any, inputs: dict[str, Any], out_dir: Path, calls: int = 5) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    spec.call(fn, inputs)
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            spec.call(fn, inputs)
        torch.cuda.synchronize()
    path = out_dir / "kineto-trace.json"
    prof.export_chrome_trace(str(path))
    return {"trace": path.name, "calls": calls, "kernels": summarize_trace(path)}


# --- the profile -------------------------------------------------------------------------------------------
def _cuda_ready() -> tuple[bool, str]:
    import torch

    if not torch.cuda.is_available():
        return False, "no CUDA GPU visible to torch"
    if _interpreter_on():
        return False, "TRITON_INTERPRET is set: kernels would run in Triton's CPU interpreter; unset it"
    return True, ""


def default_out_dir(op: str, shape: Sequence[int]) -> Path:
    return Path(f"ridgeline-profile-{op}-{'x'.join(map(str, shape))}")


def profile(
    op: str,
    impl: str,
    shape: Sequence[int],
    dtype: str = "bf16",
    variant: str = "",
    *,
    out_dir: Path | str | None = None,
    ncu: bool = False,
    kineto: bool = True,
    arch: int | None = None,
    ncu_timeout: float = 600,
) -> dict[str, Any]:
    """Collect what this machine allows about `impl` of `op` at `shape`; write files to out_dir; return the dict
    that `ridgeline report` renders (attach it to a run record's `profiles`)."""
    from ridgeline.core.registry import get_spec, resolve
    from ridgeline.core.spec import Case, dtype_name, parse_dtype

    spec = get_spec(op)
    shape = tuple(int(d) for d in shape)
    tdtype = parse_dtype(dtype)
    dname = dtype_name(tdtype)
    out = Path(out_dir) if out_dir is not None else default_out_dir(op, shape)
    out.mkdir(parents=True, exist_ok=True)
    cost = spec.cost(shape, tdtype, variant)
    implementation = resolve(op, impl)
    cuda, why_not = _cuda_ready()
    prof: dict[str, Any] = {
        "schema": PROFILE_SCHEMA, "op": op, "impl": impl, "source": implementation.source, "shape": list(shape),
        "dtype": dname, "variant": variant,
        "command": _command(op, impl, shape, dname, variant, ncu, kineto, arch),
        "ideal_bytes": cost.bytes, "ideal_flops": cost.flops, "kernels": [], "collected": [], "not_collected": [],
        "notes": [], "out_dir": str(out),
    }
    skip = prof["not_collected"]
    family = op in FAMILIES and implementation.source == "ours"
    device: dict[str, Any] = {"cuda": cuda}
    if cuda:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        device |= {"name": props.name, "arch": props.major * 10 + props.minor, "sm_count": props.multi_processor_count}
    prof["device"] = device
    target_arch = arch or device.get("arch") or DEFAULT_ARCH

    if not implementation.available:
        skip.append({"what": "running the implementation", "why": implementation.reason})
    inputs = fn = None
    ran = False
    if cuda and implementation.available:
        import torch

        try:
            inputs = spec.make_inputs(Case(shape, tdtype, variant), "cuda", seed=0)
            fn = implementation.fn
            before = jit_snapshot()
            spec.call(fn, inputs)
            torch.cuda.synchronize()
            compiled = jit_new_kernels(before)
            ran = True
        except Exception as e:  # the failure is the finding; keep what can still be collected
            inputs = fn = None
            compiled = []
            skip.append({"what": "running the implementation", "why": f"{type(e).__name__}: {e}"})
        names = Counter(str(_meta(k, "name")) for k in compiled)
        for i, ck in enumerate(compiled):
            name = str(_meta(ck, "name") or "kernel")
            stem = name if names[name] == 1 else f"{name}-{i}"
            try:
                prof["kernels"].append(kernel_facts(ck, out, "jit-cache", stem))
            except Exception as e:
                skip.append({"what": f"compile facts of {name}", "why": f"{type(e).__name__}: {e}"})
        if compiled:
            prof["collected"].append(f"compile facts and SASS of {len(compiled)} Triton kernel(s) from the JIT cache")
    launches: list[TritonLaunch] = []
    if ran and family:
        try:  # the launch our wrapper makes for these very inputs: exact grid and alignments
            launches = capture_launches(op, impl, shape, tdtype, variant, inputs, device["sm_count"])
            prof["launch"] = launches[0].describe() | {"sm_count": device["sm_count"]}
        except Exception as e:
            prof["notes"].append(f"Launch not recorded: {type(e).__name__}: {e}")
    if not prof["kernels"] and launches:
        # Compiled before this call in this process, so not new in the JIT cache: compile the recorded launch.
        try:
            prof["kernels"] = compile_launches(launches, target_arch, out)
            prof["collected"].append(f"compile facts and SASS of the recorded launch, compiled for sm_{target_arch}")
            prof["notes"].append("The kernel was already compiled in this process before the profiled call; the "
                                 "launch it made was recorded and compiled again with the same specialization.")
        except Exception as e:
            skip.append({"what": "compile facts",
                         "why": f"compiling the recorded launch failed: {type(e).__name__}: {e}"})
    if not prof["kernels"] and family and implementation.available:
        try:
            aot = aot_kernel_facts(op, impl, shape, dname, variant, target_arch, out, device.get("sm_count"))
            prof["kernels"] = aot["kernels"]
            prof.setdefault("launch", aot["launch"])
            prof["collected"].append(f"compile facts and SASS from ahead-of-time compilation for sm_{target_arch}")
            if cuda:
                prof["notes"].append(f"The call did not run on the GPU, so the kernel was compiled ahead of time for "
                                     f"sm_{target_arch} with the launch ridgeline makes for meta-device inputs.")
            else:
                prof["notes"].append(
                    f"No GPU here ({why_not}): the launch ridgeline makes was recorded on meta-device inputs and "
                    f"compiled ahead of time for sm_{target_arch}, tensors taken as 16-byte aligned (as torch "
                    "allocates them). Registers, spills, PTX and SASS are what a GPU run compiles; ncu and the "
                    "trace need a GPU.")
        except Exception as e:  # a compile failure is itself a finding: report it, keep the rest
            skip.append({"what": "compile facts", "why": f"ahead-of-time compilation failed: {type(e).__name__}: {e}"})
    elif not prof["kernels"]:
        why = ("no triton.jit kernel was compiled by one call (not a Triton implementation, or compiled outside "
               "triton.jit, as torch.compile's Inductor does)") if cuda else (
               f"{impl} is not a Triton kernel ridgeline can compile ahead of time, and {why_not}")
        skip.append({"what": "compile facts and SASS", "why": why})

    if ncu:
        if not cuda:
            skip.append({"what": "Nsight Compute", "why": f"needs a CUDA GPU ({why_not})"})
        elif not implementation.available:
            skip.append({"what": "Nsight Compute", "why": "implementation unavailable"})
        else:
            prof["ncu"] = run_ncu(op, impl, shape, dname, variant, out, cost.bytes, ncu_timeout)
            if prof["ncu"].get("available"):
                prof["collected"].append("Nsight Compute metrics of one call")
            else:
                skip.append({"what": "Nsight Compute", "why": prof["ncu"].get("reason", "failed")})
    else:
        skip.append({"what": "Nsight Compute", "why": "not requested (pass --ncu)"})

    if not kineto:
        skip.append({"what": "torch profiler trace", "why": "not requested (--no-kineto)"})
    elif not cuda:
        skip.append({"what": "torch profiler trace", "why": f"needs a CUDA GPU ({why_not})"})
    elif fn is not None and inputs is not None:
        try:
            prof["kineto"] = run_kineto(spec, fn, inputs, out)
            prof["collected"].append("torch profiler (Kineto) trace")
        except Exception as e:
            skip.append({"what": "torch profiler trace", "why": f"{type(e).__name__}: {e}"})
    if not family:
        prof["notes"].append(f"{impl} is a peer: compile facts come only from Triton kernels it launches through "
                             "triton.jit on a GPU; Nsight Compute and the trace apply to any implementation.")
    (out / "profile.json").write_text(json.dumps(prof, indent=1) + "\n")
    return prof


def _command(op: str, impl: str, shape: Sequence[int], dtype: str, variant: str, ncu: bool, kineto: bool,
             arch: int | None) -> str:
    parts = ["ridgeline", "profile", op, "--impl", impl, "--shape", "x".join(map(str, shape)), "--dtype", dtype]
    if variant:
        parts += ["--variant", variant]
    if ncu:
        parts.append("--ncu")
    if not kineto:
        parts.append("--no-kineto")
    if arch:
        parts += ["--arch", str(arch)]
    return " ".join(parts)


def attach_profile(prof: dict[str, Any], path: Path | str) -> str:
    """Attach to a run record at `path` (replacing a profile of the same case) or write the profile there."""
    from ridgeline.records.record import SCHEMA, RunRecord

    p = Path(path)
    data = None
    if p.is_file():
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError:
            data = None
    if isinstance(data, dict) and data.get("schema") == SCHEMA:
        rec = RunRecord.from_dict(data, path=p)

        def key(d: dict[str, Any]) -> tuple:
            return (d.get("op"), d.get("impl"), tuple(d.get("shape") or ()), d.get("dtype"), d.get("variant") or "")

        rec.profiles = [x for x in rec.profiles if key(x) != key(prof)] + [prof]
        rec.save()
        return "attached"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(prof, indent=1) + "\n")
    return "written"


# --- child processes ---------------------------------------------------------------------------------------
def _child_main(argv: list[str]) -> int:
    """`aot OP IMPL SHAPE DTYPE VARIANT ARCH OUT SMS`: compile and print facts;
    `ncu OP IMPL SHAPE DTYPE VARIANT`: warm up, then one call inside cudaProfilerStart/Stop for ncu."""
    from ridgeline.core.spec import parse_shape

    mode, op, impl, shape_text, dtype_text, variant = argv[:6]
    shape = parse_shape(shape_text)
    if mode == "aot":
        arch, out_dir, sms = int(argv[6]), Path(argv[7]), int(argv[8]) or None
        result = aot_kernel_facts(op, impl, shape, dtype_text, variant, arch, out_dir, sms)
        print(RESULT_MARK + json.dumps(result), flush=True)
        return 0
    if mode == "ncu":
        import torch

        from ridgeline.core.registry import get_spec, resolve
        from ridgeline.core.spec import Case, parse_dtype

        spec, implementation = get_spec(op), resolve(op, impl)
        if not implementation.available:
            print(f"implementation unavailable: {implementation.reason}", file=sys.stderr)
            return 2
        inputs = spec.make_inputs(Case(shape, parse_dtype(dtype_text), variant), "cuda", seed=0)
        for _ in range(3):  # compile and autotune outside the profiled range
            spec.call(implementation.fn, inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        spec.call(implementation.fn, inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        return 0
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2
