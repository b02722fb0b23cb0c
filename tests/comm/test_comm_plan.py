"""The pieces of `ridgeline comm` that need no processes: sizes, factors, exact inputs, the expected values."""

from __future__ import annotations

import pytest
import torch

from ridgeline.comm import collectives as C
from ridgeline.comm.env import NO_MULTICAST, multicast_problems, torchrun_env
from ridgeline.comm.runner import make_settings, parse_bytes, plan_cases, sizes_between


def test_sizes_are_powers_of_two_from_8_bytes_to_8_gib():
    sizes = sizes_between(8, parse_bytes("8G"))
    assert sizes[0] == 8 and sizes[-1] == 8 << 30 and len(sizes) == 31
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    assert sizes_between(5, 100) == [8, 16, 32, 64]
    assert [parse_bytes(t) for t in ("8", "64K", "4MiB", "1G", "2kb")] == [8, 65536, 4 << 20, 1 << 30, 2048]
    with pytest.raises(ValueError, match="size: expected bytes"):
        parse_bytes("lots")


def test_bus_factors_are_nccl_tests():
    assert C.bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert C.bus_factor(op, 4) == pytest.approx(3 / 4)
    assert C.bus_factor("broadcast", 4) == C.bus_factor("sendrecv", 4) == 1.0
    assert C.bus_factor("all_reduce", 1) == 0.0


@pytest.mark.parametrize("dtype", list(C.DTYPES.values()))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_inputs_keep_every_partial_sum_exact(dtype, n):
    for op in C.OPS:
        m = C.modulus(op, dtype, n)
        top = m * n if op in C.REDUCING else m
        assert top <= C.EXACT[dtype]
        # every integer up to the largest sum (the top of the range is where a dtype runs out of bits)
        values = torch.cat([torch.arange(1, min(top, 4096) + 1), torch.arange(max(1, top - 4096), top + 1)])
        assert torch.equal(values.to(dtype).to(torch.int64), values)


def _simulate(op: str, n: int, count: int, m: int, dtype) -> list[torch.Tensor]:
    """Each rank's output of the collective, computed directly from every rank's input."""
    chunk = count // n if op in C.SPLIT else count
    ins = [C.pattern(r, torch.arange(chunk if op == "all_gather" else count), m).to(dtype) for r in range(n)]
    if op == "all_reduce":
        return [sum(x.double() for x in ins).to(dtype)] * n
    if op == "all_gather":
        return [torch.cat(ins)] * n
    if op == "reduce_scatter":
        total = sum(x.double() for x in ins).to(dtype)
        return [total[r * chunk:(r + 1) * chunk] for r in range(n)]
    if op == "all_to_all":
        return [torch.cat([ins[q][r * chunk:(r + 1) * chunk] for q in range(n)]) for r in range(n)]
    if op == "broadcast":
        return [ins[0]] * n
    return [ins[(r - 1) % n] for r in range(n)]


@pytest.mark.parametrize("op", C.OPS)
@pytest.mark.parametrize("n", [1, 2, 4])
def test_expected_values_match_the_collective_and_count_a_wrong_element(op, n):
    dtype = torch.bfloat16
    count = C.element_count(op, 4 * 96 + 4, 2, n)
    m = C.modulus(op, dtype, n)
    outs = _simulate(op, n, count, m, dtype)
    for r, out in enumerate(outs):
        assert C.count_wrong(op, out, r, n, count, m) == 0
        bad = out.clone()
        bad[-1] += 1
        bad[0] = 0  # the poison value: never right
        assert C.count_wrong(op, bad, r, n, count, m) == 2
        if n > 1 and op != "broadcast":  # another rank's result is wrong almost everywhere
            if op not in ("all_reduce", "all_gather"):  # (those two give every rank the same result)
                assert C.count_wrong(op, outs[(r + 1) % n], r, n, count, m) > out.numel() // 2


def test_plan_skips_with_reasons():
    s = make_settings(ops=["all_reduce", "all_to_all"], impls=["gloo", "ridgeline-oneshot"], dtypes=["fp32", "int32"],
                      min_bytes=4, max_bytes=8 << 20, placements=None, regimes=None, nprocs=4, budget=0.01,
                      warmup=1, min_iters=1, max_iters=2, graph_calls=1, timeout=10, device_type="cpu")
    cases, skipped = plan_cases(s)
    reasons = {(k["op"], k["impl"], k["dtype"], k["variant"], k["regime"], k["size"]): k["reason"] for k in skipped}
    assert reasons[("all_reduce", "gloo", "fp32", "out-of-place", "eager", None)] == (
        "torch.distributed offers all_reduce in-place only")
    assert reasons[("all_to_all", "gloo", "fp32", "in-place", "eager", None)] == (
        "torch.distributed offers all_to_all out-of-place only")
    assert reasons[("all_reduce", "ridgeline-oneshot", "int32", "in-place", "eager", None)] == (
        "ridgeline-oneshot takes bf16, fp16 or fp32")
    assert "above ridgeline-oneshot's limit of 4194304 bytes" in reasons[
        ("all_reduce", "ridgeline-oneshot", "fp32", "in-place", "eager", 8 << 20)]
    assert "less than one element per rank" in reasons[("all_to_all", "gloo", "fp32", "out-of-place", "eager", 8)]
    assert ("all_reduce", "gloo", "fp32", "in-place", "graph", None) in reasons
    assert all(c["count"] % 4 == 0 for c in cases if c["op"] == "all_to_all")
    assert max(c["bytes"] for c in cases if c["impl"] == "ridgeline-oneshot") == 4 << 20


def test_multicast_switches_and_torchrun_detection():
    env = {}
    assert len(multicast_problems(env)) == 3
    from ridgeline.comm.env import apply_no_multicast

    apply_no_multicast(env)
    assert env == NO_MULTICAST and multicast_problems(env) == []
    assert torchrun_env({}) is None
    tr = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert torchrun_env(tr) == (1, 2, 1)


def test_multicast_is_off_before_the_process_group_exists(monkeypatch):
    """env.init sets the switches before init_process_group sees the environment."""
    import torch.distributed as dist

    from ridgeline.comm import env as E

    for k in NO_MULTICAST:
        monkeypatch.delenv(k, raising=False)
    seen = {}

    def fake_init(*a, **kw):
        import os

        seen.update({k: os.environ.get(k) for k in NO_MULTICAST})
        raise RuntimeError("stop here")

    monkeypatch.setattr(dist, "init_process_group", fake_init)
    with pytest.raises(RuntimeError, match="stop here"):
        E.init(0, 1, "cpu", 5.0, init_method="tcp://127.0.0.1:1")
    assert seen == NO_MULTICAST
