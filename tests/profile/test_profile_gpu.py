"""`ridgeline profile` on a GPU (marked gpu; run on the device machine): JIT-cache facts, the trace, ncu."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import ridgeline.profile as P


# --- GPU (device machine) ----------------------------------------------------------------------------------
def _profile_in_fresh_process(tmp_path: Path, *args: str) -> dict:
    """A fresh process has compiled nothing yet, so the kernel the profiled call compiles is new in the JIT cache."""
    import subprocess
    import sys

    code = ("import json, sys; from ridgeline.profile import profile; "
            "p = profile(sys.argv[1], sys.argv[2], tuple(int(d) for d in sys.argv[3].split('x')), sys.argv[4], "
            "out_dir=sys.argv[5]); print('PROFILE', json.dumps(p))")
    env = {**os.environ, "PYTHONPATH": str(Path(P.__file__).resolve().parents[2])}
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, "-c", code, *args, str(tmp_path)], capture_output=True, text=True,
                         timeout=600, env=env, check=False)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("PROFILE ")), None)
    assert line, res.stderr[-3000:]
    return json.loads(line[len("PROFILE "):])


@pytest.mark.gpu
def test_profile_gpu_jit_cache_and_trace(tmp_path):
    prof = _profile_in_fresh_process(tmp_path, "rmsnorm", "ridgeline", "4096x4096", "bf16")
    (k,) = [k for k in prof["kernels"] if k["name"] == "_rms_norm_kernel"]
    assert k["source"] == "jit-cache" and k["registers"] > 0
    assert k.get("driver_registers") in (None, k["registers"])
    assert k["sass"]["global_loads"].get("128", 0) > 0
    assert (tmp_path / prof["kineto"]["trace"]).is_file()
    assert any("_rms_norm_kernel" in r["name"] for r in prof["kineto"]["kernels"])
    assert prof["launch"]["grid"] >= 1 and prof["launch"]["sm_count"] > 0


@pytest.mark.gpu
def test_profile_gpu_kernel_compiled_earlier_in_process(tmp_path):
    import torch

    from ridgeline import rms_norm

    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    rms_norm(x, torch.ones(4096, device="cuda", dtype=torch.bfloat16))  # same specialization as below
    prof = P.profile("rmsnorm", "ridgeline", (64, 4096), "bf16", out_dir=tmp_path, kineto=False)
    (k,) = prof["kernels"]
    assert k["source"] in ("jit-cache", "aot") and k["registers"] > 0


@pytest.mark.gpu
def test_profile_gpu_ncu(tmp_path):
    if shutil.which("ncu") is None:
        pytest.skip("ncu is not on the PATH")
    prof = P.profile("rmsnorm", "ridgeline", (4096, 4096), "bf16", out_dir=tmp_path, ncu=True, kineto=False)
    ncu = prof["ncu"]
    assert ncu["available"], ncu.get("reason")
    (k,) = [k for k in ncu["kernels"] if "_rms_norm_kernel" in k["name"]]
    x_bytes = 4096 * 4096 * 2
    assert 0.95 * x_bytes < k["dram_bytes_read"] < 1.2 * x_bytes  # x read once from DRAM (caches flushed)
    # Written lines can still sit in the 60 MB L2 when the kernel ends: DRAM writes may be under the ideal.
    assert ncu["dram_vs_ideal"] < 1.2
    assert "--clock-control none" in ncu["command"]
    # the warp-state breakdown: this ncu knows the stall metrics, and they split the cycles between issues
    assert k["stalls"] and k["cycles_per_issue"] > 0, ncu.get("metrics_dropped")
    assert sum(k["stalls"].values()) == pytest.approx(k["cycles_per_issue"], rel=0.25)


@pytest.mark.gpu
def test_profile_gpu_ncu_source(tmp_path):
    """--source: the warp samples land on the kernel's instructions and on its Python source lines."""
    if shutil.which("ncu") is None:
        pytest.skip("ncu is not on the PATH")
    prof = P.profile("rmsnorm", "ridgeline", (4096, 4096), "bf16", out_dir=tmp_path, ncu_source=True, kineto=False)
    ncu = prof["ncu"]
    assert ncu["available"] and "SourceCounters" in ncu["command"], ncu.get("reason")
    (k,) = [k for k in ncu["source"] if "_rms_norm_kernel" in k["name"]]
    assert k["samples"] > 0 and k["top_instructions"] and sum(k["by_reason"].values()) == pytest.approx(k["samples"])
    # Triton keeps line info: the hottest lines are lines of Python files (the kernel's or Triton's library)
    assert k["top_lines"] and all(str(x["file"]).endswith(".py") for x in k["top_lines"])
    assert any(x.get("line") for x in k["top_instructions"])
    assert "--source" in prof["command"] and (tmp_path / "ncu-source-lines.csv").stat().st_size > 0


@pytest.mark.gpu
def test_profile_gpu_peer(tmp_path):
    prof = P.profile("rmsnorm", "torch-eager", (1024, 4096), "bf16", out_dir=tmp_path)
    assert "kineto" in prof, prof["not_collected"]
    assert prof["kineto"]["kernels"], "the eager peer launches kernels the trace must see"


@pytest.mark.gpu
def test_profile_gpu_user_op(tmp_path):
    """A user's op and kernel from a file: the launch runs on the GPU and its compiled kernel comes with it."""
    toy = Path(__file__).resolve().parent / "profile_toy_op.py"
    prof = _profile_in_fresh_process(tmp_path, f"{toy}:ScaleAdd", f"{toy}:scale_add", "4096x4096", "fp32")
    (k,) = [k for k in prof["kernels"] if k["name"] == "_scale_add_kernel"]
    assert k["source"] == "jit-cache" and k["registers"] > 0 and k["launches"] == 1
    assert k["sass"]["global_loads"].get("128", 0) > 0
    assert prof["launch"]["grid"] == 4096 * 4096 // 1024 and prof["source"] == "user"


@pytest.mark.gpu
def test_profile_gpu_autotuned_user_kernel_records_the_tuned_launch(tmp_path):
    toy = Path(__file__).resolve().parent / "profile_toy_op.py"
    prof = P.profile(f"{toy}:ScaleAdd", f"{toy}:scale_add_tuned", (1024, 1024), "fp32", out_dir=tmp_path,
                     kineto=False)
    assert "best of 2" in prof["launch"]["autotune"]
    launched = [k for k in prof["kernels"] if k["launches"]]
    assert len(launched) == 1 and launched[0]["name"] == "_scale_add_tuned_kernel"
