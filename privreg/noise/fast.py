"""Vectorised secure samplers: many exact draws per call from CSPRNG bytes.

:func:`discrete_laplace_many` runs Canonne-Kamath-Steinke's Algorithm 2 (NeurIPS 2020)
on numpy int64 arrays (:mod:`privreg.noise.trials`): every decision is an exact
comparison of CSPRNG bits, so the draws follow the discrete Laplace distribution
*exactly* -- for the scale it was given. To keep int64 arithmetic, a scale
``t/s`` whose numerator or denominator exceeds 2**40 is first rounded *up* to a nearby
rational (:func:`fast_scale`): more noise, hence a realised epsilon at most the nominal
one. The increase is below ``max(2**-40, 2**-39 * scale)``: negligible in relative terms
for any scale >= 1 (the mechanisms' grid scales are >= 1024). Floating point only skips
work whose outcome is already certain (a proven filter, :mod:`privreg.noise.trials`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.noise.trials import Plan, draw_many, draw_one, laplace_plan

__all__ = [
    "discrete_laplace_many",
    "discrete_laplace_planned",
    "discrete_laplace_one",
    "laplace_plan_of",
    "fast_scale",
    "MAX_PART",
    "CHUNK",
]

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


def discrete_laplace_many(scale: Fraction, size: int, rng: RandomSource) -> NDArray[np.int64]:
    """``size`` independent integers with P(z) proportional to exp(-|z| / scale'), where
    ``scale' = fast_scale(scale) >= scale``; int64 array (CKS 2020, Algorithm 2, as merged
    trials: :mod:`privreg.noise.trials`, exact in every decision).

    The draws are made in chunks of :data:`CHUNK` values, one after the other, so the
    temporaries stay in cache and the cost per value does not grow with ``size``. Each
    chunk is a run of the same exact algorithm on fresh randomness, so the law of every
    value is unchanged. A seeded source gives the same values as an unchunked run for
    ``size <= CHUNK``; beyond, the stream is consumed chunk by chunk (other values, the
    same law)."""
    size = v.check_int("size", size, minimum=0)
    return discrete_laplace_planned(laplace_plan_of(scale), size, rng)


def discrete_laplace_planned(plan: Plan, size: int, rng: RandomSource) -> NDArray[np.int64]:
    """:func:`discrete_laplace_many` for ``plan = laplace_plan_of(scale)`` (callers cache
    it) and a validated ``size``: the same values from the same stream."""
    out = np.empty(size, dtype=np.int64)
    for start in range(0, size, CHUNK):
        draw_many(plan, out[start : start + CHUNK], rng)
    return out


def laplace_plan_of(scale: Fraction) -> Plan:
    """The sampler plan of ``fast_scale(scale)`` (validated; cached by the engine)."""
    scaled = fast_scale(scale)
    return laplace_plan(scaled.numerator, scaled.denominator)


def discrete_laplace_one(plan: Plan, rng: RandomSource) -> int:
    """``int(discrete_laplace_many(scale, 1, rng)[0])`` for ``plan = laplace_plan_of(scale)``:
    the same value from the same stream, in plain Python (the scalar releases' path)."""
    return draw_one(plan, rng)
