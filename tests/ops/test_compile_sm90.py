"""Every op package's own kernels compile for sm_90 (Hopper) on a machine without a GPU.

Triton's CPU interpreter runs kernels as Python, so it accepts code the real compiler refuses (a plain Python
global inside @triton.jit: the softmax kernels passed every CPU test and failed to compile on the H200). Here the
launches our implementations make at each op's CPU shapes are recorded without running (as `ridgeline profile`
does), then every distinct specialization is compiled ahead of time for sm_90 with Triton's bundled ptxas, all in
one child process without the interpreter. (Launch rules that pick other configs on a GPU than under the
interpreter are compiled by the GPU tests; this catches what no CPU test can.) The same launches are compiled
again with the oldest Triton we support (3.6.0, the H200's), which refuses code that newer ones accept.
"""

from __future__ import annotations

import os

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


# The oldest Triton we support (the H200's image has it) refuses code that newer ones accept (a jit helper's
# defaulted constexpr parameter left out of a call compiled with 3.7.1 and failed on the H200 with 3.6.0). CI
# unpacks it into a folder and names it here (.ci/run); elsewhere: `pip install --no-deps --target DIR
# triton==3.6.0` and RIDGELINE_OLDEST_TRITON=DIR.
OLDEST_TRITON = "3.6.0"
OLDEST_TRITON_PATH = os.environ.get("RIDGELINE_OLDEST_TRITON", "")


def _recorded_launches() -> tuple[list, list[str]]:
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
    return launches, owner


def _by_op(owner: list[str], results: list[dict] | None) -> dict[str, list[dict]]:
    assert results is not None, "a recorded launch could not be sent to the compiler child"
    by_op: dict[str, list[dict]] = {}
    for op, r in zip(owner, results):
        by_op.setdefault(op, []).append(r)
    return by_op


@pytest.fixture(scope="module")
def compiled_both(tmp_path_factory) -> dict[str, dict[str, list[dict]] | str]:
    """The launches recorded once, compiled by this Triton and (where RIDGELINE_OLDEST_TRITON names it) the oldest
    supported one in two child processes at once (ptxas is single-threaded: two cores, half the wall time).
    'oldest' is the reason it was not compiled where it was not."""
    from concurrent.futures import ThreadPoolExecutor

    launches, owner = _recorded_launches()
    oldest: str | None = None
    why = ""
    if not OLDEST_TRITON_PATH:
        why = f"RIDGELINE_OLDEST_TRITON is not set (a folder holding triton=={OLDEST_TRITON}; CI sets it)"
    elif not os.path.isdir(os.path.join(OLDEST_TRITON_PATH, "triton")):
        why = f"RIDGELINE_OLDEST_TRITON={OLDEST_TRITON_PATH}: expected a folder holding the triton package"
    else:
        oldest = OLDEST_TRITON_PATH
    with ThreadPoolExecutor(2) as pool:
        current = pool.submit(check_in_child, launches, 90, tmp_path_factory.mktemp("sm90"), None)
        old = pool.submit(check_in_child, launches, 90, tmp_path_factory.mktemp("sm90-oldest"), oldest) \
            if oldest else None
        return {"current": _by_op(owner, current.result()),
                "oldest": _by_op(owner, old.result()) if old else why}


@pytest.fixture(scope="module")
def compiled(compiled_both) -> dict[str, list[dict]]:
    return compiled_both["current"]


@pytest.fixture(scope="module")
def compiled_oldest(compiled_both) -> dict[str, list[dict]]:
    oldest = compiled_both["oldest"]
    if isinstance(oldest, str):
        if OLDEST_TRITON_PATH:  # named but not usable: a broken setup, not a reason to skip
            pytest.fail(oldest)
        pytest.skip(oldest)
    return oldest


def _assert_compiled(op: str, results: list[dict] | None, triton_version: str | None = None) -> None:
    if not results:
        pytest.skip(f"{op} launches no Triton kernel at its CPU shapes")
    if triton_version is not None:
        assert {r["triton"] for r in results} == {triton_version}, f"the child did not compile with {triton_version}"
    errors = sorted({f"{r['kernel']}: {r['error']}" for r in results if "error" in r})
    assert not errors, errors
    assert all(r["cubin_bytes"] > 0 for r in results)


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the GPU tests compile every kernel for real")
@pytest.mark.parametrize("op", [op for op, _ in _our_ops()])
def test_our_kernels_compile_for_sm90(op, compiled):
    _assert_compiled(op, compiled.get(op))


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the GPU tests compile every kernel for real")
@pytest.mark.parametrize("op", [op for op, _ in _our_ops()])
def test_our_kernels_compile_for_sm90_with_the_oldest_supported_triton(op, compiled_oldest):
    _assert_compiled(op, compiled_oldest.get(op), OLDEST_TRITON)
