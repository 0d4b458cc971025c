"""Gaussian differential privacy (Dong-Roth-Su 2022): exact for Gaussian mechanisms.

A Gaussian mechanism with sensitivity/sigma = mu is mu-GDP, and the composition of
mu_i-GDP mechanisms is exactly sqrt(sum mu_i^2)-GDP (DRS 2022, Corollary 3.3), so k
Gaussians compose without any slack -- paper 002's Theorem 2.1 relies on this.
"""

from __future__ import annotations

import math

from privreg.accountant.base import Accountant
from privreg.accountant.curves import gaussian_delta, gaussian_epsilon
from privreg.core import validation as v
from privreg.core.events import Gaussian, PrivacyEvent

__all__ = ["GDPAccountant"]


class GDPAccountant(Accountant):
    """Composes Gaussian events exactly. Other events are unsupported: GDP is not an
    exact description of Laplace or pure-DP mechanisms, and subsampled Gaussians are
    GDP only asymptotically (a CLT, not a guarantee)."""

    name = "gdp"

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self._mu_squared = 0.0

    def _leaf(self, event: PrivacyEvent, count: int, compose: bool) -> bool:
        if not isinstance(event, Gaussian):
            return False
        if compose:
            self._mu_squared += count / event.noise_multiplier**2
        return True

    @property
    def mu(self) -> float:
        return math.sqrt(self._mu_squared)

    def epsilon(self, delta: float) -> float:
        return gaussian_epsilon(v.check_delta("delta", delta), self.mu)

    def delta(self, epsilon: float) -> float:
        return gaussian_delta(v.check_epsilon("epsilon", epsilon, allow_zero=True), self.mu)
