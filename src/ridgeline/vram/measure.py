"""``--measure``: allocate the plan on a real GPU and compare it with ``torch.cuda.mem_get_info``.

What is allocated, in order, on one device (rank 0's share when tp > 1):

1. one ``uint8`` buffer of the planned weights + rotary caches (bytes per rank);
2. the KV pool exactly as vLLM lays it out: ``group_size`` tensors of ``num_blocks x page_bytes``;
3. a transient buffer of the estimated activation peak (freed right after), to check the headroom.

After each step the free memory CUDA reports is read, so the record shows what the formula
missed (allocator rounding, the CUDA context, a GPU-table total that differs from this device).
Everything is freed before returning.
"""

from __future__ import annotations

import datetime as _dt
import platform
from typing import Any

from .errors import MeasureError
from .planner import Plan, gib


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(torch.cuda.is_available())


def _nvml(device: int) -> dict[str, Any]:
    """nvidia-smi's view (total as the driver reports it), if pynvml is importable."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(device)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            driver = pynvml.nvmlSystemGetDriverVersion()
            return {"nvml_total_bytes": int(mem.total), "nvml_used_bytes": int(mem.used),
                    "driver_version": driver.decode() if isinstance(driver, bytes) else str(driver)}
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - optional information only
        return {"nvml_error": f"{type(exc).__name__}: {exc}"}


def measure(p: Plan, device: int = 0) -> dict[str, Any]:
    """Allocate ``p`` on CUDA device ``device`` and return the comparison record.

    Raises :class:`MeasureError` when CUDA is unavailable. An out-of-memory during allocation is
    recorded in the returned dict (``"error"``) rather than raised, so the partial record survives.
    """
    if not cuda_available():
        raise MeasureError("--measure needs a CUDA GPU, and torch.cuda.is_available() is False on this machine; "
                           "run it on the GPU host (the plan itself needs no GPU)")
    import torch

    dev = torch.device("cuda", device)
    torch.cuda.set_device(dev)
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(dev)
    free0, total = (int(x) for x in torch.cuda.mem_get_info(dev))
    lay = p.layout
    weights_planned = p.weights_loaded_bytes
    kv_planned = p.num_blocks * lay.block_bytes
    act_planned = p.activation.peak_bytes
    record: dict[str, Any] = {
        "schema": "ridgeline.vram.measure/1",
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": {
            "index": device, "name": props.name, "total_bytes": total,
            "properties_total_memory": int(props.total_memory), "torch": torch.__version__,
            "cuda": torch.version.cuda, **_nvml(device),
        },
        "plan_gpu_total_bytes": p.gpu.total_bytes,
        "plan_gpu_total_minus_device_bytes": p.gpu.total_bytes - total,
        "free_before_bytes": free0,
        "in_use_before_bytes": total - free0,
        "ranks_measured": 1,
    }
    if p.tp > 1:
        record["note"] = f"tp={p.tp}: this device holds one rank's share (the plan is per rank)"
    stages: list[dict[str, Any]] = []
    held: list[Any] = []
    error = None
    free = free0
    try:
        held.append(torch.empty(weights_planned, dtype=torch.uint8, device=dev))
        torch.cuda.synchronize(dev)
        f1 = int(torch.cuda.mem_get_info(dev)[0])
        stages.append({"name": "weights + rotary caches", "planned": weights_planned, "observed": free - f1})
        free = f1
        for _ in range(lay.group_size):
            held.append(torch.empty((p.num_blocks, lay.page_bytes), dtype=torch.uint8, device=dev))
        torch.cuda.synchronize(dev)
        f2 = int(torch.cuda.mem_get_info(dev)[0])
        stages.append({"name": f"KV pool ({lay.group_size} x {p.num_blocks:,} blocks x {lay.page_bytes:,} B)",
                       "planned": kv_planned, "observed": free - f2})
        free = f2
        act = torch.empty(act_planned, dtype=torch.uint8, device=dev)
        torch.cuda.synchronize(dev)
        f3 = int(torch.cuda.mem_get_info(dev)[0])
        stages.append({"name": "activation peak (estimate, transient)", "planned": act_planned,
                       "observed": free - f3})
        record["free_at_peak_bytes"] = f3
        del act
    except torch.cuda.OutOfMemoryError as exc:
        error = f"CUDA out of memory after {len(stages)} stage(s): {str(exc).splitlines()[0]}"
    finally:
        record["torch_allocated_bytes"] = int(torch.cuda.memory_allocated(dev))
        record["torch_reserved_bytes"] = int(torch.cuda.memory_reserved(dev))
        held.clear()
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        record["free_after_release_bytes"] = int(torch.cuda.mem_get_info(dev)[0])

    budget = int(total * p.inputs["gpu_memory_utilization"])
    kv_with_device_total = budget - sum(t.bytes for t in p.budget_terms[2:])
    comparison = [
        {"name": "GPU total (table vs device)", "planned": p.gpu.total_bytes, "observed": total},
        {"name": "in use before allocating (context, other processes)", "planned": p.term("cuda_context").bytes,
         "observed": total - free0},
        *stages,
        {"name": "KV pool if planned with this device's total", "planned": p.kv_pool_bytes,
         "observed": kv_with_device_total},
    ]
    record["stages"] = stages
    record["comparison"] = comparison
    record["kv_pool_with_device_total_bytes"] = kv_with_device_total
    record["kv_tokens_with_device_total"] = (max(kv_with_device_total, 0) // p.layout.block_bytes
                                             // p.layout.num_groups * p.inputs["block_size"])
    if "free_at_peak_bytes" in record:
        # what would be left if the non-torch estimate and the outside-budget items were also resident
        record["headroom_at_peak_bytes"] = record["free_at_peak_bytes"] - p.term("non_torch").bytes - sum(
            t.bytes for t in p.outside_terms if t.key != "cuda_context")
        record["headroom_at_peak_gib"] = round(gib(record["headroom_at_peak_bytes"]), 4)
    if error:
        record["error"] = error
    return record
