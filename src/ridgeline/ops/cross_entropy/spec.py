"""Contracts of the cross-entropy over a vocabulary: the forward, and the training step (forward + backward).

cross_entropy:          loss = F.cross_entropy(logits.float(), target)  (+ variants)   fn(logits, target) -> loss
cross_entropy_fwd_bwd:  (loss, d loss / d logits)                                      fn(logits, target)
                        -> (loss, dlogits): what one training step needs from the loss layer, for grad_output 1

logits [N, V] (float32, float16 or bfloat16), target [N] int64 class indices. The loss is float32 (Hugging Face's
causal-LM loss upcasts the logits to float32 before F.cross_entropy; torch on 16-bit logits would return 16 bits);
dlogits has the logits' dtype (the gradient autograd hands back through that upcast). Per valid row (target !=
ignore_index) with lse = logsumexp(logits[row]):
    loss_row = (1 - ls) * (lse - logits[row, target]) + ls * (lse - mean(logits[row])) + z * lse^2
and 0 for ignored rows; "mean" divides the sum by the number of valid rows (none valid: NaN), "sum" does not,
"none" returns [N]. Variants (joined with "+"): "ls" label_smoothing=0.1, "z" z_loss=1e-4 (PaLM), "ignore" every
fourth row (from the second) ignore_index=-100, "sum" / "none" the reduction, "strided" rows in a wider buffer
(an unaligned row stride), "nan" a NaN logit in the first row. A plain call passes only (logits, target); a variant
adds only its keywords (label_smoothing=, z_loss=, reduction=).

Why no separate `cross_entropy_bwd` contract: the standard backward saves the logits (and lse) and reads them again
to write the gradient; the fused design writes the gradient in the forward pass, so the honest unit of comparison
is the training step as a whole (peers: torch's loss + autograd.grad, compiled as one function, Liger's in-place
forward), which `cross_entropy_fwd_bwd` is.

Batch invariance: a mean couples every row (each gradient is scaled by 1/rows), so no input is a "batch input" the
harness may slice; tests/ops/cross_entropy checks that a row's loss ("none") and unscaled gradient do not depend on
the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

IGNORE_INDEX = -100
LABEL_SMOOTHING = 0.1
Z_LOSS = 1e-4
STRIDE_PAD = 13  # the "strided" variant's extra columns: an odd pad makes the row stride unaligned
LOGIT_SCALE = 2.0  # logits ~ N(0, 2^2): a softmax with some peaks, like a trained LM head's

# bf16 sweep on the H200: Llama-2/Mistral (32000), Llama-3 (128256), Qwen2.5 (151936), Gemma (256000) vocabularies;
# the largest moves 4.2 GB of logits (8.4 GB with the gradient).
SWEEP: list[Shape] = [
    (1024, 32000), (4096, 32000), (16384, 32000),
    (1024, 128256), (4096, 128256), (8192, 128256),
    (4096, 151936), (8192, 151936),
    (4096, 256000), (8192, 256000),
]
# Real vocabularies at one training micro-batch of tokens.
MODELS: list[Shape] = [(4096, v) for v in (32000, 32768, 50257, 128256, 151936, 256000)]
# One column, a vocab just over a power of two, the widest row in registers + 1 (two passes), unaligned wide rows.
EDGE: list[Shape] = [(1, 1), (3, 5), (7, 1000), (5, 4097), (2, 32769), (3, 70000), (1, 50257), (0, 128)]
# Small enough for the CPU interpreter (a few program instances each).
CPU: list[Shape] = [(8, 1000), (16, 4100), (4, 40000)]
# More than 2^31 logits: 64-bit row offsets or bust (CUDA only; 4.3 GB in bf16).
HUGE: Shape = (2**31 // 262144 + 1, 262144)

VARIANTS = ("", "ls", "z", "ignore", "sum", "none", "strided", "nan")

LOSS_TOLERANCES = {
    torch.float32: Tolerance(atol=1e-5, rtol=1e-5),
    # The loss is float32 from the exact 16-bit logits for us and torch; these admit a per-row loss stored in the
    # logits' dtype before the reduction (Liger stores bf16 rows), 2^-9 / 2^-11 of each row.
    torch.float16: Tolerance(atol=1e-4, rtol=1e-3),
    torch.bfloat16: Tolerance(atol=1e-4, rtol=4e-3),
}
# dlogits: one rounding to the dtype (rtol) on top of float32 softmax error; the atol scales with the gradient
# (1/V per column, times the reduction's 1/rows) to cover float32 cancellation in softmax - ls/V, plus float16's
# subnormal step (a mean over many rows puts most of its gradient below float16's normal range).
GRAD_RTOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
GRAD_FLOOR = {torch.float32: 0.0, torch.float16: 2.0**-24, torch.bfloat16: 0.0}


def parse_variant(variant: str) -> dict[str, Any]:
    """The keywords a variant passes to the public function (only the non-default ones)."""
    parts = set(filter(None, variant.split("+")))
    kw: dict[str, Any] = {}
    if "ls" in parts:
        kw["label_smoothing"] = LABEL_SMOOTHING
    if "z" in parts:
        kw["z_loss"] = Z_LOSS
    if "sum" in parts:
        kw["reduction"] = "sum"
    if "none" in parts:
        kw["reduction"] = "none"
    return kw


def ignored_rows(n: int, variant: str) -> torch.Tensor:
    """Rows whose target is ignore_index: every fourth from the second under "ignore"."""
    rows = torch.arange(n)
    return (rows % 4 == 1) if "ignore" in variant.split("+") else torch.zeros(n, dtype=torch.bool)


def valid_rows(n: int, variant: str) -> int:
    return n - int(ignored_rows(n, variant).sum())


def make_logits_target(case: Case, device: torch.device | str, seed: int) -> Inputs:
    n, v = case.shape
    gen = torch.Generator(device=torch.device(device)).manual_seed(seed)
    parts = case.variant.split("+")
    width = v + STRIDE_PAD if "strided" in parts else v
    logits = (LOGIT_SCALE * torch.randn((n, width), generator=gen, device=device, dtype=torch.float32)).to(case.dtype)
    logits = logits[:, :v]
    target = torch.randint(0, v, (n,), generator=gen, device=device, dtype=torch.int64)
    target[ignored_rows(n, case.variant).to(device)] = IGNORE_INDEX
    if "nan" in parts and n and v:
        logits[0, v // 2] = float("nan")
    return {"logits": logits, "target": target, **parse_variant(case.variant)}


def reference(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = IGNORE_INDEX,
              label_smoothing: float = 0.0, reduction: str = "mean", z_loss: float = 0.0, with_grad: bool = False,
              chunk_elements: int = 1 << 26) -> tuple[torch.Tensor, ...]:
    """float64 loss (and, with_grad, d loss / d logits in float64), rows taken in chunks so that no float64
    temporary is bigger than chunk_elements. The gradient is the closed form; tests check it against float64
    autograd of the same loss."""
    n, v = logits.shape
    valid = target != ignore_index
    n_valid = int(valid.sum())
    rows_loss = torch.zeros((n,), dtype=torch.float64, device=logits.device)
    grad = torch.empty((n, v), dtype=torch.float64, device=logits.device) if with_grad else None
    scale = (1.0 / n_valid if n_valid else float("inf")) if reduction == "mean" else 1.0
    step = max(1, chunk_elements // max(1, v))
    for start in range(0, n, step):
        sl = slice(start, min(n, start + step))
        x, t, ok = logits[sl].double(), target[sl], valid[sl]
        lse = torch.logsumexp(x, dim=1)
        x_t = x.gather(1, torch.where(ok, t, 0).unsqueeze(1)).squeeze(1)
        row = (1.0 - label_smoothing) * (lse - x_t) + z_loss * lse * lse
        if label_smoothing:  # (not 0 * inf = NaN where a logit is -inf without smoothing)
            row = row + label_smoothing * (lse - x.mean(1))
        rows_loss[sl] = torch.where(ok, row, 0.0)
        if grad is not None:
            p = torch.exp(x - lse.unsqueeze(1))
            g = (1.0 + 2.0 * z_loss * lse.unsqueeze(1)) * p - label_smoothing / v
            g.scatter_add_(1, torch.where(ok, t, 0).unsqueeze(1),
                           torch.full((x.shape[0], 1), -(1.0 - label_smoothing), dtype=torch.float64,
                                      device=x.device))
            grad[sl] = torch.where(ok.unsqueeze(1), g * scale, 0.0)
        del x
    if reduction == "none":
        loss = rows_loss
    elif reduction == "sum":
        loss = rows_loss.sum()
    else:
        loss = rows_loss.sum() / n_valid if n_valid else torch.tensor(float("nan"), dtype=torch.float64,
                                                                         device=logits.device)
    return (loss,) if grad is None else (loss, grad)


def _numel(shape: Shape) -> int:
    return shape[0] * shape[1] if len(shape) == 2 else 0


def _loss_bytes(shape: Shape, variant: str) -> int:
    return 4 * shape[0] if "none" in variant.split("+") else 4


class _CrossEntropyFamily:
    """What both contracts share: inputs, shapes, the loss's tolerance, edge cases."""

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        return make_logits_target(case, device, seed)

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return torch.float32 if name == "loss" else inputs["logits"].dtype

    def rows(self, shape: Shape) -> int:
        # 0 rows: nothing to compare beyond the outputs; else one "row": a mean couples them all (module docstring).
        return min(shape[0], 1) if shape else 1

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        if output == "loss":
            return LOSS_TOLERANCES[dtype]
        return Tolerance(atol=GRAD_FLOOR[dtype], rtol=GRAD_RTOL[dtype])

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        # (the loss is float32 whatever the logits: its tolerance follows the logits' dtype, the case's)
        tol = self.tolerance(case.dtype if output == "loss" else dtype, output)
        if output == "loss" or len(case.shape) != 2 or not case.shape[1]:
            return tol
        n, v = case.shape
        mean = parse_variant(case.variant).get("reduction", "mean") == "mean"
        scale = 1.0 / max(1, valid_rows(n, case.variant)) if mean else 1.0
        return Tolerance(atol=tol.atol + 1e-5 * scale / v, rtol=tol.rtol)

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in EDGE]
        for variant in ("ls", "z", "ignore", "sum", "none", "strided", "nan", "ls+z+ignore", "none+ignore"):
            cases += [Case((7, 1000), dtype, variant), Case((3, 70000), dtype, variant)]
        cases += [Case((4, 4), dtype, "ignore"), Case((2, 32769), dtype, "strided+ignore")]
        if torch.device(device).type == "cuda":
            cases += [Case((4096, 128256), dtype), Case((4096, 50257), dtype, "strided+ignore")]
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        if len(case.shape) != 2:
            return None
        from ridgeline.ops.cross_entropy.launch import launch_config

        cfg, grid = launch_config(case.shape[1], case.dtype, case.shape[0], self.name != "cross_entropy", device)
        return {"config": cfg.describe(), "num_warps": cfg.num_warps, "block": cfg.block, "grid": grid}


FAMILY_FIELDS: dict[str, Any] = {
    "dims": ("N", "V"), "ranks": (2,), "dtypes": (torch.bfloat16, torch.float16, torch.float32),
    "shape_sets": {"sweep": SWEEP, "models": MODELS, "edge": EDGE, "cpu": CPU}, "variants": VARIANTS,
    "batch_inputs": (),
}


class CrossEntropySpec(_CrossEntropyFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="cross_entropy",
            summary="cross-entropy of logits [N, V] against class indices (forward only, float32 loss)",
            signature="fn(logits, target) -> loss",
            outputs=("loss",),
            **FAMILY_FIELDS,
        )

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return reference(inputs["logits"], inputs["target"], **parse_kw(inputs))

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["logits"], inputs["target"], **parse_kw(inputs)),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        # Read the logits and the targets once, write the loss; max, subtract, exp, add: 4 FLOPs a logit.
        return Cost(bytes=_numel(shape) * dtype.itemsize + 8 * shape[0] + _loss_bytes(shape, variant),
                    flops=4 * _numel(shape))


class CrossEntropyFwdBwdSpec(_CrossEntropyFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="cross_entropy_fwd_bwd",
            summary="cross-entropy loss and d loss / d logits (the training step, grad_output 1)",
            signature="fn(logits, target) -> (loss, dlogits)",
            outputs=("loss", "dlogits"),
            **FAMILY_FIELDS,
        )

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return reference(inputs["logits"], inputs["target"], with_grad=True, **parse_kw(inputs))

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        out = fn(inputs["logits"], inputs["target"], **parse_kw(inputs))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("cross_entropy_fwd_bwd implementation must return (loss, dlogits)")
        return tuple(out)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        # Read the logits once, write the gradient once, read the targets; the forward's 4 FLOPs a logit, then
        # subtract, exp, scale (and the target's correction): 7.
        return Cost(bytes=2 * _numel(shape) * dtype.itemsize + 8 * shape[0] + _loss_bytes(shape, variant),
                    flops=7 * _numel(shape))


KEYWORDS = ("label_smoothing", "z_loss", "reduction")


def parse_kw(inputs: Inputs) -> dict[str, Any]:
    return {k: inputs[k] for k in KEYWORDS if k in inputs}


register_spec(CrossEntropySpec())
register_spec(CrossEntropyFwdBwdSpec())


def _ours_fwd() -> Callable[..., Any]:
    from ridgeline.ops.cross_entropy.launch import cross_entropy

    return lambda logits, target, **kw: cross_entropy(logits, target, **kw)


def _ours_fwd_bwd(inplace: bool) -> Callable[[], Callable[..., Any]]:
    def factory() -> Callable[..., Any]:
        from ridgeline.ops.cross_entropy.launch import cross_entropy_fwd_bwd

        return lambda logits, target, **kw: cross_entropy_fwd_bwd(logits, target, inplace=inplace, **kw)

    return factory


register_impl("cross_entropy", "ridgeline", "ours", _ours_fwd, description="ridgeline Triton kernel")
register_impl("cross_entropy_fwd_bwd", "ridgeline", "ours", _ours_fwd_bwd(False),
              description="ridgeline Triton kernel: loss and gradient in one pass, a fresh gradient buffer")
register_impl("cross_entropy_fwd_bwd", "ridgeline-inplace", "ours", _ours_fwd_bwd(True), mutates=("logits",),
              description="ridgeline Triton kernel writing the gradient into the logits (Liger's convention)")
