"""The power of an empirical audit: the smallest overrun it detects with 90% probability.

An audit (:mod:`privreg.audit.empirical`) with ``samples`` outputs per neighbour tests
one event ``E`` on ``m = samples - samples // 2`` estimation outputs per side and flags a
violation when ``log((CP_lower(K_hi) - delta) / CP_upper(K_lo)) > epsilon_claimed``, the
Clopper-Pearson (1934) bounds each at level ``alpha / 2``. For a mechanism whose true
epsilon is ``(1 + r) * epsilon_claimed``, the counts are ``K_hi ~ Binomial(m, p_hi)`` and
``K_lo ~ Binomial(m, p_lo)``, independent, so the probability of a flag is

    sum_k P(K_lo = k) * P(K_hi >= K*(k)),   K*(k) = min {j : CP_lower(j) > delta + e^eps CP_upper(k)}

computed exactly here (binomial sums, no simulation). :func:`detectable_overrun` returns
the smallest ``r`` for which that probability reaches ``power`` (0.9), by bisection, for
two reference shapes whose best event is known:

* ``"laplace"`` -- Laplace noise of scale ``Delta / ((1 + r) eps)`` on neighbours ``Delta``
  apart; the event ``output >= Delta`` has ``p_hi = 1/2`` and ``p_lo = e^(-(1 + r) eps) / 2``
  (thresholds further out have the same ratio and smaller probabilities);
* ``"randomized-response"`` -- k-ary randomized response (``k = 4``, the registry's example)
  at ``(1 + r) eps``; the event ``report = first input`` has ``p_hi = e^eps' / (e^eps' + 3)``
  and ``p_lo = 1 / (e^eps' + 3)``.

The figure assumes the audit's selection half picks that best event, which it does with
high probability at these sample sizes (tests/test_audit_power.py measures the real audit's
detection rate at the thorough profile); it is therefore a statement of what the sample
size allows, and a mechanism of another shape may need a larger overrun.
"""

from __future__ import annotations

import functools
import math

import attrs
import numpy as np
from scipy import stats

from privreg.audit.stats import clopper_pearson_lower, clopper_pearson_upper
from privreg.core.errors import PrivregValueError

__all__ = ["POWER", "SHAPES", "Power", "detection_probability", "detectable_overrun", "power_of"]

#: The detection probability the stated overrun is for.
POWER = 0.9
#: The reference shapes, and k of the randomized-response shape.
SHAPES = ("laplace", "randomized-response")
_RR_K = 4
#: Overruns beyond this are reported as inf (the audit cannot see any plausible bug).
_MAX_OVERRUN = 64.0


def _window(m: int, p: float) -> np.ndarray:
    """The counts of Binomial(m, p) within 12 standard deviations of the mean (outside:
    mass below 1e-30)."""
    sd = math.sqrt(m * p * (1 - p)) + 1
    return np.arange(max(0, int(m * p - 12 * sd)), min(m, int(m * p + 12 * sd) + 1) + 1)


def _event(shape: str, epsilon: float) -> tuple[float, float]:
    if shape == "laplace":
        return 0.5, 0.5 * math.exp(-epsilon)
    if shape == "randomized-response":
        e = math.exp(min(epsilon, 700.0))
        return e / (e + _RR_K - 1), 1 / (e + _RR_K - 1)
    raise PrivregValueError(f"shape must be one of {SHAPES}; got {shape!r}")


def detection_probability(
    p_hi: float, p_lo: float, *, samples: int, alpha: float, claimed_epsilon: float, claimed_delta: float = 0.0
) -> float:
    """The exact probability that an audit with ``samples`` outputs per neighbour flags an
    event of probabilities ``p_hi`` and ``p_lo`` (module docstring)."""
    m = samples - samples // 2
    lo_k, hi_k = _window(m, p_lo), _window(m, p_hi)
    target = claimed_delta + math.exp(claimed_epsilon) * clopper_pearson_upper(lo_k, m, alpha / 2)
    lower = clopper_pearson_lower(hi_k, m, alpha / 2)  # increasing in the count
    first = np.searchsorted(lower, target, side="right")  # index in hi_k of the smallest flagging count
    need = np.where(first < hi_k.size, hi_k[np.minimum(first, hi_k.size - 1)], m + 1)
    hit = np.where(need <= m, stats.binom.sf(need - 1, m, p_hi), 0.0)
    return float(np.sum(stats.binom.pmf(lo_k, m, p_lo) * hit))


def detectable_overrun(
    samples: int,
    *,
    alpha: float,
    claimed_epsilon: float,
    claimed_delta: float = 0.0,
    shape: str = "laplace",
    power: float = POWER,
) -> float:
    """The smallest relative overrun ``r`` (0.25: a true epsilon 25% above the claim) that
    an audit with ``samples`` outputs per neighbour flags with probability at least
    ``power``, for a mechanism of ``shape`` (module docstring); ``inf`` when even a
    64-fold overrun is not. Exact binomial computation, monotone in ``r``, bisected to a
    relative 1e-3."""
    if not math.isfinite(claimed_epsilon) or claimed_epsilon <= 0:
        return math.inf

    def flags(r: float) -> bool:
        p_hi, p_lo = _event(shape, (1 + r) * claimed_epsilon)
        return (
            detection_probability(
                p_hi,
                p_lo,
                samples=samples,
                alpha=alpha,
                claimed_epsilon=claimed_epsilon,
                claimed_delta=claimed_delta,
            )
            >= power
        )

    if not flags(_MAX_OVERRUN):
        return math.inf
    lo, hi = 0.0, _MAX_OVERRUN
    while hi - lo > 1e-3 * max(hi, 1e-3):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if flags(mid) else (mid, hi)
    return hi


@attrs.frozen(kw_only=True)
class Power:
    """What an audit of ``samples`` outputs per neighbour at ``alpha`` can see: the
    smallest relative overrun of the claim it flags with probability :data:`POWER`, for a
    Laplace-shaped and a randomized-response-shaped mechanism (:func:`detectable_overrun`)."""

    samples: int
    alpha: float
    claimed_epsilon: float
    laplace: float
    randomized_response: float

    def describe(self) -> str:
        def pct(r: float) -> str:
            return "none below 64x" if not math.isfinite(r) else f"{100 * r:.0f}%"

        return (
            f"detects with {POWER:.0%} probability an overrun of {pct(self.laplace)} (Laplace-shaped) or "
            f"{pct(self.randomized_response)} (randomized-response-shaped) at {self.samples} samples"
        )


@functools.lru_cache(maxsize=64)
def power_of(samples: int, *, alpha: float, claimed_epsilon: float, claimed_delta: float = 0.0) -> Power:
    """:class:`Power` of an audit of ``samples`` outputs per neighbour."""
    kw = {"alpha": alpha, "claimed_epsilon": claimed_epsilon, "claimed_delta": claimed_delta}
    return Power(
        samples=samples,
        alpha=alpha,
        claimed_epsilon=claimed_epsilon,
        laplace=detectable_overrun(samples, shape="laplace", **kw),  # type: ignore[arg-type]
        randomized_response=detectable_overrun(samples, shape="randomized-response", **kw),  # type: ignore[arg-type]
    )
