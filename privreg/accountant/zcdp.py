"""Zero-concentrated DP (Bun-Steinke 2016): rho adds up under composition."""

from __future__ import annotations

from dp_accounting.rdp import rdp_privacy_accountant as dpr

from privreg.accountant.base import Accountant, Handler, finite_number, handles
from privreg.accountant.rdp import ORDERS, TINY
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

__all__ = ["ZCDPAccountant", "RHO_HANDLERS", "rho_of", "zcdp_epsilon", "zcdp_delta"]


def _positive(rho: float) -> float:
    """rho of an event with positive privacy loss: never 0 (an underflowed rho, e.g.
    eps^2 / 2 for eps < 1e-162, would claim nothing was released), so at least
    :data:`~privreg.accountant.rdp.TINY`."""
    return max(rho, TINY)


def _pure(eps: float) -> float:
    return _positive(0.5 * eps * eps) if eps > 0 else 0.0


#: The zCDP parameter of one release. Gaussian: (sens/sigma)^2 / 2 (BS16 Prop. 1.6);
#: pure eps-DP (Laplace, discrete Laplace, PureDP, LocalDP): eps^2 / 2 (BS16 Prop. 1.4);
#: exponential mechanism / Gumbel report-noisy-max, which are eps-bounded-range:
#: eps^2 / 8 (Cesar-Rogers 2021, Lemma 3.2); permute-and-flip and exponential-noise
#: report-noisy-max are only known to be pure eps-DP: eps^2 / 2.
RHO_HANDLERS: dict[type[PrivacyEvent], Handler] = dict(
    [
        handles(ZCDP, lambda acc, e: e.rho),
        handles(DiscreteGaussian, lambda acc, e: _positive(e.rho)),
        handles(Gaussian, lambda acc, e: _positive(0.5 * (e.sensitivity / e.sigma) ** 2)),
        handles(Laplace, lambda acc, e: _pure(e.sensitivity / e.scale)),
        handles(PureDP, lambda acc, e: _pure(e.epsilon)),
        handles(DiscreteLaplace, lambda acc, e: _pure(e.epsilon)),
        handles(LocalDP, lambda acc, e: _pure(e.epsilon0)),
        handles(Exponential, lambda acc, e: _positive(e.epsilon**2 / (8 if e.bounded_range else 2))),
    ]
)


def rho_of(event: PrivacyEvent) -> float | None:
    """The zCDP parameter of a leaf event, or None."""
    rho: float | None = ZCDPAccountant().cost(event)[0]
    return rho


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Epsilon at ``delta`` of rho-zCDP, by the tight RDP conversion (CKS 2020, Prop. 12)
    over the RDP curve rho * alpha."""
    return 0.0 if rho == 0 else float(dpr.compute_epsilon(ORDERS, rho * ORDERS, delta)[0])


def zcdp_delta(rho: float, epsilon: float) -> float:
    """Delta at ``epsilon`` of rho-zCDP (same conversion)."""
    return 0.0 if rho == 0 else float(dpr.compute_delta(ORDERS, rho * ORDERS, epsilon)[0])


class ZCDPAccountant(Accountant):
    """Sums rho. Converts to (eps, delta) through the RDP curve r(alpha) = rho alpha with
    the tight conversion of :mod:`privreg.accountant.rdp` (CKS 2020, Proposition 12)."""

    name = "zcdp"
    handlers = RHO_HANDLERS

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.rho = 0.0

    def _valid(self, cost: object) -> bool:
        return finite_number(cost)

    def _add(self, cost: float, count: int) -> None:
        self.rho += count * float(cost)

    def _epsilon(self, delta: float) -> float:
        return zcdp_epsilon(self.rho, delta)

    def _delta(self, epsilon: float) -> float:
        return zcdp_delta(self.rho, epsilon)
