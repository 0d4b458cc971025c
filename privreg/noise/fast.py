"""Vectorised secure samplers: many exact draws per call from CSPRNG bytes.

:func:`discrete_laplace_many` runs Canonne-Kamath-Steinke's Algorithms 1-2 (NeurIPS 2020)
on numpy int64 arrays: every coin is an exact uniform integer from
:func:`privreg.noise.vector.uniform_below`, so the draws follow the discrete Laplace
distribution *exactly* -- for the scale it was given. To keep int64 arithmetic, a scale
``t/s`` whose numerator or denominator exceeds 2**40 is first rounded *up* to a nearby
rational (:func:`fast_scale`): more noise, hence a realised epsilon at most the nominal
one. The increase is below ``max(2**-40, 2**-39 * scale)``: negligible in relative terms
for any scale >= 1 (the mechanisms' grid scales are >= 1024). No floating point touches
a sample.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.noise.vector import uniform_below

__all__ = ["discrete_laplace_many", "fast_scale", "MAX_PART", "CHUNK"]

#: Largest numerator/denominator used by the vectorised sampler.
MAX_PART = 1 << 40
#: Values drawn per pass of :func:`discrete_laplace_many` (its temporaries fit in cache).
CHUNK = 1 << 18


def fast_scale(scale: Fraction) -> Fraction:
    """``scale`` itself if its numerator and denominator are at most 2**40; otherwise the
    smallest rational ``t / 2**j`` >= scale with ``t <= 2**40`` and ``j <= 40`` (never a
    smaller scale; larger by less than ``max(2**-40, 2**-39 * scale)``)."""
    scale = Fraction(scale)
    if scale <= 0:
        raise PrivregValueError(f"scale must be > 0; got {scale}")
    if scale.numerator <= MAX_PART and scale.denominator <= MAX_PART:
        return scale
    j = 40
    while True:  # choose the finest dyadic grid whose numerator still fits
        t = -((-scale.numerator << j) // scale.denominator)  # ceil(scale * 2**j)
        if t <= MAX_PART or j == 0:
            break
        j -= 1
    if t > MAX_PART:
        raise PrivregValueError(
            f"scale {_approx(scale)} exceeds 2**40, the vectorised sampler's limit; use the "
            f"exact path (path='exact' on the mechanisms) for such noise"
        )
    return Fraction(t, 1 << j)


def _approx(x: Fraction) -> str:
    """``x`` as ``%g``, or its power of ten when it is beyond the float range."""
    try:
        return f"{float(x):g}"
    except OverflowError:
        return f"about 1e{len(str(x.numerator // x.denominator)) - 1}"


def _bernoulli_exp_neg_fraction(u: NDArray[np.int64], t: int, rng: RandomSource) -> NDArray[np.bool_]:
    """True with probability exactly exp(-u/t), elementwise, for integers 0 <= u <= t
    (CKS Algorithm 1: count K while Bernoulli(gamma/K) succeeds; return K odd)."""
    result = np.zeros(u.size, dtype=bool)
    active = np.arange(u.size)
    k = 1
    while active.size:
        success = uniform_below(t * k, active.size, rng) < u[active]  # Bernoulli(u / (t k))
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return result


def _geometric_exp_neg_one(size: int, rng: RandomSource) -> NDArray[np.int64]:
    """Number of successes of Bernoulli(exp(-1)) before the first failure, elementwise."""
    count = np.zeros(size, dtype=np.int64)
    active = np.arange(size)
    while active.size:
        ones = np.ones(active.size, dtype=np.int64)
        success = _bernoulli_exp_neg_fraction(ones, 1, rng)
        count[active[success]] += 1
        active = active[success]
    return count


def discrete_laplace_many(scale: Fraction, size: int, rng: RandomSource) -> NDArray[np.int64]:
    """``size`` independent integers with P(z) proportional to exp(-|z| / scale'), where
    ``scale' = fast_scale(scale) >= scale``; int64 array (CKS 2020, Algorithm 2).

    The draws are made in chunks of :data:`CHUNK` values, one after the other, so the
    temporaries stay in cache and the cost per value does not grow with ``size``. Each
    chunk is a run of the same exact algorithm on fresh randomness, so the law of every
    value is unchanged. A seeded source gives the same values as an unchunked run for
    ``size <= CHUNK``; beyond, the stream is consumed chunk by chunk (other values, the
    same law)."""
    size = v.check_int("size", size, minimum=0)
    scaled = fast_scale(scale)
    t, s = scaled.numerator, scaled.denominator
    out = np.empty(size, dtype=np.int64)
    for start in range(0, size, CHUNK):
        _laplace_chunk(out[start : start + CHUNK], t, s, rng)
    return out


def _laplace_chunk(out: NDArray[np.int64], t: int, s: int, rng: RandomSource) -> None:
    """Fill ``out`` with discrete Laplace draws of scale ``t / s`` (CKS Algorithm 2)."""
    pending = np.arange(out.size)
    while pending.size:
        u = uniform_below(t, pending.size, rng)
        keep = _bernoulli_exp_neg_fraction(u, t, rng)
        kept = np.flatnonzero(keep)
        x = u[kept] + t * _geometric_exp_neg_one(kept.size, rng)
        y = x // s
        negative = uniform_below(2, kept.size, rng).astype(bool)
        ok = ~(negative & (y == 0))  # zero would otherwise be counted twice
        out[pending[kept[ok]]] = np.where(negative[ok], -y[ok], y[ok])
        finished = np.zeros(pending.size, dtype=bool)
        finished[kept[ok]] = True
        pending = pending[~finished]
