"""Host side of the RMSNorm backward (kernel_bwd.py): `rms_norm_backward` and `fused_add_rms_norm_backward`.

Both validate their arguments (one-line errors naming the argument), take the config from rules_bwd.py and launch
the row kernel, then (with more than one row and a weight) the dweight reduction. The autograd of the forward
custom ops (autograd.py) calls them through the custom op `ridgeline::rms_norm_bwd`.
"""

from __future__ import annotations

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import multiprocessor_count, require_dtype, require_rows, require_same_device, require_tensor
from ridgeline.lib.rounding import inv_hidden
from ridgeline.ops.rmsnorm.kernel import _INTERPRETED, row_alignments
from ridgeline.ops.rmsnorm.kernel_bwd import _dweight_reduce_kernel, _rms_norm_bwd_kernel, bwd_constexprs
from ridgeline.ops.rmsnorm.launch import _check_eps, _check_float, _input_rows, _validate_weight
from ridgeline.ops.rmsnorm.rules_bwd import REDUCE_BLOCK_C, REDUCE_BLOCK_P, BwdConfig, bwd_config

_LAUNCHER = CachedLauncher(_rms_norm_bwd_kernel)
_REDUCE_LAUNCHER = CachedLauncher(_dweight_reduce_kernel)


def _same_rows(name: str, t: object, x: torch.Tensor) -> torch.Tensor:
    t = require_tensor(name, t)
    if t.shape != x.shape:
        raise ValueError(f"{name}: expected shape {tuple(x.shape)} (same as x), got {tuple(t.shape)}")
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        require_dtype(name, t)
    require_same_device(name, t, "x", x)
    return t


def _validate_rstd(rstd: object, x: torch.Tensor, m: int) -> torch.Tensor:
    """rstd as the forward saves it: float32, one value per row (shape x.shape[:-1], (M,) or with a trailing 1)."""
    rstd = require_tensor("rstd", rstd)
    if rstd.dtype != torch.float32:
        raise TypeError(f"rstd: expected dtype float32 (one 1/rms per row), got {rstd.dtype}")
    if rstd.numel() != m or rstd.shape not in (x.shape[:-1], torch.Size((m,)), torch.Size((*x.shape[:-1], 1))):
        raise ValueError(f"rstd: expected shape {tuple(x.shape[:-1])} (one value per row of x), got "
                         f"{tuple(rstd.shape)}")
    require_same_device("rstd", rstd, "x", x)
    return rstd.reshape(m)  # (a copy only for a strided rstd: M floats)


def rms_norm_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    rstd: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    weight_offset: float = 0.0,
    dresidual_out: torch.Tensor | None = None,
    need_dweight: bool = True,
    cfg: BwdConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gradients of ``y = x * rstd * (weight_offset + weight)``: returns ``(dx, dweight)``.

    ``dy`` and ``x`` have one shape (any leading dims, rows may be strided) and float dtypes; ``rstd`` (float32,
    one value per row: ``1 / sqrt(mean(x**2) + eps)``) is what the forward saved, or None to recompute it from x
    with ``eps`` (x is read anyway). ``dresidual_out`` (x's shape) is added to dx: the fused op's residual_out
    gradient. ``dx`` has x's dtype; ``dweight`` the weight's dtype (None without a weight or with
    ``need_dweight=False``), summed over rows in float32 in a fixed order: repeated calls agree bitwise, and a
    row's dx does not depend on the other rows in the call.
    """
    x = require_rows("x", x)
    dy = _same_rows("dy", dy, x)
    eps = _check_eps(eps)
    weight = _validate_weight(weight, x, weight_offset)
    weight_offset = float(_check_float("weight_offset", weight_offset))
    n = x.shape[-1]
    m = x.numel() // n
    if rstd is not None:
        rstd = _validate_rstd(rstd, x, m)
    if dresidual_out is not None:
        dresidual_out = _same_rows("dresidual_out", dresidual_out, x)
    if type(need_dweight) is not bool:
        raise TypeError(f"need_dweight: expected a bool, got {type(need_dweight).__name__}")
    if cfg is not None and not isinstance(cfg, BwdConfig):
        raise TypeError(f"cfg: expected a BwdConfig (rules_bwd.py) or None, got {type(cfg).__name__}")
    need_dw = need_dweight and weight is not None
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dweight = torch.empty(n, dtype=weight.dtype, device=x.device) if need_dw else None
    if m == 0:
        if dweight is not None:
            dweight.zero_()  # a sum over no rows
        return dx, dweight
    if x.is_cuda and x.get_device() != torch.cuda.current_device():
        with torch.cuda.device(x.device):  # Triton launches on the current device: make it x's
            _launch(dy, x, weight, rstd, dresidual_out, dx, dweight, m, n, eps, weight_offset, cfg)
    else:
        _launch(dy, x, weight, rstd, dresidual_out, dx, dweight, m, n, eps, weight_offset, cfg)
    return dx, dweight


def fused_add_rms_norm_backward(
    dy: torch.Tensor,
    dresidual_out: torch.Tensor | None,
    residual_out: torch.Tensor,
    weight: torch.Tensor | None = None,
    rstd: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    weight_offset: float = 0.0,
    need_dweight: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gradients of ``(out, residual_out) = fused_add_rms_norm(x, residual, weight)``: ``(dx, dweight)``.

    ``dx`` is also the residual's gradient (x and residual enter as their sum): the norm's gradient at
    ``residual_out`` plus ``dresidual_out`` (None: residual_out was not used). ``rstd`` as for
    `rms_norm_backward` (of residual_out), or None to recompute it with ``eps``.
    """
    return rms_norm_backward(dy, residual_out, weight, rstd, eps, weight_offset=weight_offset,
                             dresidual_out=dresidual_out, need_dweight=need_dweight)


def grid_of(m: int, cfg: BwdConfig, device: torch.device) -> int:
    """Programs of the row kernel: at most programs_per_sm per SM, never more than rows."""
    return max(1, min(m, multiprocessor_count(device) * max(1, cfg.programs_per_sm)))


def _launch(dy, x, weight, rstd, dres, dx, dweight, m: int, n: int, eps: float, weight_offset: float,
            cfg: BwdConfig | None) -> None:
    if cfg is None:
        cfg = bwd_config(n, m, multiprocessor_count(x.device))
    elif cfg.single_pass and cfg.block_n < n:
        raise ValueError(f"cfg: {cfg.describe()} does not fit a row of {n} columns")
    x_in, x_stride = _input_rows("x", x)
    dy_in, dy_stride = _input_rows("dy", dy)
    dr_in, dr_stride = _input_rows("dresidual_out", dres) if dres is not None else (x_in, x_stride)
    grid = grid_of(m, cfg, x.device)
    need_dw = dweight is not None
    # One program writes dweight itself; otherwise one fp32 partial row per program, summed by the reduction.
    direct = need_dw and grid == 1 and (cfg.single_pass or m == 1)
    if need_dw and not direct:
        part = torch.empty((grid, n), dtype=torch.float32, device=x.device)
    else:
        part = dweight if need_dw else dx
    aligns = row_alignments(n, (dy_stride, x_stride, dr_stride, n))
    dya, xa, dra, dxa, na = aligns
    w = weight if weight is not None else x
    r = rstd if rstd is not None else x
    constexprs = bwd_constexprs(aligns, weight is not None, rstd is not None, dres is not None, need_dw,
                                cfg.block_n, cfg.single_pass, cfg.hold_weight, _INTERPRETED, cfg.prefetch)
    _LAUNCHER.launch(grid, (dy_in, dy_stride // dya, x_in, x_stride // xa, dr_in, dr_stride // dra, w, r, dx,
                            n // dxa, part, m, n // na, eps, inv_hidden(n), weight_offset),
                     constexprs, cfg.num_warps)
    if need_dw and not direct:
        _REDUCE_LAUNCHER.launch(triton_cdiv(n, REDUCE_BLOCK_C), (part, dweight, grid, n),
                                {"BLOCK_P": REDUCE_BLOCK_P, "BLOCK_C": REDUCE_BLOCK_C, "INTERPRETED": _INTERPRETED},
                                4)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


__all__ = ["rms_norm_backward", "fused_add_rms_norm_backward", "grid_of"]
