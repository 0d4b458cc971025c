"""Output laws: what a mechanism or randomizer may declare about the distribution of its
output on one input, so that its privacy loss can be computed exactly instead of sampled.

A law is optional (:meth:`privreg.Mechanism.output_law`, :meth:`privreg.Randomizer.output_law`
return None by default). When an item declares one, :mod:`privreg.testing`'s ``exact``
check (i) tests that the declared law matches the item's own outputs (a goodness-of-fit
test with a stated false-alarm rate) and (ii) computes the hockey-stick divergence between
the laws on two neighbouring inputs (:mod:`privreg.audit.exact`) and compares it with the
claim: a deterministic verdict, with no sampling error.

Four forms:

* :class:`DiscreteLaw` -- a probability mass function on integer (or float) codes,
  ``offset + support[i]`` with log-probability ``log_pmf[i]``; ``tail`` bounds the mass
  of every outcome not listed (a window of an infinite support, e.g. two-sided geometric
  noise). ``offset`` is an exact Python number, so a law centred at ``2**70`` keeps small
  codes and two laws are aligned exactly. One more outcome, "no value" (a key not
  released), may carry probability ``exp(none_log_pmf)``: it is no code, is never
  shifted by ``offset``, and ``encode`` maps it to NaN.
* :class:`DiscreteGaussianLaw` -- the discrete Gaussian on the integers around an exact
  integer centre, for scales too large to list (a smooth-sensitivity Gaussian on a fine
  grid): masses of integer intervals come from the normal CDF with a stated error bound.
* :class:`DensityLaw` -- a continuous law given by an object with ``logpdf``, ``cdf`` and
  ``ppf`` (e.g. a frozen ``scipy.stats`` distribution).
* :class:`ProductLaw` -- independent coordinates, each a discrete or density law (vector
  outputs, bit vectors). With ``labels`` the coordinates are named (keys of a partition
  selection): two products are compared label by label, and a label one of them lacks
  is "no value" surely there (:func:`aligned_factors`).

``encode`` maps a batch of outputs (first axis: repetitions) to the law's codes:
relative to ``offset`` for a discrete law, one column per factor for a product.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "NO_VALUE",
    "DensityLaw",
    "DiscreteGaussianLaw",
    "DiscreteLaw",
    "OutputLaw",
    "ProductLaw",
    "aligned_factors",
    "check_law",
]


def _identity_codes(outputs: Any) -> np.ndarray:
    return np.asarray(outputs, dtype=np.float64)


def _support(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        if arr.ndim == 1 and arr.size == 0:
            return arr.astype(np.int64)
        raise PrivregTypeError("support must be a 1-d array of integer or float codes")
    return arr


def _log_pmf(x: Any) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or np.any(np.isnan(arr)) or np.any(arr > 1e-12):
        raise PrivregValueError("log_pmf must be a 1-d array of natural-log probabilities (<= 0, no NaN)")
    return arr


@attrs.frozen(kw_only=True, eq=False)
class DiscreteLaw:
    """A probability mass function: outcome ``offset + support[i]`` has probability
    ``exp(log_pmf[i])``; every outcome not listed has probability at most ``tail`` in
    total. The outcome "no value" (no code: a key not released) has probability
    ``exp(none_log_pmf)`` (none by default). ``encode(outputs)`` gives the codes
    (``support`` values, relative to ``offset``; NaN for "no value") of a batch of
    outputs. ``support`` may be empty only when "no value" is sure."""

    support: np.ndarray = attrs.field(converter=_support)
    log_pmf: np.ndarray = attrs.field(converter=_log_pmf)
    offset: int | float = 0
    tail: float = 0.0
    none_log_pmf: float = -math.inf
    encode: Callable[[Any], np.ndarray] = _identity_codes

    def __attrs_post_init__(self) -> None:
        if self.log_pmf.shape != self.support.shape:
            raise PrivregValueError("support and log_pmf must have the same length")
        if math.isnan(self.none_log_pmf) or self.none_log_pmf > 1e-12:
            raise PrivregValueError(f"none_log_pmf must be a natural-log probability (<= 0); got {self.none_log_pmf!r}")
        if self.support.size == 0 and self.none_log_pmf < -1e-12:
            raise PrivregValueError("support may be empty only when 'no value' is sure (none_log_pmf = 0)")
        ordered = np.sort(self.support)
        if np.any(ordered[1:] == ordered[:-1]):
            raise PrivregValueError("support must list each code once")
        if not (0.0 <= self.tail < 1.0):
            raise PrivregValueError(f"tail must lie in [0, 1); got {self.tail!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, (int, float)):
            raise PrivregTypeError(f"offset must be an int or a float; got {self.offset!r}")
        total = float(np.exp(self.log_pmf).sum()) + math.exp(self.none_log_pmf)
        if not (1.0 - self.tail - 1e-9 <= total <= 1.0 + 1e-9):
            raise PrivregValueError(
                f"the listed probabilities sum to {total!r}; they must sum to 1 up to the declared tail {self.tail!r}"
            )

    @property
    def probabilities(self) -> np.ndarray:
        """The listed codes' probabilities (without "no value")."""
        return np.asarray(np.exp(self.log_pmf))


#: "No value" surely: the law of a key absent from an input (it is never released).
NO_VALUE = DiscreteLaw(support=np.zeros(0, dtype=np.int64), log_pmf=np.zeros(0), none_log_pmf=0.0)


def _centre(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise PrivregTypeError(f"center must be an integer; got {x!r}")
    return int(x)


def _sigma2(x: Any) -> Fraction:
    out = Fraction(x)
    if out <= 0:
        raise PrivregValueError(f"sigma2 must be > 0; got {x!r}")
    return out


@attrs.frozen(kw_only=True, eq=False)
class DiscreteGaussianLaw:
    """``center + Z`` with ``P(Z = z) = exp(-z^2 / (2 sigma2)) / Zn`` on the integers
    (Canonne-Kamath-Steinke 2020), ``Zn = sum_z exp(-z^2 / (2 sigma2))``. ``encode``
    maps outputs to integer codes relative to ``center``.

    For ``sigma >= 10`` (:data:`MIN_SIGMA`) :meth:`mass` gives the probability of an
    integer interval as the normal probability of the interval widened by 1/2 on each
    side, with the bound :attr:`mass_error` on the difference: the midpoint rule errs by
    ``f''(xi) / 24`` per cell, and summing ``sup |f''|`` over the cells of the normal
    density ``f`` gives at most ``int |f''| + 6 sup |f''| <= (0.968 + 2.4 / sigma) /
    sigma^2`` (six monotone pieces); Poisson summation puts ``Zn`` within a factor
    ``1 + 2 e^(-2 pi^2 sigma^2)`` (0 in doubles) of ``sqrt(2 pi) sigma``. Smaller scales
    are listed exactly (:meth:`window`)."""

    center: int = attrs.field(converter=_centre)
    sigma2: Fraction = attrs.field(converter=_sigma2)
    encode: Callable[[Any], np.ndarray] = _identity_codes

    #: Smallest sigma for which :meth:`mass` is used.
    MIN_SIGMA: ClassVar[float] = 10.0

    @property
    def sigma(self) -> float:
        return math.sqrt(float(self.sigma2))

    @property
    def mass_error(self) -> float:
        """Bound on ``|mass(lo, hi) - P(lo <= Z <= hi)|`` over any set of integer intervals
        (for sigma >= :data:`MIN_SIGMA`)."""
        s = self.sigma
        return (0.968 + 2.4 / s) / (24 * s * s)

    def mass(self, lo: float, hi: float) -> float:
        """``P(lo <= Z <= hi)`` for integers (or infinities) ``lo <= hi``, up to
        :attr:`mass_error` (sigma >= 10)."""
        from scipy import special

        s = self.sigma
        a, b = (lo - 0.5) / s, (hi + 0.5) / s
        if a > 0:  # both in the upper tail: difference of survival functions, no cancellation
            return float(special.ndtr(-a) - special.ndtr(-b))
        return float(special.ndtr(b) - special.ndtr(a))

    def window(self, max_outcomes: int) -> DiscreteLaw | None:
        """The same law listed on ``|z| <= ceil(sqrt(140) sigma) + 1`` with the mass outside
        (below ``exp(-70)``) as ``tail``; None when that exceeds ``max_outcomes``."""
        from scipy import special

        width = math.ceil(math.sqrt(140.0) * self.sigma) + 1
        if 2 * width + 1 > max_outcomes:
            return None
        z = np.arange(-width, width + 1, dtype=np.int64)
        log_w = -(z.astype(np.float64) ** 2) / (2 * float(self.sigma2))
        log_total = float(special.logsumexp(log_w))
        edge = (width + 1) ** 2 / (2 * float(self.sigma2))
        ratio = -math.expm1(-(width + 1) / float(self.sigma2))
        tail = 2 * math.exp(-edge - log_total) / ratio
        return DiscreteLaw(
            support=z, log_pmf=log_w - log_total, offset=self.center, tail=min(tail, 0.5), encode=self.encode
        )


@attrs.frozen(kw_only=True, eq=False)
class DensityLaw:
    """A continuous law: ``distribution`` has ``logpdf``, ``cdf`` and ``ppf`` (a frozen
    ``scipy.stats`` distribution works). ``encode`` maps outputs to the real line."""

    distribution: Any
    encode: Callable[[Any], np.ndarray] = _identity_codes

    def __attrs_post_init__(self) -> None:
        for method in ("logpdf", "cdf", "ppf"):
            if not callable(getattr(self.distribution, method, None)):
                raise PrivregTypeError(f"distribution must have a {method}() method (e.g. a frozen scipy.stats law)")


def _factors(x: Any) -> tuple[DiscreteLaw | DensityLaw, ...]:
    out = tuple(x)
    if not out or not all(isinstance(f, (DiscreteLaw, DensityLaw)) for f in out):
        raise PrivregTypeError("factors must be a non-empty sequence of DiscreteLaw or DensityLaw")
    return out


def _columns(outputs: Any) -> np.ndarray:
    arr = np.asarray(outputs, dtype=np.float64)
    return arr.reshape(arr.shape[0], -1)


def _labels(x: Any) -> tuple[Hashable, ...] | None:
    return None if x is None else tuple(x)


@attrs.frozen(kw_only=True, eq=False)
class ProductLaw:
    """Independent coordinates: coordinate ``j`` follows ``factors[j]``. ``encode``
    maps a batch of outputs to a ``(repetitions, len(factors))`` array of codes (each
    column relative to its factor's ``offset``). ``labels`` (optional, distinct and
    hashable, one per factor) name the coordinates: see :func:`aligned_factors`."""

    factors: tuple[DiscreteLaw | DensityLaw, ...] = attrs.field(converter=_factors)
    encode: Callable[[Any], np.ndarray] = _columns
    labels: tuple[Hashable, ...] | None = attrs.field(default=None, converter=_labels)

    def __attrs_post_init__(self) -> None:
        if self.labels is not None and (
            len(self.labels) != len(self.factors) or len(set(self.labels)) != len(self.labels)
        ):
            raise PrivregValueError("labels must name each factor once (as many distinct labels as factors)")


def aligned_factors(
    p: ProductLaw, q: ProductLaw
) -> list[tuple[Hashable, DiscreteLaw | DensityLaw, DiscreteLaw | DensityLaw]] | None:
    """The coordinates of two products side by side, as ``(label, factor of p, factor of
    q)``: by label when both are labelled -- a label only one of them has is "no value"
    surely in the other (:data:`NO_VALUE`: a key absent from an input is never released)
    --, else by position (labels 0, 1, ...). None when unlabelled products have different
    numbers of coordinates (their outputs are told apart surely)."""
    if p.labels is not None and q.labels is not None:
        fp, fq = dict(zip(p.labels, p.factors)), dict(zip(q.labels, q.factors))
        names = list(p.labels) + [k for k in q.labels if k not in fp]
        return [(k, fp.get(k, NO_VALUE), fq.get(k, NO_VALUE)) for k in names]
    if len(p.factors) != len(q.factors):
        return None
    return [(j, a, b) for j, (a, b) in enumerate(zip(p.factors, q.factors))]


OutputLaw = DiscreteLaw | DiscreteGaussianLaw | DensityLaw | ProductLaw


def check_law(law: Any, who: str) -> OutputLaw | None:
    """``law`` if it is None or an :data:`OutputLaw`; raises naming ``who`` otherwise."""
    if law is None or isinstance(law, (DiscreteLaw, DiscreteGaussianLaw, DensityLaw, ProductLaw)):
        return law
    raise PrivregTypeError(
        f"{who}.output_law() must return a DiscreteLaw, DiscreteGaussianLaw, DensityLaw, ProductLaw or None; "
        f"got {law!r}"
    )
