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

import functools
import math

import numpy as np
from dp_accounting import dp_event as dpe
from dp_accounting import privacy_accountant as dpa
from dp_accounting.rdp import rdp_privacy_accountant as dpr

from privreg.accountant.base import Accountant
from privreg.core import validation as v
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

__all__ = ["RDPAccountant", "ORDERS", "pure_dp_rdp"]

#: Renyi orders evaluated: dense near 1, up to 1e4. A coarser grid only loosens bounds.
ORDERS = np.unique(np.concatenate([
    1 + np.geomspace(1e-2, 1, 60), np.linspace(2.25, 64, 248), np.geomspace(64, 1e4, 60),
]))

_RELATION = {"add_remove": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
             "substitution": dpa.NeighboringRelation.REPLACE_ONE}


def pure_dp_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP of binary randomized response with ratio e^eps: the largest Renyi divergence
    of order alpha between any two distributions whose ratio lies in [e^-eps, e^eps]."""
    if epsilon == 0:
        return np.zeros_like(orders)
    lp = -math.log1p(math.exp(-epsilon))  # log p, p = e^eps / (1 + e^eps)
    lq = lp - epsilon
    a = orders
    return np.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)


def _gaussian_tree(event: PrivacyEvent) -> dpe.DpEvent | None:
    """Translate a tree of Gaussians (the only sub-event dp_accounting can subsample)."""
    if isinstance(event, Gaussian):
        return dpe.GaussianDpEvent(noise_multiplier=event.noise_multiplier)
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
        return dpe.GaussianDpEvent(noise_multiplier=event.noise_multiplier)
    if isinstance(event, Laplace):
        return dpe.LaplaceDpEvent(noise_multiplier=event.noise_multiplier)
    if isinstance(event, ZCDP):
        return dpe.ZCDpEvent(rho=event.rho)
    if isinstance(event, PoissonSampled):
        inner = _gaussian_tree(event.event)
        return None if inner is None else dpe.PoissonSampledDpEvent(event.sampling_probability, inner)
    if isinstance(event, SampledWithoutReplacement):
        inner = _gaussian_tree(event.event)
        return None if inner is None else dpe.SampledWithoutReplacementDpEvent(
            event.source_size, event.sample_size, inner)
    return None


@functools.lru_cache(maxsize=4096)
def leaf_curve(event: PrivacyEvent, neighbouring: str) -> np.ndarray | None:
    """The RDP curve of one leaf event on :data:`ORDERS`, or None if unsupported.
    Computed once per distinct event (sampled Gaussians are expensive)."""
    if isinstance(event, (PureDP, LocalDP, DiscreteLaplace)):
        return pure_dp_rdp(event.epsilon0 if isinstance(event, LocalDP) else event.epsilon, ORDERS)
    if isinstance(event, DiscreteGaussian):
        return ORDERS * event.rho  # CKS 2020: exactly rho-zCDP, i.e. (alpha, rho alpha)-RDP
    if isinstance(event, Exponential):
        curve = pure_dp_rdp(event.epsilon, ORDERS)
        return np.minimum(curve, ORDERS * event.epsilon**2 / 8) if event.bounded_range else curve
    translated = to_dp_accounting(event)
    if translated is None:
        return None
    google = dpr.RdpAccountant(orders=list(ORDERS), neighboring_relation=_RELATION[neighbouring])
    if not google.supports(translated):
        return None
    google.compose(translated, 1)
    curve = np.array(google._rdp, dtype=np.float64)  # dp-accounting keeps its curve in _rdp
    curve.setflags(write=False)
    return curve


class RDPAccountant(Accountant):
    """Renyi DP: curves r(alpha) add up under composition (count times a leaf's curve)."""

    name = "rdp"

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.orders = ORDERS
        self._curve = np.zeros_like(ORDERS)

    def _leaf(self, event: PrivacyEvent, count: int, compose: bool) -> bool:
        curve = leaf_curve(event, self.neighbouring)
        if curve is None:
            return False
        if compose:
            self._curve = self._curve + count * curve
        return True

    def curve(self) -> np.ndarray:
        """The total RDP at each of :attr:`orders`."""
        return self._curve

    def epsilon(self, delta: float) -> float:
        delta = v.check_delta("delta", delta)
        return float(dpr.compute_epsilon(self.orders, self.curve(), delta)[0])

    def delta(self, epsilon: float) -> float:
        epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
        return float(dpr.compute_delta(self.orders, self.curve(), epsilon)[0])
