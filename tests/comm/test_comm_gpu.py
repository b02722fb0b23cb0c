"""GPU tests of tests/comm: ridgeline's all-reduce at world size 1 (and on every visible GPU when there are
more), checked against NCCL, eager and in CUDA graphs; a short `ridgeline comm` sweep at world size 1."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from ridgeline.comm.env import free_port

pytestmark = pytest.mark.gpu


def _spawn(world: int):
    import comm_ranks

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = mp.start_processes(comm_ranks.check_allreduce_gpu, args=(world, f"tcp://127.0.0.1:{free_port()}", q),
                               nprocs=world, join=False, start_method="spawn")
    results = dict(q.get(timeout=300) for _ in range(world))
    procs.join(60)
    return results


def _check(results):
    tol = {"torch.float32": 2e-6, "torch.float16": 1e-3, "torch.bfloat16": 8e-3}
    for rank, out in results.items():
        assert isinstance(out, list), f"rank {rank} failed:\n{out}"
        for c in out:
            assert c["equal_to_nccl"] and c["same_bits"] and c["graph_right"], c
            assert c["err"] <= tol[c["case"][1]] * max(1.0, c["scale"]), c


def test_allreduce_world_size_1_against_nccl():
    _check(_spawn(1))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2+ GPUs")
def test_allreduce_on_every_visible_gpu_against_nccl():
    _check(_spawn(min(torch.cuda.device_count(), 8)))


def test_comm_sweep_world_size_1(tmp_path):
    from ridgeline.comm.runner import make_settings, run

    s = make_settings(ops=None, impls=["nccl", "ridgeline-oneshot", "ridgeline-twoshot"], dtypes=["bf16"],
                      min_bytes=8, max_bytes=1 << 20, placements=None, regimes=None, nprocs=1, budget=0.002,
                      warmup=2, min_iters=3, max_iters=20, graph_calls=5, timeout=60, device_type="cuda")
    d = run(s, json_path=tmp_path / "ws1.json").to_dict()
    assert d["device"]["link"]["source"]
    bad = [f for f in d["failures"] if f["op"] != "sendrecv"]  # (send/recv to oneself: NCCL's word decides)
    assert not bad, bad
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
        for regime in ("eager", "graph"):
            assert any(m["op"] == op and m["regime"] == regime and m["wrong"] == 0 for m in d["measurements"])
    assert all(f.get("reason") for f in d["failures"])
