"""ridgeline's all-reduce kernels (one-shot, two-shot) across real processes on the CPU.

What runs here is the GPU code path minus the GPU: the same Triton kernels (under Triton's interpreter), the same
cross-rank flag barrier (real atomic CAS on memory shared between processes), the same launch rules and
validation; the buffers are shared-memory files instead of CUDA symmetric memory. Not exercised here: symmetric
memory's rendezvous, NVLink ordering (release/acquire at system scope on a GPU), CUDA graphs, fast launch.
"""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from ridgeline.comm import MAX_BYTES, all_reduce
from ridgeline.comm.allreduce import RULES, rule_for
from ridgeline.comm.env import free_port


def _spawn(world: int) -> dict[int, object]:
    import comm_ranks

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = f"tcp://127.0.0.1:{free_port()}"
    procs = mp.start_processes(comm_ranks.check_allreduce, args=(world, init, q), nprocs=world, join=False,
                               start_method="spawn")
    results = {}
    for _ in range(world):
        rank, out = q.get(timeout=120)
        results[rank] = out
    procs.join(60)
    return results


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])  # (4 ranks on 2 cores: ~15 s)
def test_allreduce_across_processes(world):
    results = _spawn(world)
    for rank, out in results.items():
        assert isinstance(out, list), f"rank {rank} failed:\n{out}"
        *cases, last = out
        for c in cases:
            assert c["err"] <= c["tol"], c
            assert c["same_bits"], c  # every rank ends with the same bits
            assert c["equal_to_gloo"], c  # exact inputs: equal to the process group's own all_reduce
            assert c["input_kept"], c  # out of place leaves the input alone
        assert last["empty"] == (0,)
        assert last["kind"] == "shared-memory"
        assert last["env"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                               "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.mark.parametrize("call, message", [
    (lambda: all_reduce([1.0]), "x: expected a torch.Tensor, got list"),
    (lambda: all_reduce(torch.zeros(4, dtype=torch.int32)), "x: expected dtype bfloat16, float16 or float32"),
    (lambda: all_reduce(torch.zeros(4, 4).t()), "x: expected a contiguous tensor"),
    (lambda: all_reduce(torch.zeros(MAX_BYTES // 4 + 1)), "is above ridgeline's all-reduce limit of 4194304 bytes"),
    (lambda: all_reduce(torch.zeros(4), out=torch.zeros(5)), "out: expected shape (4,)"),
    (lambda: all_reduce(torch.zeros(4), algorithm="ring"), "algorithm: expected one of oneshot, twoshot"),
    (lambda: all_reduce(torch.zeros(4)), "group: torch.distributed is not initialized"),
])
def test_refusals_are_one_line(call, message):
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_launch_rules_cover_every_allowed_size_in_order():
    limits = [r[0] for r in RULES]
    assert limits == sorted(limits) and limits[-1] == MAX_BYTES
    assert rule_for(1) == RULES[0][1:3] and rule_for(MAX_BYTES) == RULES[-1][1:3]
    with pytest.raises(ValueError, match="above ridgeline's all-reduce limit"):
        rule_for(MAX_BYTES + 1)
    from ridgeline.comm.kernel import FLAG_BYTES, MAX_PROGRAMS, MAX_WORLD, PHASES

    assert all(p <= MAX_PROGRAMS for _, p, _, _ in RULES)
    assert PHASES * MAX_PROGRAMS * MAX_WORLD * 4 <= FLAG_BYTES  # every barrier slot fits the flag region
