"""The GPUs ridgeline knows, in one place: memory as CUDA reports it (for VRAM budgets), SM count and compute
capability (for grids and occupancy when no GPU is at hand), and vendor datasheet figures (shown beside the
probed ceilings for contrast, never used as the roof). Every memory figure cites where it was observed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1 << 20

# Dense datasheet rates (no sparsity), TFLOP/s per unit, and DRAM GB/s.
_HOPPER_TFLOPS = {"fp32": 67, "tf32": 494, "bf16": 989, "fp16": 989, "fp8": 1979}


@dataclass(frozen=True)
class GpuModel:
    name: str
    family: str  # what the CUDA device name contains ("NVIDIA H200" -> "H200"): how a device finds its row
    arch: int  # compute capability x 10
    sm_count: int
    memory_bytes: int  # what torch.cuda.mem_get_info()[1] reports (smaller than nvidia-smi's memory.total)
    memory_source: str
    nvidia_smi_mib: int | None = None
    aliases: tuple[str, ...] = ()
    dram_gbps: float | None = None  # datasheet
    tflops: dict[str, float | None] = field(default_factory=dict)  # datasheet

    def datasheet(self) -> dict[str, object] | None:
        if self.dram_gbps is None and not self.tflops:
            return None
        return {"dram_gbps": self.dram_gbps, "tflops": dict(self.tflops)}


GPUS: tuple[GpuModel, ...] = (
    GpuModel("H200", "H200", 90, 132, 150_109_880_320,
             "torch.cuda.get_device_properties().total_memory on the lent H200 (driver 580.159.04, torch 2.11), "
             "docs/results/h200-probe.json; torch prints it rounded as total_memory=143156MB (e.g. "
             "ai-bot-pro/achatbot deploy/modal/src/llm/vllm/vlm/skywork_r1v.py)",
             nvidia_smi_mib=143771, aliases=("h200-141gb", "h200-sxm", "nvidia h200"),
             dram_gbps=4800, tflops=_HOPPER_TFLOPS),
    GpuModel("H100", "H100", 90, 132, 81089 * MiB,
             "torch _CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', total_memory=81089MB) (torch 2.7, CUDA 12.8); "
             "vLLM 0.19 log 'total_memory=79.19GiB' in llm-d-incubation/llm-d-planner accuracy/results/v0.19.0",
             nvidia_smi_mib=81559, aliases=("h100-sxm", "h100-80gb", "h100-sxm-80gb", "nvidia h100 80gb hbm3"),
             dram_gbps=3350, tflops=_HOPPER_TFLOPS),
    GpuModel("B200", "B200", 100, 148, 182642 * MiB,
             "torch _CudaDeviceProperties(name='NVIDIA B200', total_memory=182642MB) in ai-bot-pro/achatbot",
             aliases=("nvidia b200",)),
    GpuModel("A100-80GB", "A100", 80, 108, 81050 * MiB,
             "vLLM logs 'total_gpu_memory (79.15GiB)' on A100-SXM4-80GB (2-decimal GiB, so +-5 MiB)",
             nvidia_smi_mib=81920, aliases=("a100-sxm4-80gb", "a100-80g", "a100_80gb"),
             dram_gbps=2039, tflops={"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "fp8": None}),
    GpuModel("A100-40GB", "A100", 80, 108, 40536 * MiB,
             "_gpuDeviceProperties(name='A100-SXM4-40GB', total_memory=40536MB) (same cudaDeviceProp field)",
             nvidia_smi_mib=40960, aliases=("a100-sxm4-40gb", "a100-40g"),
             dram_gbps=1555, tflops={"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "fp8": None}),
    GpuModel("L40S", "L40S", 89, 142, 45589 * MiB,
             "torch _CudaDeviceProperties(name='NVIDIA L40S', total_memory=45589MB); OOM text "
             "'GPU 0 has a total capacity of 44.52 GiB' in the same write-up",
             nvidia_smi_mib=46068, aliases=("nvidia l40s",),
             dram_gbps=864, tflops={"fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362, "fp8": 733}),
    GpuModel("RTX4090", "4090", 89, 128, 24248 * MiB,
             "torch OOM text '23.68 GiB total capacity' on an RTX 4090 (zai-org/CogVideo issue #36; +-5 MiB)",
             nvidia_smi_mib=24564, aliases=("4090", "rtx-4090", "geforce rtx 4090")),
)

# SMs assumed for a grid when no GPU says otherwise, per compute capability (the flagship of each).
DEFAULT_SM_COUNT: dict[int, int] = {90: 132, 80: 108, 89: 142, 100: 148}


def normalize_name(name: str) -> str:
    """How GPU names and aliases compare: lower case, '-' for spaces and underscores."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def model_for_device(device_name: str) -> GpuModel | None:
    """The row of a CUDA device name such as 'NVIDIA H200': the longest name or alias it contains, else the first
    row whose family it contains."""
    key = normalize_name(device_name)
    named = [(len(a), g) for g in GPUS for a in (g.name, *g.aliases) if normalize_name(a) in key]
    if named:
        return max(named, key=lambda t: t[0])[1]
    return next((g for g in GPUS if g.family in device_name), None)


def datasheet_for(device_name: str) -> dict[str, object] | None:
    g = model_for_device(device_name)
    return g.datasheet() if g else None


def sm_count_for_arch(arch: int) -> int:
    return DEFAULT_SM_COUNT.get(arch, DEFAULT_SM_COUNT[90])
