"""Gaussian differential privacy (Dong-Roth-Su 2022): exact for Gaussian mechanisms.

A Gaussian mechanism with sensitivity/sigma = mu is mu-GDP, and the composition of
mu_i-GDP mechanisms is exactly sqrt(sum mu_i^2)-GDP (DRS 2022, Corollary 3.3), so k
Gaussians compose without any slack -- paper 002's Theorem 2.1 relies on this.
"""

from __future__ import annotations

import math

from privreg.accountant.base import Accountant, Handler, finite_number, handles
from privreg.accountant.curves import gaussian_delta, gaussian_epsilon
from privreg.accountant.rdp import TINY
from privreg.core.events import Gaussian, PrivacyEvent

__all__ = ["GDPAccountant", "MU_HANDLERS"]

#: mu of one release. Only Gaussians: GDP is not an exact description of Laplace or
#: pure-DP mechanisms, and subsampled Gaussians are GDP only asymptotically (a CLT).
MU_HANDLERS: dict[type[PrivacyEvent], Handler] = dict(
    [
        handles(Gaussian, lambda acc, e: e.sensitivity / e.sigma),
    ]
)


class GDPAccountant(Accountant):
    """Composes Gaussian events exactly: mu^2 adds up."""

    name = "gdp"
    handlers = MU_HANDLERS

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self._mu_squared = 0.0

    def _valid(self, cost: object) -> bool:
        return finite_number(cost)

    def _add(self, cost: float, count: int) -> None:
        # mu > 0 always here: a square that underflows to 0 would claim no privacy loss
        self._mu_squared += count * max(float(cost) * float(cost), TINY)

    @property
    def mu(self) -> float:
        return math.sqrt(self._mu_squared)

    def _epsilon(self, delta: float) -> float:
        return gaussian_epsilon(delta, self.mu) if math.isfinite(self.mu) else math.inf

    def _delta(self, epsilon: float) -> float:
        return gaussian_delta(epsilon, self.mu) if math.isfinite(self.mu) else 1.0
