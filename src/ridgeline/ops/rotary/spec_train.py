"""Contracts of the training form of rotary position embedding (Hugging Face's layout, out of place).

rotary_train:      fn(q, k, cos, sin) -> (q_out, k_out)
  q [B, Hq, S, D], k [B, Hk, S, D]; cos, sin [B, S, D] as LlamaRotaryEmbedding returns them (cat(freqs, freqs):
  both halves equal); q_out = q * cos + rotate_half(q) * sin (cos, sin unsqueezed at dim 1), k_out likewise.
rotary_train_bwd:  fn(dq, dk, cos, sin) -> (dq_in, dk_in)
  the backward, on what the standard autograd formulation saves: cos and sin (the forward's inputs q and k are
  not needed); dq, dk are the gradients of q_out, k_out (same shapes and layout). dq_in = dq * cos +
  rotate_half^T(dq * sin), with rotate_half^T(y) = cat(y2, -y1): the rotation by -theta.

Shapes are (B, S, Hq, Hk, D). Variants: "" is HF's real layout (q and k transposed views of [B, S, H, D]
projections, so one token's heads are adjacent in memory), "contiguous" ([B, H, S, D] tensors), "cos-4d" (cos and
sin [B, 1, S, D]), "cos-shared" ([1, S, D]: every sequence at the same positions), "nan".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape
from ridgeline.ops.rotary.spec import ROPE_THETA, TOLERANCES

SWEEP: list[Shape] = [
    (1, 4096, 32, 8, 128), (4, 2048, 32, 8, 128), (8, 4096, 32, 8, 128),
    (1, 4096, 64, 8, 128), (4, 2048, 28, 4, 128), (8, 4096, 28, 4, 128),
]
EDGE: list[Shape] = [(0, 4, 2, 1, 8), (1, 1, 1, 1, 2), (2, 5, 4, 2, 64), (3, 4, 7, 1, 80), (2, 3, 6, 3, 96),
                     (1, 6, 2, 2, 256)]
CPU: list[Shape] = [(1, 8, 4, 2, 64), (2, 8, 8, 2, 128), (2, 16, 4, 4, 64)]
# q of more than 2^31 elements (CUDA only; 4.3 GB at bf16).
HUGE: Shape = (2, 2**30 // (32 * 128) + 1, 32, 8, 128)
VARIANTS = ("", "contiguous", "cos-4d", "cos-shared", "nan")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rotate_half_t(y: torch.Tensor) -> torch.Tensor:
    """The transpose of rotate_half: <rotate_half(x), y> = <x, rotate_half_t(y)>."""
    h = y.shape[-1] // 2
    return torch.cat((y[..., h:], -y[..., :h]), dim=-1)


def hf_cos_sin(position_ids: torch.Tensor, dim: int, dtype: torch.dtype, theta: float = ROPE_THETA
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """LlamaRotaryEmbedding.forward's (cos, sin) for position_ids [B, S]: [B, S, D], both halves equal."""
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=position_ids.device) / dim)
    freqs = position_ids.double()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _unsqueezed(t: torch.Tensor) -> torch.Tensor:
    """cos/sin in any accepted form -> [B or 1, 1, S, D] (broadcasts against [B, H, S, D])."""
    if t.dim() == 2:
        t = t.unsqueeze(0)
    return t if t.dim() == 4 else t.unsqueeze(1)


class _RotaryTrainFamily(OpSpec):
    grad: bool = False

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        b, s, hq, hk, d = case.shape
        v = case.variant
        gen = torch.Generator(device=torch.device(device)).manual_seed(seed)

        def heads(h: int) -> torch.Tensor:
            if "contiguous" in v:
                return torch.randn((b, h, s, d), generator=gen, device=device).to(case.dtype)
            # HF: q_proj(x).view(B, S, H, D).transpose(1, 2)
            return torch.randn((b, s, h, d), generator=gen, device=device).to(case.dtype).transpose(1, 2)

        q, k = heads(hq), heads(hk)
        if "nan" in v and q.numel():
            q[0, 0, 0, 1] = float("nan")
            k[-1, -1, -1, -1] = float("inf")
        rows = 1 if "cos-shared" in v else b
        # Each sequence starts at its own offset (as packed or continued sequences do): rows differ per batch.
        start = torch.randint(0, 4096, (rows, 1), generator=gen, device=device)
        position_ids = start + torch.arange(s, device=device)[None, :]
        cos, sin = hf_cos_sin(position_ids, d, case.dtype)
        if "cos-4d" in v:
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        names = ("dq", "dk") if self.grad else ("q", "k")
        return {names[0]: q, names[1]: k, "cos": cos, "sin": sin}

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        names = ("dq", "dk") if self.grad else ("q", "k")
        out = fn(inputs[names[0]], inputs[names[1]], inputs["cos"], inputs["sin"])
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"{self.name} implementation must return two tensors")
        return tuple(out)

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        names = ("dq", "dk") if self.grad else ("q", "k")
        cos, sin = _unsqueezed(inputs["cos"]).double(), _unsqueezed(inputs["sin"]).double()
        outs = []
        for name in names:
            x = inputs[name].double()
            outs.append(x * cos + rotate_half_t(x * sin) if self.grad else x * cos + rotate_half(x) * sin)
        return tuple(outs)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        b, s, hq, hk, d = shape
        rows = s if "cos-shared" in variant else b * s
        elems = b * s * (hq + hk) * d
        # q and k read once and their outputs written once; the cos and sin rows (D values each) read once per
        # token (once per position when shared), not per head; 3 FLOPs per element (2 multiplies, 1 add).
        return Cost(bytes=2 * elems * dtype.itemsize + 2 * rows * d * dtype.itemsize, flops=3 * elems)

    def tolerance(self, dtype: torch.dtype, output: str):
        return TOLERANCES[dtype]

    def rows(self, shape: Shape) -> int:
        return shape[0]

    def batch_subset(self, inputs: Inputs, index: slice) -> Inputs:
        """Sequences `index` of the batch; cos and sin shared by the batch ([1, ...] or [S, D]) are kept whole."""
        b = next(iter(inputs.values())).shape[0]
        out = {}
        for key, val in inputs.items():
            shared = key in ("cos", "sin") and (val.dim() == 2 or (val.shape[0] == 1 and b != 1))
            out[key] = val if shared else val[index]
        return out

    def check_shape(self, shape: Shape) -> None:
        super().check_shape(shape)
        if shape[2] < 1 or shape[3] < 1 or shape[4] < 2 or shape[4] % 2:
            raise ValueError(f"shape: {self.name} takes BxSxHqxHkxD with heads >= 1 and D even; "
                             f"got {'x'.join(map(str, shape))}")

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        cases += [Case((2, 5, 4, 2, 64), dtype, v) for v in ("contiguous", "cos-4d", "cos-shared", "nan")]
        cases.append(Case((3, 4, 7, 1, 80), dtype, "contiguous+cos-4d"))
        if torch.device(device).type == "cuda":
            cases += [Case((8, 4096, 32, 8, 128), dtype), Case((4, 2048, 28, 4, 128), dtype, "contiguous")]
            if dtype.itemsize == 2:
                cases.append(Case(HUGE, dtype))
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.rotary.launch_train import train_config
        from ridgeline.ops.rotary.rules import resolve

        b, s, hq, hk, d = case.shape
        cfg = train_config(b * s, hq, hk, d, case.dtype, device)
        plan = resolve(cfg, hq, hk, d // 2)
        return {"config": cfg.describe(), "num_warps": plan.num_warps, "grid": plan.grid(b * s)}


_FIELDS: dict[str, Any] = {
    "dtypes": (torch.bfloat16, torch.float16, torch.float32),
    "shape_sets": {"sweep": SWEEP, "edge": EDGE, "cpu": CPU},
    "variants": VARIANTS,
    "dims": ("B", "S", "Hq", "Hk", "D"),
}


class RotaryTrainSpec(_RotaryTrainFamily):
    def __init__(self) -> None:
        super().__init__(name="rotary_train", summary="HF apply_rotary_pos_emb: q*cos + rotate_half(q)*sin, k alike",
                         signature="fn(q, k, cos, sin) -> (q_out, k_out)", outputs=("q_out", "k_out"),
                         batch_inputs=("q", "k", "cos", "sin"), **_FIELDS)


class RotaryTrainBwdSpec(_RotaryTrainFamily):
    grad = True

    def __init__(self) -> None:
        super().__init__(name="rotary_train_bwd",
                         summary="backward of rotary_train: dq*cos + rotate_half^T(dq*sin), dk alike (saved: cos, sin)",
                         signature="fn(dq, dk, cos, sin) -> (dq_in, dk_in)", outputs=("dq_in", "dk_in"),
                         batch_inputs=("dq", "dk", "cos", "sin"), **_FIELDS)


register_spec(RotaryTrainSpec())
register_spec(RotaryTrainBwdSpec())


def _ours_fwd() -> Callable[..., Any]:
    from ridgeline.ops.rotary.launch_train import apply_rotary

    return apply_rotary


def _ours_bwd() -> Callable[..., Any]:
    from ridgeline.ops.rotary.launch_train import apply_rotary_backward

    return apply_rotary_backward


register_impl("rotary_train", "ridgeline", "ours", _ours_fwd, description="ridgeline Triton kernel (out of place)")
register_impl("rotary_train_bwd", "ridgeline", "ours", _ours_bwd,
              description="ridgeline Triton backward kernel (the rotation by -theta)")
