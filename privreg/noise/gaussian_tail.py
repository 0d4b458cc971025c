"""Secure Gaussian-tail coins: the sampler behind Gaussian thresholding of a histogram.

Guarantee: :func:`gaussian_tail_coins` returns independent coins, coin ``i`` True with
probability ``Q((rho - counts[i] / scale) / sigma)`` (``Q = 1 - Phi``) up to a total
variation below ``2^-270`` per coin; :func:`gaussian_tail_binomial` draws
``Binomial(n, Q(rho / sigma))`` to the same precision. All randomness comes from privreg's
CSPRNG integers (:func:`privreg.noise.vector.uniform_below`, ``RandomSource.randbits``),
never from numpy's or Spark's generators, and no noisy floating-point total is ever
formed, so there is no low-order-bit leak (Mironov 2012).

Why coins: DPSU and DPNE release a key iff ``H[u] + N(0, sigma^2) > rho`` and publish
nothing but the set of released keys (Kim-Gopi-Kulkarni-Yekhanin 2021, Algorithms 1, 2 and
6). The released set is therefore a function of independent coins, key ``u`` released with
probability ``Q((rho - H[u]) / sigma)``; this module draws exactly those coins.

How a coin is drawn: a uniform ``U`` on [0, 1) is revealed 62 bits at a time and compared
with ``p = Q(a)``, ``a = (rho - h / scale) / sigma`` (``h`` an exact integer). First against
the float64 value of ``p`` (scipy's ``ndtr``): when ``U``'s interval lies farther than
``1e-6 p + 2^-58`` from it (float error is many orders smaller: ``a`` is formed with two
roundings and ``ndtr`` is accurate to ~1e-15 relative) the coin is decided. Otherwise
(probability about ``1e-6 p + 2^-57``) ``p`` is recomputed with mpmath at 320 bits from the
exact rationals ``rho``, ``h``, ``scale``, ``sigma`` and ``U`` is extended with further
random bits until the comparison is clear by ``2^-280``. The coin is thus a Bernoulli(p)
up to mpmath's rounding at 320 bits: total variation below ``2^-270`` per coin.

The spurious-count Binomial of the scalable variant (Appendix A) is drawn by inversion in
the same 320-bit arithmetic (:func:`gaussian_tail_binomial`).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from numpy.typing import NDArray
from scipy import special

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.noise.vector import uniform_below

__all__ = ["gaussian_tail_coins", "gaussian_tail_probability", "gaussian_tail_binomial", "exact_tail_coin"]

_BITS = 62
_REL = 1e-6
_ABS = 2.0**-58
_PREC = 320
_CLEAR = 280  # a comparison is decided when |U - p| > 2^-_CLEAR at _PREC bits
_MAX_STEPS = 50_000_000  # inversion steps (the mean n q is at most eta |S_{k-1}| in DPNE)


def _exact_a(count: int, scale: int, rho: float, sigma: float) -> mpmath.mpf:
    return (mpmath.mpf(rho) - mpmath.mpf(count) / scale) / mpmath.mpf(sigma)


def gaussian_tail_probability(a: mpmath.mpf) -> mpmath.mpf:
    """``Q(a) = P[N(0,1) > a] = erfc(a / sqrt 2) / 2`` at the current mpmath precision."""
    return mpmath.erfc(a / mpmath.sqrt(2)) / 2


def exact_tail_coin(word: int, count: int, scale: int, rho: float, sigma: float, rng: RandomSource) -> bool:
    """One coin by the exact path of :func:`gaussian_tail_coins`: ``U = word 2^-62 + more
    random bits from rng``, compared with ``Q((rho - count / scale) / sigma)`` at 320+ bits
    (doubled until decided). ``word`` is the coin's first 62 uniform bits."""
    num, bits = word, _BITS
    prec, clear = _PREC, _CLEAR
    while True:
        with mpmath.workprec(prec):
            p = gaussian_tail_probability(_exact_a(count, scale, rho, sigma))
            while bits < prec - 20:  # U known to ~prec bits
                num = (num << 64) | rng.randbits(64)
                bits += 64
            diff = mpmath.mpf(num) / mpmath.mpf(2) ** bits - p
            # U lies in [num 2^-bits, (num + 1) 2^-bits): decided if that interval clears p
            if diff > mpmath.mpf(2) ** -clear:
                return False
            if diff + mpmath.mpf(2) ** -bits < -(mpmath.mpf(2) ** -clear):
                return True
        prec, clear = prec * 2, clear * 2  # probability ~2^-280: refine


def gaussian_tail_coins(counts: np.ndarray, *, scale: int, rho: float, sigma: float, rng: RandomSource) -> np.ndarray:
    """Independent coins: coin ``i`` is True with probability
    ``P[counts[i] / scale + N(0, sigma^2) > rho] = Q((rho - counts[i]/scale) / sigma)``
    (exactly, up to the 320-bit evaluation described in the module docstring).

    ``counts`` are non-negative integer totals; a total at or above 2**53 is clamped to
    ``2**53 - 1`` first (so ``counts / scale`` is exact for a power-of-two ``scale``).
    Clamping is 1-Lipschitz in every coordinate, so the sensitivity is unchanged, and it
    means the coins never fail after a charge, whatever the data. ``rho`` any finite
    float, ``sigma > 0``."""
    counts = np.asarray(counts)
    if counts.ndim != 1 or not np.issubdtype(counts.dtype, np.integer):
        raise PrivregValueError("counts must be a 1-d integer array (exact histogram totals)")
    if counts.size and counts.min() < 0:
        raise PrivregValueError("counts must be non-negative (sums of non-negative weights)")
    counts = np.minimum(counts, 2**53 - 1)
    scale = v.check_count("scale", scale)
    if scale & (scale - 1):
        raise PrivregValueError(f"scale must be a power of two (exact division); got {scale}")
    rho = v.check_real("rho", rho)
    if not math.isfinite(rho):
        raise PrivregValueError(f"rho must be finite; got {rho}")
    sigma = v.check_sensitivity("sigma", sigma)
    n = counts.size
    words = uniform_below(1 << _BITS, n, rng)
    p: NDArray[np.float64] = special.ndtr(-((rho - counts.astype(np.float64) / scale) / sigma))
    tol = _REL * p + _ABS
    lo = words.astype(np.float64) * 2.0**-_BITS
    hi = lo + 2.0**-_BITS
    out: NDArray[np.bool_] = hi < p - tol
    unsure = np.flatnonzero(~out & ~(lo > p + tol))
    for i in unsure.tolist():  # rare: about 1e-6 p + 2^-57 of the coins
        out[i] = exact_tail_coin(int(words[i]), int(counts[i]), scale, rho, sigma, rng)
    return out


def gaussian_tail_binomial(n: int, *, rho: float, sigma: float, rng: RandomSource) -> int:
    """A draw of ``Binomial(n, q)`` with ``q = Q(rho / sigma) = P[N(0, sigma^2) > rho]``:
    how many of ``n`` zero-weight keys would cross the threshold (paper 002, Algorithm 2,
    ``B_k``). Inversion in 320-bit arithmetic with a lazily extended uniform (decisions
    closer than ``2^-250`` are redone at doubled precision); cost O(n q) steps."""
    n = v.check_int("n", n, minimum=0)
    rho = v.check_real("rho", rho)
    sigma = v.check_sensitivity("sigma", sigma)
    if n == 0:
        return 0
    num, bits = 0, 0
    prec, clear = _PREC, 250
    while True:
        with mpmath.workprec(prec):
            q = gaussian_tail_probability(mpmath.mpf(rho) / mpmath.mpf(sigma))
            if q * n > _MAX_STEPS:
                raise PrivregValueError(
                    f"expected spurious count n q = {float(q * n):.3g} is too large to draw by inversion; "
                    f"lower eta or use pruning='both'"
                )
            while bits < prec:
                num = (num << 64) | rng.randbits(64)
                bits += 64
            u = mpmath.mpf(num) / mpmath.mpf(2) ** bits
            eps = mpmath.mpf(2) ** -clear
            pmf = mpmath.exp(n * mpmath.log1p(-q)) if q < 1 else mpmath.mpf(0)
            cdf = pmf
            ratio = q / (1 - q) if q < 1 else mpmath.inf
            b, ambiguous = 0, False
            while b < n:
                if abs(u - cdf) <= eps:
                    ambiguous = True
                    break
                if u < cdf:
                    break
                b += 1
                pmf = pmf * (n - b + 1) / b * ratio
                cdf += pmf
            if not ambiguous:
                return b
        prec, clear = prec * 2, clear * 2
