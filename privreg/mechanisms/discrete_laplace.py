"""The discrete Laplace (two-sided geometric) mechanism for integer-valued queries."""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction
from typing import ClassVar

import attrs
import numpy as np

from privreg.core.events import DiscreteLaplace, PrivacyEvent
from privreg.core.laws import DiscreteLaw
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomness import RandomSource
from privreg.mechanisms.grid_mechanism import IntegerNoiseMechanism
from privreg.mechanisms.laws import two_sided_geometric_law
from privreg.mechanisms.noise_params import PATHS, float_at_most, laplace_scale
from privreg.noise import discrete_laplace
from privreg.noise.fast import discrete_laplace_one, discrete_laplace_planned, fast_scale, laplace_plan_of
from privreg.noise.one_draw import one_sampler
from privreg.noise.trials import Plan

__all__ = ["DiscreteLaplaceMechanism"]


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class DiscreteLaplaceMechanism(IntegerNoiseMechanism):
    """Adds two-sided geometric noise, P(z) proportional to exp(-|z| epsilon / sensitivity),
    to every coordinate of an integer-valued query (counts, histograms).

    Guarantee: ``epsilon``-DP when one individual changes the query by at most the integer
    ``sensitivity`` in L1 (Ghosh-Roughgarden-Sundararajan 2009); outputs are integers, so
    no grid is needed and nothing leaks through floating point. Noise comes from the
    Canonne-Kamath-Steinke 2020 samplers on the OS CSPRNG; ``path="fast"`` (default) is
    vectorised with the scale rounded up by less than ``max(2**-40, 2**-39 * scale)``
    (:func:`privreg.noise.fast.fast_scale`; only ever more noise), ``path="exact"``
    uses the exact rational scale. The charged event is the DiscreteLaplace applied; its
    epsilon, ``sensitivity / scale`` in floating point, is at most ``epsilon`` (the scale
    is raised by less than an ulp where needed:
    :func:`~privreg.mechanisms.noise_params.laplace_scale`).

    **Input range.** Integers (or whole floats) in ``[-2**62, 2**62]``, scalar or
    ``dimension``-vector. Anything else -- ``2**63 - 1``, ``2**64 - 1`` (which int64 would
    turn into -1), ``1e308``, non-integers -- is refused before the charge with an error
    naming the rule, so ``value + noise`` always fits int64. A scalar output is that
    exact integer, a vector output int64. Running time does not depend on the value.
    """

    name: ClassVar[str] = "discrete-laplace"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    sensitivity: int = param_field(minimum=1, doc="integer L1 sensitivity of the query")
    dimension: int = param_field(default=1, minimum=1, doc="number of coordinates of the query (1: a scalar)")
    path: str = param_field(
        default="fast", choices=PATHS, doc="vectorised sampler, or one exact rational draw at a time"
    )

    _immutable: ClassVar[bool] = True

    # Immutable: the scale, event and sampler plan are computed once, on first use.
    @functools.cached_property
    def noise_scale(self) -> Fraction:
        exact = laplace_scale(self.sensitivity, self.epsilon)
        return fast_scale(exact) if self.path == "fast" else exact

    @functools.cached_property
    def _event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=float_at_most(self.noise_scale), sensitivity=self.sensitivity)

    @functools.cached_property
    def _plan(self) -> Plan:
        return laplace_plan_of(self.noise_scale)

    def privacy_event(self) -> PrivacyEvent:
        return self._event

    def coordinate_law(self, center: int) -> DiscreteLaw | None:
        """Two-sided geometric noise of the realised scale around ``center``."""
        return two_sided_geometric_law(self.noise_scale, center)

    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        if self.path == "fast":
            return discrete_laplace_planned(self._plan, count, rng)
        return np.array([discrete_laplace(self.noise_scale, rng) for _ in range(count)], dtype=np.int64)

    def _noise_one(self, rng: RandomSource) -> int:
        if self.path == "fast":
            return discrete_laplace_one(self._plan, rng)
        return discrete_laplace(self.noise_scale, rng)

    def _scalar_noise(self) -> Callable[[RandomSource], int]:
        # draw_one specialised to the cached plan: the value _noise_one draws, one call
        return one_sampler(self._plan) if self.path == "fast" else self._noise_one
