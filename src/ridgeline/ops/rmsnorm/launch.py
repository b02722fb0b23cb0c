"""Host side of the RMSNorm kernels (kernel.py, split.py): the public functions `rms_norm`, `fused_add_rms_norm`
and `rms_norm_dynamic_quant` with their argument checks, the launch grid (`grid_for`) and the launches.

Eager calls validate their arguments (one-line errors naming the argument), pick the launch configuration
(rules.py) and launch through a `CachedLauncher`; under torch.compile they call the torch custom ops defined at
the bottom of this module (which wrap them).
"""

from __future__ import annotations

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    FLOAT_DTYPES,
    multiprocessor_count,
    require_dtype,
    require_rows,
    require_same_device,
    require_tensor,
    row_stride,
    rows_view,
    stride_alignment,
)
from ridgeline.lib.rounding import inv_hidden
from ridgeline.ops.rmsnorm import autograd
from ridgeline.ops.rmsnorm.autograd import refuse_inplace_grad, wants_grad
from ridgeline.ops.rmsnorm.kernel import (
    _INTERPRETED,
    _rms_norm_kernel,
    kernel_constexprs,
    row_alignments,
    split_constexprs,
)
from ridgeline.ops.rmsnorm.quant import (
    FP8_DTYPES,
    MIN_SCALE_FACTOR,
    QUANT_DYNAMIC,
    QUANT_STATIC,
    check_quant_dtype,
    validate_static_scale,
)
from ridgeline.ops.rmsnorm.rules import (  # (the config API is also ridgeline's, through this module)
    LaunchConfig,
    config_for,
    launch_config,
)
from ridgeline.ops.rmsnorm.split import (
    WORKSPACE,
    _rms_norm_split_kernel,
    resident_programs,
    split_grid,
)

# Split-row programs per SM before this process has launched that config on the device (or for a capture on the
# meta device): 8 warps at up to 64 registers fit 4 (the shipped configs compile to 46-64 registers, 59-121 with
# the weight first). After a launch, the driver's count for the compiled kernel (`_SPLIT_SEEN`).
SPLIT_PROGRAMS_PER_SM_GUESS = 4
_SPLIT_SEEN: dict[tuple, int] = {}


def _split_key(device: torch.device, cfg: LaunchConfig) -> tuple:
    # ("cuda" without an index, as reports pass it, is the current device: 0 in a one-GPU process.)
    return (device.index or 0, cfg.block_n, cfg.split, cfg.num_warps, cfg.weight_first)


def grid_for(m: int, cfg: LaunchConfig, device: torch.device) -> int:
    """Programs the launch of m rows with cfg takes on device (split rows: groups of cfg.split programs)."""
    if cfg.split:  # groups of cfg.split programs, as many as are resident at once (capped by the config)
        per_sm = _SPLIT_SEEN.get(_split_key(device, cfg), SPLIT_PROGRAMS_PER_SM_GUESS)
        if cfg.programs_per_sm:
            per_sm = min(per_sm, cfg.programs_per_sm)
        if cfg.split > per_sm * multiprocessor_count(device):
            raise ValueError(f"cfg: {cfg.describe()}: {cfg.split} programs per row cannot be resident at once "
                             f"({per_sm * multiprocessor_count(device)} fit)")
        return split_grid(m, cfg.split, per_sm, multiprocessor_count(device))[1]
    per_sm = cfg.programs_per_sm
    if per_sm == 0 and not _INTERPRETED:
        return max(1, m)
    # Persistent grid-stride: at most as many programs as fit on the GPU at once (64 warps per SM on Hopper).
    # (The CPU interpreter always takes this path: few program instances keep CPU tests fast.)
    resident = multiprocessor_count(device) * (per_sm or max(1, 64 // cfg.num_warps))
    return max(1, min(m, resident))


def _validate_weight(weight: torch.Tensor | None, x: torch.Tensor, weight_offset: float) -> torch.Tensor | None:
    """The weight to launch with: contiguous, and 16-byte aligned (a weight view starting elsewhere is copied:
    its narrower loads would change the register layout, hence the order of the row's sum, so its bits)."""
    _check_float("weight_offset", weight_offset)
    if weight is None:
        if weight_offset != 0.0:
            raise ValueError("weight_offset: only meaningful with a weight (got weight=None)")
        return None
    if not isinstance(weight, torch.Tensor) or weight.dtype not in FLOAT_DTYPES:
        require_tensor("weight", weight)
        require_dtype("weight", weight)
    # (On CUDA the device index is a cheaper test than comparing torch.device objects; -1 covers CPU and meta.)
    if weight.get_device() != x.get_device() or (not x.is_cuda and weight.device != x.device):
        require_same_device("weight", weight, "x", x)
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight: expected shape ({x.shape[-1]},) to match x's last dim, got {tuple(weight.shape)}")
    if not weight.is_contiguous() or (weight.data_ptr() & 15 and weight.is_cuda):
        weight = weight.clone(memory_format=torch.contiguous_format)  # fresh allocations are 16-byte aligned
    return weight


def _input_rows(name: str, x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """An input and its row stride; copied only when the layout cannot be read in place (as documented)."""
    stride = row_stride(x)
    if stride is None:
        x = x.contiguous()
        stride = x.shape[-1]
    return x, stride


def _output_rows(name: str, t: torch.Tensor) -> int:
    """Row stride of a tensor the kernel writes: it must be addressable in place, rows must not overlap."""
    stride = row_stride(t)
    if stride is None:
        rows_view(name, t)  # raises the detailed error (last dim not contiguous, or unmergeable leading dims)
        raise ValueError(f"{name}: rows of shape {tuple(t.shape)}, strides {tuple(t.stride())} are not addressable")
    if stride < t.shape[-1] and t.numel() > t.shape[-1]:
        raise ValueError(f"{name}: rows overlap (row stride {stride} < hidden size {t.shape[-1]}); cannot write")
    return stride


def _last_piece(cfg: LaunchConfig) -> int:
    return cfg.piece_c or cfg.piece_b or cfg.block_n


_LAUNCHER = CachedLauncher(_rms_norm_kernel)


def _launch(
    x: torch.Tensor, x_stride: int,
    r: torch.Tensor | None, r_stride: int,
    ro: torch.Tensor | None, ro_stride: int,
    weight: torch.Tensor | None,
    y: torch.Tensor, y_stride: int,
    m: int, n: int,
    eps: float,
    weight_offset: float,
    cfg: LaunchConfig | None = None,
    quant: int = 0,
    scale: torch.Tensor | None = None,
) -> None:
    """quant 1: y is FP8, sat(y / scale[0]); quant 2: y is FP8 and scale (m floats) receives each row's scale."""
    if m == 0:
        return
    if x.is_cuda and x.get_device() != torch.cuda.current_device():
        # Triton launches on the current device: make it x's (tensors on cuda:1 while cuda:0 is current).
        with torch.cuda.device(x.device):
            return _launch(x, x_stride, r, r_stride, ro, ro_stride, weight, y, y_stride, m, n, eps, weight_offset,
                           cfg, quant, scale)
    if cfg is None:
        cfg = config_for(n, x.dtype, m, r is not None, weight.dtype if weight is not None else None, quant)
    elif cfg.single_pass and (cfg.width() < n or cfg.width() - _last_piece(cfg) > n):
        # Every piece but the last is unmasked: they must lie wholly inside the row.
        raise ValueError(f"cfg: {cfg.describe()} does not fit a row of {n} columns")
    elif cfg.split and (cfg.width() < n or cfg.block_n * (cfg.split - 1) >= n):
        raise ValueError(f"cfg: {cfg.describe()} does not fit a row of {n} columns (each program needs columns)")
    has_res = r is not None
    if not has_res:
        r, r_stride, ro, ro_stride = x, x_stride, y, y_stride
    w = weight if weight is not None else x
    if cfg.split:
        if quant:
            raise ValueError(f"cfg: {cfg.describe()}: a split row has no FP8 epilogue")
        _launch_split(x, x_stride, r, r_stride, ro, ro_stride, w, y, y_stride, m, n, eps, weight_offset, cfg,
                      has_res, weight is not None)
        return
    if quant:
        qmax = FP8_DTYPES[y.dtype]
        s, min_scale = scale, MIN_SCALE_FACTOR / qmax
    else:
        s, qmax, min_scale = x, 1.0, 1.0
    fast_key = None
    if x.is_cuda and _LAUNCHER.enabled():
        # Everything the compiled kernel, the grid and the alignments depend on, cheap to build: raw sizes and
        # strides, dtypes, and which pointers are 16-byte aligned (what Triton specializes on).
        ptrs = (x.data_ptr() & 15, r.data_ptr() & 15, ro.data_ptr() & 15, w.data_ptr() & 15, y.data_ptr() & 15,
                s.data_ptr() & 15 if quant else 0)
        # id(cfg): configs come from caches; the entry keeps its config alive, so the id cannot be reused.
        fast_key = (x.get_device(), id(cfg), m, n, x_stride, r_stride, ro_stride, y_stride, x.dtype, w.dtype, y.dtype,
                    has_res, weight is not None, ptrs, quant)
        hit = _LAUNCHER.cached(fast_key)
        if hit is not None:
            kernel, (grid, xa, ra, roa, ya, na, cvals, _) = hit
            _LAUNCHER.run(kernel, grid, (x, x_stride // xa, r, r_stride // ra, ro, ro_stride // roa, w, y,
                                         y_stride // ya, m, n // na, eps, inv_hidden(n), weight_offset, s, qmax,
                                         min_scale),
                          cvals, fast_key[0])
            return
    xa, ra, roa, ya, na = row_alignments(n, (x_stride, r_stride, ro_stride, y_stride))
    grid = grid_for(m, cfg, x.device)
    constexprs = kernel_constexprs(cfg, (xa, ra, roa, ya, na), has_res, weight is not None,
                                   cfg.loop_free and grid == m, quant, n)
    _LAUNCHER.launch(
        grid,
        (x, x_stride // xa, r, r_stride // ra, ro, ro_stride // roa, w, y, y_stride // ya, m, n // na, eps,
         inv_hidden(n), weight_offset, s, qmax, min_scale),
        constexprs,
        cfg.num_warps,
        fast_key,
        (grid, xa, ra, roa, ya, na, tuple(constexprs.values()), cfg),
        {"maxnreg": cfg.max_registers} if cfg.max_registers else None,
    )


_SPLIT_LAUNCHER = CachedLauncher(_rms_norm_split_kernel)
# (device, compile key) -> programs of the split kernel that fit on one SM, from its compiled registers.
_SPLIT_RESIDENT: dict[tuple, int] = {}


def _launch_split(
    x: torch.Tensor, x_stride: int, r: torch.Tensor, r_stride: int, ro: torch.Tensor, ro_stride: int,
    w: torch.Tensor, y: torch.Tensor, y_stride: int, m: int, n: int, eps: float, weight_offset: float,
    cfg: LaunchConfig, has_res: bool, has_weight: bool,
) -> None:
    """A row split across cfg.split programs (kernels/rmsnorm_split.py): a persistent, cooperative grid of as many
    groups of them as are resident at once (all of a group's programs must run together)."""
    xa, ra, roa, ya, na = aligns = row_alignments(n, (x_stride, r_stride, ro_stride, y_stride))
    constexprs = split_constexprs(cfg, aligns, has_res, has_weight)

    def args_for(part: torch.Tensor, sync: torch.Tensor, groups: int) -> tuple:
        return (x, x_stride // xa, r, r_stride // ra, ro, ro_stride // roa, w, y, y_stride // ya, m, n // na, eps,
                inv_hidden(n), weight_offset, part, sync, groups)

    if _INTERPRETED:  # programs run one after another: only split=1 can make progress (tests use it)
        if cfg.split > 1:
            raise ValueError(f"cfg: {cfg.describe()}: rows split across programs need a GPU (the interpreter runs "
                             "programs one after another, so they would wait on each other forever)")
        groups = min(m, 4)
        part, sync = WORKSPACE.get(x.device, groups, cfg.split)
        _SPLIT_LAUNCHER.launch(groups, args_for(part, sync, groups), constexprs, cfg.num_warps)
        return
    options = {"launch_cooperative_grid": True}
    # Everything Triton specializes the compile on (so the occupancy is that of the kernel this call launches):
    # constexprs, dtypes, 16-byte alignment of pointers, integers equal to 1, divisible by 16 or 64-bit.
    ints = (x_stride // xa, r_stride // ra, ro_stride // roa, y_stride // ya, m, n // na)
    key = (x.get_device(), *constexprs.values(), cfg.num_warps, x.dtype, w.dtype, y.dtype,
           x.data_ptr() & 15, r.data_ptr() & 15, ro.data_ptr() & 15, w.data_ptr() & 15, y.data_ptr() & 15,
           *((i == 1, i % 16 == 0, i < 2**31) for i in ints))
    resident = _SPLIT_RESIDENT.get(key)
    if resident is None and not (x.is_cuda and hasattr(_rms_norm_split_kernel, "warmup")):
        resident = SPLIT_PROGRAMS_PER_SM_GUESS  # a capture of the launch (scripts, `ridgeline profile`), no GPU
    elif resident is None:
        part, sync = WORKSPACE.get(x.device, 1, cfg.split)
        compiled = _rms_norm_split_kernel.warmup(*args_for(part, sync, 1), grid=(1,), **constexprs,
                                                 num_warps=cfg.num_warps, **options)
        resident = resident_programs(x.device, compiled, cfg.num_warps)
        _SPLIT_RESIDENT[key] = resident
    _SPLIT_SEEN[_split_key(x.device, cfg)] = resident
    grid = grid_for(m, cfg, x.device)
    groups = grid // cfg.split
    part, sync = WORKSPACE.get(x.device, groups, cfg.split)
    _SPLIT_LAUNCHER.launch(grid, args_for(part, sync, groups), constexprs, cfg.num_warps, options=options)


def _new_rows(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A contiguous tensor of x's shape. empty_like costs a fraction of torch.empty(shape, dtype=, device=) in
    host time (scripts/host_breakdown.py: 4.0 vs 8.9 us on the H200's host), and for a contiguous x it is one."""
    if x.is_contiguous():
        return torch.empty_like(x, dtype=dtype)
    return torch.empty(x.shape, dtype=dtype or x.dtype, device=x.device)


def _check_float(name: str, v: object) -> float:
    if type(v) is float and v - v == 0.0:  # the common case, cheaply: a finite float (inf - inf and NaN are NaN)
        return v
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise TypeError(f"{name}: expected a float, got {type(v).__name__}")
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"{name}: expected a finite float, got {v}")
    return float(v)


def _check_eps(eps: float) -> float:
    eps = _check_float("eps", eps)
    if not eps >= 0.0:
        raise ValueError(f"eps: expected a non-negative float, got {eps}")
    return eps


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    weight_offset: float = 0.0,
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    scale: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """RMSNorm over the last dim: ``y = x / sqrt(mean(x**2) + eps) * (weight_offset + weight)``.

    Computed in float32 and rounded once to x's dtype. ``x`` may be float32, float16 or bfloat16 with any number
    of leading dims; ``weight`` (shape ``(hidden,)``) may be any of those dtypes, independently of x. Rows may be
    strided (``x[..., :H]`` of a wider buffer): they are read in place. An input whose last dim is not
    contiguous, or whose leading dims cannot be merged into one row stride, is copied first. ``weight=None``
    means no scale. ``out`` (same shape and dtype as x, rows may be strided) receives the result.
    The result of a row does not depend on how many rows are in the call, and repeated calls agree bitwise.

    ``out_dtype=torch.float8_e4m3fn`` (or ``float8_e5m2``) with a static per-tensor ``scale`` (float or
    1-element tensor) returns ``sat(y / scale)`` in that FP8 dtype, y computed in float32 and rounded once
    (any hidden size; under torch.compile an opaque custom op). ``out`` may then be a given FP8 tensor.
    """
    if out_dtype is not None and out_dtype != getattr(x, "dtype", None) or scale is not None:
        if torch.compiler.is_compiling():  # torch.compile: an opaque custom op, no graph break
            _check_fp8_request(out_dtype, scale)
            scale_t = validate_static_scale(scale, x)
            if out is not None:
                _validate_fp8_out(out, x, out_dtype)
            y = rms_norm_fp8_op(x, weight, float(eps), scale_t, float(weight_offset), out_dtype)
            return y if out is None else out.copy_(y)
        return _rms_norm_fp8_static(x, weight, eps, weight_offset, out, out_dtype, scale)
    if torch.compiler.is_compiling() or wants_grad(x, weight):  # compile or autograd: through the custom op
        if out is not None:
            _validate_out("out", out, x)
        y = rms_norm_op(x, weight, float(eps), float(weight_offset))
        return y if out is None else out.copy_(y)
    x = require_rows("x", x)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    if out is None:
        out = _new_rows(x)
    else:
        _validate_out("out", out, x)
    n = x.shape[-1]
    x, x_stride = _input_rows("x", x)
    _launch(x, x_stride, None, 0, None, 0, weight, out, _output_rows("out", out), x.numel() // n, n, eps,
            weight_offset)
    return out


def _check_fp8_request(out_dtype: object, scale: object) -> None:
    if out_dtype is None:
        raise ValueError("out_dtype: a static scale needs an FP8 out_dtype (e.g. torch.float8_e4m3fn)")
    check_quant_dtype("out_dtype", out_dtype)
    if scale is None:
        raise ValueError("scale: out_dtype FP8 needs a static per-tensor scale (or use rms_norm_dynamic_quant)")


def _validate_fp8_out(out: object, x: torch.Tensor, out_dtype: torch.dtype) -> None:
    out = require_tensor("out", out)
    if out.shape != x.shape:
        raise ValueError(f"out: expected shape {tuple(x.shape)} (same as x), got {tuple(out.shape)}")
    if out.dtype != out_dtype:
        raise TypeError(f"out: expected dtype {out_dtype} (out_dtype), got {out.dtype}")
    require_same_device("out", out, "x", x)


def _rms_norm_fp8_static(x, weight, eps, weight_offset, out, out_dtype, scale) -> torch.Tensor:
    x = require_rows("x", x)
    _check_fp8_request(out_dtype, scale)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    scale_t = validate_static_scale(scale, x)
    if out is None:
        out = _new_rows(x, out_dtype)
    else:
        _validate_fp8_out(out, x, out_dtype)
    n = x.shape[-1]
    x_in, x_stride = _input_rows("x", x)
    out_stride = _output_rows("out", out)
    if out.data_ptr() & 15 or stride_alignment(out_stride) < stride_alignment(n):
        # One-byte outputs widen the register layout when their rows start on 16 bytes (16 values a thread);
        # rows of a given `out` that do not would sum in another order (other bits): write aligned, then copy.
        out.copy_(_rms_norm_fp8_static(x, weight, eps, weight_offset, None, out_dtype, scale_t))
        return out
    _launch(x_in, x_stride, None, 0, None, 0, weight, out, out_stride, x.numel() // n, n, eps, weight_offset,
            quant=QUANT_STATIC, scale=scale_t)
    return out


def rms_norm_dynamic_quant(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    residual: torch.Tensor | None = None,
    weight_offset: float = 0.0,
    quant_dtype: torch.dtype = torch.float8_e4m3fn,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """RMSNorm with dynamic per-token FP8 quantization: ``(out_fp8, scales[..., 1] float32, residual_out)``.

    ``scales[m] = max(|y[m]|) / fp8_max`` (never below fp8_max^-1 / 512), ``out = y / scales``: dequantize with
    ``out.float() * scales``. With ``residual``, y is the norm of ``residual_out = x + residual`` (rounded to x's
    dtype, returned as the third output); otherwise the third output is None. Any hidden size (rows wider than
    16384 take two passes; their scale is rstd * max|x * weight|, equal to max|y| up to float32 rounding).
    """
    if torch.compiler.is_compiling():  # torch.compile: an opaque custom op, no graph break
        out, scales, residual_out = rms_norm_dynamic_quant_op(x, weight, float(eps), residual,
                                                                   float(weight_offset), quant_dtype)
        return out, scales, residual_out if residual is not None else None
    x = require_rows("x", x)
    check_quant_dtype("quant_dtype", quant_dtype)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    n = x.shape[-1]
    m = x.numel() // n
    x_in, x_stride = _input_rows("x", x)
    residual_out, r_in, r_stride = None, None, 0
    if residual is not None:
        residual = require_tensor("residual", residual)
        if residual.shape != x.shape:
            raise ValueError(f"residual: expected shape {tuple(x.shape)} (same as x), got {tuple(residual.shape)}")
        if residual.dtype != x.dtype:
            raise TypeError(f"residual: expected dtype {x.dtype} (same as x), got {residual.dtype}")
        require_same_device("residual", residual, "x", x)
        r_in, r_stride = _input_rows("residual", residual)
        residual_out = _new_rows(x)
    out = _new_rows(x, quant_dtype)
    scales = torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device)
    _launch(x_in, x_stride, r_in, r_stride, residual_out, n, weight, out, n, m, n, eps, weight_offset,
            quant=QUANT_DYNAMIC, scale=scales)
    return out, scales, residual_out


def _validate_out(name: str, t: object, x: torch.Tensor) -> None:
    t = require_tensor(name, t)
    if t.shape != x.shape:
        raise ValueError(f"{name}: expected shape {tuple(x.shape)} (same as x), got {tuple(t.shape)}")
    if t.dtype != x.dtype:
        raise TypeError(f"{name}: expected dtype {x.dtype} (same as x), got {t.dtype}")
    require_same_device(name, t, "x", x)


def fused_add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    weight_offset: float = 0.0,
    inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add then RMSNorm, one pass over memory: returns ``(out, residual_out)``.

    ``residual_out = x + residual`` rounded to x's dtype, and ``out`` equals, bitwise, ``rms_norm(residual_out,
    weight, eps, weight_offset=...)``. ``residual`` must have x's shape and dtype. With ``inplace=True`` out is
    written into ``x`` and residual_out into ``residual`` (the vLLM / FlashInfer convention) and those two
    tensors are returned; their last dims must then be contiguous and their rows viewable in place.
    """
    if inplace:
        refuse_inplace_grad(x, residual, weight)
    if torch.compiler.is_compiling() or wants_grad(x, residual, weight):  # compile or autograd: custom ops
        if inplace:
            fused_add_rms_norm_inplace_op(x, residual, weight, float(eps), float(weight_offset))
            return x, residual
        return fused_add_rms_norm_op(x, residual, weight, float(eps), float(weight_offset))
    x = require_rows("x", x)
    residual = require_tensor("residual", residual)
    if residual.shape != x.shape:
        raise ValueError(f"residual: expected shape {tuple(x.shape)} (same as x), got {tuple(residual.shape)}")
    if residual.dtype != x.dtype:
        raise TypeError(f"residual: expected dtype {x.dtype} (same as x), got {residual.dtype}")
    require_same_device("residual", residual, "x", x)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(weight_offset)  # an int 1 would be compiled in as a constant by Triton
    n = x.shape[-1]
    m = x.numel() // n
    if inplace:
        x_stride, r_stride = _output_rows("x", x), _output_rows("residual", residual)
        _launch(x, x_stride, residual, r_stride, residual, r_stride, weight, x, x_stride, m, n, eps, weight_offset)
        return x, residual
    out = _new_rows(x)
    residual_out = _new_rows(x)
    x_in, x_stride = _input_rows("x", x)
    r_in, r_stride = _input_rows("residual", residual)
    _launch(x_in, x_stride, r_in, r_stride, residual_out, n, weight, out, n, m, n, eps, weight_offset)
    return out, residual_out


# --- the torch custom ops: under torch.compile(fullgraph=True) the functions above call these (opaque to the
# compiler, which schedules the launch and knows the output shapes from the fake implementations); their bodies
# call the functions above, which then take the eager path.
_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float) -> torch.Tensor:
    return rms_norm(x, weight, eps, weight_offset=weight_offset)


@rms_norm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.custom_op(f"{_LIB}::fused_add_rms_norm", mutates_args=())
def fused_add_rms_norm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
) -> tuple[torch.Tensor, torch.Tensor]:
    return fused_add_rms_norm(x, residual, weight, eps, weight_offset=weight_offset)


@fused_add_rms_norm_op.register_fake
def _(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
      ) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            torch.empty(x.shape, dtype=x.dtype, device=x.device))


@torch.library.custom_op(f"{_LIB}::fused_add_rms_norm_", mutates_args=("x", "residual"))
def fused_add_rms_norm_inplace_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
) -> None:
    fused_add_rms_norm(x, residual, weight, eps, weight_offset=weight_offset, inplace=True)


@fused_add_rms_norm_inplace_op.register_fake
def _(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float
      ) -> None:
    return None


@torch.library.custom_op(f"{_LIB}::rms_norm_fp8", mutates_args=())
def rms_norm_fp8_op(x: torch.Tensor, weight: torch.Tensor | None, eps: float, scale: torch.Tensor,
                    weight_offset: float, out_dtype: torch.dtype) -> torch.Tensor:
    return rms_norm(x, weight, eps, weight_offset=weight_offset, out_dtype=out_dtype, scale=scale)


@rms_norm_fp8_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, scale: torch.Tensor, weight_offset: float,
      out_dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(x.shape, dtype=out_dtype, device=x.device)


@torch.library.custom_op(f"{_LIB}::rms_norm_dynamic_quant", mutates_args=())
def rms_norm_dynamic_quant_op(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None, weight_offset: float,
    quant_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out, scales, residual_out = rms_norm_dynamic_quant(x, weight, eps, residual=residual,
                                                          weight_offset=weight_offset, quant_dtype=quant_dtype)
    # A custom op returns tensors only: without a residual, an empty residual_out stands for None.
    return out, scales, residual_out if residual_out is not None else x.new_empty(0)


@rms_norm_dynamic_quant_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, residual: torch.Tensor | None, weight_offset: float,
      quant_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    res = torch.empty(x.shape if residual is not None else (0,), dtype=x.dtype, device=x.device)
    return (torch.empty(x.shape, dtype=quant_dtype, device=x.device),
            torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device), res)


autograd.register(rms_norm_op, fused_add_rms_norm_op)  # the backward (backward.py, kernel_bwd.py)
_grid = grid_for  # (the name harness/profile.py calls)

__all__ = ["rms_norm", "fused_add_rms_norm", "rms_norm_dynamic_quant", "launch_config", "config_for", "LaunchConfig",
           "FLOAT_DTYPES", "grid_for"]
