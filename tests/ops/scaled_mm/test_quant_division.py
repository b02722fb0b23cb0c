"""The quantizers' division (kernel.py `_div_by_scale`), in exact rational arithmetic: RN(x * RN(1 / s)) and two
FMA corrections give the correctly rounded fp32 quotient x / s that the contract names, for scales amax / 448 over
the fast path's range; where fp32 underflows the result may differ, but never in its e4m3 rounding."""

from __future__ import annotations

import math
import random
from fractions import Fraction as Q

import numpy as np


def _round(v: Q, mant_bits: int, min_exp: int, top: float | None = None) -> float:
    """v rounded to nearest even with `mant_bits` fraction bits, exponents >= min_exp (subnormals below)."""
    if v == 0:
        return 0.0
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Q(2) ** e > a:
        e -= 1
    while Q(2) ** (e + 1) <= a:
        e += 1
    ulp = Q(2) ** (max(e, min_exp) - mant_bits)
    m = a / ulp
    n, rem = divmod(m.numerator, m.denominator)
    if 2 * rem > m.denominator or (2 * rem == m.denominator and n % 2):
        n += 1
    out = float(n * ulp)
    if top is not None:
        out = min(out, top)
    return math.copysign(out, v)


def rn32(v: Q) -> float:
    return float(np.float32(_round(Q(v), 23, -126)))


def e4m3(v: float) -> float:
    return _round(Q(v), 3, -6, 448.0)


def fast_quotient(x: float, s: float) -> float:
    r = rn32(1 / Q(s))
    q = rn32(Q(x) * Q(r))
    for _ in range(2):
        rem = rn32(Q(x) - Q(q) * Q(s))  # (one FMA: the exact value, rounded once)
        q = rn32(Q(q) + Q(rem) * Q(r))
    return q


def test_reciprocal_division_is_correctly_rounded():
    rng = random.Random(2026)
    worse_in_fp32 = 0
    for i in range(4000):
        amax = rn32(Q(rng.uniform(0.5, 2.0)) * Q(2) ** rng.randint(-80, 100))
        shape = rng.choice((1, 1, 3, 9))
        x = rn32(Q(amax) * Q(rng.uniform(-1.0, 1.0)) ** shape) if i % 10 else math.copysign(amax, rng.random() - .5)
        s = rn32(Q(amax) / 448)
        assert 2.0 ** -100 <= s <= 2.0 ** 127
        exact = rn32(Q(x) / Q(s))
        got = fast_quotient(x, s)
        if got != exact:
            worse_in_fp32 += 1
            assert abs(exact) < 2.0 ** -100 and e4m3(got) == e4m3(exact), (x, s, got, exact)
    assert worse_in_fp32 <= 20  # (only the underflowing remainders of quotients far below e4m3's 2^-9)
