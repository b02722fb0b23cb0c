"""Every op package's own kernels compile for sm_90 (Hopper) on a machine without a GPU.

Triton's CPU interpreter runs kernels as Python, so it accepts code the real compiler refuses (a plain Python
global inside @triton.jit: the softmax kernels passed every CPU test and failed to compile on the H200). Here the
launches our implementations make at each op's CPU shapes are recorded without running (as `ridgeline profile`
does), then every distinct specialization is compiled ahead of time for sm_90 with Triton's bundled ptxas, all in
one child process without the interpreter. (Launch rules that pick other configs on a GPU than under the
interpreter are compiled by the GPU tests; this catches what no CPU test can.)
"""

from __future__ import annotations

import pytest
import torch

from ridgeline.core import registry
from ridgeline.profile.aot import check_in_child
from ridgeline.profile.launches import capture_call

HAS_CUDA = torch.cuda.is_available()


def _our_ops() -> list[tuple[str, str]]:
    out = []
    for name, spec in sorted(registry.specs().items()):
        ours = [i.name for i in registry.implementations(name) if i.source == "ours" and i.available]
        if ours and spec.__module__.startswith("ridgeline.ops.") and "cpu" in spec.shape_sets:
            out.append((name, ours[0]))
    return out


def _dtypes(spec) -> list[torch.dtype]:
    """One 16-bit float (what the kernels specialize on most), fp32, and any non-float dtype the op takes."""
    picked = [d for d in (torch.bfloat16, torch.float32) if d in spec.dtypes]
    return picked or list(spec.dtypes[:1])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, list[dict]]:
    launches, owner = [], []
    for op, impl in _our_ops():
        spec = registry.get_spec(op)
        for shape in spec.shapes("cpu"):
            for dtype in _dtypes(spec):
                try:
                    call = capture_call(op, impl, shape, dtype, require_launch=False)
                except ValueError:
                    continue  # this contract does not take the dtype (it says so in its own tests)
                launches += call.launches
                owner += [op] * len(call.launches)
    results = check_in_child(launches, 90, tmp_path_factory.mktemp("sm90"))
    assert results is not None, "a recorded launch could not be sent to the compiler child"
    by_op: dict[str, list[dict]] = {}
    for op, r in zip(owner, results):
        by_op.setdefault(op, []).append(r)
    return by_op


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the GPU tests compile every kernel for real")
@pytest.mark.parametrize("op", [op for op, _ in _our_ops()])
def test_our_kernels_compile_for_sm90(op, compiled):
    results = compiled.get(op)
    if not results:
        pytest.skip(f"{op} launches no Triton kernel at its CPU shapes")
    errors = sorted({f"{r['kernel']}: {r['error']}" for r in results if "error" in r})
    assert not errors, errors
    assert all(r["cubin_bytes"] > 0 for r in results)
