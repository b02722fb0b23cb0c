"""`ridgeline profile`: compile facts, occupancy, SASS, Nsight Compute and a torch trace of one implementation at
one shape, for any op and any implementation that launches Triton kernels (ours, a peer's, a user's file).

Modules, by job: occupancy (ArchLimits, theoretical occupancy), sass (CUDA binary tools, SASS parsing), facts
(one compiled kernel's facts), jit_cache (kernels in Triton's JIT caches), launches (capturing the Triton launches a
call makes, by patching Triton's launch entry points), hooks (an op's optional `profile` module), aot
(ahead-of-time compilation for sm_90 without a GPU), child (the clean child processes), ncu (Nsight Compute),
kineto (torch profiler trace), run (the `profile(...)` entry point and `attach_profile`).
"""

from ridgeline.profile.aot import (
    aot_compile,
    aot_kernel_facts,
    compile_in_child,
    compile_launches,
    launch_from_json,
    launch_to_json,
    specialization,
)
from ridgeline.profile.facts import kernel_facts
from ridgeline.profile.hooks import hooks_for
from ridgeline.profile.jit_cache import compiled_in, jit_new_kernels, jit_snapshot
from ridgeline.profile.kineto import run_kineto, summarize_trace
from ridgeline.profile.launches import (
    CallCapture,
    LaunchCapture,
    TensorArg,
    TritonLaunch,
    as_jit,
    capture_call,
    capture_launches,
    record_launch,
)
from ridgeline.profile.ncu import NCU_METRICS, ncu_command, parse_ncu_csv, run_ncu, summarize_ncu
from ridgeline.profile.occupancy import ARCH_LIMITS, DEFAULT_ARCH, DEFAULT_SM_COUNT, ArchLimits, occupancy
from ridgeline.profile.run import PROFILE_SCHEMA, attach_profile, default_out_dir, profile
from ridgeline.profile.sass import (
    access_width,
    disassemble,
    parse_sass,
    ptxas_usage,
    resource_usage,
    sass_loops,
    sass_opcodes,
    tool_path,
)

__all__ = [
    "ARCH_LIMITS", "ArchLimits", "CallCapture", "DEFAULT_ARCH", "DEFAULT_SM_COUNT", "LaunchCapture", "NCU_METRICS",
    "PROFILE_SCHEMA", "TensorArg", "TritonLaunch", "access_width", "aot_compile", "aot_kernel_facts", "as_jit",
    "attach_profile", "capture_call", "capture_launches", "compile_in_child", "compile_launches", "compiled_in",
    "default_out_dir", "disassemble", "hooks_for", "jit_new_kernels", "jit_snapshot", "kernel_facts",
    "launch_from_json", "launch_to_json", "ncu_command", "occupancy", "parse_ncu_csv", "parse_sass", "profile",
    "ptxas_usage", "record_launch", "resource_usage", "run_kineto", "run_ncu", "sass_loops", "sass_opcodes",
    "specialization", "summarize_ncu", "summarize_trace", "tool_path",
]
