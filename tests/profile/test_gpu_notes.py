"""A record-only capture on the CPU cannot see a kernel the rules take only on a real sm_90 device (the Gluon
kernels); the op's `gpu_notes` hook says so in the profile's notes, so the recorded Triton launch is not taken for
the one that runs, and says nothing where the recorded launch is the one that runs."""

from __future__ import annotations

import torch

from ridgeline.profile.launches import capture_call


def _notes(op, shape, dtype, variant):
    return capture_call(op, "ridgeline", shape, dtype, variant).notes


def test_attention_names_the_gluon_forward_where_the_rules_take_it():
    notes = _notes("attention", (2, 8192, 32, 8, 128), torch.bfloat16, "causal")
    assert any("Gluon" in n and "overlap" in n and "kernel_ws.py" in n for n in notes), notes
    notes = _notes("attention", (4, 4096, 32, 8, 128), torch.bfloat16, "causal")  # the schedule follows S_k
    assert any("pairs persistent" in n and "pairs=True, persistent=True" in n for n in notes), notes
    assert any("Gluon" in n for n in _notes("attention", (2, 1024, 8, 8, 64), torch.float16, ""))
    assert any("Gluon" in n for n in _notes("attention", (4, 4096, 16, 16, 256), torch.bfloat16, "causal"))
    # packed batches and windows too (s37), with the compile call that reproduces their form
    from ridgeline.ops.attention.rules import WS_FORWARD

    packed = _notes("attention", (16384, 32, 8, 128), torch.bfloat16, "causal")
    assert any("varlen=True" in n for n in packed) == WS_FORWARD.takes(128, True, -1)
    window = _notes("attention", (2, 1024, 8, 8, 128), torch.bfloat16, "window")
    assert any("window=True" in n for n in window) == WS_FORWARD.takes(128, False, 0)
    assert not any("Gluon" in n for n in _notes("attention", (2, 1024, 8, 8, 128), torch.bfloat16, "bhsd"))
    # the backward's kernels are the recorded ones
    assert not any("Gluon" in n for n in _notes("attention_bwd", (2, 1024, 8, 8, 128), torch.bfloat16, "causal"))


def test_scaled_mm_names_the_gluon_gemm_where_the_rules_take_it():
    fp8 = torch.float8_e4m3fn
    for variant in ("row", "tensor", "block"):
        notes = _notes("scaled_mm", (4096, 4096, 4096), fp8, variant)
        assert any("Gluon" in n and "kernel_ws.py" in n for n in notes), (variant, notes)
    # decode rows, an fp32 output (no TMA store) and N-major weights stay on the recorded Triton kernels
    for shape, variant in (((16, 4096, 4096), "row"), ((4096, 4096, 4096), "row+fp32"),
                           ((4096, 4096, 4096), "row+nmajor")):
        assert not any("Gluon" in n for n in _notes("scaled_mm", shape, fp8, variant)), (shape, variant)
