"""Test setup: without CUDA, kernels run under Triton's CPU interpreter (set before any kernel is decorated)."""

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
    if os.environ.get("RIDGELINE_PLAIN_INTERPRETER", "0") in ("", "0"):  # (=1: Triton's interpreter as shipped)
        import interpreter_speedup

        interpreter_speedup.install()

DEVICE = "cuda" if HAS_CUDA else "cpu"


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path, monkeypatch):
    """Runs, the store and device profiles go to a per-test folder, never the user's home."""
    monkeypatch.setenv("RIDGELINE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIDGELINE_CACHE_DIR", str(tmp_path / "cache"))
