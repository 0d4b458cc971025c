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
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.noise.coins import LazyUniform, exp_neg_approx, exp_neg_bounds
from privreg.noise.exact import bernoulli_exp_neg, discrete_laplace
from privreg.noise.fast import MAX_PART

__all__ = ["discrete_gaussian", "discrete_gaussian_many", "check_sigma2"]

#: Trials per vectorised round (bounds memory; small enough to stay in cache).
_MAX_TRIALS = 1 << 16
#: Width of the uniform words the fast path compares with exp(-v) and exp(-lambda).
_WORD_BITS = 16
#: Below this sigma2 the float filter's range assumptions fail; such (absurdly small) noise
#: is drawn by the scalar exact sampler instead.
_MIN_FAST_SIGMA2 = Fraction(1, 1 << 60)
#: Half-width of the undecided band around the float threshold, in units of 2**-16: far
#: above the proven float error, 2**16 * 2**-31 = 2**-15 (see discrete_gaussian_many).
_BAND = 2.0**-8
#: Trials with a larger geometric count (probability e**-64) decide their coin exactly.
_MAX_FLOAT_V = 64


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


def _geometric_table() -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """For every 16-bit word ``w``: ``V(w) = #{v >= 1 : b_v > w}`` and whether ``w`` is a
    tie, where ``b_v = floor(2**16 exp(-v))`` (exact, from :func:`exp_neg_bounds`).

    For ``U`` uniform in ``[w, w + 1) / 2**16``: ``w < b_v`` gives ``U < (w+1)/2**16 <=
    exp(-v)``, and ``w > b_v`` gives ``U >= w/2**16 > exp(-v)``; so unless ``w = b_v`` for
    some ``v`` (``w = 0`` is a tie: ``b_v = 0`` for all ``v >= 12``), ``V(w)`` is exactly
    ``#{v >= 1 : U < exp(-v)}``, whose law is ``P(V >= v) = exp(-v)``: the geometric count
    of CKS Algorithm 2's ``exp(-1)`` successes.
    """
    bounds: list[int] = []
    while not bounds or bounds[-1]:
        prec = 64
        while True:  # exp(-k) 2**16 is irrational, so tight enough bounds agree on its floor
            lo, hi = exp_neg_bounds(Fraction(len(bounds) + 1), prec)
            if lo >> (prec - _WORD_BITS) == hi >> (prec - _WORD_BITS):
                break
            prec *= 2
        bounds.append(lo >> (prec - _WORD_BITS))
    words = np.arange(1 << _WORD_BITS)
    b = np.array(bounds)
    count = (b[None, :] > words[:, None]).sum(axis=1)
    tie = np.isin(words, b)
    return count.astype(np.int64), tie


_GEOMETRIC, _GEOMETRIC_TIE = _geometric_table()


@attrs.frozen
class _Plan:
    """Per-sigma2 constants of the fast path (cached: they cost Fraction arithmetic)."""

    sigma2: Fraction
    t: int
    u_bytes: int  # bytes of the word U is masked from (0 when t = 1)
    u_mask: int
    shift: Fraction  # sigma2 / t, exact
    inv2s2: Fraction  # 1 / (2 sigma2), exact
    shift_f: float  # the same, rounded to nearest double
    inv2s2_f: float
    acceptance: float  # estimated P(trial accepted); only sizes batches


@functools.lru_cache(maxsize=64)
def _plan(sigma2: Fraction) -> _Plan:
    t = _t_of(sigma2)
    bits = (t - 1).bit_length()
    u_bytes = 0 if bits == 0 else 2 if bits <= 16 else 4 if bits <= 32 else 8
    shift, inv2s2 = sigma2 / t, 1 / (2 * sigma2)
    s2 = float(sigma2)
    if s2 >= 1:
        mass = math.sqrt(2 * math.pi * s2)  # sum_y exp(-y^2 / 2 s2), to within exp(-2 pi^2 s2)
    else:
        mass = 1 + 2 * sum(math.exp(-y * y / (2 * s2)) for y in range(1, 40))
    acceptance = (t / (1 << bits)) * (1 - math.exp(-1)) / (2 * t) * math.exp(-s2 / (2 * t * t)) * mass
    return _Plan(
        sigma2=sigma2,
        t=t,
        u_bytes=u_bytes,
        u_mask=(1 << bits) - 1,
        shift=shift,
        inv2s2=inv2s2,
        shift_f=float(shift),
        inv2s2_f=float(inv2s2),
        acceptance=acceptance,
    )


def _words(buf: bytes, offset: int, nbytes: int, count: int) -> NDArray[np.unsignedinteger[Any]]:
    dtype = {2: "<u2", 4: "<u4", 8: "<u8"}[nbytes]
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset)


def _geometric_exactly(word: int, count: int, rng: RandomSource) -> int:
    """``#{v >= 1 : U < exp(-v)}`` for the uniform ``U`` whose first 16 bits are the tie
    word ``word``, exactly; ``U < exp(-v)`` is already certain for ``v <= count``."""
    geo = LazyUniform(word, _WORD_BITS, rng)
    while geo.below_exp_neg(Fraction(count + 1)):
        count += 1
    return count


def _lambda(plan: _Plan, u: int, x: int) -> Fraction:
    """The trial's exact exponent ``u/t + (x - sigma2/t)^2 / (2 sigma2)``."""
    return Fraction(u, plan.t) + (x - plan.shift) ** 2 * plan.inv2s2


def _lambda_approx(plan: _Plan, u: NDArray[np.int64], x: NDArray[np.int64]) -> NDArray[np.float64]:
    """float64 ``lambda~`` with ``|lambda~ - lambda| <= 8 * 2**-53 (lambda + 1)`` for
    ``u < t`` and ``0 <= x < 2**47`` (see :func:`discrete_gaussian_many`)."""
    lam = x.astype(np.float64)
    lam -= plan.shift_f
    lam *= lam
    lam *= plan.inv2s2_f
    lam += u / float(plan.t)
    return lam


def _coin_filter(
    plan: _Plan, u: NDArray[np.int64], x: NDArray[np.int64], word: NDArray[np.unsignedinteger[Any]]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """``(accept, decided)``: where ``decided``, ``accept`` equals ``U' < exp(-lambda)`` for
    every uniform ``U'`` in ``[word, word + 1) / 2**16`` (see :func:`discrete_gaussian_many`)."""
    threshold = exp_neg_approx(_lambda_approx(plan, u, x))
    threshold *= float(1 << _WORD_BITS)
    coin = word.astype(np.float64)
    accept = coin + 1 <= threshold - _BAND
    decided = accept | (coin >= threshold + _BAND)
    decided &= x < (_MAX_FLOAT_V + 1) * plan.t  # keeps x exact and within the error analysis
    return accept & decided, decided


def _round(plan: _Plan, trials: int, rng: RandomSource) -> NDArray[np.int64]:
    """``trials`` independent trials; the accepted values, in trial order."""
    n, wb = trials, _WORD_BITS // 8
    buf = rng.random_bytes(n * (plan.u_bytes + 2 * wb) + (n + 7) // 8)
    if plan.u_bytes:
        u = (_words(buf, 0, plan.u_bytes, n) & np.uint64(plan.u_mask)).astype(np.int64)
        valid = u < plan.t  # rejection sampling of the uniform on [0, t)
    else:
        u, valid = np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
    pos = n * plan.u_bytes
    geo_word = _words(buf, pos, wb, n)
    coin_word = _words(buf, pos + n * wb, wb, n)
    sign_bytes = np.frombuffer(buf, dtype=np.uint8, offset=pos + 2 * n * wb)
    negative = np.unpackbits(sign_bytes, count=n).astype(bool)
    count: NDArray[np.int64] = _GEOMETRIC[geo_word]
    for i in np.flatnonzero(_GEOMETRIC_TIE[geo_word] & valid).tolist():  # ~2e-4 per trial
        count[i] = _geometric_exactly(int(geo_word[i]), int(count[i]), rng)
    x = u + plan.t * count
    valid &= ~(negative & (x == 0))  # zero would otherwise be counted twice
    accept, decided = _coin_filter(plan, u, x, coin_word)
    accept &= valid
    for i in np.flatnonzero(valid & ~decided).tolist():  # ~2e-5 per trial
        lam = _lambda(plan, int(u[i]), int(x[i]))
        accept[i] = LazyUniform(int(coin_word[i]), _WORD_BITS, rng).below_exp_neg(lam)
    values: NDArray[np.int64] = np.where(negative, -x, x)
    return values[accept]


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
    plan = _plan(sigma2)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        trials = min(_MAX_TRIALS, int(need / plan.acceptance * 1.03) + 16)
        got = _round(plan, trials, rng)[:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out
