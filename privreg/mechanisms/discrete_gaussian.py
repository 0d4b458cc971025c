"""The discrete Gaussian mechanism for integer-valued queries (Canonne-Kamath-Steinke 2020)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction
from typing import ClassVar

import attrs
import numpy as np

from privreg.core.events import DiscreteGaussian, PrivacyEvent
from privreg.core.laws import DiscreteLaw
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomness import RandomSource
from privreg.mechanisms.grid_mechanism import IntegerNoiseMechanism
from privreg.mechanisms.laws import discrete_gaussian_law
from privreg.mechanisms.noise_params import PATHS
from privreg.noise.fast import MAX_PART
from privreg.noise.gaussian import discrete_gaussian, discrete_gaussian_many, discrete_gaussian_sampler

__all__ = ["DiscreteGaussianMechanism"]


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class DiscreteGaussianMechanism(IntegerNoiseMechanism):
    """Adds discrete Gaussian noise, P(z) proportional to exp(-z^2 / (2 sigma^2)) on the
    integers, to every coordinate of an integer-valued query (counts, histograms).

    Guarantee: ``sensitivity^2 / (2 sigma^2)``-zCDP when one individual changes the query
    by at most the integer ``sensitivity`` in L2 (CKS 2020, Theorem 14); any accountant
    turns the charged ``DiscreteGaussian`` event into (epsilon, delta). The noise is the
    exact law for ``sigma^2`` equal to the square of the given float (no rounding of the
    scale): ``path="fast"`` vectorised, ``path="exact"`` one rational draw at a time, both
    from the OS CSPRNG. Outputs are integers, so nothing leaks through floating point.

    **Input range.** Integers (or whole floats) in ``[-2**62, 2**62]``, scalar or
    ``dimension``-vector. Anything else -- ``2**63 - 1``, ``2**64 - 1`` (which int64 would
    turn into -1), ``1e308``, non-integers -- is refused before the charge with an error
    naming the rule, so ``value + noise`` always fits int64. A scalar output is that
    exact integer, a vector output int64. Running time does not depend on the value.
    """

    name: ClassVar[str] = "discrete-gaussian"
    sigma: float = param_field(
        maximum=MAX_PART,
        exclusive_maximum=True,
        **POSITIVE,
        doc="noise standard-deviation parameter, in the query's integer units (below 2**40)",
    )
    sensitivity: int = param_field(default=1, minimum=1, doc="integer L2 sensitivity of the query")
    dimension: int = param_field(default=1, minimum=1, doc="number of coordinates of the query (1: a scalar)")
    path: str = param_field(
        default="fast", choices=PATHS, doc="vectorised exact sampler, or one exact rational draw at a time"
    )

    _immutable: ClassVar[bool] = True

    # Immutable: sigma^2 and the event are computed once, on first use.
    @functools.cached_property
    def sigma2(self) -> Fraction:
        return Fraction(self.sigma) ** 2

    @functools.cached_property
    def _event(self) -> PrivacyEvent:
        return DiscreteGaussian(sigma=self.sigma, sensitivity=self.sensitivity, dimension=self.dimension)

    def privacy_event(self) -> PrivacyEvent:
        return self._event

    def coordinate_law(self, center: int) -> DiscreteLaw | None:
        """Discrete Gaussian noise of variance parameter ``sigma**2`` around ``center``."""
        return discrete_gaussian_law(self.sigma2, center)

    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        if self.path == "fast":
            return discrete_gaussian_many(self.sigma2, count, rng)
        return np.array([discrete_gaussian(self.sigma2, rng) for _ in range(count)], dtype=np.int64)

    def _scalar_noise(self) -> Callable[[RandomSource], int]:
        # the value _noise(1, rng) draws, from the same stream, by a sampler bound to sigma^2
        return discrete_gaussian_sampler(self.sigma2, exact=self.path != "fast")
