"""PyTorch peers of the FP8 GEMM and the quantizers.

- "torch-scaled-mm": `torch._scaled_mm(mat1, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
  use_fast_accum=False)` as in torch 2.6 through 2.13: mat2 must be column-major [K, N] (ours is b [N, K], so
  b.t(): the same memory), per-tensor scales are one-element fp32 tensors, row-wise scales are scale_a [M, 1] and
  scale_b [1, N] (fp32; row-wise needs a bf16 output in torch 2.6), sizes multiples of 16. It takes no block
  scales there: a block case fails with the reason "unsupported" (recorded, not a crash). FACTS.md measured it at
  1074-1264 TFLOP/s row-wise at M >= 1024 on the H200.
- "torch-compile": torch.compile(mode="max-autotune-no-cudagraphs", dynamic=False) of the same `_scaled_mm` call
  (Inductor tunes its own Triton FP8 templates against cuBLAS there); for block scales, of the dequantize + matmul
  expression (the operands dequantized to the output dtype, then one GEMM), what a model without a block kernel
  runs. ("-no-cudagraphs": the harness does its own graph replay; Inductor's cudagraph trees would nest in it.)
- "torch-eager": that dequantize + matmul expression, eager (every mode).
Quantizers: "torch-eager" (the contract's expression in float32) and "torch-compile" of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import Unavailable, register_impl
from ridgeline.lib.peers import compiled, compiled_factory

BLOCK = 128
FP8_MAX = 448.0


def _mode(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> str:
    from ridgeline.ops.scaled_mm.launch import scale_mode

    return scale_mode(scale_a, scale_b, a.shape[0], b.shape[0], a.shape[1])


def torch_scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                    out_dtype: torch.dtype = torch.bfloat16, bias: torch.Tensor | None = None) -> torch.Tensor:
    mode = _mode(a, b, scale_a, scale_b)
    if mode == "block":
        raise ValueError(f"unsupported: torch._scaled_mm (torch {torch.__version__}) takes per-tensor and row-wise "
                         "scales, not 1x128 / 128x128 block scales")
    if mode == "tensor":
        sa, sb = scale_a.reshape(()), scale_b.reshape(())
    else:
        sa, sb = scale_a.reshape(-1, 1), scale_b.reshape(1, -1)
    return torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=out_dtype)


def dequant_matmul(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                   out_dtype: torch.dtype = torch.bfloat16, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Dequantize both operands (scales expanded, float32 products rounded to out_dtype), then one GEMM."""
    m, k = a.shape
    n = b.shape[0]
    mode = _mode(a, b, scale_a, scale_b)
    if mode == "tensor":
        ea, eb = scale_a.reshape(1, 1), scale_b.reshape(1, 1)
    elif mode == "row":
        ea, eb = scale_a.reshape(m, 1), scale_b.reshape(n, 1)
    else:
        ea = scale_a.repeat_interleave(BLOCK, 1)[:, :k]
        eb = scale_b.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:n, :k]
    da = (a.float() * ea).to(out_dtype)
    db = (b.float() * eb).to(out_dtype)
    return torch.nn.functional.linear(da, db, bias)


def _compiled_mm() -> Callable[..., Any]:
    if not torch.cuda.is_available():
        raise Unavailable("torch.compile(max-autotune) of torch._scaled_mm needs a CUDA GPU (none here)")
    scaled = compiled(torch_scaled_mm, mode="max-autotune-no-cudagraphs")
    dequant = compiled(dequant_matmul, mode="max-autotune-no-cudagraphs")

    def fn(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None):
        pick = dequant if _mode(a, b, scale_a, scale_b) == "block" else scaled
        return pick(a, b, scale_a, scale_b, out_dtype, bias)

    return fn


def _scaled_mm_peer() -> Callable[..., Any]:
    if not hasattr(torch, "_scaled_mm"):
        raise Unavailable(f"torch {torch.__version__} has no torch._scaled_mm")
    if not torch.cuda.is_available():
        raise Unavailable("torch._scaled_mm has CUDA kernels only (no CUDA here)")
    return torch_scaled_mm


register_impl("scaled_mm", "torch-scaled-mm", "peer", _scaled_mm_peer,
              description="torch._scaled_mm (cuBLASLt; per-tensor and row-wise), b passed as b.t()")
register_impl("scaled_mm", "torch-compile", "peer", _compiled_mm,
              description="torch.compile(max-autotune-no-cudagraphs) of torch._scaled_mm; block: of dequant+matmul")
register_impl("scaled_mm", "torch-eager", "peer", lambda: dequant_matmul,
              description="dequantize both operands to out_dtype, then F.linear (eager)")


# --- quantizers: the contract's expression in float32 ----------------------------------------------------------
# The scale is the correctly rounded amax / 448: on CUDA torch divides by a Python number as a multiply by its
# reciprocal (and so does Inductor), 1 ulp off now and then, which flips an e4m3 code at a rounding boundary (the
# H200, s21: every shape failed the exact check). The quotient of the few amax values in float64 costs nothing.
def _scale(amax: torch.Tensor) -> torch.Tensor:
    return torch.where(amax > 0, (amax.double() / FP8_MAX).float(), torch.ones_like(amax))


def eager_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    amax = xf.abs().amax(-1, keepdim=True)
    scale = _scale(amax)
    return (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def eager_per_group(x: torch.Tensor, group: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    m, k = x.shape
    g = -(-k // group)
    xf = torch.nn.functional.pad(x.float(), (0, g * group - k)).reshape(m, g, group)
    amax = xf.abs().amax(-1, keepdim=True)
    scale = _scale(amax)
    q = (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(m, g * group)[:, :k]
    return q, scale.reshape(m, g)


register_impl("quantize_fp8_per_token", "torch-eager", "peer", lambda: eager_per_token,
              description="eager PyTorch, float32 math")
register_impl("quantize_fp8_per_token", "torch-compile", "peer", compiled_factory(eager_per_token),
              description="torch.compile(dynamic=False) of it")
register_impl("quantize_fp8_per_group", "torch-eager", "peer", lambda: eager_per_group,
              description="eager PyTorch, float32 math")
register_impl("quantize_fp8_per_group", "torch-compile", "peer", compiled_factory(eager_per_group),
              description="torch.compile(dynamic=False) of it")
