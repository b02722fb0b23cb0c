"""Host side of the fused cross-entropy: the public functions `cross_entropy` (autograd + torch.compile) and
`cross_entropy_fwd_bwd` (the training step as one call), their argument checks, the launches and the torch custom
ops with their autograd.

Semantics: those of ``torch.nn.functional.cross_entropy(logits, target, ignore_index=, label_smoothing=,
reduction=)`` for logits [N, V] and class-index targets [N], plus PaLM's z-loss (Liger's lse_square_scale):
``z_loss * lse**2`` added to each valid row's loss before the reduction. What differs from torch, on purpose:
- The loss is float32 whatever the logits' dtype (torch returns the logits' dtype; Hugging Face's causal-LM loss
  upcasts the logits to float32 first and so returns float32, as we do without the copy). Math is float32.
- The gradient is computed in the forward pass (the logits are read once, the gradient written once, in the logits'
  dtype) and held until backward, which scales it by grad_output in place: nothing moves when grad_output is 1.
  It costs N*V*itemsize of memory from forward to backward (torch holds the logits and an N-float lse instead).
  A backward through the same graph twice (retain_graph=True) is refused: the stored gradient is scaled in place.
- A target outside [0, V) that is not ignore_index: torch raises (CPU) or hits a device-side assert (CUDA). We never
  read out of bounds: that row's loss and gradient are NaN (so a "mean"/"sum" loss is NaN). ``check_targets=True``
  raises a one-line ValueError instead, at the cost of one host sync per call (off by default: it would stall a
  training step and cannot run under CUDA-graph capture).
- "mean" over zero non-ignored rows is NaN (0/0), as torch; every gradient is then 0, as torch's.
"""

from __future__ import annotations

import math

import torch
import triton

from ridgeline.lib.coop import CoopLauncher
from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    FLOAT_DTYPES,
    l2_cache_bytes,
    multiprocessor_count,
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.ops.cross_entropy.kernel import (
    _INTERPRETED,
    PREP_BLOCK,
    _xent_finish_kernel,
    _xent_prep_kernel,
    _xent_rows_kernel,
    _xent_scale_kernel,
)
from ridgeline.ops.cross_entropy.kernel_coop import _xent_coop
from ridgeline.ops.cross_entropy.kernel_split import WS_SLOTS, _xent_split_stats, _xent_split_write
from ridgeline.ops.cross_entropy.rules import (
    FINISH_BLOCK,
    Case,
    LaunchConfig,
    config_for,
    grid_for,
    lane_columns,
    s_block,
    split_plan,
)

REDUCTIONS = ("mean", "sum", "none")
TARGET_DTYPES = (torch.int64, torch.int32)
SCALE_BLOCK = 4096

_ROWS = CachedLauncher(_xent_rows_kernel)
_PREP = CachedLauncher(_xent_prep_kernel)
_FINISH = CachedLauncher(_xent_finish_kernel)
_SCALE = CachedLauncher(_xent_scale_kernel)
_SPLIT_STATS = CachedLauncher(_xent_split_stats)
_SPLIT_WRITE = CachedLauncher(_xent_split_write)
# Split rows read once (kernel_coop.py).
_COOP = CoopLauncher(_xent_coop)


def case_of(logits: torch.Tensor, has_grad: bool) -> Case:
    n, v = logits.shape
    dev = logits.device
    return Case(v, logits.element_size(), n, has_grad, multiprocessor_count(dev), l2_cache_bytes(dev))


def launch_config(n_cols: int, dtype: torch.dtype, n_rows: int = 1, has_grad: bool = True,
                  device: torch.device | str = "cuda") -> tuple[LaunchConfig, int]:
    """The config and grid our kernel takes for N x V logits of `dtype` (what reports record beside a timing)."""
    device = torch.device(device)
    case = Case(n_cols, dtype.itemsize, n_rows, has_grad, multiprocessor_count(device), l2_cache_bytes(device))
    cfg = config_for(case)
    return cfg, grid_for(case, cfg, _INTERPRETED)


# --- argument checks (one line each, naming the argument) -----------------------------------------------------------
def _validate(logits: object, target: object, ignore_index: object, label_smoothing: object, reduction: object,
              z_loss: object) -> tuple[torch.Tensor, torch.Tensor, int, float, float]:
    if not isinstance(logits, torch.Tensor):
        require_tensor("logits", logits)
    require_dtype("logits", logits, FLOAT_DTYPES)
    if logits.dim() != 2:
        raise ValueError(f"logits: expected 2 dims (N, V), got shape {tuple(logits.shape)}")
    if logits.shape[1] == 0:
        raise ValueError("logits: vocab size (dim 1) is 0")
    if not logits.is_cuda:
        require_runnable_device("logits", logits)
    if not isinstance(target, torch.Tensor):
        require_tensor("target", target)
    if target.dtype not in TARGET_DTYPES:
        raise TypeError(f"target: expected dtype int64 or int32 (class indices), got {str(target.dtype)[6:]}")
    if target.dim() != 1 or target.shape[0] != logits.shape[0]:
        raise ValueError(f"target: expected shape ({logits.shape[0]},) to match logits' rows, got "
                         f"{tuple(target.shape)}")
    if target.device != logits.device:
        require_same_device("target", target, "logits", logits)
    if type(ignore_index) is not int:
        raise TypeError(f"ignore_index: expected an int, got {type(ignore_index).__name__}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction: expected 'mean', 'sum' or 'none', got {reduction!r}")
    ls = _float("label_smoothing", label_smoothing)
    if not 0.0 <= ls <= 1.0:
        raise ValueError(f"label_smoothing: expected a float in [0, 1], got {ls}")
    z = _float("z_loss", z_loss)
    if z < 0.0:
        raise ValueError(f"z_loss: expected a non-negative float, got {z}")
    if logits.stride(1) != 1 and logits.shape[1] > 1:
        # An exotic layout (columns not contiguous): copied once, so the kernel's loads stay vectorized.
        logits = logits.contiguous()
    return logits, target, ignore_index, ls, z


def _float(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: expected a float, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name}: expected a finite float, got {v}")
    return v


# --- the launches -----------------------------------------------------------------------------------------------
def _run(logits: torch.Tensor, target: torch.Tensor, ignore_index: int, ls: float, reduction: str, z: float,
         grad: torch.Tensor | None, check_targets: bool, cfg: LaunchConfig | None = None, grid: int | None = None,
         ) -> torch.Tensor:
    """Loss (float32: a scalar, or [N] for 'none'); with `grad` (N x V, logits' dtype, last dim contiguous) also the
    gradient of that loss for grad_output 1, written into it."""
    n, v = logits.shape
    dev = logits.device
    loss_rows = torch.empty((n,), dtype=torch.float32, device=dev)
    loss = loss_rows if reduction == "none" else torch.empty((), dtype=torch.float32, device=dev)
    if n == 0:
        if reduction != "none":
            loss.fill_(float("nan") if reduction == "mean" else 0.0)
        return loss
    if logits.is_cuda and logits.get_device() != torch.cuda.current_device():
        with torch.cuda.device(dev):  # Triton launches on the current device: make it the logits'
            return _run(logits, target, ignore_index, ls, reduction, z, grad, check_targets, cfg, grid)
    mean = reduction == "mean"
    stats = _target_stats(target, v, ignore_index, check_targets) if mean or check_targets else loss_rows
    if cfg is None:
        case = case_of(logits, grad is not None)
        cfg = config_for(case)
        grid = grid_for(case, cfg, _INTERPRETED)
    elif grid is None:
        grid = grid_for(case_of(logits, grad is not None), cfg, _INTERPRETED)
    if cfg.single and cfg.block < v:
        raise ValueError(f"cfg: {cfg.describe()} does not hold a row of {v} columns")
    g = grad if grad is not None else logits  # (never written without HAS_GRAD)
    if cfg.split:
        if not (cfg.coop and grad is not None and _run_coop(logits, target, ignore_index, ls, z, grad, loss_rows,
                                                            stats, mean, cfg)):
            _run_split(logits, target, ignore_index, ls, z, grad, loss_rows, stats, mean, cfg)
        if reduction != "none":
            _FINISH.launch(1, (loss_rows, n, stats, loss), {"MEAN": mean, "BLOCK": FINISH_BLOCK}, 4)
        return loss
    constexprs = {"BLOCK": cfg.block, "SINGLE": cfg.single, "HAS_GRAD": grad is not None, "MEAN": mean,
                  "HAS_SMOOTH": ls > 0.0, "HAS_Z": z > 0.0, "LOOP": grid < n, "EMULATE": _INTERPRETED,
                  "LANES": lane_columns(cfg, logits.element_size()), "BACK": cfg.back}
    _ROWS.launch(grid, (logits, logits.stride(0), target, target.stride(0), loss_rows, g, g.stride(0), stats, n, v,
                        ignore_index, ls, z), constexprs, cfg.num_warps)
    if reduction != "none":
        _FINISH.launch(1, (loss_rows, n, stats, loss), {"MEAN": mean, "BLOCK": FINISH_BLOCK}, 4)
    return loss


def _align(value: int, itemsize: int) -> int:
    """The largest power of two <= 16 bytes' worth of elements dividing `value` (told to Triton as a constexpr)."""
    a = max(1, 16 // itemsize)
    while a > 1 and value % a:
        a //= 2
    return a


def _run_split(logits: torch.Tensor, target: torch.Tensor, ignore_index: int, ls: float, z: float,
               grad: torch.Tensor | None, loss_rows: torch.Tensor, stats: torch.Tensor, mean: bool,
               cfg: LaunchConfig) -> None:
    """Split rows (kernel_split.py): per group of rows, kernel 1 (chunk partials to a float32 workspace of
    WS_SLOTS floats a chunk) then kernel 2 (combine; the loss; with `grad`, re-read the chunk and write its
    gradient). The forward (no grad) launches kernel 2 once a row and all rows as one group."""
    n, v = logits.shape
    item = logits.element_size()
    chunks, rows = split_plan(n, v, item, cfg, grad is not None)
    ws = torch.empty((n, chunks, WS_SLOTS), dtype=torch.float32, device=logits.device)
    g = grad if grad is not None else logits  # (never written without HAS_GRAD)
    xa, ga, va = _align(logits.stride(0), item), _align(g.stride(0), item), _align(v, item)
    xs, gs, ts = logits.stride(0) // xa, g.stride(0) // ga, target.stride(0)
    c1 = {"X_ALIGN": xa, "V_ALIGN": va, "CHUNK": cfg.block, "HAS_SMOOTH": ls > 0.0}
    c2 = {"X_ALIGN": xa, "G_ALIGN": ga, "V_ALIGN": va, "CHUNK": cfg.block, "S_BLOCK": s_block(v, cfg),
          "HAS_GRAD": grad is not None, "MEAN": mean, "HAS_SMOOTH": ls > 0.0, "HAS_Z": z > 0.0,
          "REVERSE": cfg.reverse, "EMULATE": _INTERPRETED}
    warps2 = cfg.num_warps if grad is not None else 1  # (the forward's kernel 2 combines S partials, nothing more)
    for row0 in range(0, n, rows):
        r = min(rows, n - row0)
        _SPLIT_STATS.launch(chunks * r, (logits, xs, target, ts, ws, row0, v // va, ignore_index), c1,
                            cfg.num_warps)
        _SPLIT_WRITE.launch(chunks * r if grad is not None else r,
                            (logits, xs, target, ts, loss_rows, g, gs, ws, stats, row0, v // va, ignore_index,
                             ls, z), c2, warps2)


def _run_coop(logits: torch.Tensor, target: torch.Tensor, ignore_index: int, ls: float, z: float,
              grad: torch.Tensor, loss_rows: torch.Tensor, stats: torch.Tensor, mean: bool, cfg: LaunchConfig) -> bool:
    """The training step's split rows read once (kernel_coop.py): one cooperative launch of as many groups of
    S = cdiv(V, chunk) programs as are resident at once. False (nothing launched) where a row's S programs cannot
    all be resident: the caller takes the two-kernel split (the same arithmetic, chunk for chunk)."""
    n, v = logits.shape
    item = logits.element_size()
    chunks = triton.cdiv(v, cfg.block)
    xa, ga, va = _align(logits.stride(0), item), _align(grad.stride(0), item), _align(v, item)
    constexprs = {"X_ALIGN": xa, "G_ALIGN": ga, "V_ALIGN": va, "CHUNK": cfg.block, "S_BLOCK": s_block(v, cfg),
                  "MEAN": mean, "HAS_SMOOTH": ls > 0.0, "HAS_Z": z > 0.0, "PHASE": 0, "EMULATE": _INTERPRETED,
                  "PREFETCH": cfg.prefetch}
    ws = torch.empty((n, chunks, WS_SLOTS), dtype=torch.float32, device=logits.device)

    def args_for(sync: torch.Tensor, groups: int) -> tuple:
        return (logits, logits.stride(0) // xa, target, target.stride(0), loss_rows, grad, grad.stride(0) // ga, ws,
                stats, sync, n, v // va, ignore_index, ls, z, groups)

    return _COOP.launch(args_for, constexprs, cfg.num_warps, chunks, n, logits.device) > 0


def _target_stats(target: torch.Tensor, v: int, ignore_index: int, check: bool) -> torch.Tensor:
    """int32 [2] on the device: rows whose target is not ignore_index, and those of them outside [0, v); with
    `check`, a ValueError when there are any (one host sync)."""
    n = target.shape[0]
    stats = torch.empty((2,), dtype=torch.int32, device=target.device)
    _PREP.launch(1, (target, target.stride(0), n, v, ignore_index, stats), {"BLOCK": PREP_BLOCK}, 8)
    if check:
        bad = int(stats[1])
        if bad:
            raise ValueError(f"target: {bad} of {n} values are outside [0, {v}) and not ignore_index={ignore_index}")
    return stats


def scale_grad_(grad: torch.Tensor, grad_output: torch.Tensor) -> None:
    """grad *= grad_output in place (a scalar, or one factor per row); rows whose factor is 1 are not touched."""
    n, v = grad.shape
    if n == 0 or v == 0:
        return
    go = grad_output.reshape(-1) if grad_output.dim() else grad_output
    per_row = grad_output.dim() > 0
    if grad.is_cuda and grad.get_device() != torch.cuda.current_device():
        with torch.cuda.device(grad.device):
            return scale_grad_(grad, grad_output)
    chunks = -(-v // SCALE_BLOCK)
    _SCALE.launch(n * chunks, (grad, grad.stride(0), v, chunks, go, go.stride(0) if per_row else 0),
                  {"BLOCK": SCALE_BLOCK, "PER_ROW": per_row, "EMULATE": _INTERPRETED}, 4)


# --- public functions -------------------------------------------------------------------------------------------
def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    z_loss: float = 0.0,
    *,
    check_targets: bool = False,
) -> torch.Tensor:
    """Cross-entropy of logits [N, V] (float32/float16/bfloat16, rows may be strided) against class indices [N]
    (int64 or int32), as ``F.cross_entropy`` with ``ignore_index``, ``label_smoothing`` and ``reduction``, plus
    ``z_loss * lse**2`` per non-ignored row. Returns float32: a scalar for "mean"/"sum", [N] for "none".

    Differentiable (the gradient is computed in this same pass when logits require grad, and only scaled by
    grad_output in backward) and traceable by torch.compile(fullgraph=True). See the module docstring for what
    differs from torch (float32 loss, NaN rows for out-of-range targets unless ``check_targets``).
    """
    if torch.compiler.is_compiling():
        with_grad = logits.requires_grad and torch.is_grad_enabled()
        loss, _ = cross_entropy_op(logits, target, int(ignore_index), float(label_smoothing), str(reduction),
                                   float(z_loss), with_grad)
        return loss
    logits, target, ignore_index, ls, z = _validate(logits, target, ignore_index, label_smoothing, reduction, z_loss)
    if logits.requires_grad and torch.is_grad_enabled():
        if check_targets and logits.shape[0]:
            _target_stats(target, logits.shape[1], ignore_index, True)  # raises on a bad target
        loss, _ = cross_entropy_op(logits, target, ignore_index, ls, reduction, z, True)
        return loss
    return _run(logits, target, ignore_index, ls, reduction, z, None, check_targets)


def cross_entropy_fwd_bwd(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    z_loss: float = 0.0,
    *,
    inplace: bool = False,
    check_targets: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The training step in one pass: ``(loss, dlogits)`` with ``dlogits = d loss / d logits`` for grad_output 1
    (for "none": the gradient of loss.sum()), in the logits' dtype, the logits read once and dlogits written once.

    ``inplace=True`` writes dlogits into the logits' own buffer (Liger's trick: no second N x V buffer) and returns
    it as dlogits; the logits' values are then gone. Off by default. Not through autograd (use `cross_entropy`).
    """
    if inplace and isinstance(logits, torch.Tensor) and logits.dim() == 2 and logits.shape[1] > 1 \
            and logits.stride(1) != 1:
        raise ValueError("logits: inplace=True needs the last dim contiguous (stride 1), got stride "
                         f"{logits.stride(1)}")
    logits, target, ignore_index, ls, z = _validate(logits, target, ignore_index, label_smoothing, reduction, z_loss)
    if inplace:
        grad = logits
    else:
        grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
    loss = _run(logits.detach(), target, ignore_index, ls, reduction, z, grad.detach(), check_targets)
    return loss, grad


# --- the torch custom ops (opaque to torch.compile; their bodies take the eager path above) -------------------------
_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::cross_entropy", mutates_args=())
def cross_entropy_op(logits: torch.Tensor, target: torch.Tensor, ignore_index: int, label_smoothing: float,
                     reduction: str, z_loss: float, with_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, grad): grad is the gradient for grad_output 1 when with_grad, else an empty tensor."""
    logits, target, ignore_index, ls, z = _validate(logits, target, ignore_index, label_smoothing, reduction, z_loss)
    if not with_grad:
        return _run(logits, target, ignore_index, ls, reduction, z, None, False), logits.new_empty((0,))
    grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
    return _run(logits, target, ignore_index, ls, reduction, z, grad, False), grad


@cross_entropy_op.register_fake
def _(logits, target, ignore_index, label_smoothing, reduction, z_loss, with_grad):
    n = logits.shape[0]
    loss = logits.new_empty((n,) if reduction == "none" else (), dtype=torch.float32)
    grad = logits.new_empty(logits.shape if with_grad else (0,))
    return loss, grad


@torch.library.custom_op(f"{_LIB}::cross_entropy_scale_grad_", mutates_args=("grad",))
def scale_grad_op(grad: torch.Tensor, grad_output: torch.Tensor) -> None:
    scale_grad_(grad, grad_output)


@scale_grad_op.register_fake
def _(grad, grad_output):
    return None


def _setup_context(ctx, inputs, output) -> None:
    _, grad = output
    ctx.mark_non_differentiable(grad)
    ctx.save_for_backward(grad)
    ctx.with_grad = inputs[6]
    ctx.used = False


def _backward(ctx, grad_loss, _grad_grad):
    if not ctx.with_grad:
        raise RuntimeError("cross_entropy: the forward ran without computing the gradient (logits did not require "
                           "grad or grad mode was off)")
    if ctx.used and not torch.compiler.is_compiling():
        raise RuntimeError("cross_entropy: backward twice through the same graph is not supported (the gradient "
                           "stored by the forward is scaled in place)")
    ctx.used = True
    (grad,) = ctx.saved_tensors
    scale_grad_op(grad, grad_loss)
    return grad, None, None, None, None, None, None


cross_entropy_op.register_autograd(_backward, setup_context=_setup_context)

__all__ = ["cross_entropy", "cross_entropy_fwd_bwd", "launch_config", "LaunchConfig", "REDUCTIONS"]
