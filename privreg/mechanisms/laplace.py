"""The Laplace mechanism, sampled securely on an integer grid."""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core.events import DiscreteLaplace, PrivacyEvent
from privreg.core.laws import DiscreteLaw
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomness import RandomSource
from privreg.core.sensitivity import (
    GlobalSensitivity,
    Norm,
)
from privreg.mechanisms.grid_mechanism import GridMechanism
from privreg.mechanisms.laws import two_sided_geometric_law
from privreg.mechanisms.noise_params import PATHS, as_global, float_at_most, laplace_scale
from privreg.noise import Grid, discrete_laplace
from privreg.noise.fast import discrete_laplace_one, discrete_laplace_planned, fast_scale, laplace_plan_of
from privreg.noise.one_draw import one_sampler
from privreg.noise.trials import Plan

__all__ = ["LaplaceMechanism", "as_global_l1"]


def as_global_l1(x: Any) -> GlobalSensitivity:
    """A number (global L1 sensitivity) or a global L1 Sensitivity, validated."""
    return as_global(x, norm=Norm.L1, who="the Laplace mechanism")


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class LaplaceMechanism(GridMechanism):
    """Adds Laplace noise of scale ``sensitivity / epsilon`` to a query of ``dimension``
    coordinates (1: a scalar).

    Guarantee: ``epsilon``-DP for queries whose global L1 sensitivity is ``sensitivity``
    (Dwork-McSherry-Nissim-Smith 2006). Implementation: the answer is snapped to a grid of
    step ``sensitivity / m`` (``m`` a power of two, see :mod:`privreg.noise.grid`), which
    makes it an integer query of L1 sensitivity ``m`` (scalar) or ``m + dimension``, and
    two-sided geometric noise of scale ``integer sensitivity / epsilon`` is added, drawn
    from the OS CSPRNG by the Canonne-Kamath-Steinke 2020 samplers. The output lies on
    the grid, so its floating-point bits carry no information about the input (Mironov
    2012). The charged event is the :class:`~privreg.core.events.DiscreteLaplace` that
    actually happened.

    Paths: ``"fast"`` (default) draws vectorised, about 4e6 values per second per core
    (``benchmarks/noise.py``; a scalar release takes a plain-Python path with the same values),
    with the integer scale (>= 1024) rounded up by at most a relative 2**-39
    (:func:`privreg.noise.fast.fast_scale`);
    ``"exact"`` draws one value at a time with the exact rational scale (about 2e4/s).
    Both start from ``integer sensitivity / epsilon`` raised by less than an ulp where the
    charged event would otherwise read as more than ``epsilon`` in floating point
    (:func:`~privreg.mechanisms.noise_params.laplace_scale`): the charge never exceeds
    the epsilon asked for.
    Both sample their stated distribution exactly.

    **Input range.** Every finite float64, scalar or ``dimension``-vector (integers within
    the float range are converted); NaN, inf and integers beyond 1.8e308 are refused
    before the charge. Nothing is clamped: the snapped value and the noise are added in
    exact integer arithmetic, and the output is their grid point rounded once to the
    nearest float (``+-inf`` only beyond the float range), so no input that passes
    validation can make the release fail after the charge.

    **Timing.** Values beyond about ``2**53`` grid steps (``2**53 sensitivity / m``, e.g.
    8.8e12 at epsilon 1) are added on an exact Python-integer path instead of int64:
    measured (``benchmarks/data_timing.py``) 1.0-1.1x for one release of 1000
    coordinates, up to 1.8x for ``release_many`` of 1e5 draws of a scalar near 1e300.
    """

    name: ClassVar[str] = "laplace"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    sensitivity: GlobalSensitivity = param_field(
        type=float, doc="global L1 sensitivity of the query", converter=as_global_l1, **POSITIVE
    )
    dimension: int = param_field(default=1, minimum=1, doc="number of coordinates of the query (1: a scalar)")
    path: str = param_field(
        default="fast", choices=PATHS, doc="vectorised sampler, or one exact rational draw at a time"
    )

    _immutable: ClassVar[bool] = True

    # Mechanisms are immutable: everything a release needs that does not depend on the
    # value is computed once, on first use (cached_property), not per release.
    @functools.cached_property
    def grid(self) -> Grid:
        return Grid.for_query(sensitivity=self.sensitivity.value, epsilon=self.epsilon, dimension=self.dimension)

    @functools.cached_property
    def integer_sensitivity(self) -> int:
        return self.grid.integer_sensitivity(self.dimension)

    @functools.cached_property
    def noise_scale(self) -> Fraction:
        """Scale of the integer noise actually drawn (grid units)."""
        exact = laplace_scale(self.integer_sensitivity, self.epsilon)
        return fast_scale(exact) if self.path == "fast" else exact

    @functools.cached_property
    def _event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=float_at_most(self.noise_scale), sensitivity=self.integer_sensitivity)

    @functools.cached_property
    def _plan(self) -> Plan:
        return laplace_plan_of(self.noise_scale)

    def privacy_event(self) -> PrivacyEvent:
        return self._event

    def coordinate_law(self, center: int) -> DiscreteLaw | None:
        """Two-sided geometric noise of the realised integer scale around the snapped ``center``."""
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
