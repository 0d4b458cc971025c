"""Basic composition: epsilons add up, deltas add up (Dwork et al. 2006)."""

from __future__ import annotations

import math

from privreg.accountant.base import Accountant
from privreg.accountant.curves import amplify_by_sampling, gaussian_epsilon
from privreg.accountant.shuffle import shuffle_epsilon
from privreg.accountant.zcdp import ZCDPAccountant
from privreg.core import validation as v
from privreg.core.events import (
    ApproxDP,
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
    Shuffled,
)

__all__ = ["BasicAccountant", "approx_dp_of"]


def approx_dp_of(event: PrivacyEvent, *, event_delta: float | None, neighbouring: str) -> tuple[float, float] | None:
    """One (eps, delta) pair that ``event`` satisfies, or None if there is none we can
    state. Curve events (Gaussian, shuffled reports) are read off at ``event_delta`` when
    it is given; a shuffle uses the bound its event names."""
    if isinstance(event, PureDP):
        return event.epsilon, 0.0
    if isinstance(event, ApproxDP):
        return event.epsilon, event.delta
    if isinstance(event, Laplace):
        return event.sensitivity / event.scale, 0.0
    if isinstance(event, (Exponential, DiscreteLaplace)):
        return event.epsilon, 0.0
    if isinstance(event, LocalDP):
        return event.epsilon0, 0.0  # an eps0-LDP report is eps0-DP for its user
    if isinstance(event, Gaussian) and event_delta is not None:
        return gaussian_epsilon(event_delta, 1.0 / event.noise_multiplier), event_delta
    if isinstance(event, DiscreteGaussian) and event_delta is not None:
        return ZCDPAccountant().compose(event).epsilon(event_delta), event_delta
    if isinstance(event, Shuffled) and event_delta is not None:
        eps = shuffle_epsilon(epsilon0=event.event.epsilon0, num_reports=event.num_reports,
                              delta=event_delta, bound=event.bound)
        return eps, event_delta
    if isinstance(event, PoissonSampled) and neighbouring == "add_remove":
        inner = _single(event.event, event_delta=event_delta, neighbouring=neighbouring)
        return None if inner is None else amplify_by_sampling(*inner, event.sampling_probability)
    if isinstance(event, SampledWithoutReplacement) and neighbouring == "substitution":
        inner = _single(event.event, event_delta=event_delta, neighbouring=neighbouring)
        q = event.sample_size / event.source_size
        return None if inner is None else amplify_by_sampling(*inner, q)
    return None


def _single(event: PrivacyEvent, *, event_delta: float | None, neighbouring: str) -> tuple[float, float] | None:
    """(eps, delta) of a whole sub-tree by basic composition (for amplification)."""
    acc = BasicAccountant(event_delta=event_delta, neighbouring=neighbouring)
    if not acc.supports(event):
        return None
    acc.compose(event)
    return acc.total


class BasicAccountant(Accountant):
    """Sums epsilons and deltas. Exact for worst-case composition of arbitrary
    (eps, delta)-DP mechanisms and never wrong, but loose for many releases.

    ``event_delta``: if set, a Gaussian or a shuffle is charged as the (eps, event_delta)
    point of its curve; otherwise such events are unsupported here.
    """

    name = "basic"

    def __init__(self, *, event_delta: float | None = None, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.event_delta = None if event_delta is None else v.check_delta("event_delta", event_delta, allow_zero=False)
        self._eps = 0.0
        self._delta = 0.0

    def _leaf(self, event: PrivacyEvent, count: int, compose: bool) -> bool:
        pair = approx_dp_of(event, event_delta=self.event_delta, neighbouring=self.neighbouring)
        if pair is None:
            return False
        if compose:
            self._eps += count * pair[0]
            self._delta = min(1.0, self._delta + count * pair[1])
        return True

    @property
    def total(self) -> tuple[float, float]:
        return self._eps, self._delta

    def epsilon(self, delta: float) -> float:
        delta = v.check_delta("delta", delta)
        return self._eps if delta >= self._delta else math.inf

    def delta(self, epsilon: float) -> float:
        epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
        return self._delta if epsilon >= self._eps else 1.0
