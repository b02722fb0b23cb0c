"""`ridgeline probe`: measure this GPU's real ceilings; datasheet figures are shown beside, never used as the roof.

The profile is cached per (GPU name, driver) in the user cache dir; `refresh=True` measures again.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

from ridgeline.core.hardware import datasheet_for
from ridgeline.harness.timing import time_cold_eager, time_graph, time_host
from ridgeline.records.env import nvml_state
from ridgeline.records.paths import cache_dir

PROFILE_SCHEMA = "ridgeline.device/1"

@triton.jit
def _empty_kernel(X):
    pass


@triton.jit
def _fma_kernel(X, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(X + offs)
    x0, x1, x2, x3 = a, a + 1.0, a + 2.0, a + 3.0
    # Four independent FMA chains per element: enough instruction-level parallelism to fill the pipes.
    for _ in range(ITERS):
        x0 = x0 * 0.9999 + 0.0001
        x1 = x1 * 0.9999 + 0.0001
        x2 = x2 * 0.9999 + 0.0001
        x3 = x3 * 0.9999 + 0.0001
    tl.store(X + offs, x0 + x1 + x2 + x3)


def _median_us(fn: Callable[[], Any], budget_s: float = 1.0) -> float:
    return time_cold_eager(fn, budget_s).median_us


def _dram_bandwidths(quick: bool) -> dict[str, float]:
    n = (1 << 28) if quick else (1 << 30)  # bf16 elements: 512 MiB or 2 GiB per buffer
    src = torch.randn(n, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()
    return {
        "copy_gbps": 2 * nbytes / _median_us(lambda: dst.copy_(src)) / 1e3,
        "read_gbps": nbytes / _median_us(lambda: src.sum()) / 1e3,
        "write_gbps": nbytes / _median_us(lambda: dst.fill_(1.5)) / 1e3,
    }


def _bandwidths(quick: bool) -> dict[str, float]:
    out = _dram_bandwidths(quick)
    torch.cuda.empty_cache()
    # L2: an 8 MiB -> 8 MiB copy replayed hot in a graph stays resident in L2.
    small_src = torch.randn(1 << 22, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    small_dst = torch.empty_like(small_src)
    t = time_graph([lambda: small_dst.copy_(small_src)], 1.0, regime="graph-hot")
    out["l2_gbps"] = 2 * small_src.numel() * 2 / t.median_us / 1e3
    return out


# GEMM shapes the tensor-core rate is the best of: square ones and a long-K one. On the H200 cuBLAS ran
# 4096x4096x14336 at 810 TFLOP/s (bf16) against 738-782 for squares of 4096 and 8192 (docs/results,
# h200-bench-matmul-sweep-graph-cold.json): a ceiling from squares alone put real GEMMs above 100% of it.
LONG_K = (4096, 4096, 16384)


def _matmul_tflops(dtype: torch.dtype, m: int, n: int | None = None, k: int | None = None) -> float:
    n, k = n or m, k or m
    a = torch.randn(m, k, device="cuda", dtype=torch.float32).to(dtype)
    b = torch.randn(k, n, device="cuda", dtype=torch.float32).to(dtype)
    return 2 * m * n * k / _median_us(lambda: a @ b) / 1e6


def _fp8_tflops(m: int, n: int | None = None, k: int | None = None) -> float | None:
    """torch._scaled_mm with fast accumulation: the FP8 tensor cores' own rate (the ceiling; precise
    accumulation, its default, spends some of it on promotions)."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    n, k = n or m, k or m
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
    one = torch.tensor(1.0, device="cuda")
    return 2 * m * n * k / _median_us(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                                                out_dtype=torch.bfloat16, use_fast_accum=True)) / 1e6


def _fp32_fma_tflops(sm_count: int) -> float:
    block, iters = 1024, 2048
    x = torch.randn(sm_count * 16 * block, device="cuda")
    launch = lambda: _fma_kernel[(sm_count * 16,)](x, ITERS=iters, BLOCK=block, num_warps=4)
    return 2 * 4 * iters * x.numel() / _median_us(launch) / 1e6


def _floors() -> dict[str, float]:
    x = torch.empty(1, device="cuda")
    launch = lambda: _empty_kernel[(1,)](x)
    return {
        "cold-eager": time_cold_eager(launch, 1.0).median_us,
        "graph": time_graph([launch], 1.0, regime="graph-hot").median_us,
        "host": time_host(launch, 1.0).median_us,
    }


def measure(quick: bool = False, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure the current CUDA device's ceilings (about 30-60 s on an H200; `quick` shrinks the problems)."""
    if not torch.cuda.is_available():
        raise RuntimeError("probe: no CUDA device; ceilings can only be measured on a GPU")
    t0 = time.perf_counter()
    idx = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(idx)
    nv = nvml_state(idx)
    profile: dict[str, Any] = {
        "schema": PROFILE_SCHEMA, "name": props.name, "device_type": "cuda", "measured": True, "quick": quick,
        "driver": nv.get("driver"), "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count, "l2_bytes": getattr(props, "L2_cache_size", None),
        "memory_bytes": props.total_memory,
        "smem_per_block_optin": getattr(props, "shared_memory_per_block_optin", None),
        "smem_per_sm": getattr(props, "shared_memory_per_multiprocessor", None),
        "clocks": {k: nv.get(k) for k in ("sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz")},
        "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    log("memory bandwidth (copy, read, write, L2)")
    profile.update({k: round(v, 1) for k, v in _bandwidths(quick).items()})
    size = 4096 if quick else 8192
    tflops: dict[str, float | None] = {}
    log("fp32 FMA rate (CUDA cores)")
    tflops["fp32"] = round(_fp32_fma_tflops(profile["sm_count"]), 2)
    log("tensor-core matmul rates (tf32, bf16, fp16, fp8)")
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        tflops["tf32"] = round(_matmul_tflops(torch.float32, size), 1)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    shapes = [(s, s, s) for s in sorted({4096, size})] + ([] if quick else [LONG_K])
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        # The best of several shapes: large GEMMs can lose a few % to clock drops under full power.
        tflops[name] = round(max(_matmul_tflops(dtype, *s) for s in shapes), 1)
    try:
        rates = [_fp8_tflops(*s) for s in shapes] if props.major >= 9 else [None]
        tflops["fp8"] = round(max(rates), 1) if None not in rates else None
    except RuntimeError:
        tflops["fp8"] = None
    profile["tflops"] = tflops
    log("launch floors (empty kernel per regime)")
    profile["floors_us"] = {k: round(v, 3) for k, v in _floors().items()}
    profile["ridge_flop_per_byte"] = {
        k: (round(v * 1e12 / (profile["copy_gbps"] * 1e9), 2) if v else None) for k, v in tflops.items()
    }
    profile["datasheet"] = datasheet_for(props.name)
    profile["probe_seconds"] = round(time.perf_counter() - t0, 1)
    torch.cuda.empty_cache()
    return profile


def _profile_path(name: str, driver: str | None) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{name}-{driver or 'unknown'}")
    return cache_dir() / f"device-{slug}.json"


def device_profile(refresh: bool = False, quick: bool = False, log: Callable[[str], None] = lambda s: None
                   ) -> dict[str, Any]:
    """The cached profile of the current GPU, measured when missing (or when refresh is asked)."""
    if not torch.cuda.is_available():
        return cpu_profile()
    idx = torch.cuda.current_device()
    path = _profile_path(torch.cuda.get_device_name(idx), nvml_state(idx).get("driver"))
    if path.exists() and not refresh:
        cached = json.loads(path.read_text())
        # A full profile serves a quick request; a quick one (smaller problems, lower ceilings) is replaced
        # when a full one is asked for.
        if cached.get("schema") == PROFILE_SCHEMA and (quick or not cached.get("quick")):
            cached["cache_path"] = str(path)
            return cached
    profile = measure(quick=quick, log=log)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile, indent=1))
    profile["cache_path"] = str(path)
    return profile


def cpu_profile() -> dict[str, Any]:
    """No GPU: no ceilings. Benches still run, and say their figures are CPU figures."""
    import platform

    return {"schema": PROFILE_SCHEMA, "name": platform.processor() or platform.machine(), "device_type": "cpu",
            "measured": False, "copy_gbps": None, "read_gbps": None, "write_gbps": None, "l2_gbps": None,
            "tflops": {}, "floors_us": {}, "ridge_flop_per_byte": {}, "datasheet": None,
            "note": "CPU: no ceilings measured; CPU timings say nothing about GPU speed"}
