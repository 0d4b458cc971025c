"""The discrete Gaussian mechanism for integer-valued queries (Canonne-Kamath-Steinke 2020)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.events import DiscreteGaussian, PrivacyEvent
from privreg.core.randomness import RandomSource
from privreg.mechanisms.grid_mechanism import IntegerNoiseMechanism
from privreg.mechanisms.noise_params import check_path
from privreg.noise.fast import MAX_PART
from privreg.noise.gaussian import discrete_gaussian, discrete_gaussian_many

__all__ = ["DiscreteGaussianMechanism"]


def _sigma(x: Any) -> float:
    sigma = v.check_sensitivity("sigma", x)
    if sigma >= MAX_PART:
        raise PrivregValueError(f"sigma = {sigma:g} must be below 2**40; scale the query down instead")
    return sigma


@attrs.frozen(kw_only=True)
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
    sigma: float = attrs.field(converter=_sigma)
    sensitivity: int = attrs.field(default=1, converter=lambda x: v.check_count("sensitivity", x))
    dimension: int = attrs.field(default=1, converter=lambda x: v.check_int("dimension", x, minimum=1))
    path: str = attrs.field(default="fast", converter=check_path)

    @property
    def sigma2(self) -> Fraction:
        return Fraction(self.sigma) ** 2

    def privacy_event(self) -> PrivacyEvent:
        return DiscreteGaussian(sigma=self.sigma, sensitivity=self.sensitivity, dimension=self.dimension)

    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        if self.path == "fast":
            return discrete_gaussian_many(self.sigma2, count, rng)
        return np.array([discrete_gaussian(self.sigma2, rng) for _ in range(count)], dtype=np.int64)
