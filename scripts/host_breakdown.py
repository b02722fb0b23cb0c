"""Where the host time of one eager `ridgeline.rms_norm` call goes, step by step, beside the floors of this host.

Usage (on the GPU): python scripts/host_breakdown.py OUT.json
Each step runs in a loop of CALLS calls (no synchronization inside, a sync after each loop), REPEATS times; the
median per-call time is reported. The GPU work is tiny (1 x 4096), so the queue never fills and host time is
what is measured.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton

from ridgeline.lib import fastlaunch as _fastlaunch
from ridgeline.ops.rmsnorm import launch as rmsnorm

CALLS = 2000
REPEATS = 7


@triton.jit
def _empty_kernel(X):
    pass


def per_call_us(fn: Callable[[], object]) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / CALLS * 1e6)
    return statistics.median(samples)


def _ctypes_launcher(compiled: object, x: torch.Tensor, stream: int) -> Callable[[], None]:
    """cuLaunchKernel through ctypes with a prebuilt parameter block: the floor of any Python-side launch."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    fn = cuda.cuLaunchKernel
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                                             ctypes.c_void_p]
    fn.restype = ctypes.c_int
    storage = (ctypes.c_uint64 * 8)()
    params = (ctypes.c_void_p * 8)(*[ctypes.addressof(storage) + 8 * i for i in range(8)])  # spare slots: safe
    threads = 32 * compiled.metadata.num_warps
    function = compiled.function

    def launch() -> None:
        storage[0] = x.data_ptr()
        rc = fn(function, 1, 1, 1, threads, 1, 1, 0, stream, params, None)
        if rc != 0:
            raise RuntimeError(f"cuLaunchKernel returned {rc}")

    return launch


def main() -> None:
    dev = torch.device("cuda")
    x = torch.randn(1, 4096, device=dev, dtype=torch.bfloat16)
    w = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    n = 4096
    cfg = rmsnorm.launch_config(n, x.dtype)
    rmsnorm.rms_norm(x, w)  # compile, fill the fast-launch cache
    launcher = rmsnorm._LAUNCHER
    kernel = next(iter(launcher._compiled.values()))
    xa = rmsnorm.stride_alignment(n)
    # (every runtime parameter, as `_launch` passes them: no FP8 epilogue, so S is a placeholder tensor)
    args = (x, n // xa, x, n // xa, y, n // xa, w, y, n // xa, 1, n // xa, 1e-6, 0.0, x, 1.0, 1.0)
    constexprs = rmsnorm.kernel_constexprs(cfg, (xa,) * 5, False, True, cfg.loop_free, n=n)
    cvals = tuple(constexprs.values())
    stream = _fastlaunch._raw_stream(0)
    empty = _empty_kernel[(1,)](x)
    r = torch.randn_like(x)
    run = kernel.run

    def c_launcher_direct() -> None:  # Triton's C launch function, without its Python wrapper (3.7 layout)
        run.launch(1, 1, 1, stream, kernel.function, run.launch_cooperative_grid, run.launch_pdl,
                   kernel.packed_metadata, None, None, None, None, None, run.arg_annotations, run.kernel_signature,
                   (*args, *cvals))

    raw_launch = _ctypes_launcher(empty, x, stream)

    steps: list[tuple[str, Callable[[], object]]] = [
        ("python call of a no-op function", lambda: None),
        ("torch.compiler.is_compiling()", torch.compiler.is_compiling),
        ("x.data_ptr()", x.data_ptr),
        ("x.is_contiguous()", x.is_contiguous),
        ("current raw stream", lambda: _fastlaunch._raw_stream(0)),
        ("torch.empty(x.shape, dtype, device)", lambda: torch.empty(x.shape, dtype=x.dtype, device=x.device)),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("validate x + weight", lambda: (rmsnorm._validate_x("x", x), rmsnorm._validate_weight(w, x, 0.0))),
        ("row strides (input + output)", lambda: (rmsnorm._input_rows("x", x), rmsnorm._output_rows("out", y))),
        ("launch_config + grid", lambda: rmsnorm._grid(1, rmsnorm.launch_config(n, x.dtype), dev)),
        ("fast-launch key", lambda: (0, *cvals, cfg.num_warps, *map(_fastlaunch._arg_key, args))),
        ("compiled launcher only (kernel.run)", lambda: kernel.run(1, 1, 1, stream, kernel.function,
                                                                   kernel.packed_metadata, None, None, None,
                                                                   *args, *cvals)),
        ("Triton C launch function only", c_launcher_direct),
        ("ctypes cuLaunchKernel, empty kernel", raw_launch),
        ("CachedLauncher.launch (generic key)", lambda: launcher.launch(1, args, constexprs, cfg.num_warps)),
        ("CachedLauncher.run (cached kernel)", lambda: launcher.run(kernel, 1, args, cvals, 0)),
        ("empty triton kernel, kernel[grid](x)", lambda: _empty_kernel[(1,)](x)),
        ("ridgeline.rms_norm(x, w, out=y)", lambda: rmsnorm.rms_norm(x, w, out=y)),
        ("ridgeline.rms_norm(x, w)", lambda: rmsnorm.rms_norm(x, w)),
        ("ridgeline.fused_add_rms_norm(x, r, w)", lambda: rmsnorm.fused_add_rms_norm(x, r, w)),
        ("F.rms_norm(x, (n,), w)", lambda: F.rms_norm(x, (n,), w, 1e-6)),
        ("torch.add(x, x) (one ATen kernel)", lambda: torch.add(x, x)),
    ]
    results = []
    for name, fn in steps:
        try:
            us = per_call_us(fn)
            results.append({"step": name, "host_us": us})
            print(f"{name:42} {us:8.2f} us")
        except Exception as e:  # record and go on
            results.append({"step": name, "error": f"{type(e).__name__}: {e}"})
            print(f"{name:42} error {type(e).__name__}: {e}")
    with open(sys.argv[1], "w") as f:
        json.dump({"calls": CALLS, "repeats": REPEATS, "triton": triton.__version__, "torch": torch.__version__,
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
