"""Host side of the softmax kernels: the public `softmax(x, dim=-1)` and `softmax_backward(y, dy, dim=-1)`, their
argument checks, the launches, and the torch custom ops (autograd and torch.compile).

The last dim is the fast path: rows are read in place (leading dims merged into one row stride, rows may be
strided), the output is a fresh contiguous tensor. Another `dim` is moved last and made contiguous first (one
extra read and write of x: a copy, said here because it costs), and the result is moved back (a view).
"""

from __future__ import annotations

import torch
import triton

from ridgeline.lib.coop import CoopLauncher
from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    FLOAT_DTYPES,
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
    row_stride,
    stride_alignment,
)
from ridgeline.ops.softmax.kernel import _softmax_bwd_rows, _softmax_fwd_rows
from ridgeline.ops.softmax.kernel_coop import _softmax_bwd_coop, _softmax_fwd_coop
from ridgeline.ops.softmax.kernel_split import (
    _softmax_bwd_split_dot,
    _softmax_bwd_split_write,
    _softmax_fwd_split_stats,
    _softmax_fwd_split_write,
)
from ridgeline.ops.softmax.rules import (
    _INTERPRETED,
    COOP_PROGRAMS_PER_SM_GUESS,
    COOP_SEEN,
    LaunchConfig,
    config_for,
    grid_for,
    s_block,
    split_plan,
)

# One pass, per direction (bwd: False / True).
_LAUNCHERS = {False: CachedLauncher(_softmax_fwd_rows), True: CachedLauncher(_softmax_bwd_rows)}
# Split rows, per direction: (kernel 1: chunk statistics, kernel 2: combine and write).
_SPLIT_LAUNCHERS = {
    False: (CachedLauncher(_softmax_fwd_split_stats), CachedLauncher(_softmax_fwd_split_write)),
    True: (CachedLauncher(_softmax_bwd_split_dot), CachedLauncher(_softmax_bwd_split_write)),
}
# Split rows read once, per direction (kernel_coop.py).
_COOP_LAUNCHERS = {False: CoopLauncher(_softmax_fwd_coop, COOP_PROGRAMS_PER_SM_GUESS),
                   True: CoopLauncher(_softmax_bwd_coop, COOP_PROGRAMS_PER_SM_GUESS)}


def _rows(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A tensor and its row stride; copied only when its layout cannot be read in place (last dim not contiguous,
    leading dims not mergeable)."""
    stride = row_stride(t)
    if stride is None:
        t = t.contiguous()
        stride = t.shape[-1]
    return t, stride


def _alignments(n: int, itemsize: int, strides: tuple[int, ...]) -> tuple[int, ...]:
    """(N_ALIGN, one per row stride): how many elements divide n and each stride, up to a 16-byte vector; strides
    capped at n's so the register layout (so the order of a row's sums, so the bits) follows n only."""
    vec = 16 // itemsize
    na = stride_alignment(n, vec)
    return (na, *(min(stride_alignment(s, vec), na) for s in strides))


def _launch(bwd: bool, tensors: tuple[torch.Tensor, ...], strides: tuple[int, ...], m: int, n: int,
            cfg: LaunchConfig | None = None) -> None:
    """Forward: tensors (x, y); backward: (y, dy, dx). The last tensor is written."""
    if m == 0 or n == 0:
        return
    x0 = tensors[0]
    if x0.is_cuda and x0.get_device() != torch.cuda.current_device():
        with torch.cuda.device(x0.device):  # Triton launches on the current device
            return _launch(bwd, tensors, strides, m, n, cfg)
    if cfg is None:
        cfg = config_for(n, x0.dtype.itemsize, bwd)
    elif cfg.one_pass and (cfg.width() < n or (cfg.piece_b and cfg.block > n)):
        raise ValueError(f"cfg: {cfg.describe()} does not fit a row of {n} columns")
    fast_key = None
    if x0.is_cuda and CachedLauncher.enabled():
        # Everything the compiled kernels and the grid depend on; id(cfg): configs come from a cache (or the
        # caller keeps theirs), and the entry holds the config, so the id is not reused while it is cached.
        fast_key = (x0.get_device(), id(cfg), m, n, strides, x0.dtype, tensors[-1].dtype,
                    tuple(t.data_ptr() & 15 for t in tensors))
    if not cfg.one_pass:
        if not (cfg.coop and _launch_coop(bwd, tensors, strides, m, n, cfg)):
            _launch_split(bwd, tensors, strides, m, n, cfg, fast_key)
        return
    launcher = _LAUNCHERS[bwd]
    if fast_key is not None:
        hit = launcher.cached(fast_key)
        if hit is not None:
            kernel, (grid, args_tail, cvals, _) = hit
            args = _args(tensors, strides, args_tail, m, n)
            launcher.run(kernel, grid, args, cvals, fast_key[0])
            return
    aligns = _alignments(n, x0.dtype.itemsize, strides)
    grid = grid_for(m, n, x0.dtype.itemsize, cfg, x0.device, bwd)
    constexprs = _align_constexprs(bwd, aligns)
    constexprs.update(BLOCK=cfg.block, PIECE_B=cfg.piece_b, ROWS=cfg.rows, EMULATE_RNE=_INTERPRETED,
                      LOAD_POLICY=cfg.load_policy, STORE_CM=cfg.store_cm)
    args_tail = (aligns, cfg.rows)
    args = _args(tensors, strides, args_tail, m, n)
    launcher.launch(grid, args, constexprs, cfg.num_warps, fast_key,
                    (grid, args_tail, tuple(constexprs.values()), cfg))


def _align_constexprs(bwd: bool, aligns: tuple[int, ...]) -> dict:
    names = ("Y_ALIGN", "DY_ALIGN", "DX_ALIGN") if bwd else ("X_ALIGN", "Y_ALIGN")
    constexprs: dict = dict(zip(names, aligns[1:], strict=True))
    constexprs["N_ALIGN"] = aligns[0]
    return constexprs


def _launch_split(bwd: bool, tensors: tuple[torch.Tensor, ...], strides: tuple[int, ...], m: int, n: int,
                  cfg: LaunchConfig, fast_key: tuple | None) -> None:
    """Split rows: per group of rows, kernel 1 (chunk statistics to a float32 workspace) then kernel 2 (combine,
    re-read, write). The workspace is [m, S, 2] forward, [m, S] backward (8 or 4 bytes a chunk)."""
    first, second = _SPLIT_LAUNCHERS[bwd]
    x0 = tensors[0]
    hits = (first.cached(fast_key), second.cached(fast_key)) if fast_key is not None else (None, None)
    if hits[0] is not None and hits[1] is not None:
        (k1, (chunks, rows, aligns, cv1, _)), (k2, cv2) = hits
        ws = torch.empty((m, chunks, 2) if not bwd else (m, chunks), dtype=torch.float32, device=x0.device)
        for row0 in range(0, m, rows):
            grid = chunks * min(rows, m - row0)
            a1, a2 = _split_args(tensors, strides, aligns, ws, row0, n)
            first.run(k1, grid, a1, cv1, fast_key[0])
            second.run(k2, grid, a2, cv2, fast_key[0])
        return
    chunks, rows = split_plan(m, n, x0.dtype.itemsize, cfg, bwd)
    aligns = _alignments(n, x0.dtype.itemsize, strides)
    ws = torch.empty((m, chunks, 2) if not bwd else (m, chunks), dtype=torch.float32, device=x0.device)
    # Kernel 1 reads the inputs only (no output's alignment); kernel 2 all of them.
    c2 = _align_constexprs(bwd, aligns)
    c1 = {k: v for k, v in c2.items() if k != ("DX_ALIGN" if bwd else "Y_ALIGN")}
    c1["CHUNK"] = cfg.block
    c2.update(CHUNK=cfg.block, S_BLOCK=s_block(n, cfg), REVERSE=cfg.reverse, EMULATE_RNE=_INTERPRETED)
    for row0 in range(0, m, rows):
        grid = chunks * min(rows, m - row0)
        a1, a2 = _split_args(tensors, strides, aligns, ws, row0, n)
        # (The entries remembered under fast_key rebuild every group's arguments: row0 is not specialized on.)
        first.launch(grid, a1, c1, cfg.num_warps, fast_key, (chunks, rows, aligns, tuple(c1.values()), cfg))
        second.launch(grid, a2, c2, cfg.num_warps, fast_key, tuple(c2.values()))


def _launch_coop(bwd: bool, tensors: tuple[torch.Tensor, ...], strides: tuple[int, ...], m: int, n: int,
                 cfg: LaunchConfig) -> bool:
    """Split rows read once (kernel_coop.py): one cooperative launch of as many groups of S = cdiv(n, chunk)
    programs as are resident at once. False (nothing launched) where a row's S programs cannot all be resident:
    the caller takes the two-kernel split, whose arithmetic is the same chunk for chunk."""
    x0 = tensors[0]
    chunks = triton.cdiv(n, cfg.block)
    aligns = _alignments(n, x0.dtype.itemsize, strides)
    constexprs = _align_constexprs(bwd, aligns)
    constexprs.update(CHUNK=cfg.block, S_BLOCK=s_block(n, cfg), PHASE=0, EMULATE_RNE=_INTERPRETED,
                      PREFETCH=cfg.prefetch)
    ws = torch.empty(m * chunks * (1 if bwd else 2), dtype=torch.float32, device=x0.device)

    def args_for(sync: torch.Tensor, groups: int) -> tuple:
        pairs: list = []
        for t, s, a in zip(tensors, strides, aligns[1:], strict=True):
            pairs += [t, s // a]
        return (*pairs, ws, sync, m, n // aligns[0], groups)

    per_sm = _COOP_LAUNCHERS[bwd].launch(args_for, constexprs, cfg.num_warps, chunks, m, x0.device)
    if per_sm:
        COOP_SEEN[(x0.get_device(), cfg.block, cfg.num_warps, bwd)] = per_sm
    return per_sm > 0


def _split_args(tensors: tuple[torch.Tensor, ...], strides: tuple[int, ...], aligns: tuple[int, ...],
                ws: torch.Tensor, row0: int, n: int) -> tuple[tuple, tuple]:
    """Arguments of kernel 1 (the inputs) and kernel 2 (inputs and output) of one group of rows."""
    pairs: list = []
    for t, s, a in zip(tensors, strides, aligns[1:], strict=True):
        pairs += [t, s // a]
    tail = [ws, row0, n // aligns[0]]
    return tuple(pairs[:-2] + tail), tuple(pairs + tail)


def _args(tensors: tuple[torch.Tensor, ...], strides: tuple[int, ...], tail: tuple, m: int, n: int) -> tuple:
    aligns, rows = tail
    args: list = []
    for t, s, a in zip(tensors, strides, aligns[1:], strict=True):
        args += [t, s // a]
    return (*args, m, n // aligns[0], -(-m // rows))  # (the last: the number of row tiles)


def _check_x(name: str, x: object) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
        require_tensor(name, x)
        require_dtype(name, x)
    if x.dim() == 0:
        raise ValueError(f"{name}: expected at least 1 dim (..., N), got a scalar")
    if not x.is_cuda and not x.is_meta:  # (meta: shapes only, through the op; nothing launches)
        require_runnable_device(name, x)
    return x


def _check_dim(dim: object, ndim: int) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim: expected an int, got {type(dim).__name__}")
    if not -ndim <= dim < ndim:
        raise ValueError(f"dim: expected a dim in [{-ndim}, {ndim - 1}] for a {ndim}-dim input, got {dim}")
    return dim % ndim


def _new_like(x: torch.Tensor) -> torch.Tensor:
    # empty_like of a contiguous tensor is contiguous and cheaper in host time than torch.empty(shape, ...).
    return torch.empty_like(x) if x.is_contiguous() else torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _softmax_last(x: torch.Tensor, cfg: LaunchConfig | None = None) -> torch.Tensor:
    """Softmax over the last dim of a checked tensor (the kernels; no autograd)."""
    y = _new_like(x)
    n = x.shape[-1]
    if n == 0 or x.numel() == 0:
        return y
    xr, stride = _rows(x)
    _launch(False, (xr, y), (stride, n), x.numel() // n, n, cfg)
    return y


def _softmax_backward_last(y: torch.Tensor, dy: torch.Tensor, cfg: LaunchConfig | None = None) -> torch.Tensor:
    dx = _new_like(y)
    n = y.shape[-1]
    if n == 0 or y.numel() == 0:
        return dx
    yr, ys = _rows(y)
    gr, gs = _rows(dy)
    _launch(True, (yr, gr, dx), (ys, gs, n), y.numel() // n, n, cfg)
    return dx


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of ``x`` over ``dim``: ``exp(x - max) / sum(exp(x - max))``, float32 math, output in x's dtype.

    ``x`` may be float32, float16 or bfloat16, any shape, rows 1 to hundreds of thousands of columns wide. Over
    the last dim (the fast path) rows are read in place, strided or not; another ``dim`` is moved last and copied
    contiguous first (one extra read and write of x), and the result is returned as a view moved back. A row's
    result does not depend on the other rows in the call, and repeated calls agree bitwise. Differentiable (the
    backward is ``softmax_backward``) and traceable by torch.compile (an opaque custom op, no graph break).
    NaN and inf follow torch.softmax: a row holding NaN or +inf is NaN, -inf entries give 0.
    """
    x = _check_x("x", x)
    d = _check_dim(dim, x.dim())
    if d != x.dim() - 1:
        # Not the last dim: one movedim + contiguous copy (torch ops, so autograd and torch.compile see them).
        return softmax(x.movedim(d, -1).contiguous(), -1).movedim(-1, d)
    if torch.compiler.is_compiling() or (x.requires_grad and torch.is_grad_enabled()) or x.is_meta:
        return softmax_op(x)  # (a meta tensor: the op's shape function, no launch on no data)
    return _softmax_last(x)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The gradient of softmax from its output: ``dx = y * (dy - sum(dy * y, dim))``, float32 math, in y's dtype.

    ``y`` is softmax's output (what autograd saves), ``dy`` the gradient of the loss with respect to it, same
    shape, dtype and device. Another ``dim`` than the last is moved last and copied (as in ``softmax``).
    """
    y = _check_x("y", y)
    dy = require_tensor("dy", dy)
    if dy.shape != y.shape:
        raise ValueError(f"dy: expected shape {tuple(y.shape)} (same as y), got {tuple(dy.shape)}")
    if dy.dtype != y.dtype:
        raise TypeError(f"dy: expected dtype {str(y.dtype).replace('torch.', '')} (same as y), "
                        f"got {str(dy.dtype).replace('torch.', '')}")
    require_same_device("dy", dy, "y", y)
    d = _check_dim(dim, y.dim())
    if d != y.dim() - 1:
        return softmax_backward(y.movedim(d, -1).contiguous(), dy.movedim(d, -1).contiguous()).movedim(-1, d)
    if torch.compiler.is_compiling() or y.is_meta:
        return softmax_backward_op(y, dy)
    return _softmax_backward_last(y, dy)


# --- the torch custom ops: opaque to torch.compile (fake implementations give the output shapes); autograd
# saves the output y and calls the backward op. Their bodies run the kernels directly (last dim).
_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::softmax", mutates_args=())
def softmax_op(x: torch.Tensor) -> torch.Tensor:
    return _softmax_last(x)


@softmax_op.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.custom_op(f"{_LIB}::softmax_backward", mutates_args=())
def softmax_backward_op(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return _softmax_backward_last(y, dy)


@softmax_backward_op.register_fake
def _(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return torch.empty(y.shape, dtype=y.dtype, device=y.device)


def _setup_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)


def _backward(ctx, grad: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    # (grad may arrive in another layout or, from a mixed-precision graph, another dtype: match y's.)
    return softmax_backward_op(y, grad.to(y.dtype))


softmax_op.register_autograd(_backward, setup_context=_setup_context)

__all__ = ["softmax", "softmax_backward", "LaunchConfig", "config_for", "grid_for"]
