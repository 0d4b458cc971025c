"""Optimized Unary Encoding (OUE), a local randomizer that reports a noisy one-hot vector.

Each user holds one item ``x`` of ``{0, ..., k-1}``. Its one-hot vector of length ``k``
is perturbed bit by bit: the bit of ``x`` is reported as 1 with probability ``p = 1/2``,
every other bit as 1 with probability ``q = 1 / (e^eps + 1)``, all independently.

Reference: T. Wang, J. Blocki, N. Li, S. Jha, "Locally Differentially Private Protocols
for Frequency Estimation", USENIX Security 2017, Section 4 (Unary Encoding; OUE chooses
``p = 1/2, q = 1/(e^eps + 1)`` to minimise the estimator's variance).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.laws import DiscreteLaw, OutputLaw, ProductLaw
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomizer import FrequencyEstimate, Randomizer
from privreg.core.randomness import RandomSource
from privreg.mechanisms.probabilities import exp_lower_bound
from privreg.mechanisms.randomized_response import category_array

__all__ = ["OptimizedUnaryEncoding", "bernoulli_dyadic"]

_BITS = 53
_ONE = 1 << _BITS
_BYTES_PER_CALL = 1 << 24  # stay far below what InsecureReproducibleRandom can serve


def _random_bytes(size: int, rng: RandomSource) -> np.ndarray:
    """``size`` independent uniform bytes (uint8), requested in bounded pieces."""
    if size <= _BYTES_PER_CALL:
        return np.frombuffer(rng.random_bytes(size), dtype=np.uint8)
    parts = [rng.random_bytes(min(_BYTES_PER_CALL, size - i)) for i in range(0, size, _BYTES_PER_CALL)]
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def bernoulli_dyadic(numerator: int, bits: int, size: int, rng: RandomSource) -> np.ndarray:
    """``size`` independent booleans, each True with probability exactly
    ``numerator / 2**bits`` (``0 <= numerator <= 2**bits``).

    Exact and lazy: with ``B = 8 ceil(bits / 8)``, a draw is ``U < numerator 2^(B-bits)``
    for ``U`` uniform on ``[0, 2^B)``. ``U`` is compared with the threshold one
    big-endian byte at a time and only the draws whose bytes so far equal the threshold's
    get another byte (lexicographic order of the bytes is the order of the integers), so
    about ``1 + 1/255`` bytes are used per draw instead of 8."""
    if not 0 <= numerator <= 1 << bits:
        raise PrivregValueError(f"numerator must lie in [0, 2**{bits}]; got {numerator}")
    if numerator == 1 << bits:
        return np.ones(size, dtype=bool)
    nbytes = -(-bits // 8)
    threshold = (numerator << (8 * nbytes - bits)).to_bytes(nbytes, "big")
    u = _random_bytes(size, rng)
    out = u < threshold[0]
    todo = np.flatnonzero(u == threshold[0])  # about size / 256 ties
    for byte in threshold[1:]:
        if not todo.size:
            break
        u = _random_bytes(todo.size, rng)
        out[todo[u < byte]] = True
        todo = todo[u == byte]
    return out  # draws still tied equal the threshold: U == threshold is not below it


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class OptimizedUnaryEncoding(Randomizer):
    """Optimized Unary Encoding over ``{0, ..., k-1}`` (Wang-Blocki-Li-Jha 2017).

    **Report.** One row per user of an ``(n, k)`` boolean matrix: the perturbed one-hot
    vector (``k`` bytes per user).

    **Privacy (epsilon-LDP).** For inputs ``x != x'`` and a report ``B``, all bits but
    those of ``x`` and ``x'`` have the same law under both inputs, so
    ``Pr[B | x] / Pr[B | x'] = P(B_x | 1) P(B_x' | 0) / (P(B_x | 0) P(B_x' | 1))``, whose
    largest value is ``p (1-q) / ((1-p) q)`` (at ``B_x = 1, B_x' = 0``) and smallest its
    inverse; the report is exactly ``|ln(p (1-q) / ((1-p) q))|``-LDP. Here ``p = 1/2``
    exactly (a fair coin from uniform bytes) and the ratio is ``(1-q)/q``; ``q`` is
    rounded *up* to ``M / 2^53`` with ``M = ceil(2^53 / (1 + L))`` and ``L <= e^eps`` a
    certified rational lower bound, so ``M (1 + L) >= 2^53``, i.e. the realised
    ``(1-q)/q = (2^53 - M)/M <= L <= e^eps``, with no floating point in the inequality.
    The loss is at most one step of ``M``: realised ``ln((1-q)/q) >= eps - 2^-50 -
    2^-53 / (q (1-q))`` (approximately), negligible unless ``q`` is below about
    ``2^-40`` (epsilon above about 28, where the realised guarantee is strictly better
    than claimed; ``q`` never goes below ``2^-53``). Parameters with ``q = 1/2``
    (epsilon below about ``2 10^-15``) are refused. Bits are exact Bernoulli draws from
    uniform bytes (:func:`bernoulli_dyadic`).

    **Estimator.** With ``c_j`` reports whose bit ``j`` is 1 among ``n``,
    ``(c_j - n q) / (p - q)`` is an unbiased estimate of the number ``n_j`` of users
    holding ``j``, with variance ``(n_j p (1-p) + (n - n_j) q (1-q)) / (p - q)^2``
    (Wang et al. 2017; ``n 4 e^eps / (e^eps - 1)^2`` when ``n_j << n``). Units: counts
    of users.
    """

    name: ClassVar[str] = "optimized-unary-encoding"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    k: int = param_field(minimum=2, doc="number of categories (report length in bits)")

    def __attrs_post_init__(self) -> None:
        if self.flip_numerator >= _ONE // 2:
            raise PrivregValueError(
                f"epsilon={self.epsilon!r} is too small for unary encoding to be realised with "
                f"53-bit probabilities (q would round to 1/2); use epsilon >= 1e-14"
            )

    @property
    def epsilon0(self) -> float:
        return self.epsilon

    @property
    def flip_numerator(self) -> int:
        """A bit other than the user's is 1 with probability flip_numerator / 2**53."""
        return math.ceil(Fraction(_ONE) / (1 + exp_lower_bound(self.epsilon)))

    @property
    def keep_probability(self) -> Fraction:
        """``p = 1/2``: probability that the user's own bit is reported as 1."""
        return Fraction(1, 2)

    @property
    def other_probability(self) -> Fraction:
        """Realised ``q`` (at least ``1 / (e^eps + 1)``)."""
        return Fraction(self.flip_numerator, _ONE)

    @property
    def privacy_ratio(self) -> Fraction:
        """Realised worst-case likelihood ratio ``p (1-q) / ((1-p) q)`` (<= e^epsilon)."""
        p, q = self.keep_probability, self.other_probability
        return p * (1 - q) / ((1 - p) * q)

    def validate_inputs(self, inputs: Any) -> np.ndarray:
        return category_array("inputs", inputs, self.k)

    def output_law(self, value: Any) -> OutputLaw | None:
        """The report of a user holding item ``value``: ``k`` independent bits, bit
        ``value`` set with probability 1/2, every other with the realised ``q``."""
        q = float(self.other_probability)
        other = DiscreteLaw(support=np.array([0, 1]), log_pmf=np.log([1 - q, q]))
        own = DiscreteLaw(support=np.array([0, 1]), log_pmf=np.log([0.5, 0.5]))
        return ProductLaw(factors=[own if i == int(value) else other for i in range(self.k)])

    def _randomize(self, inputs: np.ndarray, rng: RandomSource) -> np.ndarray:
        n, k = inputs.size, self.k
        out = bernoulli_dyadic(self.flip_numerator, _BITS, n * k, rng).reshape(n, k)
        coins = np.unpackbits(_random_bytes(-(-n // 8), rng))[:n].astype(bool)  # p = 1/2
        out[np.arange(n), inputs] = coins
        return out

    def validate_reports(self, reports: Any) -> np.ndarray:
        """``reports`` as an ``(n, k)`` boolean array; 0/1 integers are accepted."""
        arr = np.asarray(reports)
        if arr.ndim != 2 or arr.shape[1] != self.k:
            raise PrivregValueError(
                f"reports must be a 2-d array of shape (n, {self.k}) (one bit vector per user); got shape {arr.shape}"
            )
        if arr.dtype == bool:
            return arr
        if arr.size and arr.dtype.kind not in "iu":
            raise PrivregTypeError(f"reports must hold bits (bool or 0/1 integers); got dtype {arr.dtype}")
        bad = (arr != 0) & (arr != 1)
        if bad.any():
            i, j = (int(x) for x in np.argwhere(bad)[0])
            raise PrivregValueError(f"reports[{i}, {j}] = {arr[i, j]} is not a bit (0 or 1)")
        return arr.astype(bool)

    def item_counts(self, reports: Any) -> np.ndarray:
        """How many reports have each bit set, as an int64 array of length ``k``."""
        return self.validate_reports(reports).sum(axis=0, dtype=np.int64)

    def variance(self, true_counts: Any) -> np.ndarray:
        """Exact variance of :meth:`estimate`'s count for each item, given the true
        number of users holding each item (length ``k``; ``n`` is their sum)."""
        t = np.asarray(true_counts, dtype=np.float64)
        if t.shape != (self.k,) or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise PrivregValueError(f"true_counts must be {self.k} non-negative counts; got shape {t.shape}")
        return _variance(t, float(t.sum()), 0.5, float(self.other_probability))

    def estimate(self, reports: np.ndarray) -> FrequencyEstimate:
        """Unbiased count of users per item, ``(c_j - n q) / (p - q)``, with the variance
        of each estimate evaluated at the estimate clipped to ``[0, n]``."""
        counts = self.item_counts(reports).astype(np.float64)
        n = float(np.asarray(reports).shape[0])
        q = float(self.other_probability)
        est = (counts - n * q) / (0.5 - q)
        return FrequencyEstimate(counts=est, variance=_variance(np.clip(est, 0, n), n, 0.5, q))


def _variance(c: np.ndarray, n: float, p: float, q: float) -> np.ndarray:
    return (c * p * (1 - p) + (n - c) * q * (1 - q)) / (p - q) ** 2
