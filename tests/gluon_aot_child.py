"""For the Gluon kernels' compile tests: run a `compile_for_sm90` call list in a child process without the CPU
interpreter, with this Triton or the oldest one we support (RIDGELINE_OLDEST_TRITON, which CI sets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

OLDEST_TRITON_PATH = os.environ.get("RIDGELINE_OLDEST_TRITON", "")  # as tests/ops/test_compile_sm90.py reads it


def compile_in_child(module: str, calls: str, triton_path: str) -> list[dict]:
    """`[compile_for_sm90(...) for ...]` of `module`, evaluated in a child; triton_path "this" or "oldest"."""
    if triton_path == "oldest" and not OLDEST_TRITON_PATH:
        pytest.skip("RIDGELINE_OLDEST_TRITON not set (CI sets it)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if triton_path == "oldest":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (OLDEST_TRITON_PATH, env.get("PYTHONPATH", "")) if p)
    code = f"import json; from {module} import compile_for_sm90; print(json.dumps({calls}))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])
