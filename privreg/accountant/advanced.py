"""Advanced composition of (eps, delta)-DP mechanisms.

* :class:`DRVAccountant` -- Dwork-Rothblum-Vadhan 2010, Theorem III.3, in its heterogeneous
  form: k mechanisms (eps_i, delta_i) compose to (eps', delta' + sum delta_i) with
  ``eps' = sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1)``.
* :class:`KOVAccountant` -- the optimal composition of Kairouz-Oh-Viswanath 2015
  (Theorem 3.3): for k copies of one (eps, delta) mechanism the exact privacy profile is
  ``delta(eps_g) = 1 - (1-delta)^k (1 - delta_RR(eps_g))`` with delta_RR the profile of
  k-fold randomized response. For mixed parameters it uses KOV Theorem 3.5.

Both never report more than basic composition.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from scipy import optimize, stats

from privreg.accountant.base import Accountant, finite_pair
from privreg.accountant.basic import PAIR_HANDLERS
from privreg.core import validation as v

__all__ = ["DRVAccountant", "KOVAccountant", "drv_epsilon", "rr_composition_delta", "KOV_EXACT_MAX_COUNT"]

#: Above this many identical releases the exact KOV profile (one binomial term per
#: release) gives way to KOV Theorem 3.5, whose cost does not depend on the count.
KOV_EXACT_MAX_COUNT = 10_000


def drv_epsilon(eps: np.ndarray, counts: np.ndarray, delta_prime: float) -> float:
    """DRV's eps' at slack delta' for eps_i repeated counts_i times."""
    s2 = float(np.sum(counts * eps**2))
    drift = float(np.sum(counts * eps * np.expm1(eps)))
    return math.sqrt(2 * math.log(1 / delta_prime) * s2) + drift


def rr_composition_delta(eps: float, k: int, eps_g: float) -> float:
    """Exact delta at eps_g of k-fold composition of eps-randomized response:
    ``E[(1 - e^(eps_g - L))_+]`` with L = eps (2X - k), X ~ Binomial(k, e^eps / (1 + e^eps))."""
    if eps == 0:
        return 0.0
    p = 1 / (1 + math.exp(-eps))
    x = np.arange(k + 1)
    loss = eps * (2 * x - k)
    keep = loss > eps_g
    if not keep.any():
        return 0.0
    pmf = stats.binom.pmf(x[keep], k, p)
    return float(np.sum(pmf * -np.expm1(eps_g - loss[keep])))


class _PairAccountant(Accountant):
    """Collects the (eps, delta) pair of every event, with multiplicities (memory grows
    with the number of distinct pairs, never with the number of releases)."""

    handlers = PAIR_HANDLERS

    def __init__(self, *, event_delta: float | None = None, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.event_delta = None if event_delta is None else v.check_delta("event_delta", event_delta, allow_zero=False)
        self._pairs: Counter[tuple[float, float]] = Counter()

    def _valid(self, cost: object) -> bool:
        return finite_pair(cost)

    def _add(self, cost: tuple[float, float], count: int) -> None:
        self._pairs[(float(cost[0]), float(cost[1]))] += count

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        items = sorted(self._pairs.items())
        eps = np.array([p[0] for p, _ in items], dtype=np.float64)
        dlt = np.array([p[1] for p, _ in items], dtype=np.float64)
        cnt = np.array([c for _, c in items], dtype=np.float64)
        return eps, dlt, cnt

    def _basic(self) -> tuple[float, float]:
        eps, dlt, cnt = self._arrays()
        return float(np.sum(cnt * eps)), min(1.0, float(np.sum(cnt * dlt)))


class DRVAccountant(_PairAccountant):
    """Advanced composition (Dwork-Rothblum-Vadhan 2010), never worse than basic."""

    name = "advanced"

    def _epsilon(self, delta: float) -> float:
        basic_eps, basic_delta = self._basic()
        best = basic_eps if delta >= basic_delta else math.inf
        slack = delta - basic_delta
        if slack > 0 and self._pairs:
            eps, _, cnt = self._arrays()
            best = min(best, drv_epsilon(eps, cnt, slack))
        return best

    def _delta(self, epsilon: float) -> float:
        basic_eps, basic_delta = self._basic()
        if not self._pairs:
            return 0.0
        best = basic_delta if epsilon >= basic_eps else 1.0
        eps, _, cnt = self._arrays()
        drift = float(np.sum(cnt * eps * np.expm1(eps)))
        s2 = float(np.sum(cnt * eps**2))
        if epsilon > drift and s2 > 0:
            best = min(best, basic_delta + math.exp(-((epsilon - drift) ** 2) / (2 * s2)))
        return min(1.0, best)


class KOVAccountant(_PairAccountant):
    """Optimal composition (Kairouz-Oh-Viswanath 2015): exact for k copies of one
    (eps, delta) mechanism, KOV Theorem 3.5 for mixed parameters."""

    name = "optimal"

    def _homogeneous(self) -> tuple[float, float, int] | None:
        if len(self._pairs) != 1:
            return None
        ((eps, dlt), k), = self._pairs.items()
        return (eps, dlt, k) if k <= KOV_EXACT_MAX_COUNT else None

    def _delta(self, epsilon: float) -> float:
        if not self._pairs:
            return 0.0
        hom = self._homogeneous()
        if hom is not None:
            eps, dlt, k = hom
            # 1 - (1-d)^k (1 - d_RR), written without cancellation for tiny deltas
            log_survive = k * math.log1p(-dlt)
            return min(1.0, -math.expm1(log_survive) + math.exp(log_survive) * rr_composition_delta(eps, k, epsilon))
        # mixed: invert epsilon(delta) numerically (it is monotone)
        if self._epsilon(1 - 1e-15) > epsilon:
            return 1.0
        if self._epsilon(1e-300) <= epsilon:
            return 1e-300
        return float(optimize.brentq(lambda d: self._epsilon(d) - epsilon, 1e-300, 1 - 1e-15, xtol=1e-300))

    def _epsilon(self, delta: float) -> float:
        if not self._pairs:
            return 0.0
        basic_eps, basic_delta = self._basic()
        hom = self._homogeneous()
        if hom is not None:
            eps, dlt, k = hom
            if self._delta(0.0) <= delta:
                return 0.0
            if self._delta(k * eps) > delta:
                return math.inf
            root = optimize.brentq(lambda e: self._delta(e) - delta, 0.0, k * eps, xtol=1e-13, rtol=1e-13)
            while self._delta(root) > delta:  # land on the safe side of the root
                root = root * (1 + 1e-13) + 1e-300
            return root
        eps, dlt, cnt = self._arrays()
        log_survive = float(np.sum(cnt * np.log1p(-dlt)))
        slack = -math.expm1(math.log1p(-delta) - log_survive)  # delta_tilde of KOV Theorem 3.5
        best = basic_eps if delta >= basic_delta else math.inf
        if slack <= 0:
            return best
        s2 = float(np.sum(cnt * eps**2))
        drift = float(np.sum(cnt * eps * np.expm1(eps) / (np.exp(eps) + 1)))
        b1 = drift + math.sqrt(2 * s2 * math.log(math.e + math.sqrt(s2) / slack))
        b2 = drift + math.sqrt(2 * s2 * math.log(1 / slack))
        return min(best, b1, b2)
