"""Exact samplers on rational parameters (Canonne-Kamath-Steinke 2020).

Every probability here is a :class:`fractions.Fraction` and every draw a uniform integer,
so the sampled distributions are exactly the stated ones: no rounding, no floating point.
Reference: C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, Section 5 (Algorithms 1 and 2).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource

__all__ = ["bernoulli", "bernoulli_exp_neg", "bernoulli_exp_neg_ratio", "discrete_laplace", "randbelow"]

_ONE = Fraction(1)
_HALF = Fraction(1, 2)
_RANDBELOW = RandomSource.randbelow


def randbelow(n: int, rng: RandomSource) -> int:
    """``rng.randbelow(n)`` for an int ``n >= 1`` (unchecked: callers pass one they computed):
    the same rejection on the same ``randbits``, without the argument check that is most of
    its cost; a source with its own ``randbelow`` is asked for it."""
    if type(rng).randbelow is not _RANDBELOW:
        return rng.randbelow(n)
    k = (n - 1).bit_length()
    while True:
        r = rng.randbits(k)
        if r < n:
            return r


def _rational(name: str, x: Any) -> Fraction:
    """``x`` as an exact Fraction; floats are refused unless finite (they are rationals)."""
    if isinstance(x, bool) or not isinstance(x, (int, Fraction, float)):
        raise PrivregTypeError(f"{name} must be an int, Fraction or float; got {x!r}")
    if isinstance(x, float) and not math.isfinite(x):
        raise PrivregValueError(f"{name} must be finite; got {x!r}")
    return Fraction(x)


def bernoulli(p: Fraction, rng: RandomSource) -> bool:
    """True with probability exactly ``p`` (0 <= p <= 1)."""
    p = _rational("p", p)
    if not 0 <= p <= 1:
        raise PrivregValueError(f"p must lie in [0, 1]; got {p}")
    return rng.randbelow(p.denominator) < p.numerator


def bernoulli_exp_neg(gamma: Fraction, rng: RandomSource) -> bool:
    """True with probability exactly ``exp(-gamma)`` for rational ``gamma >= 0``
    (CKS 2020, Algorithm 1)."""
    gamma = _rational("gamma", gamma)
    if gamma < 0:
        raise PrivregValueError(f"gamma must be >= 0; got {gamma}")
    return bernoulli_exp_neg_ratio(gamma.numerator, gamma.denominator, rng)


def bernoulli_exp_neg_ratio(a: int, b: int, rng: RandomSource) -> bool:
    """:func:`bernoulli_exp_neg` of ``gamma = a / b`` (``a >= 0``, ``b > 0``, in lowest
    terms) in integers: the same draws, without building Fractions.

    ``exp(-gamma) = exp(-1)^floor(gamma) exp(-frac(gamma))``, a product of independent
    coins; each is CKS Algorithm 1: ``K = 1``; while Bernoulli(gamma / K) succeeds,
    ``K += 1``; true iff ``K`` is odd. Bernoulli(p) for ``p = n / d`` in lowest terms is
    ``randbelow(d) < n``, exactly :func:`bernoulli`'s draw (a Fraction is in lowest terms)."""
    while a > b:  # gamma > 1; a - b and b stay coprime
        if not bernoulli_exp_neg_ratio(1, 1, rng):
            return False
        a -= b
    k = 1
    while True:
        den = b * k
        g = math.gcd(a, den)
        if randbelow(den // g, rng) >= a // g:
            return k % 2 == 1
        k += 1


def discrete_laplace(scale: Fraction, rng: RandomSource) -> int:
    """An integer ``z`` with probability proportional to ``exp(-|z| / scale)``
    (CKS 2020, Algorithm 2), for rational ``scale > 0``."""
    scale = _rational("scale", scale)
    if scale <= 0:
        raise PrivregValueError(f"scale must be > 0; got {scale}")
    t, s = scale.numerator, scale.denominator  # scale = t / s
    while True:
        u = rng.randbelow(t)
        if not bernoulli_exp_neg(Fraction(u, t), rng):
            continue
        v = 0
        while bernoulli_exp_neg(_ONE, rng):
            v += 1
        y = (u + t * v) // s
        negative = bernoulli(_HALF, rng)
        if negative and y == 0:
            continue  # keeps P(0) right: zero would otherwise be counted twice
        return -y if negative else y
