"""Zero-concentrated DP (Bun-Steinke 2016): rho adds up under composition."""

from __future__ import annotations

from dp_accounting.rdp import rdp_privacy_accountant as dpr

from privreg.accountant.base import Accountant
from privreg.accountant.rdp import ORDERS
from privreg.core import validation as v
from privreg.core.events import (
    ZCDP,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    LocalDP,
    PrivacyEvent,
    PureDP,
)

__all__ = ["ZCDPAccountant", "rho_of"]


def rho_of(event: PrivacyEvent) -> float | None:
    """The zCDP parameter of a leaf event, or None.

    Gaussian: (sens/sigma)^2 / 2 (BS16 Prop. 1.6); pure eps-DP (Laplace, discrete Laplace,
    PureDP, LocalDP):
    eps^2 / 2 (BS16 Prop. 1.4); exponential mechanism / Gumbel report-noisy-max, which are
    eps-bounded-range: eps^2 / 8 (Cesar-Rogers 2021, Lemma 3.2); permute-and-flip and
    exponential-noise report-noisy-max are only known to be pure eps-DP: eps^2 / 2.
    """
    if isinstance(event, (ZCDP, DiscreteGaussian)):
        return event.rho
    if isinstance(event, Gaussian):
        return 0.5 / event.noise_multiplier**2
    if isinstance(event, Laplace):
        return 0.5 * (event.sensitivity / event.scale) ** 2
    if isinstance(event, (PureDP, DiscreteLaplace)):
        return 0.5 * event.epsilon**2
    if isinstance(event, LocalDP):
        return 0.5 * event.epsilon0**2
    if isinstance(event, Exponential):
        return event.epsilon**2 / (8 if event.bounded_range else 2)
    return None


class ZCDPAccountant(Accountant):
    """Sums rho. Converts to (eps, delta) through the RDP curve r(alpha) = rho alpha with
    the tight conversion of :mod:`privreg.accountant.rdp` (CKS 2020, Proposition 12)."""

    name = "zcdp"

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.rho = 0.0

    def _leaf(self, event: PrivacyEvent, count: int, compose: bool) -> bool:
        rho = rho_of(event)
        if rho is None:
            return False
        if compose:
            self.rho += count * rho
        return True

    def epsilon(self, delta: float) -> float:
        delta = v.check_delta("delta", delta)
        return 0.0 if self.rho == 0 else float(dpr.compute_epsilon(ORDERS, self.rho * ORDERS, delta)[0])

    def delta(self, epsilon: float) -> float:
        epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
        return 0.0 if self.rho == 0 else float(dpr.compute_delta(ORDERS, self.rho * ORDERS, epsilon)[0])
