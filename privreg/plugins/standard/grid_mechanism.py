"""Releases of real-valued queries as integer noise on a grid (shared by Laplace and
Gaussian): snap the answer to the grid, add integer noise, map back."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.mechanism import Mechanism
from privreg.core.randomness import RandomSource
from privreg.noise import Grid, snap_to_grid

__all__ = ["GridMechanism", "IntegerNoiseMechanism", "finite_array", "integer_array"]


def finite_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array (0-d or 1-d) after rejecting NaN/inf and non-numbers."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise PrivregTypeError(f"{name} must be a number or a 1-d array of numbers; got {value!r}") from None
    if arr.ndim > 1:
        raise PrivregValueError(f"{name} must be a scalar or a 1-d vector; got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr.reshape(-1)))
    if bad.size:
        raise PrivregValueError(
            f"{name} must be finite; got {arr.reshape(-1)[bad[0]]} (at {int(bad[0])}). "
            f"Remove or impute NaN/inf before releasing."
        )
    return arr


def integer_array(name: str, value: Any, dimension: int) -> np.ndarray:
    """``value`` as an int64 scalar or vector of ``dimension`` coordinates; whole floats
    are accepted, anything else is an error pointing to the real-valued mechanisms."""
    arr = np.asarray(value)
    if arr.ndim > 1:
        raise PrivregValueError(f"{name} must be a scalar or a 1-d vector; got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise PrivregTypeError(
                f"{name} must hold integers (counts); got {value!r}. Use the 'laplace' or "
                f"'gaussian' mechanism for real-valued queries."
            )
    size = arr.size if arr.ndim else 1
    if size != dimension:
        raise PrivregValueError(
            f"{name} has {size} coordinate(s) but the mechanism was built for dimension="
            f"{dimension}; build it with dimension={size}"
        )
    return arr.astype(np.int64)


class IntegerNoiseMechanism(Mechanism):
    """Base of mechanisms adding integer noise from :meth:`_noise` to integer queries of
    ``dimension`` coordinates: outputs are integers, so no grid is needed."""

    dimension: int

    @abstractmethod
    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        """``count`` independent integer noise values (int64)."""

    def validate_input(self, value: Any) -> np.ndarray:
        return integer_array("value", value, self.dimension)

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> Any:
        out = value.reshape(-1) + self._noise(self.dimension, rng)
        return int(out[0]) if value.ndim == 0 else out

    def _sample_many(self, value: np.ndarray, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        noise = self._noise(count * self.dimension, rng).reshape(count, self.dimension)
        out = value.reshape(-1) + noise
        return out[:, 0] if value.ndim == 0 else out


class GridMechanism(Mechanism):
    """Base of mechanisms that snap a ``dimension``-coordinate answer to ``grid`` (step
    ``sensitivity / grid.multiple``) and add integer noise from :meth:`_noise`. The output
    is a deterministic function of integers, so its floating-point bits reveal nothing
    about the input (Mironov 2012)."""

    dimension: int

    @property
    @abstractmethod
    def grid(self) -> Grid:
        """The public grid; it may depend on configuration, never on data."""

    @abstractmethod
    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        """``count`` independent integer noise values (int64)."""

    @property
    def _step(self) -> float:
        return self.sensitivity.value / self.grid.multiple  # type: ignore[attr-defined]

    def validate_input(self, value: Any) -> np.ndarray:
        arr = finite_array("value", value)
        size = arr.size if arr.ndim else 1
        if size != self.dimension:
            raise PrivregValueError(
                f"value has {size} coordinate(s) but the mechanism was built for dimension="
                f"{self.dimension}; build it with dimension={size}"
            )
        return arr

    def _snap(self, value: np.ndarray) -> np.ndarray:
        grid = self.grid
        return np.array([snap_to_grid(float(x), grid) for x in value.reshape(-1)], dtype=np.int64)

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> Any:
        out = (self._snap(value) + self._noise(self.dimension, rng)).astype(np.float64) * self._step
        return float(out[0]) if value.shape == () else out.reshape(value.shape)

    def _sample_many(self, value: np.ndarray, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        noise = self._noise(count * self.dimension, rng).reshape(count, self.dimension)
        out = (self._snap(value) + noise).astype(np.float64) * self._step
        return out[:, 0] if value.shape == () else out.reshape((count, *value.shape))
