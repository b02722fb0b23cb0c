"""The environment a number was measured in: enough to reproduce it, or to know why it differs."""

from __future__ import annotations

import os
import platform
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """sha and dirty flag of the ridgeline checkout the code runs from (None when installed from a wheel)."""
    here = Path(__file__).resolve().parent
    given = os.environ.get("RIDGELINE_GIT_SHA")
    sha = _git(["rev-parse", "HEAD"], here)
    if given:
        # The caller's word wins: a copy of the tree shipped to a GPU machine may carry no .git, or a stale one
        # (the H200 copies of session 2 carried the session's starting commit, not the one that ran). What the
        # checkout says is kept beside it when it disagrees.
        dirty = os.environ.get("RIDGELINE_GIT_DIRTY")
        out: dict[str, Any] = {"git_sha": given,
                               "git_dirty": None if dirty is None else dirty not in ("0", "false", "")}
        if sha and not sha.startswith(given):
            out["git_sha_checkout"] = sha
        return out
    if sha is None:
        return {"git_sha": None, "git_dirty": None}
    status = _git(["status", "--porcelain", "--untracked-files=no"], here)
    return {"git_sha": sha, "git_dirty": bool(status)}


def _nvml_handle(pynvml: Any, cuda_index: int) -> Any:
    """NVML's handle of a CUDA device: by UUID (CUDA and NVML number GPUs differently under
    CUDA_VISIBLE_DEVICES or a non-PCI order), by index when the UUID is not available."""
    try:
        uuid = str(torch.cuda.get_device_properties(cuda_index).uuid)
        return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:
        return pynvml.nvmlDeviceGetHandleByIndex(cuda_index)


def nvml_state(index: int = 0) -> dict[str, Any]:
    """Clocks, power and throttle reasons of CUDA device `index` from NVML; empty when NVML is unavailable."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
        h = _nvml_handle(pynvml, index) if torch.cuda.is_available() else pynvml.nvmlDeviceGetHandleByIndex(index)
        state = {
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "throttle_reasons": int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
        }
        driver = pynvml.nvmlSystemGetDriverVersion()
        state["driver"] = driver.decode() if isinstance(driver, bytes) else driver
        return state
    except Exception:  # NVML missing in a container, or a field this GPU does not report
        return {}


# Throttle reasons that mean the clock was held down (NVML's clocksThrottleReasons bits): software power cap,
# hardware slowdown, software thermal, hardware thermal, hardware power brake. Idle and app settings are not.
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
_THROTTLE_NAMES = {0x4: "sw-power-cap", 0x8: "hw-slowdown", 0x20: "sw-thermal", 0x40: "hw-thermal",
                   0x80: "hw-power-brake"}


def throttle_names(bits: int) -> list[str]:
    """The clock-holding reasons set in NVML's throttle bits, by name (a record says which, not only that)."""
    return [name for bit, name in _THROTTLE_NAMES.items() if bits & bit]


def command_line(argv: list[str]) -> str:
    """The command as a user retypes it: the entry point by its name, not this machine's path to it. A CLI started
    by `python -c "from ridgeline.cli import main; main()"` (the device plans' shim) has argv[0] == "-c"; a bare
    ["-c"] is the Python API called from `python -c "..."`, whose code argv does not hold: not `ridgeline`."""
    argv = list(argv)
    if len(argv) > 1 and argv[0] == "-c":
        argv[0] = "ridgeline"
    if argv and Path(argv[0]).name in ("ridgeline", "__main__.py"):
        argv[0] = "ridgeline" if Path(argv[0]).name == "ridgeline" else "python -m ridgeline"
        return argv[0] + (" " + shlex.join(argv[1:]) if argv[1:] else "")
    return shlex.join(argv)


def capture_env(argv: list[str] | None = None) -> dict[str, Any]:
    import triton

    import ridgeline

    env: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "ridgeline": ridgeline.__version__,
        "command": command_line(argv if argv is not None else sys.argv),
        **git_state(),
    }
    from ridgeline.lib.launch import interpreter_enabled

    env["triton_interpret"] = interpreter_enabled()
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(
            device_type="cuda",
            gpu=props.name,
            gpu_count=torch.cuda.device_count(),
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            gpu_memory_bytes=props.total_memory,
        )
        nv = nvml_state(torch.cuda.current_device())
        env["driver"] = nv.pop("driver", None)
        env["clocks_at_start"] = nv
    else:
        env.update(device_type="cpu", gpu=None, cpu=platform.processor() or platform.machine())
    return env
