"""What an op *is*, independent of any implementation: the contract every implementation is measured against."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

Shape = tuple[int, ...]
Inputs = dict[str, Any]

DTYPE_NAMES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8e4m3": torch.float8_e4m3fn,
}


def dtype_name(dtype: torch.dtype) -> str:
    for name, d in DTYPE_NAMES.items():
        if d == dtype:
            return name
    return str(dtype).replace("torch.", "")


def parse_dtype(name: str) -> torch.dtype:
    key = name.strip().lower().replace("float", "fp").replace("bfloat16", "bf16").replace("bfp16", "bf16")
    if key not in DTYPE_NAMES:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPE_NAMES)}, got {name!r}")
    return DTYPE_NAMES[key]


def parse_shape(text: str) -> Shape:
    """'4096x4100' -> (4096, 4100)."""
    try:
        dims = tuple(int(p) for p in text.lower().replace("*", "x").split("x"))
    except ValueError:
        raise ValueError(f"shape: expected dims joined by 'x' such as 4096x4100, got {text!r}") from None
    if not dims or any(d < 0 for d in dims):
        raise ValueError(f"shape: expected non-negative dims such as 4096x4100, got {text!r}")
    return dims


def shape_label(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)


@dataclass(frozen=True)
class Cost:
    """The roofline inputs: the fewest bytes that must move through DRAM and the FLOPs that must be done."""

    bytes: int
    flops: int


@dataclass(frozen=True)
class Tolerance:
    """|out - ref| <= atol + rtol * |ref|, per element, against the float64 reference."""

    atol: float
    rtol: float


@dataclass(frozen=True)
class Case:
    """One input configuration of an op: shape, dtype and a variant the spec understands ('' is the plain one)."""

    shape: Shape
    dtype: torch.dtype
    variant: str = ""

    def label(self) -> str:
        parts = [shape_label(self.shape), dtype_name(self.dtype)]
        if self.variant:
            parts.append(self.variant)
        return " ".join(parts)


@dataclass
class Impl:
    """An implementation callable with the op's public signature.

    `mutates` names the inputs it writes in place (the vLLM convention for fused add + norm); the harness then
    hands it private copies and does not count those writes as corrupting the caller's inputs.
    """

    op: str
    name: str
    source: str  # "ours", "peer" or "user"
    fn: Callable[..., Any] | None
    reason: str = ""  # why it is unavailable (fn is None)
    mutates: tuple[str, ...] = ()
    description: str = ""

    @property
    def available(self) -> bool:
        return self.fn is not None


@dataclass
class OpSpec(ABC):
    """The contract of one op. Subclasses fill in the data and the four methods below."""

    name: str
    summary: str
    signature: str  # how a user implementation is called, e.g. "fn(x, weight, eps) -> out"
    outputs: tuple[str, ...]
    batch_inputs: tuple[str, ...]  # inputs whose dim 0 indexes independent rows (batch invariance, chunking)
    dtypes: tuple[torch.dtype, ...]
    shape_sets: dict[str, list[Shape]] = field(default_factory=dict)
    variants: tuple[str, ...] = ("",)  # input variants make_inputs understands ("" = plain); combine with "+"

    @abstractmethod
    def make_inputs(self, case: Case, device: torch.device | str, seed: int) -> Inputs:
        """Fresh random inputs (never zeros) for the case; strided or special variants as the case says."""

    @abstractmethod
    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        """The outputs in float64 (or the documented rounding semantics), one per name in `outputs`."""

    @abstractmethod
    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        """Call an implementation with the public signature; return its outputs as a tuple."""

    @abstractmethod
    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        """Fewest bytes moved and FLOPs done for one call."""

    @abstractmethod
    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        """Allowed error of an output against the float64 reference."""

    def edge_cases(self, dtype: torch.dtype, device: torch.device | str) -> list[Case]:
        """Correctness corner cases; by default the 'edge' shape set, plain."""
        return [Case(s, dtype) for s in self.shape_sets.get("edge", [])]

    def shapes(self, set_name: str) -> list[Shape]:
        if set_name not in self.shape_sets:
            raise ValueError(f"shapes: {self.name} has shape sets {', '.join(self.shape_sets)}; got {set_name!r}")
        return list(self.shape_sets[set_name])

    def launch_info(self, case: Case, device: torch.device) -> dict[str, Any] | None:
        """How our kernel launches for this case (config, grid), recorded beside its measurement."""
        return None

    def rows(self, shape: Shape) -> int:
        """Independent rows in a shape (the batch dim the harness may slice)."""
        return shape[0] if shape else 1

    def batch_subset(self, inputs: Inputs, index: slice) -> Inputs:
        """The same inputs restricted to rows `index` of dim 0; other arguments are kept as they are."""
        return {k: (v[index] if k in self.batch_inputs else v) for k, v in inputs.items()}
