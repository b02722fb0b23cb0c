"""The peers' weight-conversion cache: one conversion per weight object and version, never a stale one."""

import gc

import torch

from ridgeline.ops.int4_matmul.peers._cache import WeightCache


def _counting():
    calls = []

    def convert(w, s, g):
        calls.append(1)
        return (w.clone(), s.clone(), g)

    return WeightCache(convert), calls


def test_the_same_weight_converts_once_and_an_inplace_refresh_converts_again():
    cache, calls = _counting()
    w, s = torch.randint(0, 255, (8, 4), dtype=torch.uint8), torch.rand(8, 1)
    a = cache.get(w, s, 8)
    assert cache.get(w, s, 8) is a and len(calls) == 1
    w.add_(1)  # bumps the version counter
    b = cache.get(w, s, 8)
    assert len(calls) == 2 and torch.equal(b[0], w)


def test_a_new_weight_at_a_freed_weights_address_is_converted_afresh():
    cache, calls = _counting()
    for i in range(20):  # the allocator hands the same storage back: addresses repeat, contents differ
        w = torch.full((64, 32), i, dtype=torch.uint8)
        s = torch.full((64, 1), float(i))
        got = cache.get(w, s, 8)
        assert torch.equal(got[0], w) and torch.equal(got[1], s), i
        del w, s
        gc.collect()
    assert len(calls) == 20


def test_a_dead_weights_conversion_is_dropped_with_it():
    cache, calls = _counting()
    w, s = torch.randint(0, 255, (8, 4), dtype=torch.uint8), torch.rand(8, 1)
    keep_w, keep_s = torch.randint(0, 255, (8, 4), dtype=torch.uint8), torch.rand(8, 1)
    cache.get(w, s, 8)
    kept = cache.get(keep_w, keep_s, 8)
    assert len(cache._store) == 2
    del w
    gc.collect()
    assert len(cache._store) == 1  # the dead weight's conversion went with it (a big bf16 copy on a GPU)
    del s  # its scales dying later touches nothing else
    gc.collect()
    assert len(cache._store) == 1 and cache.get(keep_w, keep_s, 8) is kept and len(calls) == 2
