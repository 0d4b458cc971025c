"""Basic composition: epsilons add up, deltas add up (Dwork et al. 2006)."""

from __future__ import annotations

import math
from typing import Any, cast

from privreg.accountant.base import Accountant, Handler, finite_pair, handles
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

__all__ = ["BasicAccountant", "PAIR_HANDLERS", "approx_dp_of"]


def _subtree(acc: Any, event: PrivacyEvent) -> tuple[float, float] | None:
    """(eps, delta) of a whole sub-tree by basic composition (for amplification)."""
    inner = BasicAccountant(event_delta=acc.event_delta, neighbouring=acc.neighbouring)
    if not inner.supports(event):
        return None
    return inner.compose(event).total


def _at_event_delta(acc: Any, epsilon_at: Any) -> tuple[float, float] | None:
    """A curve event read off at the accountant's ``event_delta`` (None without one)."""
    if acc.event_delta is None:
        return None
    return float(epsilon_at(acc.event_delta)), acc.event_delta


def _poisson(acc: Any, e: PoissonSampled) -> tuple[float, float] | None:
    inner = _subtree(acc, e.event)
    return None if inner is None else amplify_by_sampling(*inner, e.sampling_probability)


def _without_replacement(acc: Any, e: SampledWithoutReplacement) -> tuple[float, float] | None:
    inner = _subtree(acc, e.event)
    return None if inner is None else amplify_by_sampling(*inner, e.sample_size / e.source_size)


def _local(e: Shuffled) -> LocalDP:
    return cast(LocalDP, e.event)  # Shuffled's validator admits LocalDP events only


#: One (eps, delta) pair per release, shared by the pair accountants (basic, advanced,
#: optimal). Curve events (Gaussian, shuffled reports) are read off at ``event_delta``.
PAIR_HANDLERS: dict[type[PrivacyEvent], Handler] = dict(
    [
        handles(PureDP, lambda acc, e: (e.epsilon, 0.0)),
        handles(ApproxDP, lambda acc, e: (e.epsilon, e.delta)),
        handles(Laplace, lambda acc, e: (e.sensitivity / e.scale, 0.0)),
        handles(Exponential, lambda acc, e: (e.epsilon, 0.0)),
        handles(DiscreteLaplace, lambda acc, e: (e.epsilon, 0.0)),
        handles(LocalDP, lambda acc, e: (e.epsilon0, 0.0)),  # an eps0-LDP report is eps0-DP for its user
        handles(Gaussian, lambda acc, e: _at_event_delta(acc, lambda d: gaussian_epsilon(d, 1.0 / e.noise_multiplier))),
        handles(
            DiscreteGaussian, lambda acc, e: _at_event_delta(acc, lambda d: ZCDPAccountant().compose(e).epsilon(d))
        ),
        handles(
            Shuffled,
            lambda acc, e: _at_event_delta(
                acc,
                lambda d: shuffle_epsilon(
                    epsilon0=_local(e).epsilon0, num_reports=e.num_reports, delta=d, bound=e.bound
                ),
            ),
        ),
        handles(PoissonSampled, _poisson),
        handles(SampledWithoutReplacement, _without_replacement),
    ]
)


def approx_dp_of(event: PrivacyEvent, *, event_delta: float | None, neighbouring: str) -> tuple[float, float] | None:
    """One (eps, delta) pair that the leaf ``event`` satisfies, or None."""
    accountant = BasicAccountant(event_delta=event_delta, neighbouring=neighbouring)
    pair: tuple[float, float] | None = accountant.cost(event)[0]
    return pair


class BasicAccountant(Accountant):
    """Sums epsilons and deltas. Exact for worst-case composition of arbitrary
    (eps, delta)-DP mechanisms and never wrong, but loose for many releases.

    ``event_delta``: if set, a Gaussian or a shuffle is charged as the (eps, event_delta)
    point of its curve; otherwise such events are unsupported here.
    """

    name = "basic"
    handlers = PAIR_HANDLERS

    def __init__(self, *, event_delta: float | None = None, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.event_delta = None if event_delta is None else v.check_delta("event_delta", event_delta, allow_zero=False)
        self._eps_sum = 0.0
        self._delta_sum = 0.0

    def _valid(self, cost: Any) -> bool:
        return finite_pair(cost)

    def _add(self, cost: tuple[float, float], count: int) -> None:
        self._eps_sum += count * cost[0]
        self._delta_sum = min(1.0, self._delta_sum + count * cost[1])

    @property
    def total(self) -> tuple[float, float]:
        return self._eps_sum, self._delta_sum

    def _epsilon(self, delta: float) -> float:
        return self._eps_sum if delta >= self._delta_sum else math.inf

    def _delta(self, epsilon: float) -> float:
        return self._delta_sum if epsilon >= self._eps_sum else 1.0
