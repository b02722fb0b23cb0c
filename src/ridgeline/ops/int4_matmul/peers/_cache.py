"""Weight conversions done once per weight, outside the timed calls.

Peers that need their own weight format (bf16 for cuBLAS, torch's tiled int4 pack, Marlin's) convert our packed
weight on first sight and keep the result keyed by the weight's storage, shape and version counter: an in-place
refresh of the weight (the harness does one after timing) bumps the version, so a stale conversion is never used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

MAX_ENTRIES = 64  # graph-cold rotates a few input sets; a sweep's shapes come and go


class WeightCache:
    def __init__(self, convert: Callable[[torch.Tensor, torch.Tensor, int], Any]) -> None:
        self.convert = convert
        self._store: OrderedDict[tuple, Any] = OrderedDict()

    def get(self, w_packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> Any:
        key = (w_packed.data_ptr(), tuple(w_packed.shape), w_packed._version, scales.data_ptr(),
               tuple(scales.shape), scales._version, scales.dtype, group_size, w_packed.device)
        hit = self._store.get(key)
        if hit is None:
            hit = self.convert(w_packed, scales, group_size)
            self._store[key] = hit
            while len(self._store) > MAX_ENTRIES:
                self._store.popitem(last=False)
        else:
            self._store.move_to_end(key)
        return hit
