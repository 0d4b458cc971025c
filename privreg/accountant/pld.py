"""Privacy loss distributions (Koskela et al. 2020; Doroshenko et al. 2022) on Google's
``dp-accounting``: tight numerical accounting with pessimistic discretisation, so every
reported epsilon is an upper bound on the true one."""

from __future__ import annotations

from collections import Counter

from dp_accounting.pld import common
from dp_accounting.pld import privacy_loss_distribution as dpl

from privreg.accountant.base import Accountant
from privreg.core import validation as v
from privreg.core.events import (
    ApproxDP,
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    LocalDP,
    NoPrivacyLoss,
    PoissonSampled,
    PrivacyEvent,
    PureDP,
    SelfComposed,
)

__all__ = ["PLDAccountant", "MAX_EXACT_DISCRETE_SENSITIVITY", "MAX_EXACT_DISCRETE_SIGMA"]

#: dp-accounting enumerates a discrete Laplace's sensitivity range; above this many grid
#: units we use the PLD of a pure eps-DP mechanism instead (valid for any eps-DP event).
MAX_EXACT_DISCRETE_SENSITIVITY = 4096
#: dp-accounting enumerates a discrete Gaussian's support (about +-11 sigma); above this
#: sigma, or for more than one coordinate, the event is left to RDP and zCDP (exact there).
MAX_EXACT_DISCRETE_SIGMA = 2e5


class PLDAccountant(Accountant):
    """Composes privacy loss distributions by FFT convolution.

    Gaussian and Laplace events (and their Poisson subsamples under add/remove) use their
    exact PLDs; any other (eps, delta)-DP event uses the tight PLD of an (eps, delta)-DP
    mechanism. ``value_discretization_interval`` trades speed for tightness: smaller is
    tighter, never less safe.
    """

    name = "pld"

    def __init__(self, *, value_discretization_interval: float = 1e-4, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.vdi = v.check_sensitivity("value_discretization_interval", value_discretization_interval)
        self._pld = dpl.identity(value_discretization_interval=self.vdi)
        self._cache: dict[PrivacyEvent, dpl.PrivacyLossDistribution] = {}

    def _build(self, event: PrivacyEvent, q: float = 1.0) -> dpl.PrivacyLossDistribution | None:
        if isinstance(event, Gaussian):
            return dpl.from_gaussian_mechanism(
                standard_deviation=event.noise_multiplier, value_discretization_interval=self.vdi,
                sampling_prob=q)
        if isinstance(event, Laplace):
            return dpl.from_laplace_mechanism(
                parameter=event.noise_multiplier, value_discretization_interval=self.vdi, sampling_prob=q)
        if isinstance(event, DiscreteGaussian) and event.dimension == 1 and event.sigma <= MAX_EXACT_DISCRETE_SIGMA:
            return dpl.from_discrete_gaussian_mechanism(
                sigma=event.sigma, sensitivity=event.sensitivity,
                value_discretization_interval=self.vdi, sampling_prob=q)
        if isinstance(event, DiscreteLaplace) and event.sensitivity <= MAX_EXACT_DISCRETE_SENSITIVITY:
            return dpl.from_discrete_laplace_mechanism(
                parameter=1.0 / event.scale, sensitivity=event.sensitivity,
                value_discretization_interval=self.vdi, sampling_prob=q)
        if q != 1.0:
            return None
        if isinstance(event, PoissonSampled) and self.neighbouring == "add_remove":
            return self._build(event.event, event.sampling_probability)
        pair = None
        if isinstance(event, PureDP):
            pair = (event.epsilon, 0.0)
        elif isinstance(event, LocalDP):
            pair = (event.epsilon0, 0.0)
        elif isinstance(event, (Exponential, DiscreteLaplace)):
            pair = (event.epsilon, 0.0)  # large discrete sensitivities: the pure-DP PLD
        elif isinstance(event, ApproxDP):
            pair = (event.epsilon, event.delta)
        if pair is None:
            return None
        return dpl.from_privacy_parameters(
            common.DifferentialPrivacyParameters(*pair), value_discretization_interval=self.vdi)

    def _leaf(self, event: PrivacyEvent, count: int, compose: bool) -> bool:
        pld = self._cache.get(event)
        if pld is None:
            pld = self._build(event)
            if pld is None:
                return False
            self._cache[event] = pld
        if compose:
            self._pld = self._pld.compose(pld if count == 1 else pld.self_compose(count))
        return True

    def compose(self, event: PrivacyEvent, count: int = 1) -> PLDAccountant:
        """As :meth:`Accountant.compose`, but identical leaves are grouped first and each
        group is self-composed once (composition commutes), which turns k convolutions
        into one FFT power per distinct leaf."""
        bad = self._walk(event, v.check_count("count", count), compose=False)
        if bad is not None:
            return super().compose(event, count)  # raises UnsupportedEventError
        leaves: Counter[PrivacyEvent] = Counter()
        _count_leaves(event, count, leaves)
        for leaf, n in leaves.items():
            self._leaf(leaf, n, compose=True)
        self._history.append((event, count))
        return self

    def epsilon(self, delta: float) -> float:
        return float(self._pld.get_epsilon_for_delta(v.check_delta("delta", delta)))

    def delta(self, epsilon: float) -> float:
        return float(self._pld.get_delta_for_epsilon(v.check_epsilon("epsilon", epsilon, allow_zero=True)))


def _count_leaves(event: PrivacyEvent, count: int, out: Counter[PrivacyEvent]) -> None:
    if isinstance(event, Composed):
        for e in event.events:
            _count_leaves(e, count, out)
    elif isinstance(event, SelfComposed):
        _count_leaves(event.event, count * event.count, out)
    elif isinstance(event, NoPrivacyLoss):
        return
    elif event.children() == () or isinstance(event, PoissonSampled):
        out[event] += count
