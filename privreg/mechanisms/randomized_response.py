"""k-ary randomized response, vectorised over a population."""

from __future__ import annotations

import functools
import math
import numbers
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.laws import OutputLaw
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomizer import FrequencyEstimate, Randomizer
from privreg.core.randomness import RandomSource
from privreg.mechanisms.laws import categorical_law
from privreg.mechanisms.probabilities import exp_lower_bound
from privreg.noise import uniform_below
from privreg.noise.vector import uniform_below_one

__all__ = ["RandomizedResponse"]

_BITS = 53


def category_array(name: str, inputs: Any, k: int) -> np.ndarray:
    """``inputs`` as a 1-d int64 array of categories in ``[0, k)``; whole floats are
    accepted. Anything else is refused with the rule, never a value or its position."""
    try:
        arr = np.asarray(inputs)
    except (TypeError, ValueError, OverflowError):
        raise PrivregTypeError(f"{name} must be a 1-d array of integer category codes") from None
    if arr.ndim != 1:
        raise PrivregValueError(f"{name} must be a 1-d array (one category per user); got shape {arr.shape}")
    outside = PrivregValueError(
        f"{name} has entries outside the declared domain [0, {k}) of category codes; encode "
        f"categories as 0..k-1 or raise k"
    )
    if arr.size and arr.dtype.kind == "O":
        items = arr.tolist()
        if all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in items):
            # Python integers beyond uint64 (numpy keeps them as objects): the same rule as any code
            if any(not 0 <= int(x) < k for x in items):
                raise outside
            arr = np.array([int(x) for x in items], dtype=np.int64)
    if arr.size and arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            if np.any((arr < 0) | (arr >= k)):  # before the cast: 1e308 must not wrap
                raise outside
            arr = arr.astype(np.int64)
        else:
            raise PrivregTypeError(
                f"{name} must hold integer category codes (int or whole floats); got dtype {arr.dtype}"
            )
    if arr.size and (arr.min() < 0 or arr.max() >= k):  # compared before any cast to int64
        raise outside
    return arr.astype(np.int64, copy=False)


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class RandomizedResponse(Randomizer):
    """k-ary randomized response: report the true category with probability
    ``p = e^eps / (e^eps + k - 1)``, otherwise a uniformly random other category.

    Guarantee: ``epsilon``-LDP per user (Warner 1965; Kairouz-Oh-Viswanath 2014). The
    keep probability is rounded *down* to a multiple of 2^-53 and drawn from exact
    uniform CSPRNG integers, so the realised ratio p/q is at most ``e^epsilon``; the
    estimator uses the realised p, so it is exactly unbiased.
    """

    name: ClassVar[str] = "randomized-response"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    k: int = param_field(minimum=2, doc="number of categories")

    def __attrs_post_init__(self) -> None:
        self.keep_numerator  # noqa: B018 -- refuse an epsilon we cannot round safely, early

    @property
    def epsilon0(self) -> float:
        return self.epsilon

    _immutable: ClassVar[bool] = True

    @functools.cached_property
    def keep_numerator(self) -> int:
        """Keep with probability keep_numerator / 2**53: at least 1/k and at most
        L / (L + k - 1) for a certified L <= e^epsilon, so p/q <= e^epsilon and q <= p."""
        low = exp_lower_bound(self.epsilon)
        numerator = math.floor(low / (low + self.k - 1) * (1 << _BITS))
        if numerator * self.k < (1 << _BITS):
            raise PrivregValueError(
                f"epsilon={self.epsilon!r} is too small for {_BITS}-bit probabilities with k={self.k}; "
                f"use epsilon >= {self.k * 2.0**-_BITS * 4:.1e}"
            )
        return numerator

    @functools.cached_property
    def keep_probability(self) -> Fraction:
        return Fraction(self.keep_numerator, 1 << _BITS)

    def validate_inputs(self, inputs: Any) -> np.ndarray:
        if type(inputs) is list and len(inputs) == 1 and type(inputs[0]) is int and 0 <= inputs[0] < self.k:
            return np.array(inputs, dtype=np.int64)  # what category_array returns, without its checks
        return category_array("inputs", inputs, self.k)

    def output_law(self, value: Any) -> OutputLaw | None:
        """The report of a user holding category ``value``: itself with the realised keep
        probability ``p``, each other category with ``(1 - p) / (k - 1)``."""
        p = self.keep_probability
        probs = np.full(self.k, float((1 - p) / (self.k - 1)))
        probs[int(value)] = float(p)
        return categorical_law(probs)

    def _randomize(self, inputs: np.ndarray, rng: RandomSource) -> np.ndarray:
        n = inputs.size
        if n == 1:  # one user: plain integers, the same draws as the array path below
            keep1 = uniform_below_one(1 << _BITS, rng) < self.keep_numerator
            other1 = uniform_below_one(self.k - 1, rng)
            x = int(inputs[0])
            return np.array([x if keep1 else other1 + (other1 >= x)], dtype=np.int64)
        keep = uniform_below(1 << _BITS, n, rng) < self.keep_numerator
        other = uniform_below(self.k - 1, n, rng)
        other += other >= inputs  # uniform over the k-1 categories != input
        return np.where(keep, inputs, other)

    def estimate(self, reports: np.ndarray) -> FrequencyEstimate:
        """Unbiased count per category, with the variance of each estimate evaluated
        at the estimate (clipped to [0, n]): ``Var = (c p(1-p) + (n-c) q(1-q)) / (p-q)^2``."""
        reports = category_array("reports", reports, self.k)
        n = reports.size
        p = float(self.keep_probability)
        q = (1.0 - p) / (self.k - 1)
        counts = np.bincount(reports, minlength=self.k).astype(np.float64)
        est = (counts - n * q) / (p - q)
        c = np.clip(est, 0, n)
        var = (c * p * (1 - p) + (n - c) * q * (1 - q)) / (p - q) ** 2
        return FrequencyEstimate(counts=est, variance=var)
