"""Builders of the output laws (:mod:`privreg.core.laws`) the library's mechanisms and
randomizers declare: two-sided geometric and discrete Gaussian noise around an exact
integer centre, categorical laws of selections and reports.

Each law is the exact law the sampler draws from, computed from the same parameters
(the realised, rounded scales and probabilities, not the nominal ones), on a window of
the integers outside which the mass is below ``exp(-70)`` (noise) -- stated as the
law's ``tail``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from privreg.core.laws import DiscreteLaw, ProductLaw

__all__ = [
    "MAX_WINDOW",
    "categorical_law",
    "discrete_gaussian_law",
    "noise_law",
    "permute_and_flip_pmf",
    "two_sided_geometric_law",
]

#: Largest number of outcomes listed for one coordinate of noise; a larger window (a huge
#: scale) declares no law.
MAX_WINDOW = 4_000_001
#: Mass outside the listed window of noise, at most e^-70.
_TAIL_DIGITS = 70.0


def _int_codes(center: int) -> Callable[[Any], np.ndarray]:
    def encode(outputs: Any) -> np.ndarray:
        return np.asarray([int(o) - center for o in np.asarray(outputs).reshape(-1).tolist()], dtype=np.int64)

    return encode


def two_sided_geometric_law(
    scale: Fraction, center: int, encode: Callable[[Any], np.ndarray] | None = None
) -> DiscreteLaw | None:
    """``center + Z`` with ``P(Z = z) = (1 - a) / (1 + a) a^|z|``, ``a = exp(-1 / scale)``
    (the discrete Laplace law, Ghosh-Roughgarden-Sundararajan 2009). None when the window
    would exceed :data:`MAX_WINDOW` outcomes."""
    s = float(scale)
    width = math.ceil(_TAIL_DIGITS * s) + 1
    if 2 * width + 1 > MAX_WINDOW:
        return None
    z = np.arange(-width, width + 1, dtype=np.int64)
    log_a = -1.0 / s
    log_norm = math.log(-math.expm1(log_a)) - math.log1p(math.exp(log_a))
    log_pmf = log_norm + np.abs(z) * log_a
    tail = 2 * math.exp((width + 1) * log_a) / (1 - math.exp(log_a))
    return DiscreteLaw(
        support=z, log_pmf=log_pmf, offset=int(center), tail=min(tail, 0.5), encode=encode or _int_codes(int(center))
    )


def discrete_gaussian_law(
    sigma2: Fraction, center: int, encode: Callable[[Any], np.ndarray] | None = None
) -> DiscreteLaw | None:
    """``center + Z`` with ``P(Z = z)`` proportional to ``exp(-z^2 / (2 sigma2))`` on the
    integers (Canonne-Kamath-Steinke 2020). The window is ``|z| <= 12 sigma + 1``
    (mass outside below ``exp(-70)``); normalised over the window and the tail's bound."""
    sigma = math.sqrt(float(sigma2))
    width = math.ceil(math.sqrt(2 * _TAIL_DIGITS) * sigma) + 1
    if 2 * width + 1 > MAX_WINDOW:
        return None
    z = np.arange(-width, width + 1, dtype=np.int64)
    log_w = -(z.astype(np.float64) ** 2) / (2 * float(sigma2))
    log_total = float(special.logsumexp(log_w))
    # outside the window: sum_{|z| > w} e^(-z^2 / 2 s2) <= 2 e^(-(w+1)^2 / 2 s2) / (1 - e^(-(w+1) / s2))
    edge = (width + 1) ** 2 / (2 * float(sigma2))
    ratio = -math.expm1(-(width + 1) / float(sigma2))
    tail = 2 * math.exp(-edge - log_total) / ratio
    return DiscreteLaw(
        support=z,
        log_pmf=log_w - log_total,
        offset=int(center),
        tail=min(tail, 0.5),
        encode=encode or _int_codes(int(center)),
    )


def noise_law(
    factors: Sequence[DiscreteLaw | None], encode: Callable[[Any], np.ndarray], scalar: bool
) -> DiscreteLaw | ProductLaw | None:
    """One coordinate's law (``scalar``) or the product of independent coordinates."""
    if any(f is None for f in factors):
        return None
    laws = [f for f in factors if f is not None]
    if scalar:
        return laws[0]
    return ProductLaw(factors=laws, encode=encode)


def categorical_law(
    probabilities: Sequence[float] | np.ndarray, encode: Callable[[Any], np.ndarray] | None = None
) -> DiscreteLaw:
    """Outcome ``i`` (``0 <= i < k``) with probability ``probabilities[i]``."""
    probs = np.asarray(probabilities, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_pmf = np.log(probs / probs.sum())
    keep = probs > 0
    support = np.arange(probs.size, dtype=np.int64)[keep]
    return DiscreteLaw(
        support=support,
        log_pmf=log_pmf[keep],
        encode=encode or (lambda out: np.asarray(out, dtype=np.int64).reshape(-1)),
    )


def exponential_pmf(gammas: Sequence[Fraction]) -> np.ndarray:
    """``P(i)`` proportional to ``exp(-gamma_i)``: the exponential mechanism (and
    report-noisy-max with Gumbel noise)."""
    g = np.array([float(x) for x in gammas], dtype=np.float64)
    w = np.exp(-(g - g.min()))
    return w / w.sum()


def permute_and_flip_pmf(gammas: Sequence[Fraction]) -> np.ndarray:
    """``P(i) = q_i * integral_0^1 prod_{j != i} (1 - q_j t) dt`` with ``q_i = exp(-gamma_i)``:
    candidate ``j`` is visited before ``i`` when its uniform arrival time is earlier
    (McKenna-Sheldon 2020; equal to report-noisy-max with exponential noise, Ding et al.
    2021). The integrand is a polynomial of degree ``k - 1``, integrated exactly by
    Gauss-Legendre quadrature with ``k // 2 + 1`` nodes (positive terms: no cancellation)."""
    q = np.exp(-np.array([float(x) for x in gammas], dtype=np.float64))
    k = q.size
    nodes, weights = np.polynomial.legendre.leggauss(k // 2 + 1)
    t = (nodes + 1) / 2
    w = weights / 2
    factors = 1 - np.outer(t, q)  # (nodes, k), each in [0, 1]
    with np.errstate(divide="ignore"):
        logs = np.log(factors)
    total = logs.sum(axis=1)
    out = np.empty(k)
    for i in range(k):
        others = total - logs[:, i]
        out[i] = q[i] * float(np.sum(w * np.exp(others)))
    return out
