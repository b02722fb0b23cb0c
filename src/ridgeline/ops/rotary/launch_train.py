"""Host side of the training form: `apply_rotary(q, k, cos, sin)` in Hugging Face's layout, out of place, with its
backward `apply_rotary_backward(dq, dk, cos, sin)`, and the torch custom ops (`ridgeline::rotary_train`, with
autograd, and `ridgeline::rotary_train_bwd`) that autograd and torch.compile see.

q [B, Hq, S, D] and k [B, Hk, S, D] as HF's attention hands them over (usually transposed views of [B, S, H, D]
projections: any strides, last dim contiguous); cos and sin as LlamaRotaryEmbedding returns them, [B, S, D], or
unsqueezed [B, 1, S, D], or shared across the batch ([1, S, D] or [S, D]). Outputs are allocated like q and k
(`empty_like` keeps their memory layout). Gradients flow to q and k only (HF computes cos/sin under no_grad).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    multiprocessor_count,
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.ops.rotary.kernel import INTERPRETED, _rotary_train_kernel
from ridgeline.ops.rotary.rules import TRAIN_RULES, RotaryCase, RotaryConfig, choose, resolve

_LAUNCHER = CachedLauncher(_rotary_train_kernel)


def train_config(tokens: int, heads_q: int, heads_k: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device | str) -> RotaryConfig:
    """The config TRAIN_RULES give a call."""
    sms = multiprocessor_count(torch.device(device))
    return choose(TRAIN_RULES, RotaryCase(tokens, heads_q, heads_k, head_dim // 2, dtype.itemsize, sms))


@dataclass(frozen=True)
class _Rows:
    """cos or sin as [batch (B or 1), S, D] strides; batch stride 0 when shared."""

    t: torch.Tensor
    sb: int
    ss: int


def _qk(name: str, t: object, ref: torch.Tensor | None) -> torch.Tensor:
    t = require_tensor(name, t)
    if ref is None:
        require_dtype(name, t)
    elif t.dtype != ref.dtype:
        raise TypeError(f"{name}: expected dtype {str(ref.dtype).replace('torch.', '')} (same as q), got "
                        f"{str(t.dtype).replace('torch.', '')}")
    if t.dim() != 4:
        raise ValueError(f"{name}: expected shape [B, heads, S, D], got {tuple(t.shape)}")
    if ref is not None:
        if (t.shape[0], t.shape[2], t.shape[3]) != (ref.shape[0], ref.shape[2], ref.shape[3]):
            raise ValueError(f"{name}: expected [B={ref.shape[0]}, heads, S={ref.shape[2]}, D={ref.shape[3]}] like "
                             f"q's, got {tuple(t.shape)}")
        require_same_device(name, t, "q", ref)
    elif t.shape[3] % 2 or t.shape[3] == 0:
        raise ValueError(f"{name}: head dim D must be even and > 0, got {t.shape[3]}")
    if t.device.type != "cuda":
        require_runnable_device(name, t)
    if t.stride(3) != 1 and t.shape[3] > 1:
        t = t.contiguous()  # (an exotic layout: the kernel reads rows of D; copied, not on the fast path)
    return t


def _rows(name: str, t: object, q: torch.Tensor) -> _Rows:
    t = require_tensor(name, t)
    require_dtype(name, t)
    b, s, d = q.shape[0], q.shape[2], q.shape[3]
    if t.dim() == 4 and t.shape[1] == 1:
        t = t.squeeze(1)
    elif t.dim() == 2:
        t = t.unsqueeze(0)
    if t.dim() != 3 or t.shape[0] not in (1, b) or (t.shape[1], t.shape[2]) != (s, d):
        raise ValueError(f"{name}: expected shape [B={b}, S={s}, D={d}], [B, 1, S, D], [1, S, D] or [S, D], got "
                         f"{tuple(t.shape)}")
    require_same_device(name, t, "q", q)
    if t.stride(2) != 1 and d > 1:
        t = t.contiguous()  # (as for q: exotic, copied)
    return _Rows(t, t.stride(0) if t.shape[0] > 1 else 0, t.stride(1))


def _run(q: torch.Tensor, k: torch.Tensor, cos: object, sin: object, backward: bool,
         config: RotaryConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    q = _qk("dq" if backward else "q", q, None)
    k = _qk("dk" if backward else "k", k, q)
    c, s = _rows("cos", cos, q), _rows("sin", sin, q)
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    b, hq, seq, d = q.shape
    hk = k.shape[1]
    tokens = b * seq
    if tokens == 0 or hq + hk == 0:
        return qo, ko
    if q.is_cuda and q.get_device() != torch.cuda.current_device():
        with torch.cuda.device(q.device):
            return _run(q, k, c.t, s.t, backward, config)
    if config is not None and not isinstance(config, RotaryConfig):
        raise TypeError(f"config: expected a RotaryConfig (rules.py) or None, got {type(config).__name__}")
    if config is None:
        config = train_config(tokens, hq, hk, d, q.dtype, q.device)
    plan = resolve(config, hq, hk, d // 2)
    qs, ks, qos, kos = q.stride(), k.stride(), qo.stride(), ko.stride()
    args = (q, k, qo, ko, c.t, s.t, qs[0], qs[2], qs[1], ks[0], ks[2], ks[1], qos[0], qos[2], qos[1], kos[0],
            kos[2], kos[1], c.sb, c.ss, s.sb, s.ss, seq)
    constexprs = {"GROUPS": plan.groups, "Q_HEADS": plan.q_heads, "K_HEADS": plan.k_heads, "HALF": d // 2,
                  "HALF_P": plan.half_p, "BLOCK_HQ": plan.block_hq, "BLOCK_HK": plan.block_hk, "BACKWARD": backward,
                  "EMULATE": INTERPRETED}
    _LAUNCHER.launch(plan.grid(tokens), args, constexprs, plan.num_warps)
    return qo, ko


def _check_no_grad(cos: object, sin: object) -> None:
    for name, t in (("cos", cos), ("sin", sin)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            raise ValueError(f"{name}: requires grad, but apply_rotary differentiates q and k only (HF computes "
                             f"cos/sin under no_grad); pass {name}.detach()")


def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *,
                 config: RotaryConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin)``: ``(q * cos + rotate_half(q) * sin, same for k)``.

    q ``[B, Hq, S, D]``, k ``[B, Hk, S, D]`` (same dtype: fp32, fp16 or bf16; any strides with a contiguous last
    dim), cos and sin ``[B, S, D]`` (``[B, 1, S, D]``, ``[1, S, D]`` and ``[S, D]`` too; any float dtype). Math in
    float32, rounded once. Differentiable in q and k (the backward is `apply_rotary_backward`, the rotation by
    -theta) through a torch custom op, so it works under autograd and torch.compile(fullgraph=True).
    """
    if torch.compiler.is_compiling():
        return rotary_train_op(q, k, cos, sin)
    if torch.is_grad_enabled() and ((isinstance(q, torch.Tensor) and q.requires_grad)
                                    or (isinstance(k, torch.Tensor) and k.requires_grad)):
        _check_no_grad(cos, sin)
        return rotary_train_op(q, k, cos, sin)
    return _run(q, k, cos, sin, backward=False, config=config)


def apply_rotary_backward(dq: torch.Tensor, dk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *,
                          config: RotaryConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The backward of `apply_rotary`: gradients of its outputs -> gradients of q and k.

    ``dq_in[..., :h] = dq1 * cos1 + dq2 * sin2``, ``dq_in[..., h:] = dq2 * cos2 - dq1 * sin1`` (h = D / 2): the
    transpose of the forward, which is the rotation by -theta when the halves of cos and of sin are equal (HF's).
    Same layouts as `apply_rotary`."""
    if torch.compiler.is_compiling():
        return rotary_train_bwd_op(dq, dk, cos, sin)
    return _run(dq, dk, cos, sin, backward=True, config=config)


# --- torch custom ops: autograd and torch.compile see these (their bodies take the eager path above).
@torch.library.custom_op("ridgeline::rotary_train", mutates_args=())
def rotary_train_op(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    return _run(q, k, cos, sin, backward=False)


def _out_like(t: torch.Tensor) -> torch.Tensor:
    """What `_run` allocates for t (empty_like of t as the kernel reads it: last dim contiguous)."""
    if t.stride(-1) == 1 or t.shape[-1] <= 1:
        return torch.empty_like(t)
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


@rotary_train_op.register_fake
def _(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _out_like(q), _out_like(k)


@torch.library.custom_op("ridgeline::rotary_train_bwd", mutates_args=())
def rotary_train_bwd_op(dq: torch.Tensor, dk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    return _run(dq, dk, cos, sin, backward=True)


@rotary_train_bwd_op.register_fake
def _(dq: torch.Tensor, dk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _out_like(dq), _out_like(dk)


def _setup_context(ctx, inputs, output) -> None:
    _, _, cos, sin = inputs
    ctx.save_for_backward(cos, sin)


def _backward(ctx, dq_out: torch.Tensor, dk_out: torch.Tensor):
    cos, sin = ctx.saved_tensors
    dq, dk = rotary_train_bwd_op(dq_out, dk_out, cos, sin)
    return dq, dk, None, None


rotary_train_op.register_autograd(_backward, setup_context=_setup_context)

__all__ = ["apply_rotary", "apply_rotary_backward", "train_config"]
