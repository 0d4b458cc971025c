"""Randomizer: a local (on-device) epsilon0-LDP map from one user's input to a report.

A randomizer is vectorised: :meth:`Randomizer.randomize` takes the inputs of many users
(one per row) and returns one report per user, each report depending only on its own
user's input and fresh randomness. The privacy guarantee is per user: any two inputs
give report distributions within a factor ``exp(epsilon0)`` (Warner 1965; Kasiviswanathan
et al. 2008). When the reports are shuffled before release, the charged event is
:class:`~privreg.core.events.Shuffled` so the accountant can apply amplification.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from privreg.core.charging import Charger, check_charger, field_parameters, memoised_parameters
from privreg.core.errors import PrivregError
from privreg.core.events import LocalDP, PrivacyEvent, Shuffled
from privreg.core.randomness import RandomSource, resolve_random

if TYPE_CHECKING:  # numpy loads on first use: importing privreg stays light (the CLI's start-up)
    import numpy as np

    from privreg.core.laws import OutputLaw

__all__ = ["Randomizer", "Reports", "FrequencyEstimate", "secure_permutation"]


@attrs.frozen(kw_only=True)
class Reports:
    """Randomized reports of a population and the event that was charged for them."""

    reports: np.ndarray
    event: PrivacyEvent
    randomizer: str
    shuffled: bool


@attrs.frozen(kw_only=True)
class FrequencyEstimate:
    """An unbiased estimate of each item's true count, and the variance of each estimate."""

    counts: np.ndarray
    variance: np.ndarray


class Randomizer(ABC):
    """Base class of local randomizers. Subclasses implement ``epsilon0``,
    :meth:`validate_inputs` and :meth:`_randomize`; frequency oracles also override
    :meth:`estimate`."""

    name: ClassVar[str] = ""

    @property
    @abstractmethod
    def epsilon0(self) -> float:
        """The local DP guarantee of one report."""

    @abstractmethod
    def validate_inputs(self, inputs: Any) -> np.ndarray:
        """Inputs as an array, one row per user; raise on values outside the domain."""

    @abstractmethod
    def _randomize(self, inputs: np.ndarray, rng: RandomSource) -> np.ndarray:
        """One report per row of ``inputs``, drawn from ``rng`` only."""

    def output_law(self, value: Any) -> OutputLaw | None:
        """Optional: the exact law of one user's report when that user holds ``value``
        (one row of what :meth:`validate_inputs` returns; see :mod:`privreg.core.laws`).
        None (the default) declares nothing. A declared law lets :mod:`privreg.testing`
        compute the exact privacy loss between two users' inputs instead of sampling it."""
        return None

    @property
    def has_estimator(self) -> bool:
        """True when :meth:`estimate` gives an unbiased aggregate estimate."""
        return type(self).estimate is not Randomizer.estimate

    def estimate(self, reports: np.ndarray) -> FrequencyEstimate:
        """Unbiased aggregate estimate from reports (frequency oracles override this)."""
        raise PrivregError(f"randomizer {self.name!r} has no unbiased aggregate estimator")

    #: True for classes whose instances never change after construction (frozen attrs
    #: values): their :meth:`parameters` are then computed once and reused per release.
    _immutable: ClassVar[bool] = False

    def parameters(self) -> dict[str, Any]:
        return memoised_parameters(self, self._parameters, immutable=self._immutable)

    def _parameters(self) -> dict[str, Any]:
        return field_parameters(self)

    def privacy_event(self, *, num_reports: int | None = None, shuffled: bool = False) -> PrivacyEvent:
        """``LocalDP(epsilon0)``; ``Shuffled(LocalDP, num_reports)`` when shuffled."""
        local = LocalDP(epsilon0=self.epsilon0, randomizer=self.name or type(self).__name__)
        if shuffled:
            return Shuffled(event=local, num_reports=num_reports)
        return local

    def randomize(
        self,
        inputs: Any,
        *,
        charger: Charger,
        rng: RandomSource | None = None,
        shuffle: bool = False,
        label: str = "",
    ) -> Reports:
        """Charge, then randomize every user's input. With ``shuffle=True`` the reports are
        returned in a uniformly random order (the shuffler's job) and the charged event is
        ``Shuffled``, which amplification-aware accountants can use."""
        charger = check_charger(charger)
        values = self.validate_inputs(inputs)
        rng = resolve_random(rng)
        n = int(values.shape[0])
        event = self.charge_reports(n, charger=charger, rng=rng, shuffled=shuffle, label=label)
        reports = self._randomize(values, rng)
        if shuffle:
            reports = reports[secure_permutation(n, rng)]
        return Reports(reports=reports, event=event, randomizer=self.name, shuffled=shuffle)

    def charge_reports(
        self, n: int, *, charger: Charger, rng: RandomSource, shuffled: bool = False, label: str = ""
    ) -> PrivacyEvent:
        """Charge ``charger`` for ``n`` reports of this randomizer, as :meth:`randomize`
        does before it draws anything (also for samplers that simulate ``n`` reports in
        aggregate), and return the charged event."""
        charger = check_charger(charger)
        event = self.privacy_event(num_reports=max(n, 1), shuffled=shuffled)
        charger.charge(
            event,
            mechanism=self.name or type(self).__name__,
            parameters={**self.parameters(), "num_reports": n, "shuffled": shuffled},
            label=label,
            randomness=rng.describe(),
        )
        return event


def secure_permutation(n: int, rng: RandomSource) -> np.ndarray:
    """A uniform permutation of ``range(n)``: Fisher-Yates on exact uniform integers from
    ``rng`` (no float rounding, so every permutation has probability exactly 1/n!)."""
    import numpy as np

    perm = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = rng.randbelow(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm
