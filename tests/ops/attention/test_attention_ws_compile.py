"""The warp-specialized attention forward (Gluon, kernel_ws.py) compiles for sm_90 without a GPU, with this
Triton and (where RIDGELINE_OLDEST_TRITON names it, as in CI) the oldest one we support; and the calls it takes.
Compiled in a child process without the CPU interpreter (Gluon's API moves between Triton releases: this is what
tells a bump broke it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from ridgeline.ops.attention.launch_ws import ws_supported

OLDEST_TRITON_PATH = os.environ.get("RIDGELINE_OLDEST_TRITON", "")  # as tests/ops/test_compile_sm90.py reads it
CHILD = ("import json; from ridgeline.ops.attention.launch_ws import compile_for_sm90; "
         "print(json.dumps([compile_for_sm90(d, c, s) for d, c, s in "
         "((128, True, 2), (128, False, 3), (64, True, 2))]))")


def _compile(prefix: str | None) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if prefix:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (prefix, env.get("PYTHONPATH", "")) if p)
    res = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("triton_path", ["this", "oldest"])
def test_ws_forward_compiles_for_sm90(triton_path):
    if triton_path == "oldest" and not OLDEST_TRITON_PATH:
        pytest.skip("RIDGELINE_OLDEST_TRITON not set (CI sets it)")
    results = _compile(OLDEST_TRITON_PATH if triton_path == "oldest" else None)
    for (d, stages), r in zip(((128, 2), (128, 3), (64, 2)), results):
        assert r["shared"] <= 227 * 1024, (d, stages, r)  # Q + STAGES x (K + V) tiles of 128 x D
        sass = r["sass"]
        # Per key tile each MMA warpgroup issues S = QK^T and O += PV as k16 wgmmas, the load warp TMA copies of
        # Q, K and V; the warps trade registers; no spills (S, P and O of 64 rows a warpgroup fit 232 registers).
        assert sass["HGMMA"] >= 2 * d // 16 and sass["UTMALDG"] >= 3 and sass["USETMAXREG"] >= 2, (d, sass)
        assert r["spill_stores_bytes"] == 0 and r["spill_loads_bytes"] == 0, (d, stages, r)


def test_ws_supported_takes_dense_full_or_causal_only():
    q = torch.empty(2, 256, 8, 128, dtype=torch.bfloat16)
    k = torch.empty(2, 256, 2, 128, dtype=torch.bfloat16)
    # On this CPU machine it is never taken (no sm_90); the shape rules are checked where a GPU exists.
    assert not ws_supported(q, k, k, False, -1, 0)
