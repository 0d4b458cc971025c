"""Renyi DP accounting (Mironov 2017) on Google's ``dp-accounting``.

Events that ``dp_accounting`` models -- Gaussian, Laplace, zCDP, and Poisson- or
without-replacement-sampled Gaussians -- are translated to its events and composed by its
``RdpAccountant``. What it lacks is written here: the RDP curve of a pure eps-DP
mechanism (PureDP, LocalDP, discrete Laplace, permute-and-flip), which by Blackwell's
theorem is at most
that of binary randomized response with ratio e^eps, and for bounded-range selections
(exponential mechanism, Gumbel report-noisy-max) also at most alpha eps^2 / 8
(Cesar-Rogers 2021). Totals convert to (eps, delta) with ``dp_accounting``'s tight
conversion (Canonne-Kamath-Steinke 2020, Proposition 12).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Iterator

import numpy as np
from dp_accounting import dp_event as dpe
from dp_accounting import privacy_accountant as dpa
from dp_accounting.rdp import rdp_privacy_accountant as dpr
from numpy.typing import NDArray

from privreg.accountant.base import Accountant, Handler, handles
from privreg.core.events import (
    ZCDP,
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    LocalDP,
    PoissonSampled,
    PrivacyEvent,
    PureDP,
    SampledWithoutReplacement,
    SelfComposed,
)

__all__ = ["RDPAccountant", "ORDERS", "TINY", "CURVE_HANDLERS", "pure_dp_rdp", "rdp_epsilon", "leaf_curve"]

#: Renyi orders evaluated: dense near 1, up to 1e4. A coarser grid only loosens bounds.
ORDERS = np.unique(
    np.concatenate(
        [
            1 + np.geomspace(1e-2, 1, 60),
            np.linspace(2.25, 64, 248),
            np.geomspace(64, 1e4, 60),
        ]
    )
)

_RELATION = {
    "add_remove": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dpa.NeighboringRelation.REPLACE_ONE,
}


#: The smallest positive float: the cost of an event with positive privacy loss whose
#: exact cost underflowed to 0 (0 would claim that nothing was released).
TINY = 5e-324


def _log_cosh(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """log cosh x without cancellation: log1p(2 sinh(x/2)^2) for |x| <= 20, else
    |x| - log 2 + log1p(e^(-2|x|))."""
    x = np.abs(x)
    small = x <= 20.0
    out = np.empty_like(x)
    out[small] = np.log1p(2.0 * np.sinh(x[small] / 2.0) ** 2)
    big = x[~small]
    out[~small] = big - math.log(2.0) + np.log1p(np.exp(-2.0 * big))
    return out


def pure_dp_rdp(epsilon: float, orders: NDArray[np.float64]) -> NDArray[np.float64]:
    """RDP of binary randomized response with ratio e^eps: the largest Renyi divergence
    of order alpha between any two distributions whose ratio lies in [e^-eps, e^eps].

    With p = e^eps / (1 + e^eps) it is log(p^a (1-p)^(1-a) + (1-p)^a p^(1-a)) / (a - 1)
    = (log cosh((a - 1/2) eps) - log cosh(eps / 2)) / (a - 1), written so that small eps
    keeps its relative precision (about alpha eps^2 / 2; the direct form lost all digits
    below eps = 1e-8 and 1% at 1e-6), floored at :data:`TINY` for eps > 0."""
    if epsilon == 0:
        return np.zeros_like(orders)
    a = np.asarray(orders, dtype=np.float64)
    if epsilon > 1.0:  # no cancellation here: the direct form, as before
        lp = -math.log1p(math.exp(-epsilon))  # log p
        lq = lp - epsilon
        curve = np.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)
    else:
        curve = (_log_cosh((a - 0.5) * epsilon) - _log_cosh(np.array([epsilon / 2.0]))) / (a - 1)
    return np.maximum(curve, TINY)


def _multiplier(event: Gaussian | Laplace) -> float:
    """noise / sensitivity, refused (ValueError: cannot vouch) unless positive and finite:
    dp-accounting divides by it, or iterates to no end on an infinite one."""
    m = event.noise_multiplier
    if not 0 < m < math.inf:
        raise ValueError(f"noise / sensitivity = {m!r} is not a positive finite number")
    return m


def _gaussian_tree(event: PrivacyEvent) -> dpe.DpEvent | None:
    """Translate a tree of Gaussians (the only sub-event dp_accounting can subsample)."""
    if isinstance(event, Gaussian):
        return dpe.GaussianDpEvent(noise_multiplier=_multiplier(event))
    if isinstance(event, Composed):
        parts = [_gaussian_tree(e) for e in event.events]
        return None if any(p is None for p in parts) else dpe.ComposedDpEvent(events=parts)
    if isinstance(event, SelfComposed):
        inner = _gaussian_tree(event.event)
        return None if inner is None else dpe.SelfComposedDpEvent(event=inner, count=event.count)
    return None


def to_dp_accounting(event: PrivacyEvent) -> dpe.DpEvent | None:
    """The ``dp_accounting`` event for a privreg leaf event, or None."""
    if isinstance(event, Gaussian):
        return dpe.GaussianDpEvent(noise_multiplier=_multiplier(event))
    if isinstance(event, Laplace):
        return dpe.LaplaceDpEvent(noise_multiplier=_multiplier(event))
    if isinstance(event, ZCDP):
        return dpe.ZCDpEvent(rho=event.rho)
    if isinstance(event, PoissonSampled):
        inner = _gaussian_tree(event.event)
        return None if inner is None else dpe.PoissonSampledDpEvent(event.sampling_probability, inner)
    if isinstance(event, SampledWithoutReplacement):
        inner = _gaussian_tree(event.event)
        return (
            None if inner is None else dpe.SampledWithoutReplacementDpEvent(event.source_size, event.sample_size, inner)
        )
    return None


_UNCONVERGED = "_compute_log_a_frac failed to converge"


class _DropUnconverged(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_UNCONVERGED)


@contextlib.contextmanager
def _unconverged_orders_quiet() -> Iterator[None]:
    """Drop dp-accounting's absl warning that a fractional order's series did not converge
    (a sampled Gaussian at large orders, e.g. 18 of them for q = 0.01, sigma = 1.1). It
    then returns inf at that order, which this accountant handles: an infinite order
    proves nothing and :func:`rdp_epsilon` skips it, so the warning asks nothing of the
    caller. Its other warnings still show."""
    logger = logging.getLogger("absl")
    quiet = _DropUnconverged()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


@functools.lru_cache(maxsize=4096)
def _google_curve(event: PrivacyEvent, neighbouring: str) -> NDArray[np.float64] | None:
    """dp-accounting's RDP curve of one event on :data:`ORDERS` (cached: sampled
    Gaussians are expensive), or None if it has no model of the event."""
    translated = to_dp_accounting(event)
    if translated is None:
        return None
    google = dpr.RdpAccountant(orders=list(ORDERS), neighboring_relation=_RELATION[neighbouring])
    if not google.supports(translated):
        return None
    with _unconverged_orders_quiet():
        google.compose(translated, 1)
    curve = np.array(google._rdp, dtype=np.float64)  # dp-accounting keeps its curve in _rdp
    curve.setflags(write=False)
    return curve


def _exponential(acc: object, e: Exponential) -> NDArray[np.float64]:
    curve = pure_dp_rdp(e.epsilon, ORDERS)
    return np.maximum(np.minimum(curve, ORDERS * e.epsilon**2 / 8), TINY) if e.bounded_range else curve


def _google(acc: RDPAccountant, e: PrivacyEvent) -> NDArray[np.float64] | None:
    curve = _google_curve(e, acc.neighbouring)
    if curve is None or (isinstance(e, ZCDP) and e.rho == 0):
        return curve
    return np.maximum(curve, TINY)  # every other event here has positive privacy loss


#: The RDP curve of one release on :data:`ORDERS`. Pure eps-DP events: binary randomized
#: response (Blackwell); discrete Gaussian: rho alpha (CKS 2020); bounded-range
#: selections: also alpha eps^2 / 8 (Cesar-Rogers 2021); the rest through dp-accounting.
CURVE_HANDLERS: dict[type[PrivacyEvent], Handler] = dict(
    [
        handles(PureDP, lambda acc, e: pure_dp_rdp(e.epsilon, ORDERS)),
        handles(LocalDP, lambda acc, e: pure_dp_rdp(e.epsilon0, ORDERS)),
        handles(DiscreteLaplace, lambda acc, e: pure_dp_rdp(e.epsilon, ORDERS)),
        handles(DiscreteGaussian, lambda acc, e: np.maximum(ORDERS * e.rho, TINY)),
        handles(Exponential, _exponential),
        handles(Gaussian, _google),
        handles(Laplace, _google),
        handles(ZCDP, _google),
        handles(PoissonSampled, _google),
        handles(SampledWithoutReplacement, _google),
    ]
)


def leaf_curve(event: PrivacyEvent, neighbouring: str) -> NDArray[np.float64] | None:
    """The RDP curve of one leaf event on :data:`ORDERS`, or None if unsupported."""
    curve: NDArray[np.float64] | None = RDPAccountant(neighbouring=neighbouring).cost(event)[0]
    return curve


class RDPAccountant(Accountant):
    """Renyi DP: curves r(alpha) add up under composition (count times a leaf's curve).
    A curve may be infinite at some orders (those orders then prove nothing), never NaN."""

    name = "rdp"
    handlers = CURVE_HANDLERS

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.orders = ORDERS
        self._curve = np.zeros_like(ORDERS)

    def _valid(self, cost: object) -> bool:
        curve = np.asarray(cost, dtype=np.float64)
        return curve.shape == self.orders.shape and not np.isnan(curve).any() and bool(np.all(curve >= 0))

    def _add(self, cost: NDArray[np.float64], count: int) -> None:
        self._curve = self._curve + count * np.asarray(cost, dtype=np.float64)

    def curve(self) -> NDArray[np.float64]:
        """The total RDP at each of :attr:`orders`."""
        return self._curve

    def _epsilon(self, delta: float) -> float:
        return rdp_epsilon(self.orders, self.curve(), delta)

    def _delta(self, epsilon: float) -> float:
        if not np.any(self._curve):
            return 0.0
        if not np.isfinite(self._curve).any():
            return 1.0
        return float(dpr.compute_delta(self.orders, self.curve(), epsilon)[0])


def rdp_epsilon(orders: NDArray[np.float64], curve: NDArray[np.float64], delta: float) -> float:
    """Epsilon at ``delta`` of a mechanism that is (alpha, curve[alpha])-RDP at every
    order, by the tight conversion (CKS 2020, Proposition 12); inf when no order helps."""
    if not np.any(curve):
        return 0.0  # zero divergence at every order: nothing was released about anyone
    if delta == 0:
        return math.inf
    finite = np.isfinite(curve)
    if not finite.any():
        return math.inf
    return float(dpr.compute_epsilon(orders[finite], curve[finite], delta)[0])
