"""The profiler's GPU branch, simulated on a CPU: what three GPU tests caught on the H200 (session 15).

- A dead ``weakref.proxy`` in the process (left by torch.compile or an earlier test) made the JIT-cache scan raise
  ReferenceError, so every in-process GPU profile reported "running the implementation" failed and fell back to
  recording without running (an autotuner's first config, "not benchmarked").
- RMSNorm's launch check moved into lib's ``require_rows``, past the profile hook's ``gpu_rules``: meta inputs
  were refused, and without the interpreter the CPU inputs after them, so that fallback compiled nothing.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import ridgeline.profile as P
from ridgeline.profile import run as prof_run

TOY = Path(__file__).resolve().parent / "profile_toy_op.py"


class _Gone:
    pass


@pytest.fixture
def dead_proxy():
    """A weakref.proxy whose object is gone: any o.__class__ on it (what isinstance falls back to) raises."""
    obj = _Gone()
    proxy = weakref.proxy(obj)
    del obj
    with pytest.raises(ReferenceError):
        proxy.__class__  # noqa: B018
    return proxy


def test_jit_cache_scan_survives_a_dead_weakref_proxy(dead_proxy):
    from triton.runtime.jit import JITFunction

    from ridgeline.profile import jit_cache

    def body(X):
        pass

    kernel = JITFunction(body)  # (a real JITFunction is still found by the scan)
    assert any(fn is kernel for fn in jit_cache._jit_functions())
    before = jit_cache.jit_snapshot()
    assert jit_cache.jit_new_kernels(before) == []


@pytest.fixture
def fake_gpu(monkeypatch):
    """profile() takes its GPU branch: CUDA 'available' (an H200's properties), 'cuda' inputs made on the CPU
    (the interpreter runs the kernels). Returns the `run` argument of every capture_call profile() makes."""
    from ridgeline.core import registry

    monkeypatch.setattr(prof_run, "_cuda_ready", lambda: (True, ""))
    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: props)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    real_get_spec = registry.get_spec

    def get_spec(op):
        spec = real_get_spec(op)
        if "make_inputs" not in vars(spec):  # (on the instance, undone after the test)
            make = spec.make_inputs
            monkeypatch.setattr(spec, "make_inputs", lambda case, device, seed: make(
                case, "cpu" if str(device) == "cuda" else device, seed), raising=False)
        return spec

    monkeypatch.setattr(registry, "get_spec", get_spec)
    runs: list[bool] = []
    real_capture = prof_run.capture_call

    def capture_call(*args, **kwargs):
        runs.append(bool(kwargs.get("run", False)))
        return real_capture(*args, **kwargs)

    monkeypatch.setattr(prof_run, "capture_call", capture_call)
    # (in-process compilation of the recorded launch needs a real compiler: out of this test's scope)
    monkeypatch.setattr(prof_run, "compile_launches", lambda launches, arch, out: [])
    return runs


def test_profile_with_a_gpu_runs_the_call_and_never_records_only(fake_gpu, dead_proxy, tmp_path):
    prof = P.profile("rmsnorm", "ridgeline", (4, 64), "fp32", out_dir=tmp_path, kineto=False)
    assert fake_gpu == [True], "on a GPU the call runs (capture_call(run=True)), no record-only fallback"
    assert not any(x["what"] == "running the implementation" for x in prof["not_collected"]), prof["not_collected"]
    assert prof["device"]["cuda"] and prof["launch"]["grid"] >= 1 and prof["launch"]["sm_count"] == 132
    assert not any("did not run on the GPU" in n for n in prof["notes"]), prof["notes"]


def test_profile_with_a_gpu_benchmarks_the_autotuner(fake_gpu, dead_proxy, tmp_path, monkeypatch):
    from triton.runtime.autotuner import Autotuner

    # (the interpreter cannot time configs: a fake timing per config, the larger BLOCK faster)
    monkeypatch.setattr(Autotuner, "_bench", lambda self, *a, config, **k: [1.0 / config.kwargs["BLOCK"]] * 3)
    prof = P.profile(f"{TOY}:ScaleAdd", f"{TOY}:scale_add_tuned", (4, 256), "fp32", out_dir=tmp_path,
                     kineto=False)
    assert fake_gpu == [True]
    assert "best of 2" in prof["launch"]["autotune"], prof["launch"]
    assert "BLOCK=512" in prof["launch"]["config"]


def test_record_only_capture_uses_the_hooks_meta_inputs():
    """Where an op's profile hook gives meta inputs, recording without running uses them (any size, no memory,
    and without the interpreter the only inputs our wrappers accept off a GPU): a refused meta input fell back to
    CPU inputs silently under the interpreter and to nothing on the H200."""
    from ridgeline.core import registry
    from ridgeline.core.spec import Case
    from ridgeline.profile import hooks

    checked = []
    for name, spec in sorted(registry.specs().items()):
        ours = [i.name for i in registry.implementations(name) if i.source == "ours" and i.available]
        if not ours or "cpu" not in spec.shape_sets or getattr(hooks.hooks_for(spec), "meta_inputs", None) is None:
            continue
        dtype = next((d for d in (torch.bfloat16, torch.float32) if d in spec.dtypes), spec.dtypes[0])
        shape = spec.shapes("cpu")[0]
        if hooks.meta_inputs(spec, Case(shape, dtype, "")) is None:
            continue
        call = P.capture_call(name, ours[0], shape, dtype, require_launch=False)
        assert call.inputs == "meta" and call.launches, (name, call.notes)
        checked.append(name)
    assert {"rmsnorm", "fused_add_rmsnorm", "rmsnorm_fp8", "matmul"} <= set(checked)
