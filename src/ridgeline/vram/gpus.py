"""Known GPUs with the memory CUDA reports, in bytes, plus ``auto`` detection.

The byte counts are what ``torch.cuda.mem_get_info()[1]`` /
``torch.cuda.get_device_properties().total_memory`` return, i.e. what an engine multiplies by
``gpu_memory_utilization``. They are smaller than the ``memory.total`` nvidia-smi prints (kept in
``nvidia_smi_mib`` for reference) and vary by a few tens of MiB with driver and ECC settings, so
the table values are stored at MiB granularity from a cited observation; ``--gpu auto`` on the
machine gives the exact number. Sources are listed per entry and in docs/vram.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import GpuError

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class GpuSpec:
    name: str
    total_bytes: int
    source: str
    nvidia_smi_mib: int | None = None
    aliases: tuple[str, ...] = ()
    detected: bool = False  # True when read from the device (exact)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "total_bytes": self.total_bytes,
            "total_gib": round(self.total_bytes / GiB, 4),
            "nvidia_smi_mib": self.nvidia_smi_mib,
            "detected": self.detected,
            "source": self.source,
        }


KNOWN_GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("H200", 150_109_880_320,
            "torch.cuda.get_device_properties().total_memory on the lent H200 (driver 580.159.04, torch 2.11), "
            "docs/results/h200-probe.json; torch prints it rounded as total_memory=143156MB (e.g. "
            "ai-bot-pro/achatbot deploy/modal/src/llm/vllm/vlm/skywork_r1v.py)",
            nvidia_smi_mib=143771, aliases=("h200-141gb", "h200-sxm", "nvidia h200")),
    GpuSpec("H100", 81089 * MiB,
            "torch _CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', total_memory=81089MB) (torch 2.7, CUDA 12.8); "
            "vLLM 0.19 log 'total_memory=79.19GiB' in llm-d-incubation/llm-d-planner accuracy/results/v0.19.0",
            nvidia_smi_mib=81559, aliases=("h100-sxm", "h100-80gb", "h100-sxm-80gb", "nvidia h100 80gb hbm3")),
    GpuSpec("B200", 182642 * MiB,
            "torch _CudaDeviceProperties(name='NVIDIA B200', total_memory=182642MB) in ai-bot-pro/achatbot",
            aliases=("nvidia b200",)),
    GpuSpec("A100-80GB", 81050 * MiB,
            "vLLM logs 'total_gpu_memory (79.15GiB)' on A100-SXM4-80GB (2-decimal GiB, so +-5 MiB)",
            nvidia_smi_mib=81920, aliases=("a100-sxm4-80gb", "a100-80g", "a100_80gb")),
    GpuSpec("A100-40GB", 40536 * MiB,
            "_gpuDeviceProperties(name='A100-SXM4-40GB', total_memory=40536MB) (same cudaDeviceProp field)",
            nvidia_smi_mib=40960, aliases=("a100-sxm4-40gb", "a100-40g")),
    GpuSpec("L40S", 45589 * MiB,
            "torch _CudaDeviceProperties(name='NVIDIA L40S', total_memory=45589MB); OOM text "
            "'GPU 0 has a total capacity of 44.52 GiB' in the same write-up",
            nvidia_smi_mib=46068, aliases=("nvidia l40s",)),
    GpuSpec("RTX4090", 24248 * MiB,
            "torch OOM text '23.68 GiB total capacity' on an RTX 4090 (zai-org/CogVideo issue #36; +-5 MiB)",
            nvidia_smi_mib=24564, aliases=("4090", "rtx-4090", "geforce rtx 4090")),
)


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def known_gpu_names() -> list[str]:
    return [g.name for g in KNOWN_GPUS]


def lookup_gpu(name: str) -> GpuSpec:
    key = _norm(name)
    for g in KNOWN_GPUS:
        if key == _norm(g.name) or key in (_norm(a) for a in g.aliases):
            return g
    raise GpuError(f"unknown GPU '{name}' (known: {', '.join(known_gpu_names())}, or 'auto' on a CUDA machine)")


def detect_gpu(device: int = 0) -> GpuSpec:
    """Read the total memory CUDA reports for ``device``. Raises :class:`GpuError` without CUDA."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        raise GpuError("--gpu auto needs torch with CUDA; pass --gpu NAME") from exc
    if not torch.cuda.is_available():
        raise GpuError("--gpu auto needs a CUDA device, and torch.cuda.is_available() is False here; "
                       f"pass --gpu NAME (known: {', '.join(known_gpu_names())})")
    _free, total = torch.cuda.mem_get_info(device)
    name = torch.cuda.get_device_name(device)
    return GpuSpec(name, int(total), f"torch.cuda.mem_get_info({device}) on this machine", detected=True)


def resolve_gpu(gpu: str | GpuSpec, *, memory_bytes: int | None = None) -> GpuSpec:
    if isinstance(gpu, GpuSpec):
        spec = gpu
    elif _norm(gpu) == "auto":
        spec = detect_gpu()
    else:
        spec = lookup_gpu(gpu)
    if memory_bytes is not None:
        spec = GpuSpec(spec.name, int(memory_bytes), f"total memory overridden to {memory_bytes} bytes",
                       spec.nvidia_smi_mib, spec.aliases, spec.detected)
    return spec
