"""The fast launcher's per-argument key separates exactly what Triton specializes on (the value 1, divisibility by
16, the int32 range, a pointer's 16-byte alignment, dtypes, bools) and nothing else, so one compiled kernel serves
every M of the same class and a kernel compiled for one class is never reused for another."""

from __future__ import annotations

import numpy as np
import torch

from ridgeline.lib.fastlaunch import _arg_key


def test_ints_fall_in_triton_s_classes():
    assert _arg_key(1) != _arg_key(17) and _arg_key(1) != _arg_key(16)
    assert _arg_key(16) == _arg_key(4096) != _arg_key(4100) == _arg_key(7)
    assert _arg_key(2**31 - 16) != _arg_key(2**31) and _arg_key(2**31) == _arg_key(2**40)
    assert _arg_key(-16) == _arg_key(32) and _arg_key(0) == _arg_key(16)
    assert _arg_key(True) != _arg_key(1) and _arg_key(False) != _arg_key(0) and _arg_key(True) != _arg_key(False)


def test_floats_tensors_and_others():
    assert _arg_key(0.5) == _arg_key(np.float64(3.0)) == "f"
    base = torch.empty(64, dtype=torch.bfloat16)
    assert _arg_key(base) == _arg_key(base[8:]) != _arg_key(base[1:])  # 16 bytes in vs 2 bytes in
    assert _arg_key(base) != _arg_key(base.float())
    assert _arg_key(None) == ("?", None)
