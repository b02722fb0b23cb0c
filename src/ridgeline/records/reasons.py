"""The check's reason prefixes for a summation-order property rather than a value: written by the harness into
run records, read by the bench (which peers to time with a caveat) and by the reports."""

from __future__ import annotations

from collections.abc import Iterable

NOT_BATCH_INVARIANT = "not batch invariant"
NOT_DETERMINISTIC = "not deterministic"
# Bitwise properties of the summation order, not of the values: every call the check made was value-checked
# too, so a failure that is only these is a kernel that adds in a different order (atomics, split-K, a tile shape
# per batch size), which many production kernels do not promise not to do.
ORDER_VARIANCE = (NOT_BATCH_INVARIANT, NOT_DETERMINISTIC)


def order_lacks(reasons: Iterable[object]) -> list[str]:
    """Which of the order properties the reasons say are missing, in ORDER_VARIANCE's order."""
    rs = [str(r) for r in reasons]
    return [p for p in ORDER_VARIANCE if any(r.startswith(p) for r in rs)]
