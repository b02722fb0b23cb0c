"""Ahead-of-time compilation for a CUDA target without a GPU: the specialization the Triton runtime would derive
from a recorded launch, ``triton.compile`` with a ``GPUTarget`` (Triton's bundled ptxas builds the cubin), and the
facts of the result. Under Triton's CPU interpreter (which swaps triton.language for Python) the compile runs in a
clean child process (ridgeline.profile.child), which records the launch again there."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ridgeline.profile.facts import kernel_facts, meta
from ridgeline.profile.launches import TensorArg, TritonLaunch, as_jit, capture_call
from ridgeline.profile.occupancy import DEFAULT_ARCH, DEFAULT_SM_COUNT


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



def _ast_source(launch: TritonLaunch, arch: int) -> tuple[Any, Any, dict[str, Any]]:
    """(Triton's ASTSource of the launch's specialization, the CUDA target, the compile options)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = as_jit(launch.kernel)
    sig, consts, attrs = specialization(kernel, launch.args)
    options: dict[str, Any] = {**launch.options, "num_warps": launch.num_warps}
    if launch.num_stages is not None:
        options["num_stages"] = launch.num_stages
    return ASTSource(kernel, sig, consts, attrs), GPUTarget("cuda", arch, 32), options


def aot_compile(launch: TritonLaunch, arch: int = DEFAULT_ARCH) -> Any:
    """triton.compile for a CUDA target; no GPU needed (Triton's bundled ptxas builds the cubin)."""
    import triton

    src, target, options = _ast_source(launch, arch)
    return triton.compile(src, target=target, options=options)


def aot_ttgir(launch: TritonLaunch, arch: int = DEFAULT_ARCH) -> str:
    """The TTGIR of a launch for a CUDA target: Triton's pipeline run up to its GPU-IR stage only (no LLVM, PTX or
    ptxas: what a layout question needs, at a fraction of a full compile). Through `triton.compile` where this
    Triton's internals differ from 3.6-3.7's (make_ir, add_stages)."""
    try:
        from triton._C.libtriton import ir
        from triton.compiler.compiler import make_backend

        src, target, opts = _ast_source(launch, arch)
        backend = make_backend(target)
        options = backend.parse_options(dict(opts, **src.parse_options()))
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(target, options, backend.get_codegen_implementation(options),
                             backend.get_module_map(), context)
        stages: dict[str, Any] = {}
        backend.add_stages(stages, options, src.language)
        metadata: dict[str, Any] = {"hash": "ttgir-only", "target": target, **options.__dict__}
        for ext in ("ttir", "ttgir"):
            module = stages[ext](module, metadata)
        return str(module)
    except (ImportError, AttributeError, TypeError, KeyError):
        return aot_compile(launch, arch).asm["ttgir"]


def _compile_key(launch: TritonLaunch) -> str:
    """What decides the compiled kernel: the kernel, its specialization and the compile options."""
    kernel = as_jit(launch.kernel)
    sig, consts, attrs = specialization(kernel, launch.args)
    return repr((id(kernel), sorted(sig.items()), sorted(consts.items(), key=str), sorted(attrs.items()),
                 sorted(launch.options.items(), key=str), launch.num_warps, launch.num_stages))


def compile_launches(launches: list[TritonLaunch], arch: int, out_dir: Path) -> list[dict[str, Any]]:
    """Compile recorded launches for `arch` (each distinct specialization once) and collect each kernel's facts;
    `launches` in a kernel's facts counts the launches that share it."""
    groups: dict[str, list[TritonLaunch]] = {}
    for launch in launches:
        groups.setdefault(_compile_key(launch), []).append(launch)
    names = [g[0].name for g in groups.values()]
    kernels = []
    for i, group in enumerate(groups.values()):
        launch = group[0]
        ck = aot_compile(launch, arch)
        name = str(meta(ck, "name") or launch.name)
        facts = kernel_facts(ck, out_dir, "aot", name if names.count(launch.name) == 1 else f"{name}-{i}", arch)
        _, consts, _ = specialization(as_jit(launch.kernel), launch.args)
        facts["constexprs"] = {k: v for k, v in consts.items() if isinstance(v, (int, float, bool, str))}
        facts["launches"] = len(group)
        kernels.append(facts)
    return kernels


def compile_check(launches: list[TritonLaunch], arch: int = DEFAULT_ARCH) -> list[dict[str, Any]]:
    """Compile each distinct specialization for `arch` and say, per launch, whether the compiler took it: the
    cubin's size, or the error's first lines. (What `tests/ops/test_compile_sm90.py` runs for every op.)"""
    done: dict[str, dict[str, Any]] = {}
    out = []
    for launch in launches:
        key = _compile_key(launch)
        if key not in done:
            try:
                ck = aot_compile(launch, arch)
                done[key] = {"kernel": launch.name, "cubin_bytes": len(ck.asm.get("cubin", b""))}
            except Exception as e:  # the compiler's message is the finding
                lines = [ln for ln in str(e).splitlines() if ln.strip()]
                keep = lines if len(lines) <= 4 else [*lines[:2], "...", *lines[-2:]]  # (the cause is last)
                done[key] = {"kernel": launch.name, "error": f"{type(e).__name__}: " + " | ".join(keep)}
        out.append(done[key])
    return out


def check_in_child(launches: list[TritonLaunch], arch: int, out_dir: Path,
                   triton_path: str | None = None) -> list[dict[str, Any]] | None:
    """`compile_check` in a clean child process (no interpreter); None where a launch cannot travel as JSON.
    `triton_path`: a folder holding another Triton (e.g. the oldest supported) that the child compiles with."""
    from ridgeline.profile.child import in_child

    data = [launch_to_json(la) for la in launches]
    if any(d is None for d in data):
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "launches.json"
    path.write_text(json.dumps(data) + "\n")
    return in_child(["check", str(path), str(arch)], timeout=1800, first_path=triton_path)["results"]


def interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def aot_kernel_facts(op: str, impl: str, shape: tuple[int, ...], dtype_name: str, variant: str, arch: int,
                     out_dir: Path, sm_count: int | None = None) -> dict[str, Any]:
    """Record the launches an implementation makes (without running it), compile each for `arch` ahead of time,
    collect the facts. `op` and `impl` are names or FILE.py:NAME references (with absolute paths when this goes
    to a child process). Where Triton's interpreter is on this runs in a clean child process."""
    if interpreter_on():
        from ridgeline.profile.child import in_child

        return in_child(["aot", op, impl, "x".join(map(str, shape)), dtype_name, variant, str(arch), str(out_dir),
                         str(sm_count or 0)])
    from ridgeline.core.spec import parse_dtype

    sms = sm_count or DEFAULT_SM_COUNT.get(arch, 132)
    call = capture_call(op, impl, shape, parse_dtype(dtype_name), variant, sm_count=sms)
    out: dict[str, Any] = {"kernels": compile_launches(call.launches, arch, out_dir),
                           "launch": call.launches[0].describe() | {"sm_count": sms}, "inputs": call.inputs,
                           "notes": call.notes}
    if len(call.launches) > 1:
        out["launches"] = [la.describe() | {"kernel": la.name} for la in call.launches]
    return out


# --- recorded launches to a child process and back ----------------------------------------------------------
def launch_to_json(launch: TritonLaunch) -> dict[str, Any] | None:
    """A recorded launch as JSON a clean child process can compile (the kernel by module, file and name), or None
    where it cannot travel (a kernel defined inside a function, a constexpr that is not a plain value)."""
    fn = getattr(launch.kernel, "fn", None)
    qualname, module = getattr(fn, "__qualname__", ""), getattr(fn, "__module__", "")
    if not qualname or not module or "<locals>" in qualname:
        return None

    def plain(v: Any) -> bool:
        return v is None or isinstance(v, (bool, int, float, str))

    args: dict[str, Any] = {}
    for k, v in launch.args.items():
        if isinstance(v, TensorArg):
            args[k] = {"tensor": str(v.dtype).removeprefix("torch."), "aligned": v.aligned}
        elif plain(v):
            args[k] = v
        else:
            return None
    if not all(plain(v) for v in launch.options.values()):
        return None
    return {"module": module, "file": getattr(sys.modules.get(module), "__file__", None), "qualname": qualname,
            "args": args, "num_warps": launch.num_warps, "num_stages": launch.num_stages,
            "options": launch.options, "grid": launch.grid, "grid_dims": list(launch.grid_dims),
            "config": launch.config, "note": launch.note}


def launch_from_json(d: dict[str, Any]) -> TritonLaunch:
    """The launch `launch_to_json` wrote, its kernel imported here (a user's file through ridgeline's loader)."""
    import importlib

    import torch

    try:
        obj: Any = importlib.import_module(d["module"])
    except ImportError:
        if not d.get("file"):
            raise
        from ridgeline.core.userfile import import_file

        obj = import_file(Path(d["file"]), "kernel")
    for part in d["qualname"].split("."):
        obj = getattr(obj, part)
    from triton.runtime.autotuner import Autotuner, Heuristics

    while isinstance(obj, (Autotuner, Heuristics)):  # around the kernel itself
        obj = obj.fn
    args = {k: TensorArg(getattr(torch, v["tensor"]), bool(v["aligned"])) if isinstance(v, dict) else v
            for k, v in d["args"].items()}
    return TritonLaunch(obj, args, int(d["num_warps"]), int(d["grid"]), d["config"], d["num_stages"],
                        dict(d["options"]), tuple(d["grid_dims"]), note=d.get("note", ""))


def compile_in_child(launches: list[TritonLaunch], arch: int, out_dir: Path) -> list[dict[str, Any]] | None:
    """`compile_launches` in a clean child process (no interpreter), the launches going there as JSON
    (out_dir/launches.json); None where one of them cannot travel."""
    from ridgeline.profile.child import in_child

    data = [launch_to_json(la) for la in launches]
    if any(d is None for d in data):
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "launches.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return in_child(["compile", str(path), str(arch), str(out_dir)])["kernels"]
