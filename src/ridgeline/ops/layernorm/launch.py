"""Host side of the LayerNorm kernels (kernel.py): the public functions `layer_norm`, `layer_norm_forward` and
`layer_norm_backward`, their argument checks (one-line errors naming the argument), the grids and the launches, and
the torch custom ops that carry autograd and torch.compile.

Eager calls without autograd launch the forward directly (no dispatcher in the way). A call that needs gradients,
or any call under torch.compile, goes through `ridgeline::layer_norm_fwd`, whose registered autograd calls
`ridgeline::layer_norm_bwd` (our backward kernels) with what it saved: x, weight, mean and rstd (float32, [M]).
"""

from __future__ import annotations

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    FLOAT_DTYPES,
    l2_cache_bytes,
    multiprocessor_count,
    require_dtype,
    require_rows,
    require_same_device,
    require_tensor,
    row_stride,
    stride_alignment,
)
from ridgeline.ops.layernorm.kernel import (
    _INTERPRETED,
    _ln_bwd_kernel,
    _ln_bwd_wide_kernel,
    _ln_dw_reduce_kernel,
    _ln_fwd_kernel,
    _ln_fwd_wide_kernel,
)
from ridgeline.ops.layernorm.rules import (
    BwdConfig,
    FwdConfig,
    bwd_config,
    fwd_config,
    fwd_config_for_call,
    fwd_load_policy,
)

_FWD = CachedLauncher(_ln_fwd_kernel)
_FWD_WIDE = CachedLauncher(_ln_fwd_wide_kernel)
_BWD = CachedLauncher(_ln_bwd_kernel)
_BWD_WIDE = CachedLauncher(_ln_bwd_wide_kernel)
_REDUCE = CachedLauncher(_ln_dw_reduce_kernel)


# --- argument checks ----------------------------------------------------------------------------------------------

def _require_vector(name: str, t: object, x: torch.Tensor) -> None:
    """weight / bias: None, or a float tensor of shape (N,) on x's device."""
    if t is None:
        return
    if not isinstance(t, torch.Tensor) or t.dtype not in FLOAT_DTYPES:
        require_tensor(name, t)
        require_dtype(name, t)
    if t.device != x.device:
        require_same_device(name, t, "x", x)
    if t.dim() != 1 or t.shape[0] != x.shape[-1]:
        raise ValueError(f"{name}: expected shape ({x.shape[-1]},) to match x's last dim, got {tuple(t.shape)}")


def _check_vector(name: str, t: object, x: torch.Tensor) -> torch.Tensor | None:
    """`_require_vector`, then contiguous and 16-byte aligned for the launch (a view elsewhere is copied: N
    elements, and the kernels' register layout then never depends on it)."""
    _require_vector(name, t, x)
    if t is None:
        return None
    if not t.is_contiguous() or (not t.is_meta and t.data_ptr() & 15):
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def _check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps: expected a float, got {type(eps).__name__}")
    eps = float(eps)
    if not (eps >= 0.0 and eps != float("inf")):
        raise ValueError(f"eps: expected a finite non-negative float, got {eps}")
    return eps


def _check_stats(name: str, t: object, m: int, x: torch.Tensor) -> torch.Tensor:
    """mean / rstd as torch's native_layer_norm saves them: float32, M values ([M] or [..., 1])."""
    t = require_tensor(name, t)
    if t.dtype != torch.float32:
        raise TypeError(f"{name}: expected dtype float32 (what the forward saves), got {str(t.dtype)[6:]}")
    if t.numel() != m:
        raise ValueError(f"{name}: expected {m} values (one per row of x), got shape {tuple(t.shape)}")
    if t.device != x.device:
        require_same_device(name, t, "x", x)
    return t.reshape(m).contiguous()


# --- row layouts --------------------------------------------------------------------------------------------------


def _rows(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A row input read in place with its row stride (strided rows welcome); copied only when its last dim is not
    contiguous or its leading dims cannot merge into one row stride (an exotic layout: say so, copy once)."""
    stride = row_stride(t)
    if stride is None:
        t = t.contiguous()
        stride = t.shape[-1]
    return t, stride


def _based(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(a view starting at the 16-byte boundary at or before t's first element, t's offset from it in elements).

    Triton specializes a pointer on being 16-byte aligned or not and lays a row's registers out by the widest access
    it can prove; a batch slice of rows 8 bytes off the boundary (4100 columns) would otherwise reduce in another
    order than the whole tensor. Handing it the aligned base and the offset (`_aligns`) makes the proof the same."""
    mis = t.data_ptr() & 15
    if mis and mis % t.element_size() == 0 and t.storage_offset() * t.element_size() >= mis:
        k = mis // t.element_size()
        return t.as_strided((1,), (1,), t.storage_offset() - k), k
    return t, 0


def _align(n_align: int, *values: int) -> int:
    """Elements every row start is a multiple of (capped at N's alignment: the layout then depends on N only)."""
    a = n_align
    for v in values:
        a = min(a, stride_alignment(v))
    return a


def _grid_fwd(m: int, cfg: FwdConfig, device: torch.device) -> int:
    tiles = -(-m // cfg.rows)
    if cfg.loop:
        return max(1, min(tiles, multiprocessor_count(device) * max(1, cfg.programs_per_sm)))
    return tiles


def bwd_programs(m: int, cfg: BwdConfig, device: torch.device) -> tuple[int, int]:
    """(programs, rows per program) of the backward: every program gets at least one row."""
    p = max(1, min(m, multiprocessor_count(device) * max(1, cfg.programs_per_sm)))
    rpp = -(-m // p)
    return -(-m // rpp), rpp


def _on_device(x: torch.Tensor):
    """Triton launches on the current device: make it x's (tensors on cuda:1 while cuda:0 is current)."""
    if x.is_cuda and x.get_device() != torch.cuda.current_device():
        return torch.cuda.device(x.device)
    return None


# --- launches -----------------------------------------------------------------------------------------------------
def _forward(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float, stats: bool,
             cfg: FwdConfig | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """y (contiguous, x's shape and dtype) and, with stats, mean and rstd (float32, [M]); arguments checked."""
    n = x.shape[-1]
    m = x.numel() // n
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    mean = torch.empty((m,), dtype=torch.float32, device=x.device) if stats else None
    rstd = torch.empty((m,), dtype=torch.float32, device=x.device) if stats else None
    if m == 0:
        return y, mean, rstd
    guard = _on_device(x)
    if guard is not None:
        with guard:
            return _forward(x, weight, bias, eps, stats, cfg)
    if cfg is None:
        cfg = fwd_config_for_call(n, x.dtype, fwd_load_policy(m, n, x.element_size(), l2_cache_bytes(x.device)))
    xr, x_stride = _rows(x)
    xb, x_off = _based(xr)
    na = stride_alignment(n)
    xa = _align(na, x_stride, x_off)
    w = weight if weight is not None else y  # (a pointer the kernel never reads: HAS_W / HAS_B / STORE_STATS)
    b = bias if bias is not None else y
    mp, rp = (mean, rstd) if stats else (y, y)
    args = (xb, x_off // xa, x_stride // xa, w, b, y, n // na, mp, rp, m, n // na, eps, 1.0 / n)
    consts = {"X_ALIGN": xa, "Y_ALIGN": na, "N_ALIGN": na, "HAS_W": weight is not None, "HAS_B": bias is not None,
              "STORE_STATS": stats}
    if cfg.wide:
        consts.update(CHUNK=cfg.chunk, EMULATE_RNE=_INTERPRETED)
        grid = max(1, min(m, multiprocessor_count(x.device) * max(1, cfg.programs_per_sm)))
        _FWD_WIDE.launch(grid, args, consts, cfg.num_warps)
    else:
        consts.update(BLOCK_A=cfg.block_a, BLOCK_B=cfg.block_b, ROWS=cfg.rows, LOOP=cfg.loop,
                      EMULATE_RNE=_INTERPRETED, X_POLICY=cfg.load_policy)
        _FWD.launch(_grid_fwd(m, cfg, x.device), args, consts, cfg.num_warps)
    return y, mean, rstd


def _backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, mean: torch.Tensor,
              rstd: torch.Tensor, need_dw: bool, need_db: bool, cfg: BwdConfig | None = None,
              dbias_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(dx, dweight, dbias) with arguments checked; dweight in the weight's dtype, dbias in `dbias_dtype` (default:
    the weight's dtype, x's without a weight); None where not asked for (dweight also without a weight)."""
    n = x.shape[-1]
    m = x.numel() // n
    need_dw = need_dw and weight is not None
    gdtype = weight.dtype if weight is not None else x.dtype
    bdtype = dbias_dtype or gdtype
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if m == 0:  # sums over no rows are zeros; nothing to launch for dx
        dw = torch.zeros((n,), dtype=gdtype, device=x.device) if need_dw else None
        db = torch.zeros((n,), dtype=bdtype, device=x.device) if need_db else None
        return dx, dw, db
    guard = _on_device(x)
    if guard is not None:
        with guard:
            return _backward(dy, x, weight, mean, rstd, need_dw, need_db, cfg, dbias_dtype)
    cfg = cfg or bwd_config(n, x.dtype)
    programs, rpp = bwd_programs(m, cfg, x.device)
    dyr, dy_stride = _rows(dy)
    xr, x_stride = _rows(x)
    dyb, dy_off = _based(dyr)
    xb, x_off = _based(xr)
    na = stride_alignment(n)
    dya, xa = _align(na, dy_stride, dy_off), _align(na, x_stride, x_off)
    parts = torch.empty((int(need_dw) + int(need_db), programs, n), dtype=torch.float32, device=x.device)
    dwp = parts[0] if need_dw else dx
    dbp = parts[-1] if need_db else dx
    w = weight if weight is not None else x
    args = (dyb, dy_off // dya, dy_stride // dya, xb, x_off // xa, x_stride // xa, w, mean, rstd, dx, n // na,
            dwp, dbp, m, n // na, rpp, 1.0 / n)
    consts = {"DY_ALIGN": dya, "X_ALIGN": xa, "DX_ALIGN": na, "N_ALIGN": na, "HAS_W": weight is not None,
              "STORE_DW": need_dw, "STORE_DB": need_db}
    if cfg.wide:
        consts.update(CHUNK=cfg.chunk, EMULATE_RNE=_INTERPRETED)
        _BWD_WIDE.launch(programs, args, consts, cfg.num_warps)
    else:
        consts.update(BLOCK_A=cfg.block_a, BLOCK_B=cfg.block_b, STAGES=cfg.stages, EMULATE_RNE=_INTERPRETED)
        _BWD.launch(programs, args, consts, cfg.num_warps)
    dw = torch.empty((n,), dtype=gdtype, device=x.device) if need_dw else None
    db = torch.empty((n,), dtype=bdtype, device=x.device) if need_db else None  # (the reduction rounds once to it)
    if need_dw or need_db:
        _REDUCE.launch(-(-n // cfg.reduce_block_c),
                       (dwp, dbp, dw if need_dw else db, db if need_db else dw, programs, n),
                       {"STORE_DW": need_dw, "STORE_DB": need_db, "BLOCK_P": cfg.reduce_block_p,
                        "BLOCK_C": cfg.reduce_block_c, "EMULATE_RNE": _INTERPRETED}, cfg.reduce_warps)
    return dx, dw, db


# --- public functions ---------------------------------------------------------------------------------------------
def _needs_grad(x: torch.Tensor, weight: object, bias: object) -> bool:
    return torch.is_grad_enabled() and (
        x.requires_grad or (isinstance(weight, torch.Tensor) and weight.requires_grad)
        or (isinstance(bias, torch.Tensor) and bias.requires_grad))


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """LayerNorm over the last dim, as ``F.layer_norm(x, (x.shape[-1],), weight, bias, eps)``:
    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance, in float32, rounded once to x's
    dtype.

    ``x``: float32, float16 or bfloat16 with any leading dims; rows may be strided (read in place; a last dim that is
    not contiguous, or leading dims that cannot merge into one row stride, are copied first). ``weight`` / ``bias``:
    shape ``(hidden,)`` in x's dtype or float32 (any float dtype is taken), each optional. Differentiable in x,
    weight and bias (autograd through the ``ridgeline::layer_norm_fwd`` custom op, whose backward runs our backward
    kernels) and traceable by ``torch.compile(fullgraph=True)``. A row's result does not depend on how many rows
    are in the call, and repeated calls agree bitwise.
    """
    x = require_rows("x", x, allow_meta=True)
    eps = _check_eps(eps)
    grad = _needs_grad(x, weight, bias)
    if grad or x.is_meta or torch.compiler.is_compiling():
        # Through the custom ops (checked first: the op's own argument parser would answer a bad one in several
        # lines); the one that saves mean/rstd (and has the autograd) only when a gradient is wanted. A meta tensor
        # takes the op's shape function.
        _require_vector("weight", weight, x)
        _require_vector("bias", bias, x)
        return layer_norm_fwd_op(x, weight, bias, eps)[0] if grad else layer_norm_op(x, weight, bias, eps)
    return _forward(x, _check_vector("weight", weight, x), _check_vector("bias", bias, x), eps, stats=False)[0]


def layer_norm_forward(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(y, mean, rstd)``: `layer_norm`'s output and what its backward needs, float32 of shape ``[M]`` (M = rows,
    leading dims merged): the row's mean and 1 / sqrt(biased variance + eps), as torch's ``native_layer_norm`` saves
    them (which shapes them ``[..., 1]``). Not differentiable itself (use `layer_norm`)."""
    x = require_rows("x", x, allow_meta=True)
    eps = _check_eps(eps)
    if x.is_meta:  # shapes only (the op's fake)
        _require_vector("weight", weight, x)
        _require_vector("bias", bias, x)
        return layer_norm_fwd_op(x, weight, bias, eps)
    y, mean, rstd = _forward(x, _check_vector("weight", weight, x), _check_vector("bias", bias, x), eps, stats=True)
    return y, mean, rstd


def layer_norm_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    *,
    compute_dweight: bool = True,
    compute_dbias: bool = True,
    dbias_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """``(dx, dweight, dbias)`` of `layer_norm` given the upstream gradient ``dy`` (x's shape and dtype) and what the
    forward saved: ``x``, ``weight`` (or None), ``mean`` and ``rstd`` (float32, M values: ``[M]`` or ``[..., 1]``).

    ``dx = rstd * (w dy - xhat * mean(xhat w dy) - mean(w dy))`` with ``xhat = (x - mean) * rstd``, float32, rounded
    once to x's dtype; ``dweight = sum_rows(dy * xhat)`` in the weight's dtype, ``dbias = sum_rows(dy)`` in
    ``dbias_dtype`` (the bias's; default: the weight's dtype, x's without one), accumulated in float32 per program,
    then summed in a fixed order and rounded once: deterministic, no atomics. dx of a row does not depend on the
    other rows. ``dweight`` is None without a weight or with ``compute_dweight=False``; ``dbias`` None with
    ``compute_dbias=False``.
    """
    x = require_rows("x", x, allow_meta=True)
    dy = require_rows("dy", dy, allow_meta=True)
    if dy.shape != x.shape:
        raise ValueError(f"dy: expected shape {tuple(x.shape)} (same as x), got {tuple(dy.shape)}")
    if dy.dtype != x.dtype:
        raise TypeError(f"dy: expected dtype {str(x.dtype)[6:]} (same as x), got {str(dy.dtype)[6:]}")
    if dy.device != x.device:
        require_same_device("dy", dy, "x", x)
    m = x.numel() // x.shape[-1]
    mean = _check_stats("mean", mean, m, x)
    rstd = _check_stats("rstd", rstd, m, x)
    if dbias_dtype is not None and dbias_dtype not in FLOAT_DTYPES:
        raise TypeError(f"dbias_dtype: expected None or float32, float16, bfloat16, got {dbias_dtype}")
    if x.is_meta:  # shapes only (the op's fake)
        _require_vector("weight", weight, x)
        dx, dw, db = layer_norm_bwd_op(dy, x, weight, mean, rstd, bool(compute_dweight), bool(compute_dbias),
                                       dbias_dtype)
        return dx, dw if dw.numel() else None, db if db.numel() else None
    weight = _check_vector("weight", weight, x)
    return _backward(dy, x, weight, mean, rstd, bool(compute_dweight), bool(compute_dbias), dbias_dtype=dbias_dtype)


# --- torch custom ops: opaque to torch.compile (fake implementations give the shapes), with autograd --------------
_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::layer_norm", mutates_args=())
def layer_norm_op(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
                  ) -> torch.Tensor:
    x = require_rows("x", x, allow_meta=True)
    return _forward(x, _check_vector("weight", weight, x), _check_vector("bias", bias, x), _check_eps(eps),
                    stats=False)[0]


@layer_norm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.custom_op(f"{_LIB}::layer_norm_fwd", mutates_args=())
def layer_norm_fwd_op(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return layer_norm_forward(x, weight, bias, eps)


@layer_norm_fwd_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m = x.numel() // x.shape[-1]
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            torch.empty((m,), dtype=torch.float32, device=x.device),
            torch.empty((m,), dtype=torch.float32, device=x.device))


@torch.library.custom_op(f"{_LIB}::layer_norm_bwd", mutates_args=())
def layer_norm_bwd_op(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, mean: torch.Tensor,
                      rstd: torch.Tensor, compute_dweight: bool, compute_dbias: bool,
                      dbias_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dw, db = layer_norm_backward(dy, x, weight, mean, rstd, compute_dweight=compute_dweight,
                                     compute_dbias=compute_dbias, dbias_dtype=dbias_dtype)
    # A custom op returns tensors only: an empty tensor stands for a gradient not asked for.
    return dx, dw if dw is not None else x.new_empty(0), db if db is not None else x.new_empty(0)


@layer_norm_bwd_op.register_fake
def _(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, mean: torch.Tensor, rstd: torch.Tensor,
      compute_dweight: bool, compute_dbias: bool, dbias_dtype: torch.dtype | None = None
      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.shape[-1]
    gdtype = weight.dtype if weight is not None else x.dtype
    dw = (n,) if compute_dweight and weight is not None else (0,)
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            torch.empty(dw, dtype=gdtype if dw != (0,) else x.dtype, device=x.device),
            torch.empty((n,) if compute_dbias else (0,), dtype=(dbias_dtype or gdtype) if compute_dbias else x.dtype,
                        device=x.device))


def _setup_context(ctx, inputs, output) -> None:
    x, weight, bias, _eps = inputs
    _y, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.mark_non_differentiable(mean, rstd)


def _backward_of_fwd(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
    # dbias is rounded once, to the bias's own dtype (a float32 bias beside a bf16 weight keeps float32 bits).
    dx, dw, db = layer_norm_bwd_op(dy, x, weight, mean, rstd, bool(need_dw), bool(need_db), ctx.bias_dtype)
    return (dx if need_dx else None, dw if need_dw else None, db if need_db else None, None)


layer_norm_fwd_op.register_autograd(_backward_of_fwd, setup_context=_setup_context)

__all__ = ["layer_norm", "layer_norm_forward", "layer_norm_backward", "fwd_config", "bwd_config", "FwdConfig",
           "BwdConfig", "bwd_programs"]
