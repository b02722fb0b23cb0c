""""triton-tutorial": a plain Triton matmul of the public tutorial's design (03-matrix-multiplication): one tile per
program, grouped program order for L2 reuse, pointer loads with masks (no TMA, not persistent), fp32 accumulator,
@triton.autotune over a short config list keyed on (M, N, K). Written here from that design: the "what a first
kernel gets" line. Its autotuner's choice per shape is `matmul_kernel.best_config` (`ridgeline audit` reads it).
"""

from __future__ import annotations

from typing import Any

import torch

from ridgeline.core.registry import register_impl
from ridgeline.lib.launch import interpreter_enabled

_KERNEL: Any = None


def _configs() -> list[Any]:
    import triton

    if interpreter_enabled():  # (two or more configs fail in the interpreter: one small one)
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4,
                              num_stages=1)]
    tiles = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
             (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
             (16, 64, 128, 4, 4), (16, 32, 256, 4, 4)]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for bm, bn, bk, s, w in tiles]


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import triton
    import triton.language as tl

    @triton.autotune(configs=_configs(), key=["M", "N", "K"])
    @triton.jit
    def tutorial_matmul_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                               stride_cm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                               GROUP_M: tl.constexpr, HAS_BIAS: tl.constexpr, UPCAST: tl.constexpr):
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        in_group = GROUP_M * num_pid_n
        first_m = (pid // in_group) * GROUP_M
        size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (pid % in_group) % size_m
        pid_n = (pid % in_group) // size_m
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0.0)
            b = tl.load(b_ptrs, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0.0)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        if HAS_BIAS:
            acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        c_ptrs = c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))

    _KERNEL = tutorial_matmul_kernel
    return _KERNEL


def tutorial_matmul(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, *,
                    layout: str = "nt") -> torch.Tensor:
    """y = x @ w^T (+ bias) for w [N, K], or x @ w for layout "kn"; x (..., K)."""
    import triton

    k = x.shape[-1]
    lead = x.shape[:-1]
    m = int(torch.Size(lead).numel())
    x2 = x.reshape(m, k)
    b = w.T if layout == "nt" else w
    n = b.shape[1]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m and n:
        if k == 0:
            y.zero_()
            if bias is not None:
                y += bias
        else:
            kernel = _kernel()

            def grid(meta: dict[str, Any]) -> tuple[int]:
                return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

            kernel[grid](x2, b, bias if bias is not None else y, y, m, n, k, x2.stride(0), x2.stride(1),
                         b.stride(0), b.stride(1), y.stride(0), HAS_BIAS=bias is not None,
                         UPCAST=interpreter_enabled())
    return y.view(*lead, n)


def _factory() -> Any:
    try:
        import triton  # noqa: F401
    except ImportError:  # pragma: no cover - triton ships with torch here
        from ridgeline.core.registry import Unavailable

        raise Unavailable("triton not installed") from None
    return tutorial_matmul


register_impl("matmul", "triton-tutorial", "peer", _factory,
              description="plain Triton matmul of the tutorial's design (grouped order, pointer loads, autotune)")
