"""Releases of real-valued queries as integer noise on a grid (shared by Laplace and
Gaussian): snap the answer to the grid, add integer noise, map back.

**Arithmetic on data never overflows.** A snapped answer ``k = round(x / g)`` is a Python
integer, exact for every finite float ``x`` (up to about ``1.8e308 / g``). ``k + z`` is
computed in int64 only when ``|k|`` and the noise ``|z|`` are both below ``2**62`` (so
the sum fits), and in Python integers otherwise. The released float is
:func:`grid_to_float`: ``(k + z) * g`` rounded once to the nearest float, ``+-inf`` when
that lies beyond the float range -- a fixed function of the integer ``k + z`` whichever
path computed it, so the path taken changes the running time, never the output. Integer
mechanisms accept queries in ``[-2**62, 2**62]`` (:data:`MAX_INTEGER_QUERY`) and refuse
anything else before the charge, so ``k + z`` fits int64 whenever ``|z| <= 2**62``.
"""

from __future__ import annotations

import functools
import math
import numbers
from abc import abstractmethod
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.laws import DiscreteLaw, OutputLaw
from privreg.core.mechanism import Mechanism
from privreg.core.randomness import RandomSource
from privreg.mechanisms.laws import noise_law
from privreg.noise import Grid, snap_to_grid

__all__ = [
    "GridMechanism",
    "IntegerNoiseMechanism",
    "MAX_INTEGER_QUERY",
    "finite_array",
    "integer_array",
    "grid_to_float",
    "grid_values",
    "snap_values",
    "exact_sum",
    "saturate_int64",
]

#: Largest magnitude of an integer query (and of a snapped value on the int64 fast path):
#: ``k + z`` then fits int64 for every noise value of magnitude at most ``2**62``.
MAX_INTEGER_QUERY = 1 << 62
_INT64_MAX = (1 << 63) - 1
#: Below this magnitude an integer converts to float64 exactly.
_FLOAT_EXACT = 1 << 53


def finite_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array (0-d or 1-d) after rejecting NaN/inf and non-numbers.
    Errors name the argument and the rule, never a value or a position."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except OverflowError:
        raise PrivregValueError(
            f"{name} must lie within the float64 range (|x| <= 1.8e308); an integer beyond it "
            f"cannot be released. Scale the query down before releasing."
        ) from None
    except (TypeError, ValueError):
        raise PrivregTypeError(
            f"{name} must be a number or a 1-d array of numbers; got {type(value).__name__}"
        ) from None
    if arr.ndim > 1:
        raise PrivregValueError(f"{name} must be a scalar or a 1-d vector; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise PrivregValueError(
            f"{name} must be finite (no NaN or inf, and integers within the float64 range); "
            f"remove or impute such entries before releasing."
        )
    return np.asarray(arr + 0.0)  # -0.0 becomes 0.0


def integer_array(name: str, value: Any, dimension: int) -> np.ndarray:
    """``value`` as an int64 scalar or vector of ``dimension`` coordinates, each in
    ``[-2**62, 2**62]``; whole floats are accepted. Anything else is refused with an error
    naming the argument and the rule (never the value): beyond that range the noisy sum
    could leave int64."""
    arr = np.asarray(value)
    if arr.ndim > 1:
        raise PrivregValueError(f"{name} must be a scalar or a 1-d vector; got shape {arr.shape}")
    size = arr.size if arr.ndim else 1
    if size != dimension:
        raise PrivregValueError(
            f"{name} has {size} coordinate(s) but the mechanism was built for dimension="
            f"{dimension}; build it with dimension={size}"
        )
    flat = arr.reshape(-1)
    out_of_range = PrivregValueError(
        f"{name} must hold integers in [-2**62, 2**62] (the range in which value + noise "
        f"cannot overflow int64); scale or clip the query to a public range before releasing"
    )
    if flat.dtype.kind == "O":
        items = flat.tolist()
        if not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in items):
            raise _not_integers(name)
        if any(abs(int(x)) > MAX_INTEGER_QUERY for x in items):
            raise out_of_range
        return np.array([int(x) for x in items], dtype=np.int64).reshape(arr.shape)
    if flat.dtype.kind in "iu":
        if flat.size and (
            int(flat.max()) > MAX_INTEGER_QUERY or (flat.dtype.kind == "i" and int(flat.min()) < -MAX_INTEGER_QUERY)
        ):
            raise out_of_range
        return arr.astype(np.int64)
    if flat.dtype.kind == "f":
        if not np.all(np.isfinite(flat)) or not np.all(flat == np.round(flat)):
            raise _not_integers(name)
        if flat.size and float(np.max(np.abs(flat))) > MAX_INTEGER_QUERY:
            raise out_of_range
        return arr.astype(np.int64)
    raise _not_integers(name)


def round_ratio(num: int, den: int) -> int:
    """``round(Fraction(num, den))`` (ties to even) for ``den > 0``, in integers."""
    q, r = divmod(num, den)
    twice = 2 * r
    return q + 1 if twice > den or (twice == den and q & 1) else q


def _not_integers(name: str) -> PrivregTypeError:
    return PrivregTypeError(
        f"{name} must hold integers (counts), as int or whole floats; use the 'laplace' or "
        f"'gaussian' mechanism for real-valued queries."
    )


# --- exact arithmetic on snapped values ----------------------------------------------------

#: Values per chunk of a grid mechanism's release_many (about 2 MiB of int64 temporaries).
_CHUNK = 1 << 18


def snap_values(values: np.ndarray, grid: Grid) -> list[int]:
    """``round(x / step)`` for every entry, as exact Python integers (any finite float)."""
    return [snap_to_grid(float(x), grid) for x in np.asarray(values, dtype=np.float64).reshape(-1)]


def exact_sum(k: list[int], noise: np.ndarray) -> np.ndarray:
    """``k + noise`` exactly, ``k`` broadcast along the last axis of ``noise``: an int64
    array when every ``|k|`` and ``|z|`` is at most ``2**62`` (no overflow), otherwise an
    object array of Python integers."""
    noise = np.asarray(noise)
    if all(-MAX_INTEGER_QUERY <= x <= MAX_INTEGER_QUERY for x in k) and (
        noise.size == 0 or (int(noise.max()) <= MAX_INTEGER_QUERY and int(noise.min()) >= -MAX_INTEGER_QUERY)
    ):
        return np.asarray(k, dtype=np.int64) + noise.astype(np.int64, copy=False)
    base = np.empty(len(k), dtype=object)
    base[:] = [int(x) for x in k]
    return base + noise.astype(object)


def grid_to_float(total: int, step: Fraction) -> float:
    """``total * step`` rounded once to the nearest float; ``+-inf`` beyond the float
    range (IEEE rounding of an overflow). Never raises."""
    num = int(total) * step.numerator
    try:
        return num / step.denominator  # int / int: correctly rounded
    except OverflowError:
        return math.inf if num > 0 else -math.inf


def grid_values(totals: np.ndarray, step: Fraction) -> np.ndarray:
    """:func:`grid_to_float` of every entry of ``totals`` (int64 or object integers), as a
    float64 array of the same shape. Vectorised when every ``|total| <= 2**53`` and the
    step is a float far from overflow (then ``float(total) * step`` is that same single
    rounding); elementwise in Python integers otherwise."""
    totals = np.asarray(totals)
    f_step = float(step)
    if (
        totals.dtype == np.int64
        and Fraction(f_step) == step
        and f_step < 2.0**960
        and (totals.size == 0 or (int(totals.max()) <= _FLOAT_EXACT and int(totals.min()) >= -_FLOAT_EXACT))
    ):
        return totals.astype(np.float64) * f_step
    flat = [grid_to_float(t, step) for t in totals.reshape(-1).tolist()]
    return np.array(flat, dtype=np.float64).reshape(totals.shape)


def saturate_int64(totals: np.ndarray) -> np.ndarray:
    """Integer totals as int64, clipped to ``[-(2**63 - 1), 2**63 - 1]`` (a fixed function
    of the totals; reached only if a noise value exceeds ``2**62``)."""
    totals = np.asarray(totals)
    if totals.dtype == np.int64:
        return totals
    flat = [max(-_INT64_MAX, min(_INT64_MAX, int(t))) for t in totals.reshape(-1).tolist()]
    return np.array(flat, dtype=np.int64).reshape(totals.shape)


def _takes_scalar_path(mech: Mechanism, base: Any) -> bool:
    """Whether ``base``'s scalar path fits ``mech``: immutable (the path is cached), one
    coordinate, and validating and sampling as ``base`` does (a subclass doing either its
    own way keeps the general path)."""
    cls = type(mech)
    return (
        mech._immutable
        and getattr(mech, "dimension", None) == 1
        and cls.validate_input is base.validate_input
        and cls._sample is base._sample
    )


class IntegerNoiseMechanism(Mechanism):
    """Base of mechanisms adding integer noise from :meth:`_noise` to integer queries of
    ``dimension`` coordinates: outputs are integers, so no grid is needed. Queries must lie
    in ``[-2**62, 2**62]`` (refused before the charge otherwise); a scalar output is the
    exact Python integer ``k + z``, a vector output int64 (saturating at ``+-(2**63 - 1)``,
    which needs a noise value beyond ``2**62``)."""

    dimension: int

    @abstractmethod
    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        """``count`` independent integer noise values (int64)."""

    def _noise_one(self, rng: RandomSource) -> int:
        """One noise value, from the stream exactly as ``_noise(1, rng)`` takes it (the
        scalar releases' path; override with a path that builds no arrays)."""
        return int(self._noise(1, rng)[0])

    def validate_input(self, value: Any) -> np.ndarray:
        if type(value) is int and self.dimension == 1 and -MAX_INTEGER_QUERY <= value <= MAX_INTEGER_QUERY:
            return np.array(value, dtype=np.int64)  # what integer_array returns, without its checks
        return integer_array("value", value, self.dimension)

    def coordinate_law(self, center: int) -> DiscreteLaw | None:
        """The law of one output coordinate ``center + noise`` (None: not declared)."""
        return None

    def output_law(self, value: np.ndarray) -> OutputLaw | None:
        """``value + noise``, independently per coordinate (the window of
        :mod:`privreg.mechanisms.laws`)."""
        centers = [int(x) for x in value.reshape(-1).tolist()]

        def columns(outputs: Any) -> np.ndarray:
            rows = np.asarray(outputs, dtype=object).reshape(-1, len(centers))
            return np.array([[int(o) - c for o, c in zip(row, centers)] for row in rows.tolist()], dtype=np.int64)

        return noise_law([self.coordinate_law(c) for c in centers], columns, scalar=value.ndim == 0)

    def _scalar_noise(self) -> Callable[[RandomSource], int]:
        """The sampler of one noise value, called as ``f(rng)``: :meth:`_noise_one`, or a
        subclass's direct sampler drawing the same value from the same stream."""
        return self._noise_one

    @functools.cached_property
    def _scalar_sampler(self) -> Callable[[RandomSource], int]:
        return self._scalar_noise()  # fixed per mechanism: computed once

    def _scalar_path(self) -> tuple[Callable[[Any], Any], Callable[[Any, RandomSource], Any]] | None:
        # a plain int in range is its own canonical value: validate_input's and _sample's
        # scalar branches, without the 0-d array between them
        if not _takes_scalar_path(self, IntegerNoiseMechanism):
            return None
        noise, low, high = self._scalar_sampler, -MAX_INTEGER_QUERY, MAX_INTEGER_QUERY

        def prepare(value: Any) -> int | None:
            return value if type(value) is int and low <= value <= high else None

        def sample(k: int, rng: RandomSource) -> int:
            return k + noise(rng)

        return prepare, sample

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> Any:
        if value.ndim == 0:
            return int(value) + self._scalar_sampler(rng)
        noise = self._noise(self.dimension, rng)
        return saturate_int64(exact_sum(value.reshape(-1).tolist(), noise))

    def _sample_many(self, value: np.ndarray, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        noise = self._noise(count * self.dimension, rng).reshape(count, self.dimension)
        out = saturate_int64(exact_sum(value.reshape(-1).tolist(), noise))
        return out[:, 0] if value.ndim == 0 else out


class GridMechanism(Mechanism):
    """Base of mechanisms that snap a ``dimension``-coordinate answer to ``grid`` (step
    ``sensitivity / grid.multiple``) and add integer noise from :meth:`_noise`. The output
    is a deterministic function of integers, so its floating-point bits reveal nothing
    about the input (Mironov 2012).

    Input range: every finite float64 (and every integer within the float range); NaN,
    inf and larger integers are refused before the charge. Nothing is clamped: the
    arithmetic is exact (module docstring), and an output beyond the float range is
    ``+-inf``."""

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

    def _noise_one(self, rng: RandomSource) -> int:
        """One noise value, from the stream exactly as ``_noise(1, rng)`` takes it (the
        scalar releases' path; override with a path that builds no arrays)."""
        return int(self._noise(1, rng)[0])

    def validate_input(self, value: Any) -> np.ndarray:
        if type(value) is float and self.dimension == 1 and math.isfinite(value):
            return np.array(value + 0.0)  # what finite_array returns, without numpy's checks
        arr = finite_array("value", value)
        size = arr.size if arr.ndim else 1
        if size != self.dimension:
            raise PrivregValueError(
                f"value has {size} coordinate(s) but the mechanism was built for dimension="
                f"{self.dimension}; build it with dimension={size}"
            )
        return arr

    def _snap(self, value: np.ndarray) -> list[int]:
        return snap_values(value, self.grid)

    def coordinate_law(self, center: int) -> DiscreteLaw | None:
        """The law of one coordinate's integer total ``center + noise`` (grid units; the
        output is that total times the step, rounded once: post-processing). None: not
        declared."""
        return None

    def output_law(self, value: np.ndarray) -> OutputLaw | None:
        """The law of the integer totals ``snapped value + noise`` in grid units, per
        coordinate; outputs are encoded back to totals exactly (``round(output / step)``,
        exact while the total is below 2**53 grid steps)."""
        centers = self._snap(value)
        step = self.grid.step

        def totals(outputs: Any) -> np.ndarray:
            flat = np.asarray(outputs, dtype=np.float64).reshape(-1, len(centers))
            return np.array(
                [[round(Fraction(float(o)) / step) - c for o, c in zip(row, centers)] for row in flat.tolist()],
                dtype=np.int64,
            )

        def scalar_totals(outputs: Any) -> np.ndarray:
            return totals(outputs).reshape(-1)

        factors = []
        for c in centers:
            law = self.coordinate_law(c)
            factors.append(None if law is None else attrs.evolve(law, encode=scalar_totals))
        return noise_law(factors, totals, scalar=value.ndim == 0)

    def _snap_one(self, x: float) -> int:
        """``snap_to_grid(x, self.grid)`` in integers (no Fraction): ``x / step =
        p D / (q N)`` for ``x = p / q`` and ``step = N / D``."""
        p, q = x.as_integer_ratio()
        step = self.grid.step
        return round_ratio(p * step.denominator, q * step.numerator)

    def _scalar_noise(self) -> Callable[[RandomSource], int]:
        """The sampler of one noise value, called as ``f(rng)``: :meth:`_noise_one`, or a
        subclass's direct sampler drawing the same value from the same stream (one call
        instead of a chain of wrappers on the scalar path)."""
        return self._noise_one

    @functools.cached_property
    def _scalar_steps(self) -> tuple[Callable[[Any], int | None], Callable[[int, RandomSource], float]]:
        """``(snap, finish)`` of a scalar release, with the grid step ``N / D`` and
        :meth:`_scalar_noise` bound (public and fixed: computed once). ``snap(x)`` is
        :meth:`_snap_one` of a finite float or an int within ``+-2**53`` (None for anything
        else); ``finish(k, rng)`` is ``(k + noise) * step`` rounded once, as
        :func:`grid_to_float` gives it."""
        step = self.grid.step
        n, d, noise, isfinite = step.numerator, step.denominator, self._scalar_noise(), math.isfinite

        def snap(x: Any) -> int | None:
            if type(x) is not float or not isfinite(x):
                if type(x) is not int or not -_FLOAT_EXACT <= x <= _FLOAT_EXACT:
                    return None
                x = float(x)  # exact: what validate_input makes of it
            p, q = x.as_integer_ratio()  # round_ratio(p D, q N), inlined
            den = q * n
            k, r = divmod(p * d, den)
            return k + 1 if 2 * r > den or (2 * r == den and k & 1) else k

        def finish(k: int, rng: RandomSource) -> float:
            total = (k + noise(rng)) * n
            try:
                return total / d  # int / int: correctly rounded
            except OverflowError:
                return math.inf if total > 0 else -math.inf

        return snap, finish

    def _scalar_path(self) -> tuple[Callable[[Any], Any], Callable[[Any, RandomSource], Any]] | None:
        # a plain number goes from the value to its grid integer at once, with no 0-d array
        if not _takes_scalar_path(self, GridMechanism):
            return None
        return self._scalar_steps

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> Any:
        if value.shape == ():  # scalar: plain integers, the same value as the array path
            snap, finish = self._scalar_steps
            return finish(snap(float(value)), rng)  # type: ignore[arg-type]  # finite: an int
        totals = exact_sum(self._snap(value), self._noise(self.dimension, rng))
        return grid_values(totals, self.grid.step).reshape(value.shape)

    def _sample_many(self, value: np.ndarray, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        # In chunks of about _CHUNK values, so that the noise and sum temporaries stay in
        # cache at any count (independent draws per chunk: the same joint law).
        dim, step = self.dimension, self.grid.step
        snapped = [self._snap_one(float(value))] if value.shape == () else self._snap(value)
        out = np.empty((count, dim), dtype=np.float64)
        rows = max(1, _CHUNK // dim)
        for start in range(0, count, rows):
            n = min(rows, count - start)
            noise = self._noise(n * dim, rng).reshape(n, dim)
            out[start : start + n] = grid_values(exact_sum(snapped, noise), step)
        return out[:, 0] if value.shape == () else out.reshape((count, *value.shape))
