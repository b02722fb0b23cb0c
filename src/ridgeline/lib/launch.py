"""What every kernel wrapper needs before a launch: where it may run, and argument checks that name the argument."""

from __future__ import annotations

import functools
import os
import threading

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def interpreter_enabled() -> bool:
    """True when Triton runs kernels on the CPU (TRITON_INTERPRET=1, read when kernels are decorated)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _scalar_loop_bounds_in_old_interpreters() -> None:
    """Triton 3.6's CPU interpreter holds scalars as 1-element arrays and turns a loop bound into an int with
    `int(array)`, which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"): every
    kernel loop with a run-time bound (the grid-stride loop, the two-pass kernel's chunks) failed there. Triton
    3.7 squeezes the array first; the same conversion is patched in for older interpreters."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - a Triton without the interpreter
        return
    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if patch_tensor is None or getattr(patch_tensor, "ridgeline_squeezes_index", False):
        return

    def patched(tensor, scope):  # (scope restores every attribute it set, last first, after the launch)
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patched.ridgeline_squeezes_index = True
    interpreter._patch_lang_tensor = patched


if interpreter_enabled():
    _scalar_loop_bounds_in_old_interpreters()


def _dtype_names(dtypes: tuple[torch.dtype, ...]) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def require_tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    return t


def require_dtype(name: str, t: torch.Tensor, allowed: tuple[torch.dtype, ...] = FLOAT_DTYPES) -> None:
    if t.dtype not in allowed:
        raise TypeError(f"{name}: expected dtype {_dtype_names(allowed)}; got {str(t.dtype).replace('torch.', '')}")


def require_same_device(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    if t.device != ref.device:
        raise ValueError(f"{name} is on {t.device} but {ref_name} is on {ref.device}: put them on one device")


def require_runnable_device(name: str, t: torch.Tensor) -> None:
    """Kernels run on CUDA, or anywhere under Triton's CPU interpreter; never on the meta device (no data)."""
    if t.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it has shapes but no data for a kernel to read (for "
                         "shapes only, call the op under torch.compile or FakeTensorMode)")
    if t.device.type == "cuda" or interpreter_enabled():
        return
    raise ValueError(
        f"{name} is on {t.device}: ridgeline's Triton kernels need a CUDA tensor, or Triton's CPU interpreter "
        "(set TRITON_INTERPRET=1 before importing ridgeline)"
    )


@functools.lru_cache(maxsize=16)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def multiprocessor_count(device: torch.device) -> int:
    """SMs of the tensor's GPU; a small fixed number under the CPU interpreter (keeps CPU tests fast)."""
    if device.type != "cuda" or interpreter_enabled():
        return 4
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


H200_L2_BYTES = 60 * 2**20


@functools.lru_cache(maxsize=16)
def _l2_bytes(index: int) -> int:
    props = torch.cuda.get_device_properties(index)
    return int(getattr(props, "L2_cache_size", 0) or H200_L2_BYTES)


def l2_cache_bytes(device: torch.device) -> int:
    """L2 bytes of the tensor's GPU (the H200's 60 MiB off the GPU: the rules that read it then pick as there)."""
    if device.type != "cuda":
        return H200_L2_BYTES
    return _l2_bytes(device.index if device.index is not None else torch.cuda.current_device())


def stride_alignment(stride: int, limit: int = 16) -> int:
    """Largest power of two (<= limit) dividing `stride`.

    Triton only knows an integer argument is divisible by 16 (or nothing). Passing stride // A and multiplying
    by a constexpr A tells it rows start at multiples of A elements, so an unaligned hidden size such as 4100
    still gets 8-byte vector accesses instead of 2-byte ones.
    """
    if stride == 0:
        return limit
    return min(stride & -stride, limit)  # lowest set bit


def rows_view(name: str, t: torch.Tensor) -> torch.Tensor:
    """View `t` as (rows, hidden) without copying: leading dims merged, rows may be strided, last dim contiguous."""
    n = t.shape[-1]
    if t.stride(-1) != 1 and n > 1:
        raise ValueError(f"{name}: the last dim must be contiguous (stride 1), got stride {t.stride(-1)}")
    try:
        return t.view(-1, n)
    except RuntimeError:
        raise ValueError(
            f"{name}: leading dims of shape {tuple(t.shape)} and strides {tuple(t.stride())} cannot be viewed as "
            "one row dimension without a copy"
        ) from None


def row_stride(t: torch.Tensor) -> int | None:
    """Stride between rows when the leading dims merge into one row dim and the last dim is contiguous (a row of a
    wider buffer, x[..., :w], qualifies: it is read in place); None when no single row stride addresses it."""
    if t.is_contiguous():
        return t.shape[-1]
    shape, strides = t.shape, t.stride()
    if shape[-1] > 1 and strides[-1] != 1:
        return None
    dims = [(shape[i], strides[i]) for i in range(t.dim() - 1) if shape[i] != 1]
    if not dims:
        return shape[-1]
    row = expect = dims[-1][1]
    for size, stride in reversed(dims):
        if stride != expect:
            return None
        expect = stride * size
    return row


def require_rows(name: str, x: object, *, allow_meta: bool = False) -> torch.Tensor:
    """A float tensor of rows (..., hidden) with a non-empty last dim, on a device the kernels run on (a meta
    tensor too where `allow_meta`: the caller sends it to its op's shape function, nothing launches)."""
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
        require_tensor(name, x)
        require_dtype(name, x)
    if x.dim() == 0:
        raise ValueError(f"{name}: expected at least 1 dim (..., hidden), got a scalar")
    if x.shape[-1] == 0:
        raise ValueError(f"{name}: hidden size (last dim) is 0")
    if not x.is_cuda and not (allow_meta and x.is_meta):
        require_runnable_device(name, x)
    return x


# Triton keeps its allocator in a ContextVar: each thread starts with none (autograd runs backward on its own
# thread: a matmul's backward failed there on the H200, s16), and so does any other context (an asyncio task made
# before the allocator was set, a contextvars.Context().run), so the variable itself is asked each call (one
# ContextVar.get): a flag per thread would say "set" in a context that has none.
_TMA_ALLOCATOR_SET = threading.local()


def _torch_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def ensure_tma_allocator() -> None:
    """Tensor descriptors made on the device need a little global scratch per program, which Triton asks an
    allocator for. Install torch's caching allocator (so it works inside CUDA graphs) unless the current context
    (thread, task) has an allocator already (the caller's own is kept)."""
    var = _allocator_var()
    if var is not None:
        if isinstance(var[0].get(), var[1]):
            import triton

            triton.set_allocator(_torch_scratch)
        return
    if getattr(_TMA_ALLOCATOR_SET, "done", False):
        return
    import triton

    triton.set_allocator(_torch_scratch)
    _TMA_ALLOCATOR_SET.done = True


@functools.cache
def _allocator_var() -> tuple | None:
    """(Triton's allocator ContextVar, its null allocator's type), or None on a Triton laid out otherwise."""
    try:
        from triton.runtime import _allocation

        return _allocation._allocator, _allocation.NullAllocator
    except (ImportError, AttributeError):
        return None
