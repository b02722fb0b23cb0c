"""Implementations that try to fool the bench, one per class its guards catch (the `guards` plan benches them
beside ours and the peers on the GPU; tests/harness/test_guards.py holds the same classes for the CPU)."""

import time
import weakref

import torch

_real_perf_counter = time.perf_counter


def _ref(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


_memo: dict = {}


def memo(x, weight, eps):
    """Result reuse: remembers its output by input identity and version (right once, stale after a refill)."""
    hit = _memo.get(id(x))
    if hit is None or hit[0]() is not x or hit[1] != x._version:
        hit = _memo[id(x)] = (weakref.ref(x), x._version, _ref(x, weight, eps))
    return hit[2]


_stream = None


def side_stream(x, weight, eps):
    """Work outside the timed stream: the work runs on a private stream and the call returns at once."""
    global _stream
    _stream = _stream or torch.cuda.Stream()
    _stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_stream):
        y = _ref(x, weight, eps)
    return y


def tampered(x, weight, eps):
    """The timer tampered with: every call makes time.perf_counter run 1000x slow from then on."""
    time.perf_counter = lambda: _real_perf_counter() / 1000.0
    return _ref(x, weight, eps)
