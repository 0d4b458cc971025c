"""Privacy curves in closed form: the Gaussian mechanism and Gaussian DP.

``gaussian_delta(eps, mu)`` is the exact delta of a Gaussian mechanism whose sensitivity
to noise ratio is ``mu`` (Balle-Wang 2018, Theorem 8; equivalently mu-GDP,
Dong-Roth-Su 2022, Corollary 2.13):
``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.
"""

from __future__ import annotations

import math

from scipy import optimize, special

from privreg.core import validation as v

__all__ = ["gaussian_delta", "gaussian_epsilon", "amplify_by_sampling"]


#: Relative rounding error allowed for each log-CDF term of gaussian_delta (about five
#: times the error of scipy's log_ndtr plus that of its argument, -eps/mu +- mu/2).
_LOG_NDTR_ERROR = 1e-14


def _log_ndtr(x: float) -> float:
    return float(special.log_ndtr(x))


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact delta at ``epsilon`` of a Gaussian mechanism with ratio ``mu`` =
    sensitivity / sigma (or of mu-GDP). Computed in log space, stable for large eps."""
    epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
    mu = v.check_sensitivity("mu", mu, allow_zero=True)
    if mu == 0:
        return 0.0
    a = _log_ndtr(-epsilon / mu + mu / 2)
    b = epsilon + _log_ndtr(-epsilon / mu - mu / 2)
    # delta = e^a (1 - e^(b - a)). For tiny mu, a - b is a small difference of terms of
    # size |a| + |b| (e.g. mu = 2e-12, eps = 7e-11: a - b is mostly rounding, and gave
    # delta 0 where it is 4.5e-289), so it is widened by a bound on its rounding error:
    # the result is never below the exact delta.
    gap = a - b + _LOG_NDTR_ERROR * (abs(a) + abs(b))
    if gap <= 0:
        return 0.0
    return max(0.0, math.exp(a) * -math.expm1(-gap))


def gaussian_epsilon(delta: float, mu: float) -> float:
    """Smallest epsilon >= 0 with gaussian_delta(epsilon, mu) <= delta (bisection-safe:
    the returned epsilon never undershoots by more than 1e-12 relative)."""
    delta = v.check_delta("delta", delta)
    mu = v.check_sensitivity("mu", mu, allow_zero=True)
    if mu == 0 or gaussian_delta(0.0, mu) <= delta:
        return 0.0
    if delta == 0:
        return math.inf
    hi = 1.0
    while gaussian_delta(hi, mu) > delta:
        hi *= 2
        if hi > 1e6:
            return math.inf
    root: float = optimize.brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, hi, xtol=1e-14, rtol=1e-13)
    # brentq may land a hair below the true root: step up until the bound holds, with
    # steps that double (its absolute xtol is coarse next to a root of 1e-11 at tiny mu,
    # and steps of a relative 1e-13 would then take ~1e10 iterations)
    factor = 1e-13
    while gaussian_delta(root, mu) > delta:
        root = math.nextafter(root, math.inf) if root > 0 else 1e-300
        root = min(root * (1 + factor), hi)
        factor *= 2
    return root


def amplify_by_sampling(epsilon: float, delta: float, q: float) -> tuple[float, float]:
    """(eps, delta)-DP run on a q-subsample: ``(log(1 + q (e^eps - 1)), q delta)``.

    Holds for Poisson sampling under add/remove neighbours and for sampling without
    replacement (q = m/n) under substitution neighbours (Balle-Barthe-Gaboardi 2018,
    Theorems 8 and 10). Stable for any epsilon: no overflow past e^709."""
    if q == 0:
        return 0.0, 0.0
    if epsilon <= 1.0:
        return math.log1p(q * math.expm1(epsilon)), q * delta
    # log(1 + q (e^eps - 1)) = eps + log(q + (1 - q) e^-eps)
    return epsilon + math.log(q + (1 - q) * math.exp(-epsilon)), q * delta
