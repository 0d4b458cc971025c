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
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

from privreg.accountant.base import Accountant, finite_pair
from privreg.accountant.basic import PAIR_HANDLERS
from privreg.core import validation as v

__all__ = ["DRVAccountant", "KOVAccountant", "drv_epsilon", "rr_composition_delta", "KOV_EXACT_MAX_COUNT"]

#: Above this many identical releases the exact KOV profile (one binomial term per
#: release) gives way to KOV Theorem 3.5, whose cost does not depend on the count.
KOV_EXACT_MAX_COUNT = 10_000


def _norm(eps: NDArray[np.float64], counts: NDArray[np.float64]) -> float:
    """sqrt(sum counts_i eps_i^2), scaled so that eps_i^2 neither underflows (eps_i below
    1e-162 would give 0: no privacy loss) nor overflows."""
    top = float(np.max(eps, initial=0.0))
    if top == 0 or not math.isfinite(top):
        return top
    return top * math.sqrt(float(np.sum(counts * (eps / top) ** 2)))


def _drv_drift(eps: NDArray[np.float64], counts: NDArray[np.float64]) -> float:
    """sum counts_i eps_i (e^eps_i - 1): inf (no bound) once e^eps_i overflows."""
    with np.errstate(over="ignore"):
        return float(np.sum(counts * eps * np.expm1(eps)))


def drv_epsilon(eps: NDArray[np.float64], counts: NDArray[np.float64], delta_prime: float) -> float:
    """DRV's eps' at slack delta' for eps_i repeated counts_i times."""
    drift = _drv_drift(eps, counts)
    return math.sqrt(2 * math.log(1 / delta_prime)) * _norm(eps, counts) + drift


def _bisect_safe(ok: Callable[[float], bool], lo: float, hi: float) -> float:
    """The upper end of a bisection for the smallest x in [lo, hi] with ok(x), given
    ok(hi) (relative width 1e-13, at most 1100 halvings)."""
    for _ in range(1100):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or hi - lo <= 1e-13 * hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


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

    def _arrays(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
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
        drift = _drv_drift(eps, cnt)
        norm = _norm(eps, cnt)
        if epsilon > drift and norm > 0:
            z = (epsilon - drift) / norm
            best = min(best, basic_delta + math.exp(-z * z / 2))
        return min(1.0, best)


class KOVAccountant(_PairAccountant):
    """Optimal composition (Kairouz-Oh-Viswanath 2015): exact for k copies of one
    (eps, delta) mechanism, KOV Theorem 3.5 for mixed parameters."""

    name = "optimal"

    def _homogeneous(self) -> tuple[float, float, int] | None:
        if len(self._pairs) != 1:
            return None
        (((eps, dlt), k),) = self._pairs.items()
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
        return self._theorem_3_5_delta(epsilon)

    def _theorem_3_5(self) -> tuple[float, float, float, float, float]:
        """``(basic eps, basic delta, log prod (1 - delta_i), sqrt(sum eps_i^2), drift)`` of KOV
        Theorem 3.5, with drift = sum eps_i (e^eps_i - 1) / (e^eps_i + 1) = sum eps_i tanh(eps_i / 2)
        (no inf / inf for large eps_i). Costs O(distinct pairs), whatever the counts."""
        basic_eps, basic_delta = self._basic()
        eps, dlt, cnt = self._arrays()
        log_survive = float(np.sum(cnt * np.log1p(-dlt)))
        drift = float(np.sum(cnt * eps * np.tanh(eps / 2)))
        return basic_eps, basic_delta, log_survive, _norm(eps, cnt), drift

    def _theorem_3_5_delta(self, epsilon: float) -> float:
        """The inverse of the Theorem 3.5 epsilon in closed form: the smallest slack
        delta_tilde whose bound is <= ``epsilon``, then 1 - (1 - delta_tilde) prod (1 - delta_i)."""
        basic_eps, basic_delta, log_survive, norm, drift = self._theorem_3_5()
        best = basic_delta if epsilon >= basic_eps else 1.0
        if not (epsilon > drift and 0 < norm < math.inf):
            return best
        # b2 <= epsilon iff log(1/slack) <= x; b1 <= epsilon iff log(e + norm/slack) <= x
        z = (epsilon - drift) / norm
        x = min(z * z / 2, 1e300)
        log_slack = -x
        if x > 1:
            log_slack = min(log_slack, math.log(norm) - x - math.log(-math.expm1(1 - x)))
        # a larger slack is always allowed: absorb rounding in x; floor 1e-300 as before
        log_slack = max(log_slack + 1e-13 * (1 + x), math.log(1e-300))
        if log_slack >= 0:
            return best
        slack = math.exp(log_slack)
        return min(best, -math.expm1(math.log1p(-slack) + log_survive))

    def _epsilon(self, delta: float) -> float:
        if not self._pairs:
            return 0.0
        hom = self._homogeneous()
        if hom is not None:
            eps, _, k = hom
            if self._delta(0.0) <= delta:
                return 0.0
            if self._delta(k * eps) > delta:
                return math.inf
            top = k * eps
            root: float  # brentq is untyped (scipy ships no stubs)
            try:
                root = optimize.brentq(
                    lambda e: self._delta(e) - delta, 0.0, top, xtol=max(1e-13 * min(top, 1.0), 1e-300), rtol=1e-13
                )
            except RuntimeError:  # no convergence (eps near the float floor): bisect
                root = _bisect_safe(lambda e: self._delta(e) <= delta, 0.0, top)
            step = max(root * 1e-13, 1e-300)
            while self._delta(root) > delta:  # land on the safe side of the root
                root = min(root + step, top)
                step *= 2
            return root
        basic_eps, basic_delta, log_survive, norm, drift = self._theorem_3_5()
        slack = -math.expm1(math.log1p(-delta) - log_survive)  # delta_tilde of KOV Theorem 3.5
        best = basic_eps if delta >= basic_delta else math.inf
        if slack <= 0 or not norm < math.inf:
            return best
        b1 = drift + math.sqrt(2 * math.log(math.e + norm / slack)) * norm
        b2 = drift + math.sqrt(2 * math.log(1 / slack)) * norm
        return min(best, b1, b2)
