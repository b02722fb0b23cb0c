"""`matmul(x, w, bias=None, out_dtype=None, *, layout="nt")`: validation, the launch, the custom op and autograd.

Plain calls (nothing requires grad, not compiling) launch straight away; otherwise through the custom op
`ridgeline::matmul` (fake implementation for torch.compile, autograd whose backward is this GEMM twice).
Strided inputs are read in place: each operand needs one dim of stride 1 for TMA (and 16-byte aligned other
stride and base), anything else takes the pointer-load path of the same kernel; no copies. The one copy: leading
dims of x that cannot be viewed as one row dim (a non-viewable batch layout) go through `reshape`.
"""

from __future__ import annotations

import contextlib

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    ensure_tma_allocator,
    interpreter_enabled,
    multiprocessor_count,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.lib.splitk import reduce_splits
from ridgeline.ops.matmul import rules
from ridgeline.ops.matmul.tails import plan as plan_tails

_INTERPRETED = interpreter_enabled()
DTYPES = (torch.bfloat16, torch.float16)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
LAYOUTS = ("nt", "kn")

_LAUNCHER: CachedLauncher | None = None
_GEMV_LAUNCHER: CachedLauncher | None = None


def _dtype_text(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def _check(x: object, w: object, bias: object, out_dtype: object, layout: object) -> tuple[int, int, int]:
    """One-line errors naming the argument; returns (M, N, K)."""
    x = require_tensor("x", x)
    w = require_tensor("w", w)
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected 'nt' (w [N, K], y = x @ w^T) or 'kn' (w [K, N], y = x @ w); "
                         f"got {layout!r}")
    for name, t in (("x", x), ("w", w)):
        if t.dtype not in DTYPES:
            raise TypeError(f"{name}: expected dtype bfloat16 or float16; got {_dtype_text(t.dtype)}")
    if w.dtype != x.dtype:
        raise TypeError(f"w: expected x's dtype {_dtype_text(x.dtype)}; got {_dtype_text(w.dtype)}")
    if x.dim() < 1:
        raise ValueError("x: expected at least 1 dim (..., K); got a 0-dim tensor")
    if w.dim() != 2:
        raise ValueError(f"w: expected 2 dims ({'[N, K]' if layout == 'nt' else '[K, N]'}); got shape "
                         f"{tuple(w.shape)}")
    require_same_device("w", w, "x", x)
    require_runnable_device("x", x)
    n, kw = (w.shape[0], w.shape[1]) if layout == "nt" else (w.shape[1], w.shape[0])
    k = x.shape[-1]
    if kw != k:
        want = f"[N, {k}]" if layout == "nt" else f"[{k}, N]"
        raise ValueError(f"w: expected shape {want} for x of shape {tuple(x.shape)} (layout {layout!r}); got "
                         f"{tuple(w.shape)}")
    if bias is not None:
        bias = require_tensor("bias", bias)
        if bias.dtype not in OUT_DTYPES:
            raise TypeError(f"bias: expected dtype bfloat16, float16 or float32; got {_dtype_text(bias.dtype)}")
        if tuple(bias.shape) != (n,):
            raise ValueError(f"bias: expected shape ({n},); got {tuple(bias.shape)}")
        require_same_device("bias", bias, "x", x)
    if out_dtype is not None and out_dtype not in OUT_DTYPES:
        raise TypeError(f"out_dtype: expected bfloat16, float16, float32 or None; got {out_dtype!r}")
    m = x.numel() // k if k else int(torch.Size(x.shape[:-1]).numel())
    return m, n, k


def _aligned(t: torch.Tensor, stride: int) -> bool:
    return t.data_ptr() % 16 == 0 and (stride * t.element_size()) % 16 == 0


def _operands(x2: torch.Tensor, w: torch.Tensor, layout: str) -> tuple[tuple[int, int, int, int], bool, bool, bool]:
    """Logical strides of x [M, K] and B [K, N], the storage orientation of each for TMA, and whether TMA can
    read both (a unit stride in one dim, the other 16-byte aligned, a 16-byte aligned base)."""
    sxm, sxk = x2.stride()
    sbk, sbn = (w.stride(1), w.stride(0)) if layout == "nt" else (w.stride(0), w.stride(1))
    m, k = x2.shape
    n = w.shape[0] if layout == "nt" else w.shape[1]
    # (a size-1 dim's stride is free: PyTorch may report anything there, and it never moves a load; the
    # descriptor still wants every outer stride 16-byte aligned, so such a stride is replaced by one that is)
    free = 16 // x2.element_size()
    a_km = sxk != 1 and (sxm == 1 or m == 1)
    a_ok = (sxk == 1 and _aligned(x2, sxm if m > 1 else 16)) or (a_km and _aligned(x2, sxk))
    if m == 1:
        sxm = 1 if a_km else free
    b_kn = sbk != 1 and (sbn == 1 or n == 1)
    b_ok = (sbk == 1 and _aligned(w, sbn if n > 1 else 16)) or (b_kn and _aligned(w, sbk))
    if n == 1:
        sbn = 1 if b_kn else free
    return (sxm, sxk, sbk, sbn), a_km, b_kn, a_ok and b_ok


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x as [M, K] (M = the product of the leading dims; explicit, so K = 0 works too)."""
    if x.dim() == 2:
        return x
    m, k = int(torch.Size(x.shape[:-1]).numel()), x.shape[-1]
    try:
        return x.view(m, k)
    except RuntimeError:  # leading dims that no view can merge: the one copy this wrapper makes
        return x.reshape(m, k)


def _launcher() -> CachedLauncher:
    global _LAUNCHER
    if _LAUNCHER is None:
        from ridgeline.ops.matmul.kernel import gemm_kernel

        _LAUNCHER = CachedLauncher(gemm_kernel)
    return _LAUNCHER


def _gemv_launcher() -> CachedLauncher:
    global _GEMV_LAUNCHER
    if _GEMV_LAUNCHER is None:
        from ridgeline.ops.matmul.kernel_gemv import gemv_kernel

        _GEMV_LAUNCHER = CachedLauncher(gemv_kernel)
    return _GEMV_LAUNCHER


def _gemv_2d(x2: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, y: torch.Tensor, layout: str,
             cfg: rules.GemvConfig) -> None:
    """The GEMV candidate (kernel_gemv.py) into y [M, N] (M in 1..8, N and K > 0): pointer loads in place at any
    strides (both layouts), split programs + the ordered reduction when the plan splits K."""
    m, k = x2.shape
    n = y.shape[1]
    sxm, sxk = x2.stride()
    sbk, sbn = (w.stride(1), w.stride(0)) if layout == "nt" else (w.stride(0), w.stride(1))
    plan = rules.gemv_plan(m, n, k, cfg, multiprocessor_count(x2.device))
    splits = plan["splits"]
    partials = y if splits == 1 else torch.empty((splits, m, n), dtype=torch.float32, device=y.device)
    gemv = _gemv_launcher()
    on_other_gpu = x2.is_cuda and x2.get_device() != torch.cuda.current_device()
    with torch.cuda.device(x2.device) if on_other_gpu else contextlib.nullcontext():
        args = (x2, w, bias if bias is not None else y, y, partials, n, k, sxm, sxk, sbk, sbn, y.stride(0),
                plan["k_chunk"], m * n)
        gemv.launch(plan["blocks"] * splits, args,
                    {"ROWS": m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "SPLIT_PROGRAMS": splits > 1,
                     "HAS_BIAS": bias is not None}, cfg.num_warps)
        if splits > 1:
            reduce_splits(partials, y, bias)


def matmul_2d(x2: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype,
              layout: str, config: rules.GemmConfig | rules.GemvConfig | None = None,
              tails: bool | None = None) -> torch.Tensor:
    """y [M, N] for x2 [M, K] (checked already). `config` overrides the rules (the tuning driver); a
    `rules.GemvConfig` runs the CUDA-core GEMV candidate (M <= 8, either layout). `tails` (rules' config only):
    None follows the rule's `tails` flag, True plans the cut wherever the cost model takes it, False never cuts."""
    m, k = x2.shape
    n = w.shape[0] if layout == "nt" else w.shape[1]
    if isinstance(config, rules.GemvConfig):
        rules.check_gemv(config)
        if m > rules.GEMV_MAX_M:
            raise ValueError(f"cfg: the gemv config serves M <= {rules.GEMV_MAX_M} rows; got M = {m}")
    if m == 0 or n == 0:
        return torch.empty((m, n), dtype=out_dtype, device=x2.device)
    if k == 0:  # an empty sum: zeros (+ bias), no launch
        y = torch.zeros((m, n), dtype=out_dtype, device=x2.device)
        return y.add_(bias.to(out_dtype)) if bias is not None else y
    y = torch.empty((m, n), dtype=out_dtype, device=x2.device)
    if isinstance(config, rules.GemvConfig):
        _gemv_2d(x2, w, bias, y, layout, config)
        return y
    pieces = None
    if config is None and (tails or (tails is None and rules.ANY_TAILS)):  # (no planning on the host path otherwise)
        pieces = plan_tails(m, n, k, multiprocessor_count(x2.device), force=bool(tails))
    if pieces is None:
        _gemm_into(x2, w, bias, y, layout, config or rules.config_for(m, n, k, x2.dtype, x2.device)[0])
        return y
    for p in pieces:  # (tails.py: every piece sums K in the same order, so the cut changes no bits)
        wp = w[p.c0:p.c1] if layout == "nt" else w[:, p.c0:p.c1]
        bp = bias[p.c0:p.c1] if bias is not None else None
        xp = x2[p.r0:p.r1]
        cfg = p.config or rules.config_for(p.r1 - p.r0, p.c1 - p.c0, k, x2.dtype, x2.device)[0]
        _gemm_into(xp, wp, bp, y[p.r0:p.r1, p.c0:p.c1], layout, cfg)
    return y


def _gemm_into(x2: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, y: torch.Tensor, layout: str,
               cfg: rules.GemmConfig) -> None:
    """One launch of the GEMM kernel on `cfg` into y [M, N] (a view with unit column stride: pieces of a cut)."""
    m, k = x2.shape
    n = y.shape[1]
    strides, a_km, b_kn, tma_ok = _operands(x2, w, layout)
    tma = cfg.tma and tma_ok
    if cfg.tma and not tma:  # pointer loads of a 128x256 tile spill (sm_90 compile check): a narrower one
        cfg = rules.pointer_fallback(cfg)
    if tma and x2.device.type == "cuda":
        ensure_tma_allocator()
    grid = rules.grid_for(m, n, cfg, x2.device)
    m_run, y_stride = m, y.stride(0)
    if m == 1 and not tma:
        # One row launched as two that alias it (zero row strides: both read x's row, both write the same values to
        # y's row; the same arithmetic per row, so the same bits). Triton compiles M == 1 apart, and on the H200
        # that code ran 17.1 us against 11.7 for M = 2 on the same tile (1x / 2x4096x4096, s22).
        m_run, strides, y_stride = 2, (0, *strides[1:]), 0
    args = (x2, w, bias if bias is not None else y, y, m_run, n, k, *strides, y_stride, grid)
    constexprs = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
                  "NUM_STAGES": cfg.num_stages, "TMA": tma, "A_KM": a_km and tma, "B_KN": b_kn and tma,
                  "HAS_BIAS": bias is not None, "UPCAST": _INTERPRETED}
    launcher = _launcher()
    # Triton launches on the current device (and the descriptor scratch is allocated there): make it x's.
    on_other_gpu = x2.is_cuda and x2.get_device() != torch.cuda.current_device()
    # Both feeds go through the cached launcher: the descriptors' global scratch is allocated by Triton's own
    # CudaLauncher.__call__, which the cached path calls too (scaled_mm's TMA launches ran that way on the H200).
    # Triton's full `kernel[grid]` dispatch was part of the 45-133 us of host time per call measured there.
    with torch.cuda.device(x2.device) if on_other_gpu else contextlib.nullcontext():
        launcher.launch(grid, args, constexprs, cfg.num_warps, options={"num_stages": 1})


def _forward(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype | None,
             layout: str) -> torch.Tensor:
    n = w.shape[0] if layout == "nt" else w.shape[1]
    y = matmul_2d(_rows(x), w, bias, out_dtype or x.dtype, layout)
    return y.view(*x.shape[:-1], n) if x.dim() != 2 else y


def _needs_op(*tensors: object) -> bool:
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def matmul(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
           *, layout: str = "nt") -> torch.Tensor:
    """``x @ w^T + bias`` (layout "nt": w is ``[N, K]``, nn.Linear's weight) or ``x @ w + bias`` (layout "kn": w is
    ``[K, N]``). x is ``(..., K)``; its leading dims fold into M; y is ``(..., N)``.

    bfloat16 or float16 operands (the same dtype), fp32 accumulation, one rounding to ``out_dtype`` (default x's
    dtype; bfloat16, float16 or float32). bias (``[N]``, any of those dtypes) is added in fp32 before the rounding.
    Strided and transposed operands are read in place (a transposed view of w is the other layout). M = 0 gives an
    empty y, K = 0 gives zeros (+ bias), without a launch. Differentiable; works under torch.compile.
    """
    _check(x, w, bias, out_dtype, layout)
    if _needs_op(x, w, bias):
        return matmul_op(x, w, bias, out_dtype, layout)
    return _forward(x, w, bias, out_dtype, layout)


# --- the custom op and its autograd ---------------------------------------------------------------------------
@torch.library.custom_op("ridgeline::matmul", mutates_args=())
def matmul_op(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype | None,
              layout: str) -> torch.Tensor:
    return _forward(x, w, bias, out_dtype, layout)


@matmul_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype | None,
      layout: str) -> torch.Tensor:
    n = w.shape[0] if layout == "nt" else w.shape[1]
    return x.new_empty((*x.shape[:-1], n), dtype=out_dtype or x.dtype)


def _setup(ctx, inputs, output) -> None:
    x, w, bias, out_dtype, layout = inputs
    ctx.save_for_backward(x, w)
    ctx.layout = layout
    ctx.bias_dtype = bias.dtype if bias is not None else None


def _grad(ctx, dy: torch.Tensor):
    """dx = dy @ B^T and dB from dy and x, each one call of this GEMM on views (no copies of x, w or dy); dbias is
    the column sum of dy in fp32. dy is cast to the operands' dtype when out_dtype differs."""
    x, w = ctx.saved_tensors
    layout = ctx.layout
    x2 = _rows(x)
    dy2 = _rows(dy.to(x.dtype))
    dx = dw = dbias = None
    if ctx.needs_input_grad[0]:
        # nt: dx = dy @ w (w [N, K] read as b [K'=N, K]); kn: dx = dy @ b^T (b [K, N] read as w [K, N'=N])
        dx = matmul_2d(dy2, w, None, x.dtype, "kn" if layout == "nt" else "nt").view(x.shape)
    if ctx.needs_input_grad[1]:
        if layout == "nt":  # dw [N, K] = dy^T @ x
            dw = matmul_2d(dy2.T, x2, None, w.dtype, "kn")
        else:  # db [K, N] = x^T @ dy
            dw = matmul_2d(x2.T, dy2, None, w.dtype, "kn")
    if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
        dbias = dy2.float().sum(0).to(ctx.bias_dtype)
    return dx, dw, dbias, None, None


matmul_op.register_autograd(_grad, setup_context=_setup)
