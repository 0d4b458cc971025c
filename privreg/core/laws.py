"""Output laws: what a mechanism or randomizer may declare about the distribution of its
output on one input, so that its privacy loss can be computed exactly instead of sampled.

A law is optional (:meth:`privreg.Mechanism.output_law`, :meth:`privreg.Randomizer.output_law`
return None by default). When an item declares one, :mod:`privreg.testing`'s ``exact``
check (i) tests that the declared law matches the item's own outputs (a goodness-of-fit
test with a stated false-alarm rate) and (ii) computes the hockey-stick divergence between
the laws on two neighbouring inputs (:mod:`privreg.audit.exact`) and compares it with the
claim: a deterministic verdict, with no sampling error.

Three forms:

* :class:`DiscreteLaw` -- a probability mass function on integer (or float) codes,
  ``offset + support[i]`` with log-probability ``log_pmf[i]``; ``tail`` bounds the mass
  of every outcome not listed (a window of an infinite support, e.g. two-sided geometric
  noise). ``offset`` is an exact Python number, so a law centred at ``2**70`` keeps small
  codes and two laws are aligned exactly.
* :class:`DensityLaw` -- a continuous law given by an object with ``logpdf``, ``cdf`` and
  ``ppf`` (e.g. a frozen ``scipy.stats`` distribution).
* :class:`ProductLaw` -- independent coordinates, each a discrete or density law (vector
  outputs, bit vectors).

``encode`` maps a batch of outputs (first axis: repetitions) to the law's codes:
relative to ``offset`` for a discrete law, one column per factor for a product.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = ["DensityLaw", "DiscreteLaw", "OutputLaw", "ProductLaw", "check_law"]


def _identity_codes(outputs: Any) -> np.ndarray:
    return np.asarray(outputs, dtype=np.float64)


def _support(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iuf":
        raise PrivregTypeError("support must be a non-empty 1-d array of integer or float codes")
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
    total. ``encode(outputs)`` gives the codes (``support`` values, relative to
    ``offset``) of a batch of outputs."""

    support: np.ndarray = attrs.field(converter=_support)
    log_pmf: np.ndarray = attrs.field(converter=_log_pmf)
    offset: int | float = 0
    tail: float = 0.0
    encode: Callable[[Any], np.ndarray] = _identity_codes

    def __attrs_post_init__(self) -> None:
        if self.log_pmf.shape != self.support.shape:
            raise PrivregValueError("support and log_pmf must have the same length")
        ordered = np.sort(self.support)
        if np.any(ordered[1:] == ordered[:-1]):
            raise PrivregValueError("support must list each code once")
        if not (0.0 <= self.tail < 1.0):
            raise PrivregValueError(f"tail must lie in [0, 1); got {self.tail!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, (int, float)):
            raise PrivregTypeError(f"offset must be an int or a float; got {self.offset!r}")
        total = float(np.exp(self.log_pmf).sum())
        if not (1.0 - self.tail - 1e-9 <= total <= 1.0 + 1e-9):
            raise PrivregValueError(
                f"the listed probabilities sum to {total!r}; they must sum to 1 up to the declared tail {self.tail!r}"
            )

    @property
    def probabilities(self) -> np.ndarray:
        return np.asarray(np.exp(self.log_pmf))


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


@attrs.frozen(kw_only=True, eq=False)
class ProductLaw:
    """Independent coordinates: coordinate ``j`` follows ``factors[j]``. ``encode``
    maps a batch of outputs to a ``(repetitions, len(factors))`` array of codes (each
    column relative to its factor's ``offset``)."""

    factors: tuple[DiscreteLaw | DensityLaw, ...] = attrs.field(converter=_factors)
    encode: Callable[[Any], np.ndarray] = _columns


OutputLaw = DiscreteLaw | DensityLaw | ProductLaw


def check_law(law: Any, who: str) -> OutputLaw | None:
    """``law`` if it is None or an :data:`OutputLaw`; raises naming ``who`` otherwise."""
    if law is None or isinstance(law, (DiscreteLaw, DensityLaw, ProductLaw)):
        return law
    raise PrivregTypeError(f"{who}.output_law() must return a DiscreteLaw, DensityLaw, ProductLaw or None; got {law!r}")
