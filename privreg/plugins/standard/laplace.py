"""The Laplace mechanism, sampled securely on an integer grid."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import Laplace, PrivacyEvent
from privreg.core.mechanism import Mechanism
from privreg.core.randomness import RandomSource
from privreg.core.sensitivity import (
    GlobalSensitivity,
    Norm,
    SensitivityKind,
    require_sensitivity,
)
from privreg.noise import Grid, discrete_laplace, snap_to_grid

__all__ = ["LaplaceMechanism", "as_global_l1"]


def as_global_l1(x: Any) -> GlobalSensitivity:
    """Accept a number (taken as a global L1 sensitivity) or a global L1 Sensitivity."""
    if not hasattr(x, "kind"):
        x = GlobalSensitivity(value=x, norm=Norm.L1)
    return require_sensitivity(
        x, kinds=(SensitivityKind.GLOBAL,), norms=(Norm.L1,), who="the Laplace mechanism"
    )  # type: ignore[return-value]


def finite_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array (0-d or 1-d) after rejecting NaN/inf and non-numbers."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise PrivregTypeError(f"{name} must be a number or a 1-d array of numbers; got {value!r}") from None
    if arr.ndim > 1:
        raise PrivregValueError(f"{name} must be a scalar or a 1-d vector; got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        first = arr.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]]
        raise PrivregValueError(
            f"{name} must be finite; got {first} (at {int(np.flatnonzero(bad.reshape(-1))[0])}). "
            f"Remove or impute NaN/inf before releasing."
        )
    return arr


@attrs.frozen(kw_only=True)
class LaplaceMechanism(Mechanism):
    """Adds Laplace noise of scale ``sensitivity / epsilon`` to a scalar or vector query.

    Guarantee: ``epsilon``-DP for queries whose global L1 sensitivity is ``sensitivity``
    (Dwork-McSherry-Nissim-Smith 2006). The answer is snapped to a power-of-two fraction
    of the sensitivity and two-sided geometric (discrete Laplace) noise is added with the
    exact sampler of Canonne-Kamath-Steinke 2020 on the OS CSPRNG; the grid and the noise
    scale are chosen so that the integer release is exactly ``epsilon``-DP (see
    :mod:`privreg.noise.grid`). The output is on that grid, so its floating-point bits
    carry no information about the input (Mironov 2012). This exact path draws
    about 2e4 values per second per core (``benchmarks/samplers.py``).
    """

    name: ClassVar[str] = "laplace"
    epsilon: float = attrs.field(converter=lambda x: v.check_epsilon("epsilon", x))
    sensitivity: GlobalSensitivity = attrs.field(converter=as_global_l1)

    def privacy_event(self) -> PrivacyEvent:
        return Laplace(scale=self.sensitivity.value / self.epsilon, sensitivity=self.sensitivity.value)

    def validate_input(self, value: Any) -> np.ndarray:
        return finite_array("value", value)

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> Any:
        dim = max(1, value.size)
        grid = Grid.for_query(sensitivity=self.sensitivity.value, epsilon=self.epsilon, dimension=dim)
        k_sens = grid.integer_sensitivity(dim)
        scale = Fraction(k_sens) / Fraction(self.epsilon)  # epsilon = k_sens / scale exactly
        noisy = [
            grid.to_float(snap_to_grid(float(x), grid) + discrete_laplace(scale, rng))
            for x in value.reshape(-1)
        ]
        return noisy[0] if value.ndim == 0 else np.asarray(noisy)
