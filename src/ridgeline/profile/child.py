"""Child processes of the profiler: a clean Python for ahead-of-time compilation (Triton's CPU interpreter, once
imported, swaps triton.language for Python) and the one profiled call Nsight Compute watches.

`python -c CHILD_CODE MODE OP IMPL SHAPE DTYPE VARIANT [...]`; OP and IMPL are names or FILE.py:NAME references
with absolute paths, so a user's op and kernel import in the child as they did in the parent.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

CHILD_CODE = "import sys; from ridgeline.profile.child import main; sys.exit(main(sys.argv[1:]))"
RESULT_MARK = "RIDGELINE-PROFILE-RESULT "


def child_env(clean_interpreter: bool, first_path: str | None = None) -> dict[str, str]:
    """The child's environment: this ridgeline first on its path (after `first_path`, a folder holding another
    Triton to compile with, where given), the interpreter off where asked."""
    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])  # .../src: the child imports this same ridgeline
    front = os.pathsep.join(p for p in (first_path, pkg_root) if p)
    env["PYTHONPATH"] = front + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if clean_interpreter:
        env.pop("TRITON_INTERPRET", None)
    return env


def in_child(argv: list[str], timeout: float = 300, first_path: str | None = None) -> dict[str, Any]:
    """Run `main(argv)` in a child process without the interpreter; its printed result, or RuntimeError.
    `first_path`: a folder put first on the child's path (another Triton to compile with)."""
    from ridgeline.profile.sass import run_tool

    res = run_tool([sys.executable, "-c", CHILD_CODE, *argv], timeout=timeout, env=child_env(True, first_path))
    for line in res.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    tail = (res.stderr or res.stdout).strip().splitlines()[-15:]
    raise RuntimeError(f"profile child ({argv[0]}) failed with exit code {res.returncode}:\n" + "\n".join(tail))


def main(argv: list[str]) -> int:
    """`aot OP IMPL SHAPE DTYPE VARIANT ARCH OUT SMS`: record the launches, compile them and print the facts;
    `ncu OP IMPL SHAPE DTYPE VARIANT`: warm up, then one call inside cudaProfilerStart/Stop for ncu;
    `compile LAUNCHES.json ARCH OUT`: compile launches recorded in the parent and print the facts;
    `check LAUNCHES.json ARCH`: compile each distinct launch only, and print per launch the cubin size or the error
    (every launch is tried: one failure does not hide the next)."""
    from ridgeline.core.spec import parse_shape

    if argv[0] == "compile":
        from ridgeline.profile.aot import compile_launches, launch_from_json

        launches = [launch_from_json(d) for d in json.loads(Path(argv[1]).read_text())]
        kernels = compile_launches(launches, int(argv[2]), Path(argv[3]))
        print(RESULT_MARK + json.dumps({"kernels": kernels}, default=str), flush=True)
        return 0
    if argv[0] == "check":
        import triton

        from ridgeline.profile.aot import compile_check, launch_from_json

        launches = [launch_from_json(d) for d in json.loads(Path(argv[1]).read_text())]
        results = compile_check(launches, int(argv[2]))
        for r in results:  # (which Triton compiled it: the child's path may put another first)
            r["triton"] = triton.__version__
        print(RESULT_MARK + json.dumps({"results": results}), flush=True)
        return 0
    mode, op, impl, shape_text, dtype_text, variant = argv[:6]
    shape = parse_shape(shape_text)
    if mode == "aot":
        from ridgeline.profile.aot import aot_kernel_facts

        arch, out_dir, sms = int(argv[6]), Path(argv[7]), int(argv[8]) or None
        try:
            result = aot_kernel_facts(op, impl, shape, dtype_text, variant, arch, out_dir, sms)
        except ValueError as e:  # one line for the parent to report
            print(f"ValueError: {e}", file=sys.stderr)
            return 2
        print(RESULT_MARK + json.dumps(result, default=str), flush=True)
        return 0
    if mode == "ncu":
        import torch

        from ridgeline.core.registry import get_spec, resolve
        from ridgeline.core.spec import Case, parse_dtype

        spec = get_spec(op)
        implementation = resolve(spec, impl)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
