"""nn.Module layers over ridgeline's kernels, and `patch(model)` for Hugging Face models (ridgeline.nn.patch).

Every layer calls the op's public function, which goes through a torch custom op with autograd: the layers train,
and torch.compile sees one opaque op per call instead of tracing into Triton.
"""

from __future__ import annotations

import torch
from torch import nn

import ridgeline


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dim (LlamaRMSNorm's meaning)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ridgeline.rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}"


class LayerNorm(nn.Module):
    """nn.LayerNorm over the last dim (normalized_shape is one int here)."""

    def __init__(self, hidden_size: int, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.eps = eps
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(hidden_size, **kw)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(hidden_size, **kw)) if elementwise_affine and bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ridgeline.layer_norm(x, self.weight, self.bias, self.eps)


class Softmax(nn.Module):
    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ridgeline.softmax(x, self.dim)


class SiluAndMul(nn.Module):
    """silu(x[..., :d]) * x[..., d:] (vLLM's layout of a fused gate_up projection)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ridgeline.silu_and_mul(x)


class GeluAndMul(nn.Module):
    """gelu(x[..., :d]) * x[..., d:], exact ("none") or tanh-approximated GELU."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ridgeline.gelu_and_mul(x, approximate=self.approximate)


class CrossEntropyLoss(nn.Module):
    """nn.CrossEntropyLoss for [N, V] logits, fused forward and backward (the logits are read once)."""

    def __init__(self, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean",
                 z_loss: float = 0.0) -> None:
        super().__init__()
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.reduction, self.z_loss = reduction, z_loss

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ridgeline.cross_entropy(logits, target, ignore_index=self.ignore_index,
                                       label_smoothing=self.label_smoothing, reduction=self.reduction,
                                       z_loss=self.z_loss)


__all__ = ["RMSNorm", "LayerNorm", "Softmax", "SiluAndMul", "GeluAndMul", "CrossEntropyLoss"]
