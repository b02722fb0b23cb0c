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


def test_a_context_without_the_allocator_gets_it_even_where_the_thread_set_one():
    """asyncio tasks and contextvars.Context().run start from another context: a thread that set the allocator
    before must not skip setting it there."""
    import contextvars

    seen: dict[str, bool] = {}

    def in_empty_context() -> None:
        seen["before"] = _is_null()
        launch.ensure_tma_allocator()
        seen["after"] = not _is_null()

    def worker() -> None:
        launch.ensure_tma_allocator()
        contextvars.Context().run(in_empty_context)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"before": True, "after": True}


def test_a_callers_own_allocator_is_kept():
    import contextvars

    def mine(size, alignment, stream):  # pragma: no cover - never called on the CPU
        raise AssertionError

    def body() -> bool:
        import triton

        triton.set_allocator(mine)
        launch.ensure_tma_allocator()
        return _allocation._allocator.get() is mine

    assert contextvars.Context().run(body)
