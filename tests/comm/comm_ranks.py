"""Functions the spawned ranks of tests/comm run (importable by name: tests/comm is on sys.path)."""

from __future__ import annotations

import os
import traceback

import torch
import torch.distributed as dist


def _init(rank: int, world: int, init: str) -> None:
    from ridgeline.comm.env import apply_no_multicast

    apply_no_multicast()
    os.environ["TRITON_INTERPRET"] = "1"
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)


# (numel, dtype, algorithm): odd sizes, one element, more elements than one program step, shards that do not
# divide evenly, and both algorithms on every dtype.
CASES = [(1, torch.float32, "oneshot"), (7, torch.bfloat16, "twoshot"), (1000, torch.float16, "oneshot"),
         (1000, torch.float32, "twoshot"), (3001, torch.bfloat16, "oneshot"), (3001, torch.float16, "twoshot"),
         (5, torch.float32, "twoshot")]


def check_allreduce(rank: int, world: int, init: str, results) -> None:
    """Our all-reduce on random data vs a float64 sum of every rank's input, vs gloo's result on exact integers,
    in place and out of place, and the same bits on every rank."""
    try:
        _init(rank, world, init)
        from ridgeline.comm import all_reduce, release_workspaces, workspace

        out = []
        for numel, dtype, algo in (CASES if world <= 2 else CASES[1::2]):  # (4 ranks share 2 CI cores)
            gen = torch.Generator().manual_seed(1000 * numel + 17)
            xs = [torch.randn(numel, generator=gen).to(dtype) for _ in range(world)]  # every rank's input
            before = xs[rank].clone()
            y = all_reduce(xs[rank], algorithm=algo)
            ref = sum(x.double() for x in xs)
            err = float((y.double() - ref).abs().max())
            # one rounding of the fp32 sum to the dtype: half an ulp of the largest result, with room
            tol = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype] * max(
                1.0, float(ref.abs().max()))
            gathered = [torch.empty_like(y) for _ in range(world)]
            dist.all_gather(gathered, y)
            same = all(torch.equal(g, y) for g in gathered)
            ints = ((torch.arange(numel) * 7 + rank * 13) % (256 // world) + 1).to(dtype)
            theirs = ints.clone()
            dist.all_reduce(theirs)
            ours = ints.clone()
            all_reduce(ours, out=ours, algorithm=algo)  # in place
            out.append({"case": (numel, str(dtype), algo), "err": err, "tol": tol, "same_bits": same,
                        "equal_to_gloo": torch.equal(ours, theirs), "input_kept": torch.equal(xs[rank], before)})
        empty = all_reduce(torch.empty(0), algorithm="oneshot")
        out.append({"empty": tuple(empty.shape), "kind": workspace(torch.device("cpu")).kind,
                    "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                           "NVSHMEM_DISABLE_NVLS")}})
        release_workspaces()
        dist.destroy_process_group()
        results.put((rank, out))
    except Exception:  # noqa: BLE001 - the test shows the rank's traceback
        results.put((rank, traceback.format_exc()))


def check_allreduce_gpu(rank: int, world: int, init: str, results) -> None:
    """On N GPUs with NCCL: ours equal to NCCL's all_reduce on exact inputs, close on random ones, the same bits on
    every rank, eager and replayed in a CUDA graph."""
    try:
        from ridgeline.comm.env import apply_no_multicast

        apply_no_multicast()
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
        dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world, device_id=dev)
        from ridgeline.comm import all_reduce, release_workspaces

        out = []
        for numel in (1, 4097, 65536 + 3, (4 << 20) // 2):
            for dtype in (torch.bfloat16, torch.float16, torch.float32):
                if numel * torch.empty((), dtype=dtype).element_size() > 4 << 20:
                    continue
                for algo in ("oneshot", "twoshot"):
                    ints = ((torch.arange(numel, device=dev) * 7 + rank * 13) % (256 // world) + 1).to(dtype)
                    nccl = ints.clone()
                    dist.all_reduce(nccl)
                    ours = all_reduce(ints, algorithm=algo)
                    x = torch.randn(numel, device=dev, generator=torch.Generator(dev).manual_seed(rank)).to(dtype)
                    y = all_reduce(x, algorithm=algo)
                    ref = x.double()
                    dist.all_reduce(ref)
                    gathered = [torch.empty_like(y) for _ in range(world)]
                    dist.all_gather(gathered, y)
                    g = torch.cuda.CUDAGraph()
                    z = torch.empty_like(ints)
                    with torch.cuda.graph(g):
                        all_reduce(ints, out=z, algorithm=algo)
                    ints.mul_(2)  # new contents, same buffer: the replay must see them
                    g.replay()
                    torch.cuda.synchronize()
                    out.append({"case": (numel, str(dtype), algo), "equal_to_nccl": torch.equal(ours, nccl),
                                "err": float((y.double() - ref).abs().max()), "scale": float(ref.abs().max()),
                                "same_bits": all(torch.equal(a, y) for a in gathered),
                                "graph_right": torch.equal(z, nccl * 2)})
        if torch.cuda.device_count() > 1:  # called while another GPU is the current device: runs on x's
            ints = ((torch.arange(4097, device=dev) * 7 + rank * 13) % (256 // world) + 1).to(torch.bfloat16)
            nccl = ints.clone()
            dist.all_reduce(nccl)
            with torch.cuda.device((rank + 1) % torch.cuda.device_count()):
                ours = all_reduce(ints, algorithm="oneshot")
            torch.cuda.synchronize(dev)
            out.append({"case": (4097, "torch.bfloat16", "other-current-device"), "err": 0.0, "scale": 1.0,
                        "equal_to_nccl": torch.equal(ours, nccl), "same_bits": True, "graph_right": True})
        release_workspaces()
        dist.destroy_process_group()
        results.put((rank, out))
    except Exception:  # noqa: BLE001
        results.put((rank, traceback.format_exc()))
