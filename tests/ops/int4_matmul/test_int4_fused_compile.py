"""The int4 kernel with the split programs' reduce fused in (a counter atomic with acq_rel at GPU scope, .cg loads
of the other programs' partials) compiles for sm_90, with this Triton and with the oldest one we support (where
RIDGELINE_OLDEST_TRITON names it, as in CI). The rules take it up to 8 rows; the every-op compile test reaches it only
at the CPU shapes' splits, this compiles it at the 8- and 16-row tiles."""

from __future__ import annotations

import os

import pytest
import torch

from ridgeline.ops.int4_matmul.launch import int4_matmul
from ridgeline.ops.int4_matmul.pack import pack_int4
from ridgeline.profile.aot import check_in_child
from ridgeline.profile.launches import LaunchCapture

OLDEST = os.environ.get("RIDGELINE_OLDEST_TRITON", "")


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the GPU tests compile and run it")
@pytest.mark.parametrize("triton_path", ["this", "oldest"])
def test_fused_reduce_compiles_for_sm90(triton_path, tmp_path):
    if triton_path == "oldest" and not os.path.isdir(os.path.join(OLDEST, "triton")):
        pytest.skip("RIDGELINE_OLDEST_TRITON does not name a folder holding triton (CI sets it)")
    wp, s = pack_int4(torch.randn(64, 2048).to(torch.bfloat16))
    with LaunchCapture(run=False) as cap:
        for m in (1, 16):  # the 8- and 16-row swapped tiles the decode rules pick
            int4_matmul(torch.randn(m, 2048).to(torch.bfloat16), wp, s, split_programs=True, fused_reduce=True)
    fused = [la for la in cap.launches if la.args.get("FUSED_REDUCE")]
    assert len(fused) == 2, [la.name for la in cap.launches]
    for la in fused:  # as a GPU launches it: the inline-assembly unpack and tl.dot, not the interpreter's stand-ins
        la.args.update(EMULATE=False, INTERPRETED=False)
    results = check_in_child(fused, 90, tmp_path, OLDEST if triton_path == "oldest" else None)
    assert results is not None
    assert all("error" not in r and r["cubin_bytes"] > 0 for r in results), results
