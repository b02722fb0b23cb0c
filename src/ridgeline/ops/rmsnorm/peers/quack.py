"""QuACK peers (pip `quack-kernels`, module `quack`): the CuTe-DSL RMSNorm of Dao-AILab/quack.

    quack.rmsnorm.rmsnorm(x, weight=None, bias=None, residual=None, out_dtype=None, residual_dtype=None,
                          eps=1e-6, prenorm=False)
        -> out, or (out, residual_out) when a residual is given with prenorm=True

With a residual the kernel adds x + residual in fp32, stores the sum rounded to the residual's dtype as
residual_out and normalizes the fp32 sum: the fused op, writing fresh tensors (nothing in place). Nothing
from QuACK is imported until an implementation is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.optional import OptionalPackage
from ridgeline.core.registry import register_impl

PIP = "quack-kernels"
_PKG = OptionalPackage(PIP)
_import = _PKG.import_module
_function = _PKG.function
# Imported by module name: `quack/__init__.py` does `from quack.rmsnorm import rmsnorm`, so the attribute
# `quack.rmsnorm` is the function, not the module, and `import quack.rmsnorm as m` would bind the function.
RMS_MODULE = "quack.rmsnorm"


def _rmsnorm(keywords: tuple[str, ...]) -> Any:
    return _function(_import(RMS_MODULE), "rmsnorm", 2, keywords)


def _rms() -> Callable[..., Any]:
    rmsnorm = _rmsnorm(("eps",))

    def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return rmsnorm(x, weight, eps=eps)

    return rms


def _fused() -> Callable[..., Any]:
    # Releases whose rmsnorm takes no residual / prenorm have no fused entry point we can call.
    rmsnorm = _rmsnorm(("residual", "eps", "prenorm"))

    def fused(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out, residual_out = rmsnorm(x, weight, residual=residual, eps=eps, prenorm=True)
        return out, residual_out

    return fused


register_impl("rmsnorm", "quack", "peer", _rms,
              description="QuACK CuTe-DSL RMSNorm (quack.rmsnorm.rmsnorm)")
register_impl("fused_add_rmsnorm", "quack", "peer", _fused,
              description="QuACK CuTe-DSL RMSNorm with residual (quack.rmsnorm.rmsnorm(..., residual=, "
                          "prenorm=True)); writes fresh out and residual_out")


# --- backward contracts (spec_bwd.py): quack.rmsnorm.rmsnorm_bwd, as its RMSNormFunction.backward calls it ------
#     rmsnorm_bwd(x, weight, dout, rstd, dresidual_out=None, has_bias=False, has_residual=False)
#         -> (dx, dweight, dbias, dresidual)     on 2-D rows


def _rms_bwd() -> Callable[..., Any]:
    bwd_fn = _function(_import(RMS_MODULE), "rmsnorm_bwd", 4, ("dresidual_out", "has_residual"))

    def bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor):
        n = x.shape[-1]
        dx, dw, _db, _dres = bwd_fn(x.reshape(-1, n), weight, dy.reshape(-1, n), rstd.reshape(-1))
        return dx.view(x.shape), dw

    return bwd


def _fused_bwd() -> Callable[..., Any]:
    bwd_fn = _function(_import(RMS_MODULE), "rmsnorm_bwd", 4, ("dresidual_out", "has_residual"))

    def bwd(dy, dresidual_out, residual_out, weight, rstd):
        n = residual_out.shape[-1]
        dx, dw, _db, _dres = bwd_fn(residual_out.reshape(-1, n), weight, dy.reshape(-1, n), rstd.reshape(-1),
                                    dresidual_out=dresidual_out.reshape(-1, n), has_residual=True)
        return dx.view(residual_out.shape), dw

    return bwd


register_impl("rmsnorm_bwd", "quack", "peer", _rms_bwd, description="QuACK CuTe-DSL quack.rmsnorm.rmsnorm_bwd")
register_impl("fused_add_rmsnorm_bwd", "quack", "peer", _fused_bwd,
              description="QuACK CuTe-DSL quack.rmsnorm.rmsnorm_bwd(..., dresidual_out=, has_residual=True)")
