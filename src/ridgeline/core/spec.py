"""What an op *is*, independent of any implementation: the contract every implementation is measured against.

A user's own op is one of these in a file of theirs: `ridgeline check my_op.py:SPEC --impl my_op.py:fn`.
The four abstract methods and the data fields are the whole contract; the methods below them have defaults
that an op overrides when it needs more (a K-dependent tolerance, a tensor-core roofline, its own regime rule).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

Shape = tuple[int, ...]
Inputs = dict[str, Any]

# `auto_regime`'s default edge: below both, a call is launch-bound (a few microseconds of ideal time).
AUTO_GRAPH_BELOW_BYTES = 16 * 2**20
AUTO_GRAPH_BELOW_FLOPS = 2 * 10**9

DTYPE_NAMES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8e4m3": torch.float8_e4m3fn,
    "fp8e5m2": torch.float8_e5m2,
    "int8": torch.int8,
    "int32": torch.int32,
    "int64": torch.int64,
}
# The ceilings a cost can be held against: "dram" (bytes / probed copy bandwidth) always; FLOPs against the probed
# rate of one unit: fp32 (CUDA-core FMA) or a tensor-core dtype. The probe measures these names.
COMPUTE_UNITS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def dtype_name(dtype: torch.dtype) -> str:
    for name, d in DTYPE_NAMES.items():
        if d == dtype:
            return name
    return str(dtype).replace("torch.", "")


def parse_dtype(name: str) -> torch.dtype:
    key = name.strip().lower().replace("float", "fp").replace("bfloat16", "bf16").replace("bfp16", "bf16")
    key = {"fp8": "fp8e4m3", "e4m3": "fp8e4m3", "fp8e4m3fn": "fp8e4m3", "e5m2": "fp8e5m2"}.get(key, key)
    if key not in DTYPE_NAMES:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPE_NAMES)}, got {name!r}")
    return DTYPE_NAMES[key]


def as_dtype(d: torch.dtype | str) -> torch.dtype:
    """A dtype, or its name ('bf16', 'fp32', ...)."""
    return parse_dtype(d) if isinstance(d, str) else d


def as_list(value: Any, what: str) -> list[Any]:
    """One name (or dtype) or an iterable of them: a lone string is one item, never its characters."""
    if value is None:
        return []
    if isinstance(value, (str, torch.dtype)):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise ValueError(f"{what}: expected a list, got {type(value).__name__}") from None


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
    """The roofline inputs: the fewest bytes that must move through DRAM and the FLOPs that must be done.

    `unit` names the measured ceiling the FLOPs are held against (one of COMPUTE_UNITS): "fp32" for work on the
    CUDA cores (norms, softmax), a tensor-core dtype for a GEMM ("bf16", "fp8", ...). The bytes are always held
    against the probed DRAM copy bandwidth; the larger of the two times is the floor."""

    bytes: int
    flops: int
    unit: str = "fp32"

    def __post_init__(self) -> None:
        if self.unit not in COMPUTE_UNITS:
            raise ValueError(f"Cost.unit: expected one of {', '.join(COMPUTE_UNITS)}, got {self.unit!r}")
        if self.bytes < 0 or self.flops < 0:
            raise ValueError(f"Cost: bytes and flops must be >= 0, got bytes={self.bytes} flops={self.flops}")


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
    # Names of the shape's dims, e.g. ("M", "N") or ("M", "N", "K"); () says nothing. With `ranks` they say which
    # shapes the op takes: a shape of another rank is refused before any implementation runs.
    dims: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()  # accepted ranks; () = len(dims) when dims are named, else any
    # Model weights: inputs a deployment prepares once at load (repacks, dequantizes) and then reuses. The
    # result-reuse guard refills every other input after timing but leaves these alone, so an implementation may
    # cache a transform of a weight (as serving does) while a cache of results is still caught.
    static_inputs: tuple[str, ...] = ()

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

    # --- optional: defaults an op overrides when it needs more -----------------------------------------------
    def cost_of(self, case: Case) -> Cost:
        """The cost of one call of a case (the harness asks this; by default `cost(shape, dtype, variant)`)."""
        return self.cost(case.shape, case.dtype, case.variant)

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        """The tolerance of `output` (expected dtype `dtype`) in `case`; override it for shape-dependent error
        (a reduction over K grows with K). By default `tolerance(dtype, output)`."""
        return self.tolerance(dtype, output)

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        """The dtype `output` must have; by default the first batch input's."""
        first = next((v for k, v in inputs.items() if k in self.batch_inputs and isinstance(v, torch.Tensor)), None)
        if first is None:
            first = next(v for v in inputs.values() if isinstance(v, torch.Tensor))
        return first.dtype

    def auto_regime(self, case: Case) -> str:
        """The timing regime `--regime auto` picks for a case: CUDA-graph replay on hot inputs for launch-bound
        work (the ideal time is a few microseconds), cold-L2 eager calls above."""
        cost = self.cost_of(case)
        return "graph-hot" if cost.bytes < AUTO_GRAPH_BELOW_BYTES and cost.flops < AUTO_GRAPH_BELOW_FLOPS \
            else "cold-eager"

    def check_shape(self, shape: Shape) -> None:
        """Raise ValueError (one line, naming what the op takes) for a shape the op does not accept."""
        ranks = self.ranks or ((len(self.dims),) if self.dims else ())
        if ranks and len(shape) not in ranks:
            named = f" ({'x'.join(self.dims)})" if self.dims else ""
            raise ValueError(f"shape: {self.name} takes shapes of rank {' or '.join(map(str, ranks))}{named}; "
                             f"got {shape_label(shape)!r}")

    def check_dtypes(self, dtypes: Sequence[torch.dtype]) -> None:
        """Raise ValueError for a dtype the contract does not take (before any implementation runs)."""
        for d in dtypes:
            if d not in self.dtypes:
                raise ValueError(f"dtype: {self.name} takes {', '.join(dtype_name(t) for t in self.dtypes)}; "
                                 f"got {dtype_name(d)}")

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
