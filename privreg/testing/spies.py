"""Instruments for the contract checks: a seeded source that counts its draws, and a
charger that records how many draws had happened when it was charged."""

from __future__ import annotations

from typing import Any

from privreg.core.charging import EventLog
from privreg.core.errors import BudgetExceededError
from privreg.core.events import PrivacyEvent
from privreg.core.randomness import InsecureReproducibleRandom

__all__ = ["CountingRandom", "SpyCharger"]


class CountingRandom(InsecureReproducibleRandom):
    """A seeded source that counts its draws, to prove that the charge happens before any
    noise is drawn."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.draws = 0

    def randbits(self, k: int) -> int:
        self.draws += 1
        return super().randbits(k)

    def random_bytes(self, n: int) -> bytes:
        self.draws += 1
        return super().random_bytes(n)


class SpyCharger(EventLog):
    """An :class:`EventLog` that records ``rng.draws`` at every charge (``rng`` a
    :class:`CountingRandom`, or None) and refuses every charge when ``refuse`` is set."""

    def __init__(self, rng: CountingRandom | None = None, *, refuse: bool = False) -> None:
        super().__init__()
        self.rng, self.refuse = rng, refuse
        self.draws_at_charge: list[int] = []

    def charge(self, event: PrivacyEvent, **kwargs: Any) -> None:
        self.draws_at_charge.append(self.rng.draws if self.rng is not None else 0)
        if self.refuse:
            raise BudgetExceededError("refused by privreg.testing (a charger that refuses every release)")
        super().charge(event, **kwargs)

    @property
    def charged(self) -> bool:
        """True once a charge was attempted (accepted or refused)."""
        return bool(self.draws_at_charge)
