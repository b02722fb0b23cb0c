"""The tiled attention kernels (forward, dK/dV, dQ) compile for sm_90 without register spills (or, where the H200
measured a spilling tile fastest, within the spills it was measured with) at every tile config the GPU launch rules
pick.

Spills in an inner loop (local-memory stores and loads per key or query tile) cost time on Hopper, and a change to the
kernel or to rules.py could bring them back silently: no CPU test runs the GPU tiles. The launches are recorded as
`ridgeline profile` records them (meta inputs, the package's `gpu_rules`: the forward's TMA flag included), compiled
ahead of time for sm_90 with Triton's bundled ptxas (in a clean child process under the interpreter) and the ptxas
report read back (scripts/spills_sm90.py prints the same for every attention kernel and for candidate configs).
"""

from __future__ import annotations

import pytest
import torch

from ridgeline.ops.attention.rules import config_for
from ridgeline.profile.aot import compile_in_child, compile_launches, interpreter_on
from ridgeline.profile.launches import capture_call

HEAD_DIMS = (64, 128, 256)
KERNELS = {"fwd": ("attention", "_attn_fwd"), "dkdv": ("attention_bwd", "_attn_bwd_dkdv"),
           "dq": ("attention_bwd", "_attn_bwd_dq")}
# Spill bytes (stores and loads each) a rule may have because the H200 timed that tile fastest anyway: D=128's dK/dV
# 32 x 64 w4 s3 spills 412/416 B (full) and 492/496 B (causal) with Triton 3.7.1's ptxas and ran the whole backward
# 1.61x / 2.0x faster than the spill-free 16 x 128 w8 s2 (docs/results/h200-tune-attention-s17.json). Every other
# (kernel, head dim): none but D=256's dK/dV 64 x 64 w8 s2, 548/592 B (572/624 causal), which ran the whole backward
# 2.26x faster than the spill-free 16 x 32 w8 s2 (h200-tune-attention-d256-bwd-s18.json). The other s18 tiles (D=64
# all three, D=256 forward through TMA) compile without spills.
SPILL_ALLOWANCE = {("dkdv", 128): 64, ("dkdv", 256): 320}  # (through TMA since s39: <= 44 B and <= 292 B)


@pytest.fixture(scope="module")
def kernel_facts(tmp_path_factory) -> dict[tuple[str, int, bool], dict]:
    launches, keys = [], []
    for d in HEAD_DIMS:
        for causal in (False, True):
            calls = {op: capture_call(op, "ridgeline", (1, 1024, 4, 4, d), torch.bfloat16,
                                      "causal" if causal else "") for op in ("attention", "attention_bwd")}
            for kernel, (op, name) in KERNELS.items():
                found = [la for la in calls[op].launches if la.name == name]
                assert len(found) == 1, [la.name for la in calls[op].launches]
                cfg = config_for(kernel, d, causal, interpreted=False)
                la = found[0]
                # The recorded launch carries the GPU rule's tile, not the interpreter's 16 x 16.
                assert (la.args["BLOCK_M"], la.args["BLOCK_N"], la.num_warps, la.num_stages) == (
                    cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages)
                assert la.args["TMA"] == cfg.tma  # (meta tensors pass launch.tma_readable)
                launches.append(la)
                keys.append((kernel, d, causal))
    out_dir = tmp_path_factory.mktemp("attn-sm90")
    kernels = compile_in_child(launches, 90, out_dir) if interpreter_on() else compile_launches(launches, 90, out_dir)
    assert kernels is not None and len(kernels) == len(launches), "each (kernel, D, causal) is its own specialization"
    return dict(zip(keys, kernels, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_kernel_does_not_spill_on_sm90(kernel_facts, kernel, d, causal):
    f = kernel_facts[(kernel, d, causal)]
    assert f["spill_stores_bytes"] is not None, "ptxas gave no spill report"
    allowed = SPILL_ALLOWANCE.get((kernel, d), 0)
    assert max(f["spill_stores_bytes"], f["spill_loads_bytes"]) <= allowed, (
        f"{kernel} at D={d} causal={causal} spills {f['spill_stores_bytes']}/{f['spill_loads_bytes']} B on sm_90 "
        f"({f['registers']} registers; allowed {allowed}): see scripts/spills_sm90.py and rules.py")
    assert f["registers"] <= 255
    assert f["shared_bytes"] <= 227 * 1024  # sm_90's opt-in shared memory per block
