"""Host side of `int4_matmul`: argument checks (one-line errors naming the argument), the launch (rules.py) and the
torch custom op with its autograd (d/dx only: the weight is a frozen quantized tensor).

Eager calls validate and launch directly; under torch.compile, or when x requires grad, they go through the custom
op `ridgeline::int4_matmul` (opaque to the compiler; its fake implementation gives the output shape).
"""

from __future__ import annotations

from typing import Any

import torch

from ridgeline.lib.launch import (
    interpreter_enabled,
    multiprocessor_count,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.lib.splitk import reduce_splits
from ridgeline.ops.int4_matmul.pack import check_group
from ridgeline.ops.int4_matmul.rules import (
    FUSE_SPLIT_REDUCE_MAX_M,
    FUSED_REDUCE_MAX_TILES,
    GROUPS_PER_STEP,
    TileConfig,
    split_programs,
    splits_for,
    tile_config,
)

X_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SCALE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _name(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def _validate(x: object, w_packed: object, scales: object, group_size: object) -> tuple[torch.Tensor, int, int, int]:
    x = require_tensor("x", x)
    w_packed = require_tensor("w_packed", w_packed)
    scales = require_tensor("scales", scales)
    if x.dtype not in X_DTYPES:
        raise TypeError(f"x: expected dtype bfloat16, float16 or float32; got {_name(x.dtype)}")
    if w_packed.dtype != torch.uint8:
        raise TypeError(f"w_packed: expected dtype uint8 (two int4 per byte, from pack_int4); got "
                        f"{_name(w_packed.dtype)}")
    if scales.dtype not in SCALE_DTYPES:
        raise TypeError(f"scales: expected dtype bfloat16, float16 or float32; got {_name(scales.dtype)}")
    if x.dim() < 1:
        raise ValueError("x: expected at least 1 dim [..., K], got a 0-dim tensor")
    if w_packed.dim() != 2:
        raise ValueError(f"w_packed: expected a 2-D [N, K // 2] tensor, got shape {tuple(w_packed.shape)}")
    n, k = w_packed.shape[0], w_packed.shape[1] * 2
    if x.shape[-1] != k:
        raise ValueError(f"x: expected last dim K = 2 * w_packed.shape[1] = {k}, got shape {tuple(x.shape)}")
    group_size = check_group(k, group_size)
    if tuple(scales.shape) != (n, k // group_size):
        raise ValueError(f"scales: expected shape [N, K // group_size] = {(n, k // group_size)}, got "
                         f"{tuple(scales.shape)}")
    if w_packed.numel() and w_packed.stride(1) != 1:
        raise ValueError(f"w_packed: the last dim must be contiguous (stride 1), got strides {w_packed.stride()}")
    require_same_device("w_packed", w_packed, "x", x)
    require_same_device("scales", scales, "x", x)
    require_runnable_device("x", x)
    return x, n, k, group_size


def check_config(cfg: object) -> TileConfig:
    """A caller's tile config (the tuning driver's candidates), refused with a one-line error before any launch."""
    if not isinstance(cfg, TileConfig):
        raise TypeError(f"cfg: expected a rules.TileConfig, got {type(cfg).__name__}")
    for name, low in (("block_m", 8), ("block_n", 16)):  # powers of two for tl.arange; MMA tiles of 8 / 16
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < low or v > 256 or v & (v - 1):
            raise ValueError(f"cfg: {name} must be a power of two in {low}..256; got {v!r}")
    if cfg.groups_per_step not in GROUPS_PER_STEP:
        raise ValueError(f"cfg: groups_per_step must be one of {', '.join(map(str, GROUPS_PER_STEP))}; got "
                         f"{cfg.groups_per_step!r}")
    if cfg.num_warps not in (1, 2, 4, 8) or isinstance(cfg.num_stages, bool) or not isinstance(cfg.num_stages, int) \
            or cfg.num_stages < 1:
        raise ValueError(f"cfg: num_warps must be 1, 2, 4 or 8 and num_stages an int >= 1; got {cfg.num_warps!r}, "
                         f"{cfg.num_stages!r}")
    if not isinstance(cfg.swap_ab, bool):
        raise ValueError(f"cfg: swap_ab must be a bool; got {cfg.swap_ab!r}")
    if not isinstance(cfg.halves, bool) or (cfg.halves and not (cfg.swap_ab and cfg.block_m >= 16)):
        raise ValueError(f"cfg: halves must be a bool, and True only with swap_ab and block_m >= 16; got "
                         f"halves={cfg.halves!r}, swap_ab={cfg.swap_ab!r}, block_m={cfg.block_m!r}")
    return cfg


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x as [M, K] without a copy where strides allow (any 2-D strides are read in place); else a copy (an exotic
    N-D layout whose leading dims cannot merge: rare, and a copy of x is small next to the weight)."""
    if x.dim() == 2:
        return x
    m = int(torch.Size(x.shape[:-1]).numel())  # (explicit: a -1 cannot be inferred when K = 0)
    try:
        return x.view(m, x.shape[-1])
    except RuntimeError:
        return x.reshape(m, x.shape[-1])


def launch_plan(m: int, n: int, k: int, group_size: int, device: torch.device,
                cfg: TileConfig | None = None, split_progs: bool | None = None,
                fused_reduce: bool | None = None) -> dict[str, Any]:
    """What a launch does for (M, N, K): tile config, numeric splits, grid, and who adds the split programs'
    partials (recorded beside measurements)."""
    sms = multiprocessor_count(device)
    cfg = cfg or tile_config(m)
    splits = splits_for(n, k, group_size, sms)
    per_split = split_programs(m, n, cfg, splits, sms) if split_progs is None else (split_progs and splits > 1)
    m_tiles = -(-m // cfg.block_m)
    n_tiles = -(-n // cfg.block_n)
    fused = per_split and (m <= FUSE_SPLIT_REDUCE_MAX_M if fused_reduce is None else fused_reduce) \
        and m_tiles * n_tiles <= FUSED_REDUCE_MAX_TILES
    return {"config": cfg.describe(), "cfg": cfg, "splits": splits, "split_programs": per_split,
            "fused_reduce": fused, "grid": (m_tiles * n_tiles, splits if per_split else 1), "m_tiles": m_tiles}


# The fused reduce's tile counters, zeroed once and left at zero by every launch. One buffer per (device, stream),
# as torch keys cuBLAS workspaces: launches on one stream run in order, so they never share a counter in flight
# (graphs captured on one stream and replayed at once on two would; torch's cuBLAS workspace has the same rule).
_COUNTERS: dict[tuple[str, int, int], torch.Tensor] = {}


def _counters(device: torch.device) -> torch.Tensor:
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    # (the device type too: the profiler's meta-device capture must not hand its data-less buffer to a CPU call)
    key = (device.type, device.index if device.index is not None else -1, stream)
    buf = _COUNTERS.get(key)
    if buf is None:  # (under graph capture the zeroing joins the graph: correct, one kernel more a replay)
        buf = _COUNTERS[key] = torch.zeros(FUSED_REDUCE_MAX_TILES, dtype=torch.int32, device=device)
    return buf


def _launch(x2: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor, y: torch.Tensor, group_size: int,
            cfg: TileConfig | None = None, split_progs: bool | None = None, fused_reduce: bool | None = None) -> None:
    from ridgeline.ops.int4_matmul.kernel import _int4_mm_kernel

    m, k = x2.shape
    n = w_packed.shape[0]
    plan = launch_plan(m, n, k, group_size, x2.device, cfg, split_progs, fused_reduce)
    cfg, splits, per_split, fused = plan["cfg"], plan["splits"], plan["split_programs"], plan["fused_reduce"]
    n_groups = k // group_size
    partials = torch.empty((splits, m, n), dtype=torch.float32, device=x2.device) if per_split else y
    counters = _counters(x2.device) if fused else y
    emulate = x2.dtype == torch.float32 or interpreter_enabled()
    _int4_mm_kernel[plan["grid"]](
        x2, w_packed, scales, y, partials, counters,
        m, n, x2.stride(0), x2.stride(1), w_packed.stride(0), scales.stride(0), scales.stride(1), y.stride(0),
        n_groups, -(-n_groups // splits), plan["m_tiles"], m * n,
        GROUP=group_size, GROUPS_PER_STEP=cfg.groups_per_step, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        SPLITS=splits, SPLIT_PROGRAMS=per_split, FUSED_REDUCE=fused, SWAP_AB=cfg.swap_ab, HALVES=cfg.halves,
        EMULATE=emulate,
        IEEE=x2.dtype == torch.float32 and not interpreter_enabled(), INTERPRETED=interpreter_enabled(),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    if per_split and not fused:
        reduce_splits(partials, y)


def int4_matmul(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor, group_size: int = 128,
                *, cfg: TileConfig | None = None, split_programs: bool | None = None,
                fused_reduce: bool | None = None) -> torch.Tensor:
    """y = x @ dequant(w_packed, scales)^T for a weight from `pack_int4` (int4 weight-only, symmetric, groups along K).

    x: [..., K] bf16, fp16 or fp32 (any strides for 2-D x; read in place). w_packed: uint8 [N, K // 2] (rows may be
    strided, bytes contiguous). scales: [N, K // group_size] bf16/fp16/fp32 (any strides). Returns [..., N] in x's
    dtype, accumulated in fp32. M = 0 returns an empty result without a launch. K must be a multiple of group_size
    (32, 64, 128 or 256). Repeated calls agree bitwise; a row's result does not depend on the batch among
    batches of up to 32 rows, nor among batches of 33 and more (across the two, the tensor cores' two instruction
    families may differ in a row's last bit: kernel.py).
    `cfg` / `split_programs` / `fused_reduce` override the launch rules (the tuning driver; the numeric split
    never changes, so neither do the bits).
    """
    # Checked before the custom op too: its dispatch would take a meta tensor's fake result or int() a bad group.
    x, n, k, group_size = _validate(x, w_packed, scales, group_size)
    if cfg is not None:
        check_config(cfg)
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and x.requires_grad):
        return int4_matmul_op(x, w_packed, scales, group_size)
    lead = x.shape[:-1]
    x2 = _rows(x)
    y = torch.empty((x2.shape[0], n), dtype=x.dtype, device=x.device)
    if x2.shape[0] and n:
        if x.is_cuda and x.get_device() != torch.cuda.current_device():
            with torch.cuda.device(x.device):
                _launch(x2, w_packed, scales, y, group_size, cfg, split_programs, fused_reduce)
        else:
            _launch(x2, w_packed, scales, y, group_size, cfg, split_programs, fused_reduce)
    return y.view(*lead, n)


# --- the custom op (torch.compile, autograd) ---------------------------------------------------------------------
@torch.library.custom_op("ridgeline::int4_matmul", mutates_args=())
def int4_matmul_op(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    with torch.no_grad():
        return int4_matmul(x, w_packed, scales, group_size)


@int4_matmul_op.register_fake
def _(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], w_packed.shape[0]))


def _setup(ctx: Any, inputs: tuple, output: Any) -> None:
    x, w_packed, scales, group_size = inputs
    ctx.save_for_backward(w_packed, scales)
    ctx.group_size = group_size


def _backward(ctx: Any, dy: torch.Tensor) -> tuple:
    from ridgeline.ops.int4_matmul.pack import unpack_nibbles

    w_packed, scales = ctx.saved_tensors
    if not ctx.needs_input_grad[0]:
        return None, None, None, None
    # dx = dy @ w_deq in fp32 (the weight is frozen: no gradient for w_packed or scales).
    q = unpack_nibbles(w_packed).float()
    n, k = q.shape
    w_deq = (q.view(n, k // ctx.group_size, ctx.group_size) * scales.float()[..., None]).view(n, k)
    dx = (dy.float().reshape(-1, n) @ w_deq).to(dy.dtype).view(*dy.shape[:-1], k)
    return dx, None, None, None


int4_matmul_op.register_autograd(_backward, setup_context=_setup)

__all__ = ["check_config", "int4_matmul", "launch_plan", "X_DTYPES"]
