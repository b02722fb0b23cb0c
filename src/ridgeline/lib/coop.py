"""What the cooperative kernels share: programs that hold one chunk of a row each and exchange partial results
through global memory (a counter per group of programs, acquire / release), so every byte is read once.

Such programs wait on each other, so all must be resident at once: the launch is cooperative (the driver refuses a
grid that cannot be co-resident instead of letting it hang), sized from the compiled kernel's occupancy
(`resident_programs`). PHASE (a constexpr of the helpers) lets the CPU interpreter, which runs programs one after
another, run such a kernel as two launches: 1 arrives only, 2 waits only (the counts are in), 0 does both (GPU).
The counters live in a per-stream workspace (`SplitWorkspace`) that the kernels leave at 0.
`CoopLauncher` is the host side: the compile key, the occupancy, the grid of resident groups and the two phases
under the interpreter, for any op package's cooperative kernel.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from ridgeline.lib.fastlaunch import CachedLauncher, _arg_key
from ridgeline.lib.launch import interpreter_enabled, multiprocessor_count


@triton.jit
def keep_in_storage(x):
    """x unchanged, through an instruction the compiler cannot look through: the float32 copy of x made for the
    partial sum is then dead after it, and x stays live in its 16-bit storage type (half the registers) until y
    is computed. (Not in the CPU interpreter, which has no inline assembly.)"""
    if x.dtype.primitive_bitwidth == 16:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=x.dtype, is_pure=False, pack=2)
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=x.dtype, is_pure=False, pack=1)


# Counters of one group each on their own 128-byte line (int32 slots apart): polls of one group never queue
# behind another group's arrivals at the same L2 line.
COUNTER_SLOTS = 32  # (the host sizes the counters: groups * COUNTER_SLOTS)
COUNTER_STRIDE = tl.constexpr(COUNTER_SLOTS)


@triton.jit
def coop_program(N, CHUNK: tl.constexpr, SYNC):
    """This program's place in a grid of groups of cdiv(N, CHUNK) programs, one chunk of a row each: (chunks a
    row, its group, its chunk, the chunk's columns, their mask against N, its group's counter)."""
    n_chunks = tl.cdiv(N, CHUNK)
    pid = tl.program_id(0)
    group = pid // n_chunks
    part = pid % n_chunks
    cols = part * CHUNK + tl.arange(0, CHUNK)
    return n_chunks, group, part, cols, cols < N, SYNC + group * COUNTER_STRIDE


@triton.jit
def arrive(sync, PHASE: tl.constexpr):
    """Arrive at the group's counter `sync` (release: this program's partial results, stored before, are ordered
    before the count). Scalar stores and atomics are issued by one thread of the program, after the reduction's
    barrier."""
    if PHASE != 2:
        tl.atomic_add(sync, 1, sem="release")


@triton.jit
def wait_for(sync, target, PHASE: tl.constexpr):
    """Wait until the group's counter `sync` reaches `target` (acquire: the partials read after are the ones
    stored before the arrivals counted). Loads issued before the wait stay in flight through it (a prefetch)."""
    if PHASE != 1:
        # Polled with acquire atomics. (Volatile-load polls ending in one acquire whose value went unused let the
        # partials' loads pass the count on the H200, s18: the training step's gradients differed.)
        arrived = tl.atomic_add(sync, 0, sem="acquire")
        while arrived < target:
            arrived = tl.atomic_add(sync, 0, sem="acquire")


@triton.jit
def arrive_and_wait(sync, target, PHASE: tl.constexpr):
    """`arrive`, then `wait_for` target."""
    arrive(sync, PHASE)
    wait_for(sync, target, PHASE)


@triton.jit
def leave_and_reset(sync, rows_done, n_chunks, PHASE: tl.constexpr):
    """After the group's last row (rows_done rows of n_chunks programs each): the last program to arrive resets
    the counter to 0 (every program of the group has passed the group's last wait by then: none reads it again)."""
    if PHASE != 1:
        if tl.atomic_add(sync, 1, sem="acq_rel") == (rows_done + 1) * n_chunks - 1:
            tl.atomic_xchg(sync, 0, sem="relaxed")


class SplitWorkspace:
    """Per (device, stream) counters and partial-sum slots, zeroed once; kernels leave them at 0.

    Keyed by stream so that launches on two streams never share counters. While a CUDA graph is being captured a
    fresh zeroed workspace is taken for each call (its zeroing is captured too), so a graph never shares counters
    with eager calls or with another graph."""

    def __init__(self) -> None:
        self._by_stream: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def get(self, device: torch.device, groups: int, split: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(partial slots float32 [groups * 2 * split], counters int32 [groups]), zeroed, for launches on the
        current stream."""
        if device.type != "cuda":  # the CPU interpreter (tests), or a capture on the meta device
            key = (str(device), 0)
        elif torch.cuda.is_current_stream_capturing():
            return self._new(device, groups, split)
        else:
            key = (device.index, torch.cuda.current_stream(device).cuda_stream)
        have = self._by_stream.get(key)
        if have is None or have[1].numel() < groups or have[0].numel() < groups * 2 * split:
            have = self._new(device, max(groups, 1024), max(split, 16))
            self._by_stream[key] = have
        return have

    @staticmethod
    def _new(device: torch.device, groups: int, split: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.zeros(groups * 2 * split, dtype=torch.float32, device=device),
                torch.zeros(groups, dtype=torch.int32, device=device))


def resident_programs(device: torch.device, compiled: object, num_warps: int) -> int:
    """Programs of a compiled Triton kernel that fit on one SM at once, as the driver counts them for a cooperative
    launch (cuOccupancyMaxActiveBlocksPerMultiprocessor); where that cannot be asked, from its registers (allocated
    per warp in units of 256), threads, shared memory and the 32-block limit, and 1 if even those are unknown."""
    getattr(compiled, "_init_handles", lambda: None)()  # Triton loads the binary (and learns its registers) lazily
    shared = int(getattr(getattr(compiled, "metadata", None), "shared", 0) or 0)
    function = getattr(compiled, "function", None)
    if function is not None:
        try:
            libcuda = ctypes.CDLL("libcuda.so.1")
            blocks = ctypes.c_int(0)
            rc = libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(blocks), ctypes.c_void_p(function), ctypes.c_int(32 * num_warps), ctypes.c_size_t(shared))
            if rc == 0 and blocks.value > 0:
                return blocks.value
        except (OSError, AttributeError, TypeError):
            pass
    registers = getattr(compiled, "n_regs", None)
    if not registers:
        return 1
    props = torch.cuda.get_device_properties(device)
    regs_per_sm = getattr(props, "regs_per_multiprocessor", 65536)
    threads_per_sm = getattr(props, "max_threads_per_multi_processor", 2048)
    smem_per_sm = getattr(props, "shared_memory_per_multiprocessor", 233472)
    regs_per_warp = -(-registers * 32 // 256) * 256
    by_regs = regs_per_sm // (regs_per_warp * num_warps)
    by_threads = threads_per_sm // (32 * num_warps)
    by_smem = smem_per_sm // (shared + 1024)
    return max(1, min(by_regs, by_threads, by_smem, 32))


class CoopLauncher:
    """Launches a cooperative kernel whose runtime parameters end with (SYNC, ..., groups): a persistent grid of as
    many groups of `chunks` programs as are resident at once, each group with its own counter (COUNTER_SLOTS apart)
    in a per-stream workspace. Under the CPU interpreter (programs one after another) it launches PHASE 1 then
    PHASE 2 on two groups. The programs per SM come from the driver's occupancy of the compiled kernel, once per
    specialization (`guess` where the kernel cannot be compiled first, e.g. a launch captured without a GPU)."""

    def __init__(self, fn: object, guess: int = 4) -> None:
        self.launcher = CachedLauncher(fn)
        self.workspace = SplitWorkspace()
        self.guess = guess
        self._resident: dict[tuple, int] = {}

    def launch(self, args_for: Callable[[torch.Tensor, int], tuple], constexprs: dict, num_warps: int,
               chunks: int, rows: int, device: torch.device) -> int:
        """Launch over `rows` rows; `args_for(sync, groups)` builds the runtime arguments. Returns the programs
        per SM the grid was sized with, 0 where a row's `chunks` programs cannot all be resident (nothing
        launched: the caller takes another path)."""
        if interpreter_enabled() and device.type != "cuda":
            groups = min(rows, 2)
            _, sync = self.workspace.get(device, groups * COUNTER_SLOTS, 1)
            for phase in (1, 2):
                self.launcher.launch(groups * chunks, args_for(sync, groups), {**constexprs, "PHASE": phase},
                                     num_warps)
            return self.guess
        options = {"launch_cooperative_grid": True}
        _, sync = self.workspace.get(device, COUNTER_SLOTS, 1)
        probe = args_for(sync, 1)
        # What Triton specializes the compile on (groups is not specialized), so the occupancy is this kernel's.
        key = (device.index, *constexprs.values(), num_warps, *map(_arg_key, probe[:-1]))
        per_sm = self._resident.get(key)
        if per_sm is None and not hasattr(self.launcher.fn, "warmup"):
            per_sm = self.guess
        elif per_sm is None:
            compiled = self.launcher.fn.warmup(*probe, grid=(1,), **constexprs, num_warps=num_warps, **options)
            per_sm = self._resident[key] = resident_programs(device, compiled, num_warps)
        groups = min(rows, multiprocessor_count(device) * per_sm // chunks)
        if groups < 1:
            return 0
        _, sync = self.workspace.get(device, groups * COUNTER_SLOTS, 1)
        self.launcher.launch(groups * chunks, args_for(sync, groups), constexprs, num_warps, options=options)
        return per_sm
