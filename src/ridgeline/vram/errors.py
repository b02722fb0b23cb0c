"""Errors raised by :mod:`ridgeline.vram`. All derive from :class:`VramError`."""

from __future__ import annotations

from typing import Any


class VramError(Exception):
    """Base class for every error this package raises on purpose."""


class ConfigError(VramError, ValueError):
    """The model config cannot be sized: unknown architecture or a missing/invalid field."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


class InputError(VramError, ValueError):
    """An input to :func:`ridgeline.vram.plan` is invalid (dtype, TP split, utilization, ...)."""


class GpuError(VramError, ValueError):
    """The GPU could not be resolved (unknown name, or ``auto`` without CUDA)."""


class MeasureError(VramError, RuntimeError):
    """``--measure`` could not run (no CUDA) or an allocation failed."""


class DoesNotFitError(VramError):
    """Not even one request of ``max_model_len`` tokens fits in the KV pool.

    ``largest_max_model_len`` is the longest length that does fit (0 when the weights and
    activations alone exceed the budget); ``plan`` is the plan that was computed, with
    ``fits=False``, so callers can still show every term.
    """

    def __init__(self, message: str, *, largest_max_model_len: int | None, plan: Any = None):
        super().__init__(message)
        self.largest_max_model_len = largest_max_model_len
        self.plan = plan
