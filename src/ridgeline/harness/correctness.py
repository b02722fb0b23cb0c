"""Prove an implementation right: float64 reference, tolerance per dtype, edge cases, and the KernelBench lessons.

For each (implementation, case) the harness checks, on fresh random inputs:
- every output against the float64 reference (NaN/inf where and only where the reference has them);
- outputs fully written (the CUDA caching allocator is poisoned with NaN before each call);
- inputs left bit-identical (except those the implementation declares it writes in place);
- determinism (the same inputs twice give the same bits);
- batch invariance (a subset of rows gives the same bits as those rows in the full call);
- freshness (a second, different input set is checked too: a cached or data-specific result fails).
"""

from __future__ import annotations

import gc
import re
import traceback
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ridgeline.core.spec import Case, Impl, Inputs, OpSpec, Tolerance, dtype_name, shape_label
from ridgeline.records.reasons import NOT_BATCH_INVARIANT, NOT_DETERMINISTIC, ORDER_VARIANCE, order_lacks

# Cases bigger than this are compared in row chunks so the float64 reference fits in memory.
CHUNK_ELEMENTS = 1 << 26


@dataclass
class OutputError:
    name: str
    max_abs_err: float
    worst_ratio: float  # max over elements of |err| / (atol + rtol |ref|); <= 1 passes
    atol: float
    rtol: float
    nan_mismatch: int = 0
    dtype_ok: bool = True
    shape_ok: bool = True


@dataclass
class CheckResult:
    op: str
    impl: str
    shape: list[int]
    dtype: str
    variant: str
    passed: bool
    reasons: list[str] = field(default_factory=list)
    outputs: list[OutputError] = field(default_factory=list)
    seconds: float = 0.0
    source: str = ""  # ours | peer | user (ours must pass every property)
    harness_error: bool = False  # the failure is the harness's or the contract's, not the implementation's
    notes: list[str] = field(default_factory=list)  # what was not checked, and why (never a failure)
    worst_value_ratio: float = 0.0  # the largest error / tolerance over every value check (run, fresh inputs, ...)

    @property
    def label(self) -> str:
        return " ".join(p for p in (shape_label(self.shape), self.dtype, self.variant) if p)

    def worst_ratio(self) -> float:
        return max((o.worst_ratio for o in self.outputs), default=float("nan"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def only_order_variance(reasons: list[str]) -> bool:
    """True when the values of every call were right and the only failures are batch invariance (rows computed
    alone differ bitwise from the same rows in the full call) and determinism (two calls differ bitwise)."""
    return bool(reasons) and all(str(r).startswith(ORDER_VARIANCE) for r in reasons)


def order_caveat(reasons: list[str]) -> str:
    """The bench's caveat for a peer admitted on order variance: which of the two properties it lacks."""
    return "; ".join(order_lacks(reasons)) + " (values checked)"


def value_near_miss(reasons: list[str], worst_value_ratio: float, limit: float) -> bool:
    """True when every failure is a value just past its tolerance (at most `limit` times it: right op, less
    precise arithmetic) or order variance (ORDER_VARIANCE), and nothing else (no wrong shape, dtype, NaN, crash or
    corruption)."""
    values = [r for r in reasons if not str(r).startswith(ORDER_VARIANCE)]
    return bool(values) and 0.0 < worst_value_ratio <= limit and all(
        _VALUE_MISS.match(str(r)) for r in values)


# Exactly the reason _check_values writes for a value past its tolerance, on the check's own calls: anything else
# (a raised error whose message happens to say "max error", a harness error, a shape or NaN failure) is no near miss.
_VALUE_MISS = re.compile(
    r"^(run|second run|rows \d+:\d+ alone|fresh inputs): \S+ max error \S+ exceeds atol \S+ \+ rtol \S+\*\|ref\|$")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Reinterpret as integers so comparisons are bitwise (NaN payloads included)."""
    size = t.element_size()
    int_type = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    return t.contiguous().view(int_type)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a), _bits(b))


def same_output(a: object, b: object) -> bool:
    """Bitwise equal outputs, except that a NaN equals any NaN: NaN positions must match, their payloads (0x7fc0
    or 0xffff, both NaN) need not, since no caller can tell them apart."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a is b
    if bitwise_equal(a, b):
        return True
    if a.shape != b.shape or a.dtype != b.dtype or not a.is_floating_point():
        return False
    both_nan = a.isnan() & b.isnan()
    return bool(((_bits(a) == _bits(b)) | both_nan).all())


def _clone_inputs(inputs: Inputs) -> Inputs:
    """Copies that keep each tensor's strides (a strided view stays a strided view of a fresh buffer)."""
    out = {}
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor):
            c = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
            c.copy_(v)
            out[k] = c
        else:
            out[k] = v
    return out


def _poison_allocator(device: torch.device, nbytes: int) -> None:
    """Fill blocks the CUDA caching allocator will hand out next with NaN, so unwritten outputs show."""
    if device.type != "cuda" or nbytes <= 0:
        return
    blocks = [torch.full((max(nbytes // 2, 1),), float("nan"), dtype=torch.float16, device=device) for _ in range(4)]
    del blocks


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, expect_dtype: torch.dtype, tol) -> OutputError:
    err = OutputError(name, 0.0, 0.0, tol.atol, tol.rtol)
    if tuple(out.shape) != tuple(ref.shape):
        err.shape_ok = False
        err.worst_ratio = float("inf")
        return err
    err.dtype_ok = out.dtype == expect_dtype
    if out.numel() == 0:
        return err
    flat_out = out.reshape(-1, out.shape[-1]) if out.dim() else out.reshape(1, 1)
    flat_ref = ref.reshape(-1, ref.shape[-1]) if ref.dim() else ref.reshape(1, 1)
    rows_per_chunk = max(1, CHUNK_ELEMENTS // max(1, flat_ref.shape[-1]))
    for start in range(0, flat_ref.shape[0], rows_per_chunk):
        o = flat_out[start : start + rows_per_chunk].double()
        r = flat_ref[start : start + rows_per_chunk]
        o_nan, r_nan = o.isnan(), r.isnan()
        r_inf = r.isinf()
        err.nan_mismatch += int((o_nan != r_nan).sum()) + int((r_inf & (o != r)).sum())
        finite = ~(r_nan | r_inf)
        diff = (o - r).abs()
        diff = torch.where(finite, diff, torch.zeros_like(diff))
        # A NaN/inf where the reference is finite is an infinite error.
        diff = torch.where(finite & ~o.isfinite(), torch.full_like(diff, float("inf")), diff)
        if diff.numel():
            bound = tol.atol + tol.rtol * r.abs()
            err.max_abs_err = max(err.max_abs_err, float(diff.max()))
            # 0/0 is a pass, not NaN (which max() would spread): an exact tolerance must still see every error.
            ratio = torch.where(diff == 0, torch.zeros_like(diff), diff / torch.where(finite, bound, 1.0))
            err.worst_ratio = max(err.worst_ratio, float(ratio.max()))
    return err


def _row_chunks(spec: OpSpec, inputs: Inputs) -> list[slice]:
    """Row slices small enough that the float64 reference of one fits comfortably in memory."""
    batch = [v for k, v in inputs.items() if k in spec.batch_inputs]
    rows = batch[0].shape[0] if batch and batch[0].dim() else 1
    numel = max((v.numel() for v in batch), default=0)
    if numel <= CHUNK_ELEMENTS or rows <= 1:
        return [slice(None)]
    step = max(1, CHUNK_ELEMENTS // max(1, numel // rows))
    return [slice(start, start + step) for start in range(0, rows, step)]


def _merge(total: OutputError | None, part: OutputError) -> OutputError:
    if total is None:
        return part
    total.max_abs_err = max(total.max_abs_err, part.max_abs_err)
    total.worst_ratio = max(total.worst_ratio, part.worst_ratio)
    total.nan_mismatch += part.nan_mismatch
    total.dtype_ok &= part.dtype_ok
    total.shape_ok &= part.shape_ok
    return total


def _expected_dtypes(spec: OpSpec, inputs: Inputs) -> list[torch.dtype]:
    """Each output's dtype, as the contract says (OpSpec.output_dtype)."""
    return [spec.output_dtype(name, inputs) for name in spec.outputs]


def _run(spec: OpSpec, impl: Impl, inputs: Inputs) -> tuple[torch.Tensor, ...]:
    """Call the implementation; in-place implementations get private copies of what they write."""
    # Only what it declares it writes is copied: a write to anything else still reaches the caller's inputs.
    call_inputs = {**inputs, **_clone_inputs({k: inputs[k] for k in impl.mutates if k in inputs})}
    device = next(v for v in inputs.values() if isinstance(v, torch.Tensor)).device
    try:
        outs = spec.call(impl.fn, call_inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the device, not a stream: work left on other streams counts
    except torch.cuda.OutOfMemoryError:
        raise
    except (Exception, SystemExit) as e:  # (SystemExit: a user's function must not end the harness's process)
        raise ImplementationError(e) from e
    if isinstance(outs, torch.Tensor):  # a user contract's call() may return the one output bare
        outs = (outs,)
    return tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)


class ImplementationError(Exception):
    """What the implementation (or the contract's call of it) raised, as opposed to a failure of the harness."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _check_values(spec: OpSpec, case: Case, inputs: Inputs, outs, result: CheckResult, tag: str,
                  slack: float = 1.0) -> None:
    """Every output against the reference of `inputs`; `slack` widens each tolerance by that factor (the result-
    reuse guard's check of a peer the bench admitted as a near miss: the same allowance that let it be timed)."""
    dtypes = _expected_dtypes(spec, inputs)
    if len(outs) != len(spec.outputs):
        result.reasons.append(f"{tag}: returned {len(outs)} outputs, expected {len(spec.outputs)}")
        return
    for name, out in zip(spec.outputs, outs):
        if not isinstance(out, torch.Tensor):
            result.reasons.append(f"{tag}: output {name} is {type(out).__name__}, not a tensor")
            return
    errors: list[OutputError | None] = [None] * len(outs)
    # Reference and comparison chunk by chunk of rows: a case of 2^31 elements never holds its float64 whole.
    chunks = _row_chunks(spec, inputs)
    for sl in chunks:
        refs = spec.reference(spec.batch_subset(inputs, sl) if len(chunks) > 1 else inputs)
        for i, (name, out, ref, dt) in enumerate(zip(spec.outputs, outs, refs, dtypes)):
            tol = spec.tolerance_for(case, name, dt)
            if slack != 1.0:
                tol = Tolerance(tol.atol * slack, tol.rtol * slack)
            if len(chunks) > 1 and out.shape[1:] != ref.shape[1:]:
                part = compare(name, out, ref, dt, tol)  # a shape mismatch, reported as such
            else:
                part = compare(name, out[sl] if len(chunks) > 1 else out, ref, dt, tol)
            errors[i] = _merge(errors[i], part)
    for name, out, e, dt in zip(spec.outputs, outs, errors, dtypes):
        if tag == "run":
            result.outputs.append(e)
        if e.shape_ok and e.dtype_ok and not e.nan_mismatch:
            result.worst_value_ratio = max(result.worst_value_ratio, float(e.worst_ratio))
        if not e.shape_ok:
            result.reasons.append(f"{tag}: {name} has shape {tuple(out.shape)}, expected the input's")
        elif not e.dtype_ok:
            result.reasons.append(f"{tag}: {name} has dtype {out.dtype}, expected {dt}")
        elif e.nan_mismatch:
            result.reasons.append(f"{tag}: {name} has {e.nan_mismatch} elements whose NaN/inf differ from the ref")
        elif e.worst_ratio > 1.0:
            result.reasons.append(
                f"{tag}: {name} max error {e.max_abs_err:.3g} exceeds atol {e.atol:g} + rtol {e.rtol:g}*|ref|"
            )


def _raised(e: BaseException) -> str:
    """'Type: first line of the message (file:line)' of an exception."""
    last = traceback.extract_tb(e.__traceback__)[-1]
    return (f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
            f"({last.filename.rsplit('/', 1)[-1]}:{last.lineno})")


def check_case(spec: OpSpec, impl: Impl, case: Case, device: torch.device | str, seed: int = 0) -> CheckResult:
    """Every check above for one implementation on one case."""
    import time

    device = torch.device(device)
    result = CheckResult(spec.name, impl.name, list(case.shape), dtype_name(case.dtype), case.variant, False,
                         source=impl.source)
    if not impl.available:
        result.reasons.append(f"unavailable: {impl.reason}")
        return result
    t0 = time.perf_counter()
    try:
        _check_case(spec, impl, case, device, seed, result)
    except torch.cuda.OutOfMemoryError as e:
        result.reasons.append(f"out of memory: {str(e).splitlines()[0]}")
    except ImplementationError as wrapped:  # a wrong implementation is a result, not a crash of the harness
        result.reasons.append(f"raised {_raised(wrapped.error)}")
    except Exception as e:  # the contract's inputs/reference or the harness itself: never blamed on the impl
        result.reasons.append(f"harness error, not the implementation's: {_raised(e)}")
        result.harness_error = True
    result.passed = not result.reasons
    result.seconds = time.perf_counter() - t0
    if device.type == "cuda":
        if not result.passed:  # a raised exception's frames held the case's tensors: collect their cycles
            gc.collect()
        torch.cuda.empty_cache()
    return result


def _tensors(outs: object, n: int) -> bool:
    return isinstance(outs, tuple) and len(outs) == n and all(isinstance(o, torch.Tensor) for o in outs)


def _check_case(spec: OpSpec, impl: Impl, case: Case, device, seed: int, result: CheckResult) -> None:
    inputs = spec.make_inputs(case, device, seed)
    pristine = _clone_inputs(inputs)
    out_bytes = sum(v.numel() * v.element_size() for k, v in inputs.items() if k in spec.batch_inputs)
    _poison_allocator(device, out_bytes)
    outs = _run(spec, impl, inputs)
    # The reference comes from the pristine copy: an implementation that rewrites its inputs so that the
    # reference agrees with a wrong output is caught (and named below).
    _check_values(spec, case, pristine, outs, result, "run")
    if not _tensors(outs, len(spec.outputs)):  # (already a reason) nothing further can be compared
        return

    for name, value in inputs.items():
        if isinstance(value, torch.Tensor) and name not in impl.mutates:
            if not bitwise_equal(value, pristine[name]):
                result.reasons.append(f"input {name} was modified")
    for out_name, out in zip(spec.outputs, outs):
        for name, value in inputs.items():
            if (isinstance(value, torch.Tensor) and name not in impl.mutates and value.numel() and out.numel()
                    and out.untyped_storage().data_ptr() == value.untyped_storage().data_ptr()):
                result.reasons.append(f"output {out_name} aliases input {name} (which it does not declare it writes)")

    rows = spec.rows(case.shape)
    if rows == 0:
        return
    # Own copies of the first outputs: an implementation that returns one reused buffer must not be compared
    # with itself.
    outs = tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in outs)
    _poison_allocator(device, out_bytes)
    again = _run(spec, impl, pristine if impl.mutates else inputs)
    if len(again) != len(outs) or any(not same_output(a, b) for a, b in zip(outs, again)):
        result.reasons.append(f"{NOT_DETERMINISTIC}: two calls on the same inputs differ bitwise")
        # A second answer that differs is held to the reference too: otherwise a racing or half-finished call
        # would pass as mere nondeterminism.
        _check_values(spec, case, pristine, again, result, "second run")

    if rows > 1:
        varies = False
        for sl in (slice(0, 1), slice(rows // 2, min(rows, rows // 2 + 3)), slice(rows - 1, rows)):
            subset = spec.batch_subset(pristine, sl)  # (a contract's own failure here stays a harness error)
            try:
                sub = _run(spec, impl, subset)
            except ImplementationError as e:  # only what the implementation raised (not OOM, not the harness)
                if result.source == "ours":  # ours must take every batch size
                    raise
                # A peer that refuses a smaller batch (cuBLASLt's FP8 path at one row, say) keeps its result on
                # the full batch; that invariance was not checked is said (CheckResult.notes: the JSON, the
                # check table and the bench's measurement), not counted against it.
                cause = e.error
                text = str(cause).splitlines()[0][:160] if str(cause) else ""
                result.notes.append(f"batch invariance not checked: rows {sl.start}:{sl.stop} alone raised "
                                    f"{type(cause).__name__}: {text}")
                break
            if len(sub) != len(outs) or any(not same_output(s, o[sl]) for s, o in zip(sub, outs)):
                if not varies:  # said once; every subset that differs is still held to the reference (below)
                    result.reasons.append(f"{NOT_BATCH_INVARIANT}: rows {sl.start}:{sl.stop} alone differ bitwise")
                varies = True
                # No break: a batch size that differs in its bits but is right must not hide a later one that
                # is wrong (garbage for 3 rows behind another summation order for 1).
                _check_values(spec, case, subset, sub, result, f"rows {sl.start}:{sl.stop} alone")

    # Fresh data: an implementation that caches results or only works on the first inputs fails here.
    # (Drop the first set first: a case of more than 2^31 elements must fit twice, not four times.)
    del inputs, pristine, outs, again
    fresh = spec.make_inputs(case, device, seed + 7919)
    fresh_pristine = _clone_inputs(fresh)
    _poison_allocator(device, out_bytes)
    _check_values(spec, case, fresh_pristine, _run(spec, impl, fresh), result, "fresh inputs")


@dataclass
class CheckPlan:
    """What `check` will run: the spec, the implementations, the dtypes and the cases (None: the edge cases)."""

    spec: OpSpec
    impls: list[Impl]
    dtypes: list[torch.dtype]
    cases: list[Case] | None
    device: str


def plan_check(
    op: str | OpSpec,
    impls: Iterable[str] | str | None = None,
    dtypes: Iterable[torch.dtype | str] | torch.dtype | str | None = None,
    device: torch.device | str | None = None,
    cases: Iterable[Case] | None = None,
) -> CheckPlan:
    """Resolve and validate a check before any work: ValueError (one line) for anything the contract refuses."""
    from ridgeline.core import registry
    from ridgeline.core.spec import as_dtype, as_list

    spec = registry.get_spec(op)
    device = str(device) if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
    impl_list = [registry.resolve(spec, n) for n in as_list(impls, "impls")] or [
        i for i in registry.implementations(spec) if i.source == "ours"
    ]
    if not impl_list:
        raise ValueError(f"impl: {spec.name} has no implementation of ridgeline's; name yours (--impl FILE.py:fn, "
                         "or impls=[...])")
    dtype_list = [as_dtype(d) for d in as_list(dtypes, "dtypes")] or list(spec.dtypes)
    spec.check_dtypes(dtype_list)
    given = list(cases) if cases is not None else None  # once: a generator would be spent by the first dtype
    if given is not None:
        if not given:
            raise ValueError("shapes: no shapes given")
        spec.check_dtypes([c.dtype for c in given])
        for c in given:
            spec.check_shape(tuple(c.shape))
        if not any(c.dtype in dtype_list for c in given):
            raise ValueError(f"dtypes: none of the given cases has one of {', '.join(map(dtype_name, dtype_list))}")
    elif not any(spec.edge_cases(d, device) for d in dtype_list):
        raise ValueError(f"shapes: {spec.name} has no edge cases (no 'edge' shape set, no edge_cases()); "
                         "pass --shapes (or cases=[...])")
    return CheckPlan(spec, impl_list, dtype_list, given, device)


def check(
    op: str | OpSpec,
    impls: Iterable[str] | str | None = None,
    dtypes: Iterable[torch.dtype | str] | torch.dtype | str | None = None,
    device: torch.device | str | None = None,
    cases: Iterable[Case] | None = None,
    seed: int = 0,
    on_result=None,
) -> list[CheckResult]:
    """Check implementations of `op` on its edge cases (or the given cases); returns one result per pair."""
    plan = plan_check(op, impls, dtypes, device, cases)
    results = []
    for dtype in plan.dtypes:
        case_list = plan.cases if plan.cases is not None else plan.spec.edge_cases(dtype, plan.device)
        for case in case_list:
            if case.dtype != dtype:
                continue
            for impl in plan.impls:
                r = check_case(plan.spec, impl, case, plan.device, seed)
                results.append(r)
                if on_result is not None:
                    on_result(r)
    return results
