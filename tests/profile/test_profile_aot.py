"""`ridgeline profile` without a GPU: ahead-of-time compilation for sm_90, what is not collected, attaching, the CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import ridgeline.profile as P
from ridgeline.records.record import load_record
from ridgeline.report.cli import profile_command
from ridgeline.report.markdown import render_markdown

DATA = Path(__file__).resolve().parents[1] / "data"
HAS_PTXAS = P.tool_path("ptxas") is not None and P.tool_path("cuobjdump") is not None
needs_tools = pytest.mark.skipif(not HAS_PTXAS, reason="Triton's bundled ptxas/cuobjdump not found: no AOT compile")


# --- ahead-of-time compilation on this machine -------------------------------------------------------------
@pytest.fixture(scope="module")
def aot_profile(tmp_path_factory) -> dict:
    if not HAS_PTXAS:
        pytest.skip("Triton's bundled ptxas/cuobjdump not found: no ahead-of-time compilation")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the JIT-cache path is tested instead (test_profile_gpu_*)")
    out = tmp_path_factory.mktemp("prof")
    return P.profile("rmsnorm", "ridgeline", (4096, 4096), "bf16", out_dir=out, ncu=True)


def test_aot_compile_facts(aot_profile):
    (k,) = aot_profile["kernels"]
    assert k["name"] == "_rms_norm_kernel" and k["source"] == "aot" and k["target"] == "cuda:90"
    assert k["registers"] > 0 and k["num_warps"] >= 1 and k["spill_stores_bytes"] == 0
    assert k["sass"]["global_loads"].get("128", 0) > 0 and k["sass"]["global_stores"].get("128", 0) > 0
    assert k["sass"]["tensor_cores"] == "none"
    assert 0 < k["occupancy"]["occupancy"] <= 1
    assert aot_profile["launch"]["grid"] >= 132 and aot_profile["ideal_bytes"] == 2 * 4096 * 4096 * 2 + 4096 * 2


def test_aot_files_written(aot_profile):
    out = Path(aot_profile["out_dir"])
    files = aot_profile["kernels"][0]["files"]
    for key in ("ptx", "cubin", "sass", "ptxas_log"):
        assert (out / files[key]).is_file(), key
    assert ".target sm_90a" in (out / files["ptx"]).read_text()
    # (128-bit loads, with or without an L2 eviction hint: LDG.E.128, LDG.E.EF.128)
    assert re.search(r"LDG\.E(\.\w+)*\.128", (out / files["sass"]).read_text())
    assert json.loads((out / "profile.json").read_text())["kernels"][0]["registers"] > 0


def test_without_gpu_says_what_it_cannot_collect(aot_profile):
    missing = {x["what"]: x["why"] for x in aot_profile["not_collected"]}
    assert "needs a CUDA GPU" in missing["Nsight Compute"] and "needs a CUDA GPU" in missing["torch profiler trace"]
    assert any("ahead of time" in n for n in aot_profile["notes"])
    assert any("ahead-of-time" in c for c in aot_profile["collected"])


def test_peer_profile_explains_itself(tmp_path):
    prof = P.profile("rmsnorm", "torch-eager", (16, 64), "fp32", out_dir=tmp_path, kineto=False)
    assert prof["kernels"] == [] and prof["source"] == "peer"
    assert any(x["what"] == "compile facts and SASS" for x in prof["not_collected"])
    assert any("peer" in n for n in prof["notes"])


def test_attach_profile_to_a_run_and_report_it(aot_profile, tmp_path):
    run = tmp_path / "run.json"
    shutil.copy(DATA / "run_h200_rmsnorm.json", run)
    before = len(load_record(run).profiles)
    assert P.attach_profile(aot_profile, run) == "attached"
    assert P.attach_profile(aot_profile, run) == "attached"  # the same case replaces, never duplicates
    rec = load_record(run)
    assert len(rec.profiles) == before + 1
    md = render_markdown(rec.to_dict())
    assert "### Profile: rmsnorm / ridgeline at 4096x4096 bf16" in md and "| aot |" in md
    loose = tmp_path / "loose" / "profile.json"
    assert P.attach_profile(aot_profile, loose) == "written"
    assert json.loads(loose.read_text())["schema"] == P.PROFILE_SCHEMA


@needs_tools
def test_profile_command(tmp_path):
    app = typer.Typer()
    app.command("profile")(profile_command)
    app.command("noop")(lambda: None)
    run = tmp_path / "run.json"
    shutil.copy(DATA / "run_h200_rmsnorm.json", run)
    res = CliRunner().invoke(app, ["profile", "fused_add_rmsnorm", "--impl", "ridgeline", "--shape", "64x4100",
                                   "--dtype", "fp16", "--variant", "strided", "-o", str(tmp_path / "p"),
                                   "--json", str(run), "--no-kineto"])
    assert res.exit_code == 0, res.output
    assert "collected:" in res.output and "not collected:" in res.output
    prof = load_record(run).profiles[-1]
    assert prof["op"] == "fused_add_rmsnorm" and prof["variant"] == "strided"
    # An odd row stride (4113) cannot be proven aligned: narrow loads of x, which the report then points out
    # (the weight, contiguous and aligned, still gets 16-byte loads).
    assert prof["kernels"][0]["source"] in ("aot", "jit-cache")
    assert "16" in prof["kernels"][0]["sass"]["global_loads"]
    res = CliRunner().invoke(app, ["profile", "rmsnorm", "--impl", "nope", "--shape", "8x64"])
    assert res.exit_code == 2




_TTGIR_CHECK = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from compile_configs import launch_for
from ridgeline.ops.rmsnorm.launch import config_for
from ridgeline.profile.aot import aot_compile, aot_ttgir
launch = launch_for(5120, config_for(5120, torch.bfloat16, 4096), False)
def body(text):
    return [ln for ln in text.splitlines() if not ln.startswith("#loc")]
ttgir = aot_ttgir(launch)
assert "ttg.blocked" in ttgir and "tt.reduce" in ttgir, ttgir[:400]
assert body(ttgir) == body(aot_compile(launch).asm["ttgir"]), "the TTGIR differs from the full compile's"
print("same TTGIR")
"""


@needs_tools
def test_ttgir_alone_is_the_full_compiles_ttgir(tmp_path):
    """aot_ttgir stops Triton's pipeline at its GPU IR; the text must be the full compile's (the layout checks of
    scripts/compile_configs.py read it instead of compiling to a cubin). Locations aside (paths differ by cache).
    In a child without the interpreter, with an empty Triton cache (a real compile, not a cache hit)."""
    import os
    import subprocess
    import sys

    from ridgeline.profile.child import child_env

    env = child_env(True) | {"TRITON_CACHE_DIR": str(tmp_path)}
    scripts = str(Path(__file__).resolve().parents[2] / "scripts")
    res = subprocess.run([sys.executable, "-c", _TTGIR_CHECK, scripts], capture_output=True, text=True, env=env,
                         timeout=300, cwd=os.getcwd())
    assert res.returncode == 0 and "same TTGIR" in res.stdout, res.stdout + res.stderr[-2000:]
