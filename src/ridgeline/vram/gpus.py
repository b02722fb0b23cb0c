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

from ridgeline.core.hardware import GPUS, normalize_name

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


# One table for the whole tool (ridgeline.core.hardware): memory as CUDA reports it, with its source.
KNOWN_GPUS: tuple[GpuSpec, ...] = tuple(
    GpuSpec(g.name, g.memory_bytes, g.memory_source, g.nvidia_smi_mib, g.aliases) for g in GPUS
)


def known_gpu_names() -> list[str]:
    return [g.name for g in KNOWN_GPUS]


def lookup_gpu(name: str) -> GpuSpec:
    key = normalize_name(name)
    for g in KNOWN_GPUS:
        if key == normalize_name(g.name) or key in (normalize_name(a) for a in g.aliases):
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
    elif normalize_name(gpu) == "auto":
        spec = detect_gpu()
    else:
        spec = lookup_gpu(gpu)
    if memory_bytes is not None:
        spec = GpuSpec(spec.name, int(memory_bytes), f"total memory overridden to {memory_bytes} bytes",
                       spec.nvidia_smi_mib, spec.aliases, spec.detected)
    return spec
