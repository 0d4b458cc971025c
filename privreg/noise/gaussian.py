"""Exact discrete Gaussian samplers (Canonne-Kamath-Steinke 2020, Algorithm 3).

The discrete Gaussian of parameter ``sigma2 = sigma^2`` is the distribution on the integers
with ``P(z) = exp(-z^2 / (2 sigma2)) / sum_y exp(-y^2 / (2 sigma2))``.

Algorithm 3 of C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020: with ``t = floor(sigma) + 1``, draw ``Y`` from the discrete Laplace
of scale ``t`` (``P(y)`` proportional to ``exp(-|y| / t)``) and accept it with probability
``exp(-(|Y| - sigma2 / t)^2 / (2 sigma2))``; otherwise start over. Since
``-|y|/t - (|y| - sigma2/t)^2 / (2 sigma2) = -y^2 / (2 sigma2) - sigma2 / (2 t^2)``, the
accepted value has exactly the discrete Gaussian law. Both samplers below return *exactly*
that law: every decision is an exact comparison of uniform CSPRNG bits with a rational or
with ``exp(-rational)``; where :func:`discrete_gaussian_many` uses floating point it is only
to skip work whose outcome is already certain (see its docstring for the proof).

* :func:`discrete_gaussian` -- one draw, scalar exact arithmetic (about 1e4 draws/s).
* :func:`discrete_gaussian_many` -- the same law on numpy arrays (several million draws/s
  per core for ``sigma`` from 1 to 1e4; see ``benchmarks/noise.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.noise import coins, trials
from privreg.noise.coins import GEOMETRIC, GEOMETRIC_TIE
from privreg.noise.exact import bernoulli_exp_neg, discrete_laplace
from privreg.noise.fast import MAX_PART
from privreg.noise.one_draw import one_sampler
from privreg.noise.trials import Plan, gaussian_plan

__all__ = [
    "discrete_gaussian",
    "discrete_gaussian_many",
    "discrete_gaussian_one",
    "discrete_gaussian_sampler",
    "check_sigma2",
]

#: Below this sigma2 the float filter's range assumptions fail; such (absurdly small) noise
#: is drawn by the scalar exact sampler instead.
_MIN_FAST_SIGMA2 = Fraction(1, 1 << 60)


def check_sigma2(sigma2: Any) -> Fraction:
    """``sigma2`` as a positive exact Fraction (ints, Fractions, finite floats accepted)."""
    if isinstance(sigma2, bool) or not isinstance(sigma2, (int, Fraction, float)):
        raise PrivregTypeError(
            f"sigma2 must be an int, Fraction or float (the variance parameter sigma^2); got {sigma2!r}. "
            f"Pass e.g. Fraction(9, 4)."
        )
    if isinstance(sigma2, float) and not math.isfinite(sigma2):
        raise PrivregValueError(f"sigma2 must be finite; got {sigma2!r}. Pass e.g. Fraction(9, 4).")
    exact = Fraction(sigma2)  # a new name: sigma2 is typed Any as the argument
    if exact <= 0:
        raise PrivregValueError(f"sigma2 must be > 0; got {exact}. Pass e.g. Fraction(9, 4).")
    return exact


def _t_of(sigma2: Fraction) -> int:
    """``floor(sigma) + 1``; exact: ``floor(sqrt(x)) == isqrt(floor(x))`` for ``x >= 0``."""
    return math.isqrt(sigma2.numerator // sigma2.denominator) + 1


def _gamma(abs_y: int, sigma2: Fraction, t: int) -> Fraction:
    """The rejection exponent ``(|y| - sigma2 / t)^2 / (2 sigma2)`` (exact)."""
    return (abs_y - sigma2 / t) ** 2 / (2 * sigma2)


def discrete_gaussian(sigma2: Fraction, rng: RandomSource | None) -> int:
    """One integer with P(z) proportional to ``exp(-z^2 / (2 sigma2))``, exactly
    (CKS 2020, Algorithm 3), for rational ``sigma2 > 0``; ``rng=None`` means the OS CSPRNG."""
    sigma2 = check_sigma2(sigma2)
    rng = resolve_random(rng)
    t = _t_of(sigma2)
    scale = Fraction(t)
    while True:
        y = discrete_laplace(scale, rng)
        if bernoulli_exp_neg(_gamma(abs(y), sigma2, t), rng):
            return y


# --- the vectorised sampler -----------------------------------------------------------------


_geometric_table = coins._geometric_table
_GEOMETRIC, _GEOMETRIC_TIE = GEOMETRIC, GEOMETRIC_TIE


# The engine is shared with the discrete Laplace (privreg.noise.trials); these names keep
# the Gaussian's pieces where its error analysis (below) and its tests refer to them.
_plan = gaussian_plan
_lambda = trials._lambda
_lambda_approx = trials._lambda_approx
_coin_filter = trials.coin_filter


def discrete_gaussian_many(sigma2: Fraction, size: int, rng: RandomSource | None) -> NDArray[np.int64]:
    """``size`` independent integers, each with P(z) proportional to
    ``exp(-z^2 / (2 sigma2))`` exactly; an int64 array (CKS 2020, Algorithm 3, vectorised).

    **Trials.** With ``t = floor(sigma) + 1``, a trial draws ``U`` uniform on ``[0, t)``
    (masked words; ``U >= t`` rejects the trial), ``V`` with ``P(V >= v) = exp(-v)``, a
    sign, and sets ``X = U + t V``; a negative sign with ``X = 0`` rejects the trial;
    otherwise it is accepted with probability ``exp(-lambda)``,
    ``lambda = U/t + (X - sigma2/t)^2 / (2 sigma2)``. This is CKS Algorithm 2 (discrete
    Laplace of scale ``t``: ``U`` kept with probability ``exp(-U/t)``, ``V`` the number of
    ``exp(-1)`` successes) followed by Algorithm 3's coin, with the two coins merged into
    one and every rejection restarting the whole trial. That changes the number of
    trials, not the law: for ``y = +-x``, ``x = u + t v``, a trial is accepted with value
    ``y`` with probability ``(1/t) (1 - e^-1) e^-v (1/2) e^(-u/t - gamma(x))`` =
    ``C exp(-y^2 / (2 sigma2))``, ``C`` free of ``y`` (``v + u/t = x/t`` and
    ``x/t + gamma(x) = x^2 / (2 sigma2) + sigma2 / (2 t^2)``), and ``y = 0`` is reached
    by the positive sign only. Trials are i.i.d. and the output is the first ``size``
    accepted ones in trial order (a round runs about ``size / P(accept)`` trials, so one
    round usually suffices; extra accepted trials are dropped by position, not value).

    **Every decision is exact.** ``V = #{v >= 1 : U_V < exp(-v)}`` for a uniform ``U_V``
    read from a 16-bit word by a table that is exact except on 12 tie words
    (:func:`_geometric_table`); a tie continues the same ``U_V`` in exact arithmetic
    (:class:`privreg.noise.coins.LazyUniform`). The coin is ``U_C < p``, ``p =
    exp(-lambda)``, for ``U_C = (w + rest) / 2**16`` with ``w`` a 16-bit word: it accepts
    if ``(w + 1) / 2**16 <= p~ - b`` and rejects if ``w / 2**16 >= p~ + b``, where ``p~``
    is a float64 value with ``|p~ - p| < 2**-31`` (below) and ``b = 2**-24``; forming
    ``2**16 p~ -+ 2**16 b`` rounds once more, by at most 2**-37 in those units, far inside
    the band. So a decision taken equals ``U_C < p`` for every continuation of ``w``. The rest --
    ``w`` within the band, probability about 2**-16 -- is finished by
    :class:`~privreg.noise.coins.LazyUniform`, which reads further bits of the same
    ``U_C`` and compares them with rigorous rational bounds of ``exp(-lambda)``. Hence a
    trial is accepted with probability exactly ``exp(-lambda)``.

    **The float error bound.** ``p~ = exp_neg_approx(lambda~)`` is within 2**-32 of
    ``exp(-lambda~)`` (proof in :func:`privreg.noise.coins.exp_neg_approx`). ``lambda~``
    comes from the exact doubles ``U``, ``t <= 2**40``, ``X`` (the float path requires
    ``V <= 64``, so ``X < 2**47``; larger ``V``, probability ``e**-64``, decide exactly)
    and the nearest doubles to ``s = sigma2/t`` and ``c = 1/(2 sigma2)``, by five
    correctly rounded operations (``u = 2**-53``; ``sigma2 >= 2**-60`` keeps every
    intermediate a normal double or zero). With ``d = X - s``, ``gamma = d^2 c``:
    ``|d~ - d| <= u |d| + u s (1 + u)``; as ``sigma < t``, ``|d| s c = |d| / (2t) <=
    sqrt(gamma / 2)`` and ``s^2 c = s / (2t) < 1/2``, so ``fl(fl(d~^2) c~)`` is within
    ``5.1 u gamma + 1.5 u sqrt(gamma) + u^2 (3 gamma + 2)`` of ``gamma``; ``fl(U/t)`` is
    within ``u U/t`` of ``U/t`` and the final sum adds ``u lambda``. Hence
    ``|lambda~ - lambda| <= 8 u (lambda + 1)``. For ``lambda <= 64`` this gives
    ``|exp(-lambda~) - exp(-lambda)| <= 16 u (lambda + 1) exp(-lambda) <= 2**-49``; for
    ``lambda > 64`` both are below 2**-90. So ``|p~ - p| < 2**-32 + 2**-49 < 2**-31``.
    ``tests/test_gaussian_fast.py`` checks these bounds against exact arithmetic.

    All randomness comes from ``rng`` (``None`` means the OS CSPRNG): bulk bytes once per
    round, ``randbits`` for the rare exact finishes; a fixed seed gives a fixed output.
    ``sigma2 < 2**-60`` is drawn by the scalar exact sampler; ``sigma >= 2**40`` is
    refused (use :func:`discrete_gaussian`). Values are int64: outputs beyond 2**62
    (probability below ``exp(-2**20)`` for every accepted ``sigma2``) are not representable.
    """
    sigma2 = check_sigma2(sigma2)
    size = v.check_int("size", size, minimum=0)
    rng = resolve_random(rng)
    t = _t_of(sigma2)
    if t > MAX_PART:
        raise PrivregValueError(
            f"sigma2 = {float(sigma2):g} is too large for the vectorised sampler (sigma must be "
            f"below 2**40); use discrete_gaussian one draw at a time"
        )
    if sigma2 < _MIN_FAST_SIGMA2:
        return np.array([discrete_gaussian(sigma2, rng) for _ in range(size)], dtype=np.int64)
    out = np.empty(size, dtype=np.int64)
    trials.draw_many(gaussian_plan(sigma2), out, rng)
    return out


def fast_plan(sigma2: Fraction) -> Plan | None:
    """The vectorised sampler's plan for ``sigma2`` (a positive Fraction), or None where
    it falls back to the scalar exact sampler or refuses (``sigma2 < 2**-60``, ``sigma >= 2**40``)."""
    if sigma2 < _MIN_FAST_SIGMA2 or _t_of(sigma2) > MAX_PART:
        return None
    return gaussian_plan(sigma2)


def discrete_gaussian_one(sigma2: Fraction, rng: RandomSource, plan: Plan | None = None) -> int:
    """``int(discrete_gaussian_many(sigma2, 1, rng)[0])``, the same value from the same
    stream, computed in plain Python (no arrays): the scalar releases' path. ``sigma2``
    must be a positive Fraction (unchecked: callers pass a cached, validated one);
    ``plan``, when given, must be ``fast_plan(sigma2)`` (callers cache it)."""
    if plan is None:
        plan = fast_plan(sigma2)
        if plan is None:
            return int(discrete_gaussian_many(sigma2, 1, rng)[0])  # the edge cases and errors
    return trials.draw_one(plan, rng)


def discrete_gaussian_sampler(sigma2: Fraction, *, exact: bool = False) -> Callable[[RandomSource], int]:
    """A sampler ``f(rng)`` of one discrete Gaussian value of parameter ``sigma2`` (a
    positive Fraction, unchecked), with its per-parameter work done once: the scalar
    releases' noise. ``exact=False``: :func:`discrete_gaussian_one` (the value
    ``discrete_gaussian_many(sigma2, 1, rng)`` draws); ``exact=True``: :func:`discrete_gaussian`."""
    if exact:
        return functools.partial(discrete_gaussian, sigma2)
    plan = fast_plan(sigma2)
    return one_sampler(plan) if plan is not None else functools.partial(discrete_gaussian_one, sigma2)
