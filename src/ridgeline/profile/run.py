"""`profile(...)`: collect what this machine allows about one implementation at one shape, and attach it to a run.

What is collected where (any implementation: ours, a peer's, a user's FILE.py:fn; any op, a user's FILE.py:SPEC):
- On a CUDA GPU: the call runs once with its Triton launches captured (ridgeline.profile.launches); each launch's
  compiled kernel (and any other kernel the call compiled, from Triton's JIT caches) gives registers, spills,
  shared memory, occupancy, PTX and SASS.
- Without a GPU: the launches are recorded without running (on the op hook's meta-device inputs, else CPU
  inputs) and compiled ahead of time for sm_90 (or ``arch``) with the same specialization the runtime would
  derive; Triton bundles ptxas, cuobjdump and nvdisasm, so none of it needs a GPU.
- Nsight Compute (``ncu`` on the PATH and a GPU): DRAM bytes, time, throughput and achieved occupancy of one
  call, in a child process, against the spec's ideal bytes. Always ``--clock-control none``.
- torch profiler (Kineto) chrome trace of a few calls, on a GPU.
Everything that is not collected is listed with the reason, in the returned dict and in the report.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ridgeline.profile.aot import aot_kernel_facts, compile_in_child, compile_launches, interpreter_on
from ridgeline.profile.facts import kernel_facts, meta
from ridgeline.profile.jit_cache import jit_new_kernels, jit_snapshot
from ridgeline.profile.kineto import run_kineto
from ridgeline.profile.launches import TritonLaunch, capture_call
from ridgeline.profile.ncu import run_ncu
from ridgeline.profile.occupancy import DEFAULT_ARCH, DEFAULT_SM_COUNT

PROFILE_SCHEMA = "ridgeline.profile/1"


def _cuda_ready() -> tuple[bool, str]:
    import torch

    if not torch.cuda.is_available():
        return False, "no CUDA GPU visible to torch"
    if interpreter_on():
        return False, "TRITON_INTERPRET is set: kernels would run in Triton's CPU interpreter; unset it"
    return True, ""


def default_out_dir(op: str, shape: Sequence[int]) -> Path:
    """./ridgeline-profile-OP-SHAPE (a FILE.py:NAME op by its NAME)."""
    name = op.rsplit(":", 1)[-1] if ".py:" in op else op
    return Path(f"ridgeline-profile-{re.sub(r'[^0-9A-Za-z_.-]', '_', name)}-{'x'.join(map(str, shape))}")


def _abs_ref(ref: str) -> str:
    """A FILE.py:NAME with the file's absolute path (a child process may run elsewhere); a name as it is."""
    from ridgeline.core.userfile import is_file_ref

    if not is_file_ref(ref):
        return ref
    path, name = ref.rsplit(":", 1)
    return f"{Path(path).expanduser().resolve()}:{name}"


def _launch_info(launches: list[TritonLaunch], sm_count: int) -> dict[str, Any]:
    out: dict[str, Any] = {"launch": launches[0].describe() | {"sm_count": sm_count}}
    if len(launches) > 1:
        out["launches"] = [la.describe() | {"kernel": la.name} for la in launches]
    return out


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
    ncu_source: bool = False,
) -> dict[str, Any]:
    """Collect what this machine allows about `impl` of `op` at `shape`; write files to out_dir; return the dict
    that `ridgeline report` renders (attach it to a run record's `profiles`). `op` is an op name or a user's
    FILE.py:SPEC, `impl` a registered name or FILE.py:fn; `ncu_source` adds Nsight Compute's stall samples by
    instruction and source line to `ncu` (implies it). Bad input raises ValueError (one line)."""
    from ridgeline.core.registry import get_spec, origin, resolve
    from ridgeline.core.spec import Case, dtype_name, parse_dtype

    ncu = ncu or ncu_source
    spec = get_spec(op)
    op_ref = origin(spec.name) or spec.name  # what a child process loads the op by
    impl_ref = _abs_ref(impl)
    shape = tuple(int(d) for d in shape)
    spec.check_shape(shape)
    tdtype = parse_dtype(dtype)
    spec.check_dtypes([tdtype])
    if variant and variant not in spec.variants and not all(v in spec.variants for v in variant.split("+")):
        raise ValueError(f"variant: {spec.name} knows {', '.join(repr(v) for v in spec.variants)}; got {variant!r}")
    dname = dtype_name(tdtype)
    implementation = resolve(spec, impl_ref)
    out = Path(out_dir) if out_dir is not None else default_out_dir(op, shape)
    out.mkdir(parents=True, exist_ok=True)
    cost = spec.cost(shape, tdtype, variant)
    cuda, why_not = _cuda_ready()
    prof: dict[str, Any] = {
        "schema": PROFILE_SCHEMA, "op": spec.name, "impl": impl, "source": implementation.source,
        "shape": list(shape), "dtype": dname, "variant": variant,
        "command": _command(op, impl, shape, dname, variant, ncu, kineto, arch, ncu_source),
        "ideal_bytes": cost.bytes, "ideal_flops": cost.flops, "kernels": [], "collected": [], "not_collected": [],
        "notes": [], "out_dir": str(out),
    }
    skip, notes = prof["not_collected"], prof["notes"]
    device: dict[str, Any] = {"cuda": cuda}
    if cuda:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        device |= {"name": props.name, "arch": props.major * 10 + props.minor, "sm_count": props.multi_processor_count}
    prof["device"] = device
    target_arch = arch or device.get("arch") or DEFAULT_ARCH
    sms = device.get("sm_count") or DEFAULT_SM_COUNT.get(target_arch, 132)

    if not implementation.available:
        skip.append({"what": "running the implementation", "why": implementation.reason})
    inputs = fn = None
    ran = False
    no_facts = ""  # why there are no compile facts (no Triton launch, or the call failed)
    if cuda and implementation.available:
        inputs = _profile_gpu_call(prof, spec, impl_ref, Case(shape, tdtype, variant), out, sms, target_arch)
        ran = inputs is not None
        fn = implementation.fn if ran else None
        if ran and not prof["kernels"] and "launch" not in prof:
            no_facts = "the call launched no triton.jit kernel (on the GPU, nothing new in the JIT caches either)"
    if not prof["kernels"] and not no_facts and not ran and implementation.available:
        try:  # recorded without running, in this process: which kernels, and are there any
            call = capture_call(spec, impl_ref, shape, tdtype, variant, sm_count=sms)
            notes += call.notes
            prof.update({k: v for k, v in _launch_info(call.launches, sms).items() if k not in prof})
        except ValueError as e:
            call = None
            no_facts = str(e).removeprefix("profile: ")
        if call is not None:
            _aot(prof, call, op_ref, impl_ref, shape, dname, variant, target_arch, out, sms, cuda, why_not)
    if not implementation.available:
        no_facts = f"implementation unavailable: {implementation.reason}"
    if no_facts:
        skip.append({"what": "compile facts and SASS", "why": no_facts})
    elif not prof["kernels"] and not any(str(x["what"]).startswith("compile facts") for x in skip):
        skip.append({"what": "compile facts and SASS", "why": "no compiled kernel came back (see the notes)"})
    if "launched no triton.jit kernel" in no_facts:
        notes.append(f"{impl} ({implementation.source}) launches no Triton kernel through triton.jit that the "
                     "profiler could see: compile facts and SASS cover Triton kernels; Nsight Compute and the trace "
                     "apply to any implementation.")

    if ncu:
        if not cuda:
            skip.append({"what": "Nsight Compute", "why": f"needs a CUDA GPU ({why_not})"})
        elif not implementation.available:
            skip.append({"what": "Nsight Compute", "why": "implementation unavailable"})
        else:
            prof["ncu"] = run_ncu(op_ref, impl_ref, shape, dname, variant, out, cost.bytes, ncu_timeout, ncu_source)
            if prof["ncu"].get("available"):
                prof["collected"].append("Nsight Compute metrics of one call")
                if prof["ncu"].get("source"):
                    prof["collected"].append("Nsight Compute's warp samples by instruction and source line")
                elif ncu_source:
                    skip.append({"what": "Nsight Compute source counters", "why": prof["ncu"].get("source_note")})
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
    else:
        skip.append({"what": "torch profiler trace", "why": "the call did not run on the GPU (see above)"})
    (out / "profile.json").write_text(json.dumps(prof, indent=1, default=str) + "\n")
    return prof


def _profile_gpu_call(prof: dict[str, Any], spec: Any, impl: str, case: Any, out: Path, sms: int,
                      arch: int) -> dict[str, Any] | None:
    """Run the call once on the GPU with its launches captured; facts of the kernels they ran (and of any other
    kernel the call compiled). Returns the CUDA inputs it ran on, None where it failed."""
    import torch

    skip = prof["not_collected"]
    try:  # (the JIT-cache scan is an extra: its failure must not stop the call running)
        before: set[int] | None = jit_snapshot()
    except Exception as e:
        before = None
        skip.append({"what": "kernels compiled past the captured launches (JIT caches)",
                     "why": f"scanning Triton's JIT caches failed: {type(e).__name__}: {e}"})
    try:
        inputs = spec.make_inputs(case, "cuda", seed=0)
        call = capture_call(spec, impl, case.shape, case.dtype, case.variant, inputs=inputs, sm_count=sms, run=True,
                            require_launch=False)
        torch.cuda.synchronize()
    except Exception as e:  # the failure is the finding; keep what can still be collected
        skip.append({"what": "running the implementation", "why": f"{type(e).__name__}: {e}"})
        return None
    prof["notes"] += call.notes
    compiled: dict[int, list[Any]] = {}  # id -> [kernel, launches]
    for la in call.launches:
        if la.compiled is not None:
            compiled.setdefault(id(la.compiled), [la.compiled, 0])[1] += 1
    try:
        new = jit_new_kernels(before) if before is not None else []
    except Exception as e:
        new = []
        skip.append({"what": "kernels compiled past the captured launches (JIT caches)",
                     "why": f"scanning Triton's JIT caches failed: {type(e).__name__}: {e}"})
    for ck in new:
        compiled.setdefault(id(ck), [ck, 0])
    names = Counter(str(meta(ck, "name")) for ck, _ in compiled.values())
    for i, (ck, n) in enumerate(compiled.values()):
        name = str(meta(ck, "name") or "kernel")
        try:
            facts = kernel_facts(ck, out, "jit-cache", name if names[name] == 1 else f"{name}-{i}")
            facts["launches"] = n
            prof["kernels"].append(facts)
        except Exception as e:
            skip.append({"what": f"compile facts of {name}", "why": f"{type(e).__name__}: {e}"})
    if compiled:
        prof["collected"].append(f"compile facts and SASS of {len(compiled)} Triton kernel(s) the call ran")
    if call.launches:
        prof.update(_launch_info(call.launches, sms))
    if not prof["kernels"] and call.launches:  # launched, but no compiled kernel came back with them
        try:
            prof["kernels"] = compile_launches(call.launches, arch, out)
            prof["collected"].append(f"compile facts and SASS of the recorded launches, compiled for sm_{arch}")
        except Exception as e:
            skip.append({"what": "compile facts", "why": f"compiling the recorded launch failed: "
                                                         f"{type(e).__name__}: {e}"})
    return inputs


def _aot(prof: dict[str, Any], call: Any, op_ref: str, impl_ref: str, shape: tuple[int, ...], dname: str,
         variant: str, arch: int, out: Path, sms: int, cuda: bool, why_not: str) -> None:
    """Compile the recorded launches ahead of time (in a clean child under the interpreter)."""
    try:
        if interpreter_on():  # the recorded launches go to a clean child; else it records them again there
            kernels = compile_in_child(call.launches, arch, out)
            aot = {"kernels": kernels} if kernels is not None else \
                aot_kernel_facts(op_ref, impl_ref, shape, dname, variant, arch, out, sms)
        else:
            aot = {"kernels": compile_launches(call.launches, arch, out)}
    except Exception as e:  # a compile failure is itself a finding: report it, keep the rest
        prof["not_collected"].append({"what": "compile facts",
                                      "why": f"ahead-of-time compilation failed: {type(e).__name__}: {e}"})
        return
    prof["kernels"] = aot["kernels"]
    prof["collected"].append(f"compile facts and SASS from ahead-of-time compilation for sm_{arch}")
    on = {"meta": "meta-device inputs", "cpu": "CPU inputs"}.get(call.inputs, "the given inputs")
    if cuda:
        prof["notes"].append(f"The call did not run on the GPU, so its launches were recorded on {on} and compiled "
                             f"ahead of time for sm_{arch}.")
    else:
        aligned = "taken as 16-byte aligned (as torch allocates them)" if call.inputs == "meta" else \
            "aligned as the CPU tensors were"
        prof["notes"].append(
            f"No GPU here ({why_not}): the launches the call makes were recorded on {on} without running and "
            f"compiled ahead of time for sm_{arch}, tensors {aligned}. Registers, spills, PTX and SASS are what a "
            "GPU run compiles; ncu and the trace need a GPU.")


def _command(op: str, impl: str, shape: Sequence[int], dtype: str, variant: str, ncu: bool, kineto: bool,
             arch: int | None, source: bool = False) -> str:
    parts = ["ridgeline", "profile", op, "--impl", impl, "--shape", "x".join(map(str, shape)), "--dtype", dtype]
    if variant:
        parts += ["--variant", variant]
    if ncu:
        parts.append("--ncu")
    if source:
        parts.append("--source")
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
