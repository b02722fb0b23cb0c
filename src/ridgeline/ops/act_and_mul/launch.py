"""Host side of the gated activations: the public functions, their argument checks, the launches, and the torch
custom ops (with autograd) that torch.compile and autograd go through.

    silu_and_mul(x)                    x = [gate, up] on the last dim (vLLM's layout): silu(x[..., :d]) * x[..., d:]
    gelu_and_mul(x, approximate)       the same with GELU ("none": erf, exact; "tanh": the tanh approximation)
    silu_mul(gate, up)                 two tensors (Hugging Face's gate_proj(x), up_proj(x)): silu(gate) * up
    gelu_mul(gate, up, approximate)
    silu_and_mul_backward(dy, x)       dx = [dgate, dup], the activation recomputed from x
    gelu_and_mul_backward(dy, x, approximate)

Plain calls (no input requiring grad, not compiling) launch directly through a `CachedLauncher` (a few
microseconds of host time at decode sizes); a call with an input that requires grad, or any call under
torch.compile, goes through the custom ops at the bottom (`ridgeline::act_and_mul`, `ridgeline::act_mul` and their
`_bwd` ops), whose registered autograd saves only the inputs and calls the backward kernel. Double backward is
not supported (the backward ops have no autograd of their own).
"""

from __future__ import annotations

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
    row_stride,
    stride_alignment,
)
from ridgeline.ops.act_and_mul.kernel import (
    _INTERPRETED,
    ACT_GELU,
    ACT_GELU_TANH,
    ACT_NAMES,
    ACT_SILU,
    _act_and_mul_bwd_kernel,
    _act_and_mul_fwd_kernel,
    grid_size,
)
from ridgeline.ops.act_and_mul.rules import ActConfig, config_for

# float64 is accepted (computed in float64: gradcheck runs on these kernels); the contracts bench the other three.
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_ACT_BY_NAME = {name: code for code, name in ACT_NAMES.items()}


def gelu_code(approximate: object) -> int:
    if approximate == "none":
        return ACT_GELU
    if approximate == "tanh":
        return ACT_GELU_TANH
    raise ValueError(f"approximate: expected 'none' or 'tanh', got {approximate!r}")


# --- validation -------------------------------------------------------------------------------------------------
def _check_tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dtype not in DTYPES:
        require_tensor(name, t)
        require_dtype(name, t, DTYPES)
    if t.dim() == 0:
        raise ValueError(f"{name}: expected at least 1 dim (..., columns), got a scalar")
    if not t.is_cuda and not t.is_meta:  # (meta: shapes only, through the op; nothing launches)
        require_runnable_device(name, t)
    return t


def _check_packed(x: object) -> torch.Tensor:
    x = _check_tensor("x", x)
    if x.shape[-1] % 2:
        raise ValueError(f"x: the last dim holds [gate, up] and must be even, got {x.shape[-1]}")
    return x


def _check_like(name: str, t: object, shape: tuple[int, ...], ref_name: str, ref: torch.Tensor) -> torch.Tensor:
    t = require_tensor(name, t)
    if tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape} (from {ref_name}), got {tuple(t.shape)}")
    if t.dtype != ref.dtype:
        raise TypeError(f"{name}: expected dtype {ref.dtype} (same as {ref_name}), got {t.dtype}")
    if t.get_device() != ref.get_device() or (not ref.is_cuda and t.device != ref.device):
        require_same_device(name, t, ref_name, ref)
    return t


def _input_rows(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """An input and its row stride. Strided rows (x[..., :w] of a wider buffer) are read in place; only a layout
    no single row stride can address (a non-contiguous last dim, unmergeable leading dims) is copied first."""
    stride = row_stride(t)
    if stride is None:
        t = t.contiguous()
        stride = t.shape[-1]
    return t, stride


def _output_stride(name: str, t: torch.Tensor) -> int:
    stride = row_stride(t)
    if stride is None:
        raise ValueError(f"{name}: rows of shape {tuple(t.shape)}, strides {tuple(t.stride())} are not addressable "
                         "with one row stride (the last dim must be contiguous)")
    if stride < t.shape[-1] and t.numel() > t.shape[-1]:
        raise ValueError(f"{name}: rows overlap (row stride {stride} < {t.shape[-1]} columns); cannot write")
    return stride


def _rows_of(t: torch.Tensor) -> int:
    n = 1
    for s in t.shape[:-1]:
        n *= s
    return n


# --- launches -----------------------------------------------------------------------------------------------------
_FWD = CachedLauncher(_act_and_mul_fwd_kernel)
_BWD = CachedLauncher(_act_and_mul_bwd_kernel)


def _common_constexprs(cfg: ActConfig, m: int, d: int, act: int, packed: bool, dtype: torch.dtype) -> tuple:
    masked = m % cfg.block_m != 0 or d % cfg.block_n != 0
    return (cfg.block_m, cfg.block_n, masked, cfg.evict_first, dtype == torch.float64, _INTERPRETED)


def launch_forward(g: torch.Tensor, g_stride: int, u: torch.Tensor, u_stride: int, out: torch.Tensor,
                   out_stride: int, m: int, d: int, act: int, packed: bool, cfg: ActConfig | None = None) -> None:
    """out = act(g) * u over m rows of d columns (packed: u is the second half of g's rows; pass g, g_stride)."""
    if m == 0 or d == 0:
        return
    if g.is_cuda and g.get_device() != torch.cuda.current_device():
        with torch.cuda.device(g.device):  # Triton launches on the current device: make it the tensors'
            return launch_forward(g, g_stride, u, u_stride, out, out_stride, m, d, act, packed, cfg)
    fast_key = None
    if cfg is None and g.is_cuda and _FWD.enabled():
        # Everything the compiled kernel, the grid and the alignments depend on, cheap to build.
        fast_key = (g.get_device(), act, packed, m, d, g_stride, u_stride, out_stride, g.dtype,
                    g.data_ptr() & 15, u.data_ptr() & 15, out.data_ptr() & 15)
        hit = _FWD.cached(fast_key)
        if hit is not None:
            kernel, (grid, ga, ua, oa, da, cvals) = hit
            _FWD.run(kernel, grid, (g, g_stride // ga, u, u_stride // ua, out, out_stride // oa, m, d // da),
                     cvals, fast_key[0])
            return
    if cfg is None:
        cfg = config_for(d, g.element_size(), m)
    ga, ua, oa, da = (stride_alignment(s) for s in (g_stride, u_stride, out_stride, d))
    names = ("ACT", "PACKED", "GA", "UA", "OA", "DA", "BLOCK_M", "BLOCK_N", "MASKED", "EVICT", "F64", "EMULATE")
    constexprs = dict(zip(names, (act, packed, ga, ua, oa, da,
                                  *_common_constexprs(cfg, m, d, act, packed, g.dtype))))
    grid = grid_size(m, d, cfg.block_m, cfg.block_n)
    _FWD.launch(grid, (g, g_stride // ga, u, u_stride // ua, out, out_stride // oa, m, d // da), constexprs,
                cfg.num_warps, fast_key, (grid, ga, ua, oa, da, tuple(constexprs.values())))


def launch_backward(dy: torch.Tensor, dy_stride: int, g: torch.Tensor, g_stride: int, u: torch.Tensor,
                    u_stride: int, dg: torch.Tensor, dg_stride: int, du: torch.Tensor, du_stride: int, m: int, d: int,
                    act: int, packed: bool, cfg: ActConfig | None = None) -> None:
    """dg = dy * u * act'(g), du = dy * act(g) (packed: u and du are the second halves of g's and dg's rows)."""
    if m == 0 or d == 0:
        return
    if g.is_cuda and g.get_device() != torch.cuda.current_device():
        with torch.cuda.device(g.device):
            return launch_backward(dy, dy_stride, g, g_stride, u, u_stride, dg, dg_stride, du, du_stride, m, d,
                                   act, packed, cfg)
    fast_key = None
    if cfg is None and g.is_cuda and _BWD.enabled():
        fast_key = (g.get_device(), act, packed, m, d, dy_stride, g_stride, u_stride, dg_stride, du_stride, g.dtype,
                    dy.data_ptr() & 15, g.data_ptr() & 15, u.data_ptr() & 15, dg.data_ptr() & 15, du.data_ptr() & 15)
        hit = _BWD.cached(fast_key)
        if hit is not None:
            kernel, (grid, al, cvals) = hit
            _BWD.run(kernel, grid, _bwd_args(dy, dy_stride, g, g_stride, u, u_stride, dg, dg_stride, du, du_stride,
                                             m, d, al), cvals, fast_key[0])
            return
    if cfg is None:
        cfg = config_for(d, g.element_size(), m, backward=True)
    al = tuple(stride_alignment(s) for s in (dy_stride, g_stride, u_stride, dg_stride, du_stride, d))
    names = ("ACT", "PACKED", "YA", "GA", "UA", "DGA", "DUA", "DA", "BLOCK_M", "BLOCK_N", "MASKED", "EVICT", "F64",
             "EMULATE")
    constexprs = dict(zip(names, (act, packed, *al, *_common_constexprs(cfg, m, d, act, packed, g.dtype))))
    grid = grid_size(m, d, cfg.block_m, cfg.block_n)
    _BWD.launch(grid, _bwd_args(dy, dy_stride, g, g_stride, u, u_stride, dg, dg_stride, du, du_stride, m, d, al),
                constexprs, cfg.num_warps, fast_key, (grid, al, tuple(constexprs.values())))


def _bwd_args(dy, dy_stride, g, g_stride, u, u_stride, dg, dg_stride, du, du_stride, m, d, al) -> tuple:
    ya, ga, ua, dga, dua, da = al
    return (dy, dy_stride // ya, g, g_stride // ga, u, u_stride // ua, dg, dg_stride // dga, du, du_stride // dua,
            m, d // da)


# --- the eager paths (validated, then launched) ---------------------------------------------------------------
def _forward(x: torch.Tensor, act: int, out: torch.Tensor | None = None) -> torch.Tensor:
    x = _check_packed(x)
    d = x.shape[-1] // 2
    shape = (*x.shape[:-1], d)
    if out is None:
        out = torch.empty(shape, dtype=x.dtype, device=x.device)
        out_stride = d
    else:
        out = _check_like("out", out, shape, "x", x)
        out_stride = _output_stride("out", out)
    if out.numel():
        xr, x_stride = _input_rows(x)
        launch_forward(xr, x_stride, xr, x_stride, out, out_stride, _rows_of(x), d, act, True)
    return out


def _forward_pair(gate: torch.Tensor, up: torch.Tensor, act: int) -> torch.Tensor:
    gate = _check_tensor("gate", gate)
    up = _check_like("up", up, tuple(gate.shape), "gate", gate)
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if out.numel():
        d = gate.shape[-1]
        gr, g_stride = _input_rows(gate)
        ur, u_stride = _input_rows(up)
        launch_forward(gr, g_stride, ur, u_stride, out, d, _rows_of(gate), d, act, False)
    return out


def _backward(dy: torch.Tensor, x: torch.Tensor, act: int) -> torch.Tensor:
    x = _check_packed(x)
    d = x.shape[-1] // 2
    dy = _check_like("dy", dy, (*x.shape[:-1], d), "x", x)
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if dx.numel():
        xr, x_stride = _input_rows(x)
        yr, y_stride = _input_rows(dy)
        launch_backward(yr, y_stride, xr, x_stride, xr, x_stride, dx, 2 * d, dx, 2 * d, _rows_of(x), d, act, True)
    return dx


def _backward_pair(dy: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, act: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    gate = _check_tensor("gate", gate)
    up = _check_like("up", up, tuple(gate.shape), "gate", gate)
    dy = _check_like("dy", dy, tuple(gate.shape), "gate", gate)
    dg = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    du = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if dg.numel():
        d = gate.shape[-1]
        yr, y_stride = _input_rows(dy)
        gr, g_stride = _input_rows(gate)
        ur, u_stride = _input_rows(up)
        launch_backward(yr, y_stride, gr, g_stride, ur, u_stride, dg, d, du, d, _rows_of(gate), d, act, False)
    return dg, du


def _needs_op(*tensors: object) -> bool:
    """Through the custom op (autograd, torch.compile, and meta tensors: the op's shape function) or straight to the
    kernel (the cheap eager path)."""
    if torch.compiler.is_compiling():
        return True
    if any(isinstance(t, torch.Tensor) and t.is_meta for t in tensors):
        return True
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _check_pair(gate: object, up: object) -> tuple[torch.Tensor, torch.Tensor]:
    """gate and up checked before the op (a non-tensor would get the op's several-line parser error)."""
    gate = _check_tensor("gate", gate)
    return gate, _check_like("up", up, tuple(gate.shape), "gate", gate)


def _via_op(x: torch.Tensor, act: int, out: torch.Tensor | None) -> torch.Tensor:
    x = _check_packed(x)  # (before the op: its own argument parser would answer in several lines)
    if out is not None and x.requires_grad and torch.is_grad_enabled() and not torch.compiler.is_compiling():
        raise ValueError("out: not supported when x requires grad (autograd needs the op's own output)")
    y = act_and_mul_op(x, ACT_NAMES[act])
    if out is None:
        return y
    _check_like("out", out, tuple(y.shape), "x", x)
    return out.copy_(y)


def _is_meta(t: object) -> bool:
    return isinstance(t, torch.Tensor) and t.is_meta


def _check_bwd(dy: object, x: object) -> tuple[torch.Tensor, torch.Tensor]:
    x = _check_packed(x)
    return _check_like("dy", dy, (*x.shape[:-1], x.shape[-1] // 2), "x", x), x


# --- the public functions -----------------------------------------------------------------------------------------
def silu_and_mul(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` for x of shape ``(..., 2*d)`` (vLLM's SiluAndMul layout): shape ``(..., d)``.

    float32, float16, bfloat16 (and float64); computed in float32 and rounded once. Rows of x may be strided
    (read in place); ``out`` (shape ``(..., d)``, x's dtype, rows may be strided) receives the result when given
    (not with autograd). Differentiable (the backward recomputes silu from x); works under torch.compile.
    """
    if _needs_op(x):
        return _via_op(x, ACT_SILU, out)
    return _forward(x, ACT_SILU, out)


def gelu_and_mul(x: torch.Tensor, approximate: str = "none", *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``gelu(x[..., :d], approximate) * x[..., d:]`` for x of shape ``(..., 2*d)``: shape ``(..., d)``.

    ``approximate="none"`` is the exact GELU, ``0.5 g (1 + erf(g / sqrt 2))``; ``"tanh"`` is
    ``0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))`` (Gemma's gelu_pytorch_tanh), as torch.nn.functional.gelu
    defines them. Otherwise as `silu_and_mul`.
    """
    act = gelu_code(approximate)
    if _needs_op(x):
        return _via_op(x, act, out)
    return _forward(x, act, out)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for two tensors of one shape (Hugging Face's LlamaMLP: gate_proj(x), up_proj(x)).

    Either may have strided rows (e.g. the halves of one fused gate_up output). Differentiable in both;
    works under torch.compile.
    """
    if _needs_op(gate, up):
        return act_mul_op(*_check_pair(gate, up), "silu")
    return _forward_pair(gate, up, ACT_SILU)


def gelu_mul(gate: torch.Tensor, up: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``gelu(gate, approximate) * up`` for two tensors of one shape (Gemma's MLP); as `silu_mul`."""
    act = gelu_code(approximate)
    if _needs_op(gate, up):
        return act_mul_op(*_check_pair(gate, up), ACT_NAMES[act])
    return _forward_pair(gate, up, act)


def silu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The gradient of `silu_and_mul` w.r.t. x: ``[dy * up * silu'(gate), dy * silu(gate)]`` (shape of x),
    silu recomputed from x. dy has shape ``(..., d)`` and x's dtype. Not itself differentiable."""
    if torch.compiler.is_compiling() or _is_meta(x):
        return act_and_mul_bwd_op(*_check_bwd(dy, x), "silu")
    return _backward(dy, x, ACT_SILU)


def gelu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """The gradient of `gelu_and_mul` w.r.t. x (as `silu_and_mul_backward`)."""
    act = gelu_code(approximate)
    if torch.compiler.is_compiling() or _is_meta(x):
        return act_and_mul_bwd_op(*_check_bwd(dy, x), ACT_NAMES[act])
    return _backward(dy, x, act)


# --- the torch custom ops: opaque to torch.compile (which schedules the launch and knows the output shapes from
# the fake implementations), differentiable through register_autograd. `act` is "silu", "gelu" or "gelu_tanh".
def _act_code(act: str) -> int:
    if act not in _ACT_BY_NAME:
        raise ValueError(f"act: expected one of {', '.join(_ACT_BY_NAME)}, got {act!r}")
    return _ACT_BY_NAME[act]


@torch.library.custom_op("ridgeline::act_and_mul", mutates_args=())
def act_and_mul_op(x: torch.Tensor, act: str) -> torch.Tensor:
    return _forward(x, _act_code(act))


@act_and_mul_op.register_fake
def _(x: torch.Tensor, act: str) -> torch.Tensor:
    _act_code(act)
    if x.shape[-1] % 2:
        raise ValueError(f"x: the last dim holds [gate, up] and must be even, got {x.shape[-1]}")
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@torch.library.custom_op("ridgeline::act_and_mul_bwd", mutates_args=())
def act_and_mul_bwd_op(dy: torch.Tensor, x: torch.Tensor, act: str) -> torch.Tensor:
    return _backward(dy, x, _act_code(act))


@act_and_mul_bwd_op.register_fake
def _(dy: torch.Tensor, x: torch.Tensor, act: str) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("ridgeline::act_mul", mutates_args=())
def act_mul_op(gate: torch.Tensor, up: torch.Tensor, act: str) -> torch.Tensor:
    return _forward_pair(gate, up, _act_code(act))


@act_mul_op.register_fake
def _(gate: torch.Tensor, up: torch.Tensor, act: str) -> torch.Tensor:
    _act_code(act)
    return torch.empty_like(gate, memory_format=torch.contiguous_format)


@torch.library.custom_op("ridgeline::act_mul_bwd", mutates_args=())
def act_mul_bwd_op(dy: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, act: str
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    return _backward_pair(dy, gate, up, _act_code(act))


@act_mul_bwd_op.register_fake
def _(dy: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, act: str) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty_like(gate, memory_format=torch.contiguous_format),
            torch.empty_like(up, memory_format=torch.contiguous_format))


def _save_inputs(ctx, inputs, output) -> None:
    *tensors, act = inputs
    ctx.save_for_backward(*tensors)
    ctx.act = act


def _act_and_mul_grad(ctx, dy: torch.Tensor):
    (x,) = ctx.saved_tensors
    return act_and_mul_bwd_op(dy, x, ctx.act), None


def _act_mul_grad(ctx, dy: torch.Tensor):
    gate, up = ctx.saved_tensors
    dg, du = act_mul_bwd_op(dy, gate, up, ctx.act)
    return dg, du, None


act_and_mul_op.register_autograd(_act_and_mul_grad, setup_context=_save_inputs)
act_mul_op.register_autograd(_act_mul_grad, setup_context=_save_inputs)

__all__ = ["silu_and_mul", "gelu_and_mul", "silu_mul", "gelu_mul", "silu_and_mul_backward", "gelu_and_mul_backward",
           "launch_forward", "launch_backward", "config_for", "ActConfig", "DTYPES"]
