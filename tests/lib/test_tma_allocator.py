"""ensure_tma_allocator installs torch's allocator in every thread that launches (Triton's allocator is a
ContextVar: autograd's backward thread starts without one; a matmul backward failed that way on the H200)."""

from __future__ import annotations

import threading

import pytest

_allocation = pytest.importorskip("triton.runtime._allocation")

from ridgeline.lib import launch  # noqa: E402


def _is_null() -> bool:
    return isinstance(_allocation._allocator.get(), _allocation.NullAllocator)


def test_each_thread_gets_the_allocator():
    seen: dict[str, bool] = {}

    def worker(tag: str) -> None:
        seen[tag + "-before"] = _is_null()
        launch.ensure_tma_allocator()
        seen[tag + "-after"] = not _is_null()

    for tag in ("a", "b"):  # two fresh threads, one after the other: the second must not trust the first's flag
        t = threading.Thread(target=worker, args=(tag,))
        t.start()
        t.join()
    assert seen == {"a-before": True, "a-after": True, "b-before": True, "b-after": True}
