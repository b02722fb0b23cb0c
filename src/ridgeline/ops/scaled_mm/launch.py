"""Host side of the FP8 GEMM and the activation quantizers: the public functions, validation, launches, custom ops.

    scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None) -> y [M, N]
        y = (a @ b^T) scaled; a [M, K] and b [N, K] (nn.Linear's layout) in float8_e4m3fn. The scale mode follows
        from the scales' shapes (scale_mode): "tensor" (one fp32 each), "row" (scale_a [M, 1] or [M], scale_b [N]
        or [1, N]) or "block" (scale_a [M, ceil(K/128)], scale_b [ceil(N/128), ceil(K/128)]). torch._scaled_mm's
        b (a [K, N] column-major tensor) is `b_kn.t()` here: the same memory, no copy.
    quantize_fp8_per_token(x) -> (x_fp8 [M, K], scale [M, 1])
    quantize_fp8_per_group(x, group=128) -> (x_fp8 [M, K], scale [M, ceil(K/group)])
        scale = amax / 448 per row (group); an all-zero row (group) gets scale 1; x_fp8 = sat(x / scale) rounded
        to nearest even, as `(x / scale).clamp(-448, 448).to(torch.float8_e4m3fn)` rounds.

Eager calls launch directly (a CachedLauncher keeps the host cost low); under torch.compile they go through the
custom ops at the bottom (`ridgeline::scaled_mm`, `ridgeline::quantize_fp8_per_token`, `..._per_group`). None is
differentiable: FP8 operands carry no gradient here (training recipes quantize the bf16 gradient themselves).
"""

from __future__ import annotations

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    ensure_tma_allocator,
    multiprocessor_count,
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.ops.scaled_mm.kernel import (
    _INTERPRETED,
    BLOCK_SCALE,
    SCALE_BLOCK,
    SCALE_ROW,
    SCALE_TENSOR,
    _quant_per_group_kernel,
    _quant_per_token_kernel,
    _scaled_mm_kernel,
)
from ridgeline.ops.scaled_mm.launch_ws import launch_ws, ws_call, ws_supported
from ridgeline.ops.scaled_mm.rules import TileConfig, config_for, per_group_config, per_token_config

FP8 = torch.float8_e4m3fn
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
X_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
MODE_CODES = {"tensor": SCALE_TENSOR, "row": SCALE_ROW, "block": SCALE_BLOCK}
# Operand dtypes the kernel takes: fp8 for callers; fp16 only through `launch_scaled_mm(allow_fp16=True)`, which
# the CPU tests use to run the same kernel on exactly representable values where no fp8 path is wanted.
_TEST_DTYPES = (FP8, torch.float16)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- validation -------------------------------------------------------------------------------------------------
def _check_operand(name: str, t: object, dtypes: tuple[torch.dtype, ...]) -> torch.Tensor:
    t = require_tensor(name, t)
    require_dtype(name, t, dtypes)
    if t.dim() != 2:
        raise ValueError(f"{name}: expected a 2-D tensor, got shape {tuple(t.shape)}")
    if not t.is_cuda:
        require_runnable_device(name, t)
    return t


def _check_scale(name: str, s: object, ref: torch.Tensor) -> torch.Tensor:
    s = require_tensor(name, s)
    if s.dtype != torch.float32:
        raise TypeError(f"{name}: expected float32 scales, got {str(s.dtype).replace('torch.', '')}")
    require_same_device(name, s, "a", ref)
    return s


def scale_mode(scale_a: torch.Tensor, scale_b: torch.Tensor, m: int, n: int, k: int) -> str:
    """The mode the scales' shapes name; ValueError listing the three accepted forms otherwise. Shapes that
    fit two modes (K <= 128, N <= 128) compute the same product either way."""
    sa, sb = tuple(scale_a.shape), tuple(scale_b.shape)
    if scale_a.numel() == 1 and scale_b.numel() == 1 and len(sa) <= 2 and len(sb) <= 2:
        return "tensor"
    if sa in ((m, 1), (m,)) and sb in ((n,), (1, n)):
        return "row"
    kb = _cdiv(k, BLOCK_SCALE)
    if sa == (m, kb) and sb == (_cdiv(n, BLOCK_SCALE), kb):
        return "block"
    raise ValueError(
        f"scale_a, scale_b: expected per-tensor (one element each), per-row ([{m}, 1] and [{n}] or [1, {n}]) or "
        f"block scales ([{m}, {kb}] and [{_cdiv(n, BLOCK_SCALE)}, {kb}]); got {list(sa)} and {list(sb)}")


def _scale_strides(s: torch.Tensor, mode: str, a_side: bool) -> tuple[int, int]:
    """(stride along M or N, stride along K blocks) the kernel reads the scales with."""
    if mode == "tensor":
        return 0, 0
    if mode == "row":
        if a_side:
            return s.stride(0), 0
        return (s.stride(-1), 0) if s.dim() == 2 else (s.stride(0), 0)
    return s.stride(0), s.stride(1)


def _tma_ok(t: torch.Tensor) -> bool:
    """TMA needs K-contiguous rows at a 16-byte aligned stride from a 16-byte aligned base (1-byte elements)."""
    return (t.stride(1) == 1 and t.stride(0) % 16 == 0 and t.stride(0) >= t.shape[1] and t.shape[0] > 0
            and (t.device.type == "meta" or t.data_ptr() % 16 == 0))


_GEMM = CachedLauncher(_scaled_mm_kernel)


def launch_scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                     out_dtype: torch.dtype = torch.bfloat16, bias: torch.Tensor | None = None,
                     cfg: TileConfig | None = None, allow_fp16: bool = False) -> torch.Tensor:
    """`scaled_mm` with an explicit tile config (the tuning driver's entry point) and, for tests, fp16 operands."""
    dtypes = _TEST_DTYPES if allow_fp16 else (FP8,)
    a = _check_operand("a", a, dtypes)
    b = _check_operand("b", b, dtypes)
    if b.dtype != a.dtype:
        raise TypeError(f"b: expected dtype {a.dtype} (same as a), got {b.dtype}")
    require_same_device("b", b, "a", a)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"b: expected [N, {a.shape[1]}] (K from a [M, K]; nn.Linear's weight layout), "
                         f"got {list(b.shape)}")
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"out_dtype: expected one of bfloat16, float16, float32, got {out_dtype}")
    m, k = a.shape
    n = b.shape[0]
    sa = _check_scale("scale_a", scale_a, a)
    sb = _check_scale("scale_b", scale_b, a)
    mode = scale_mode(sa, sb, m, n, k)
    if bias is not None:
        bias = require_tensor("bias", bias)
        require_dtype("bias", bias, OUT_DTYPES)
        require_same_device("bias", bias, "a", a)
        if tuple(bias.shape) != (n,):
            raise ValueError(f"bias: expected shape [{n}] (one per output column), got {list(bias.shape)}")
    y = torch.empty((m, n), dtype=out_dtype, device=a.device)
    if m == 0 or n == 0:
        return y
    if k == 0:  # an empty sum: y is the bias (or zeros)
        return y.copy_(bias.expand(m, n)) if bias is not None else y.zero_()
    tma_layout = _tma_ok(a) and _tma_ok(b)
    if cfg is None:
        aligned = all(st % 16 == 0 or st == 1 for st in (*a.stride(), *b.stride()))
        ws = tma_layout and a.dtype == FP8 and ws_call(a.device, out_dtype, n)
        cfg = config_for(m, n, k, mode, multiprocessor_count(a.device), tma=tma_layout, aligned=aligned, ws=ws)
    if mode == "block" and (cfg.block_k > BLOCK_SCALE or BLOCK_SCALE % cfg.block_k):
        raise ValueError(f"cfg: {cfg.describe()}: block scales need BLOCK_K dividing {BLOCK_SCALE}")
    use_tma = cfg.use_tma and not _INTERPRETED and tma_layout
    sms = multiprocessor_count(a.device)
    sam, sak = _scale_strides(sa, mode, True)
    sbn, sbk = _scale_strides(sb, mode, False)
    if use_tma and a.dtype == FP8 and ws_supported(cfg, a, y, mode):
        launch_ws(a, b, y, sa, sb, bias, MODE_CODES[mode], (sam, sak, sbn, sbk), cfg, sms)
        return y
    if use_tma:
        ensure_tma_allocator()
    tiles = _cdiv(m, cfg.block_m) * _cdiv(n, cfg.block_n)
    grid = max(1, min(tiles, sms))
    args = (a, b, y, sa, sb, bias if bias is not None else y, m, n, k, a.stride(0), a.stride(1), b.stride(0),
            b.stride(1), y.stride(0), y.stride(1), sam, sak, sbn, sbk)
    constexprs = {"SCALE": MODE_CODES[mode], "HAS_BIAS": bias is not None, "BLOCK_M": cfg.block_m,
                  "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
                  "USE_TMA": use_tma, "NUM_STAGES": cfg.num_stages, "DEFER_SCALE": cfg.defer_scale and mode == "block",
                  "SWAP_AB": cfg.swap_ab}
    if a.is_cuda and a.get_device() != torch.cuda.current_device():
        with torch.cuda.device(a.device):
            _GEMM.launch(grid, args, constexprs, cfg.num_warps, options={"num_stages": cfg.num_stages})
    else:
        _GEMM.launch(grid, args, constexprs, cfg.num_warps, options={"num_stages": cfg.num_stages})
    return y


def _direct_scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                      out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
    return launch_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              out_dtype: torch.dtype = torch.bfloat16, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = (a @ b^T) * scales (+ bias) in out_dtype, fp32 accumulation; see the module docstring for the modes."""
    if torch.compiler.is_compiling():
        return scaled_mm_op(a, b, scale_a, scale_b, out_dtype, bias)
    return _direct_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)


# --- quantizers ---------------------------------------------------------------------------------------------------
def _check_x(x: object) -> torch.Tensor:
    x = require_tensor("x", x)
    require_dtype("x", x, X_DTYPES)
    if x.dim() != 2:
        raise ValueError(f"x: expected a 2-D tensor [M, K] (tokens x features), got shape {tuple(x.shape)}")
    if not x.is_cuda:
        require_runnable_device("x", x)
    return x


_PER_TOKEN = CachedLauncher(_quant_per_token_kernel)
_PER_GROUP = CachedLauncher(_quant_per_group_kernel)


def _direct_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = _check_x(x)
    m, k = x.shape
    q = torch.empty((m, k), dtype=FP8, device=x.device)
    s = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    if m == 0:
        return q, s
    if k == 0:
        return q, s.fill_(1.0)
    cfg = per_token_config(k)
    # Persistent over rows: as many programs as are resident (64 warps an SM), each taking every grid-th row.
    grid = max(1, min(m, multiprocessor_count(x.device) * max(1, 64 // cfg.num_warps)))
    _PER_TOKEN.launch(grid, (x, q, s, m, k, x.stride(0), x.stride(1), q.stride(0)),
                      {"BLOCK_K": cfg.block_k, "ONE_PASS": cfg.one_pass}, cfg.num_warps)
    return q, s


def _direct_per_group(x: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = _check_x(x)
    if isinstance(group, bool) or not isinstance(group, int) or group < 16 or group & (group - 1) or group > 1024:
        raise ValueError(f"group: expected a power of two from 16 to 1024, got {group!r}")
    m, k = x.shape
    g = _cdiv(k, group)
    q = torch.empty((m, k), dtype=FP8, device=x.device)
    s = torch.empty((m, g), dtype=torch.float32, device=x.device)
    if m == 0 or k == 0:
        return q, s
    cfg = per_group_config(m, group)
    grid = _cdiv(m, cfg.block_m) * _cdiv(g, cfg.groups)
    _PER_GROUP.launch(grid, (x, q, s, m, k, x.stride(0), x.stride(1), q.stride(0), s.stride(0), s.stride(1)),
                      {"GROUP": group, "BLOCK_M": cfg.block_m, "GROUPS": cfg.groups}, cfg.num_warps)
    return q, s


def quantize_fp8_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_fp8 [M, K], scale [M, 1] fp32): one e4m3 scale per row, scale = amax / 448 (1 for an all-zero row)."""
    if torch.compiler.is_compiling():
        return quantize_per_token_op(x)
    return _direct_per_token(x)


def quantize_fp8_per_group(x: torch.Tensor, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_fp8 [M, K], scale [M, ceil(K / group)] fp32): one e4m3 scale per row and group of `group` columns
    (DeepSeek-V3's 1x128 activation scales); the last group of a K that is not a multiple is shorter."""
    if torch.compiler.is_compiling():
        return quantize_per_group_op(x, group)
    return _direct_per_group(x, group)


# --- torch custom ops: opaque to torch.compile, which learns the output shapes from the fake implementations -----
@torch.library.custom_op("ridgeline::scaled_mm", mutates_args=())
def scaled_mm_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                 out_dtype: torch.dtype, bias: torch.Tensor | None) -> torch.Tensor:
    return _direct_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)


@scaled_mm_op.register_fake
def _(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, out_dtype: torch.dtype,
      bias: torch.Tensor | None) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype)


@torch.library.custom_op("ridgeline::quantize_fp8_per_token", mutates_args=())
def quantize_per_token_op(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _direct_per_token(x)


@quantize_per_token_op.register_fake
def _(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape, dtype=FP8), x.new_empty((x.shape[0], 1), dtype=torch.float32)


@torch.library.custom_op("ridgeline::quantize_fp8_per_group", mutates_args=())
def quantize_per_group_op(x: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    return _direct_per_group(x, group)


@quantize_per_group_op.register_fake
def _(x: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    return (x.new_empty(x.shape, dtype=FP8),
            x.new_empty((x.shape[0], _cdiv(x.shape[1], group)), dtype=torch.float32))


__all__ = ["scaled_mm", "quantize_fp8_per_token", "quantize_fp8_per_group", "launch_scaled_mm", "scale_mode",
           "TileConfig", "config_for"]
