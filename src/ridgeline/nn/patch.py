"""`ridgeline.patch(model)`: run a Hugging Face Llama / Mistral / Qwen2 / Qwen3 model on ridgeline's kernels.

What is swapped, and how:
- every `*RMSNorm` module: its forward (on the instance) calls `ridgeline.rms_norm`;
- every MLP with gate_proj / up_proj / down_proj: act(gate) * up becomes one `silu_mul` / `gelu_mul` call;
- the modeling module's `apply_rotary_pos_emb`: `ridgeline.apply_rotary` (this is module-wide, as the attention
  layers look the function up there; it is restored when the last patched model of that type is undone);
- the causal-LM loss (`model.loss_function`): `ridgeline.cross_entropy` on the logits as they are (bf16 stays
  bf16: the kernel accumulates in fp32, so the fp32 copy of the logits Hugging Face makes is never allocated).
The weights and the state dict are untouched. `patch` returns a `Patched` handle; `.undo()` (or leaving a `with`
block) puts every original back.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

import ridgeline

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3")
_SILU = ("silu", "swish")
_GELU = {"gelu": "none", "gelu_pytorch_tanh": "tanh", "gelu_new": "tanh", "gelu_fast": "tanh"}
# modeling module -> (its original apply_rotary_pos_emb, how many patched models use ours)
_ROTARY: dict[str, tuple[Callable[..., Any], int]] = {}


@dataclass
class Patched:
    """What `patch` swapped in one model; `undo()` restores it."""

    model_type: str
    swapped: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    _undo: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> Patched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.undo()


def _rms_forward(self: torch.nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    out = ridgeline.rms_norm(hidden_states, self.weight, _eps(self))
    # Hugging Face multiplies the weight in its own dtype: an fp32 weight on bf16 activations gives fp32 out.
    want = torch.promote_types(hidden_states.dtype, self.weight.dtype)
    return out if out.dtype == want else out.to(want)


def _eps(norm: torch.nn.Module) -> float:
    for name in ("variance_epsilon", "eps"):
        if hasattr(norm, name):
            return float(getattr(norm, name))
    raise AttributeError(f"patch: {type(norm).__name__} has no variance_epsilon or eps")


def _mlp_forward(act: str, approximate: str) -> Callable[..., torch.Tensor]:
    def forward(self: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_proj(x), self.up_proj(x)
        h = ridgeline.silu_mul(gate, up) if act == "silu" else ridgeline.gelu_mul(gate, up, approximate)
        return self.down_proj(h)

    return forward


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, vocab_size: int,
                   num_items_in_batch: torch.Tensor | int | None = None, ignore_index: int = -100,
                   shift_labels: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
    """Hugging Face's ForCausalLM loss (shift the labels, flatten, mean over valid tokens or sum / num_items)."""
    if shift_labels is None:
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    flat = logits.reshape(-1, vocab_size)
    target = shift_labels.reshape(-1).to(flat.device)
    if num_items_in_batch is None:
        return ridgeline.cross_entropy(flat, target, ignore_index=ignore_index, reduction="mean")
    loss = ridgeline.cross_entropy(flat, target, ignore_index=ignore_index, reduction="sum")
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(loss.device)
    return loss / num_items_in_batch


def _rotary_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def apply_rotary_pos_emb(q, k, cos, sin, *args, unsqueeze_dim: int = 1, **kwargs):
        # Ours takes Hugging Face's current call: q [B, H, S, D], cos/sin [B, S, D]. Older releases' extra
        # arguments (position_ids indexing a [S, D] table) and the [B, S, H, D] layout keep the original.
        if args or kwargs or unsqueeze_dim != 1 or q.dim() != 4 or cos.dim() != 3:
            return original(q, k, cos, sin, *args, unsqueeze_dim=unsqueeze_dim, **kwargs)
        return ridgeline.apply_rotary(q, k, cos, sin)

    return apply_rotary_pos_emb


def _patch_rotary(module_name: str, result: Patched) -> None:
    module = sys.modules[module_name]
    current = getattr(module, "apply_rotary_pos_emb", None)
    if current is None:
        result.skipped.append(f"rotary: {module_name} has no apply_rotary_pos_emb")
        return
    if module_name in _ROTARY:
        original, users = _ROTARY[module_name]
        _ROTARY[module_name] = (original, users + 1)
    else:
        _ROTARY[module_name] = (current, 1)
        module.apply_rotary_pos_emb = _rotary_wrapper(current)

    def undo() -> None:
        original, users = _ROTARY[module_name]
        if users > 1:
            _ROTARY[module_name] = (original, users - 1)
        else:
            module.apply_rotary_pos_emb = original
            del _ROTARY[module_name]

    result._undo.append(undo)
    result.swapped["rotary"] = 1


def _patch_loss(model: torch.nn.Module, result: Patched) -> None:
    if not hasattr(type(model), "loss_function"):
        result.skipped.append("loss: this transformers has no model.loss_function (needs >= 4.46)")
        return
    had = "_loss_function" in model.__dict__
    before = model.__dict__.get("_loss_function")
    try:
        model.loss_function = causal_lm_loss
    except AttributeError:
        result.skipped.append("loss: model.loss_function cannot be set in this transformers")
        return

    def undo() -> None:
        if had:
            model._loss_function = before
        else:
            model.__dict__.pop("_loss_function", None)

    result._undo.append(undo)
    result.swapped["loss"] = 1


def _swap_forward(module: torch.nn.Module, forward: Callable[..., Any], result: Patched) -> None:
    # A forward already set on the instance (accelerate's device hooks, another patch) is put back by undo, not
    # dropped: only a module that had none loses the instance attribute.
    missing = object()
    before = module.__dict__.get("forward", missing)
    module.forward = types.MethodType(forward, module)

    def undo() -> None:
        if before is missing:
            module.__dict__.pop("forward", None)
        else:
            module.forward = before

    result._undo.append(undo)


def patch(model: torch.nn.Module, *, rms_norm: bool = True, mlp: bool = True, rotary: bool = True,
          loss: bool = True) -> Patched:
    """Swap a Hugging Face Llama / Mistral / Qwen2 / Qwen3 model's RMSNorm, MLP activation, rotary embedding and
    causal-LM loss for ridgeline's kernels, in place; returns a handle whose `undo()` restores the model."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED:
        raise ValueError(f"model: ridgeline.patch supports Hugging Face models of type {', '.join(SUPPORTED)}; "
                         f"got {model_type or type(model).__name__!r}")
    result = Patched(model_type)
    act = str(getattr(config, "hidden_act", "silu"))
    modeling = None
    for sub in model.modules():
        name = type(sub).__name__
        modeling = modeling or (type(sub).__module__ if ".modeling_" in type(sub).__module__ else None)
        if rms_norm and name.endswith("RMSNorm") and isinstance(getattr(sub, "weight", None), torch.Tensor):
            _swap_forward(sub, _rms_forward, result)
            result.swapped["rms_norm"] = result.swapped.get("rms_norm", 0) + 1
        elif mlp and all(hasattr(sub, a) for a in ("gate_proj", "up_proj", "down_proj")):
            if act in _SILU:
                _swap_forward(sub, _mlp_forward("silu", "none"), result)
            elif act in _GELU:
                _swap_forward(sub, _mlp_forward("gelu", _GELU[act]), result)
            else:
                if not any(m.startswith("mlp:") for m in result.skipped):
                    result.skipped.append(f"mlp: activation {act!r} has no ridgeline kernel")
                continue
            result.swapped["mlp"] = result.swapped.get("mlp", 0) + 1
    if rotary and modeling is not None:
        _patch_rotary(modeling, result)
    if loss:
        _patch_loss(model, result)
    return result
