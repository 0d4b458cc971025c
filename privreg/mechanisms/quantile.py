"""Quantiles by the exponential mechanism over a public grid (pure epsilon-DP).

The standard differentially private quantile (Smith 2011, "Privacy-preserving
statistical estimation with optimal convergence rates", STOC, Section 3; McSherry-Talwar
2007 for the selection) scores each candidate by how far its rank is from the target
rank ``alpha n`` and picks one with the exponential mechanism. Smith samples an interval
between consecutive data points with probability proportional to its length times
``exp(epsilon u / 2)`` and then a uniform point in it; here the candidates are the points
of a finite public grid (``points`` equally spaced values from ``lower`` to ``upper``),
so the output set never depends on the data and the whole draw is exact: utilities are
exact rationals and the index is drawn by the exact sampler of
:mod:`privreg.mechanisms.selection` on uniform CSPRNG integers (no floating-point
sampling, no leak through the float grid, Mironov 2012).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import Exponential, PrivacyEvent
from privreg.core.laws import OutputLaw
from privreg.core.mechanism import Mechanism
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomness import RandomSource
from privreg.mechanisms.grid_mechanism import finite_array
from privreg.mechanisms.laws import categorical_law, exponential_pmf
from privreg.mechanisms.selection import epsilon_spent, exponential_index

__all__ = [
    "ExponentialQuantile",
    "GridRanks",
    "MAX_QUANTILE_POINTS",
    "grid_ranks",
    "quantile_rank_errors",
    "rank_errors",
]

#: Most grid points: each release computes one exact rational per point and the rejection
#: sampler may try up to ``points`` candidates per draw.
MAX_QUANTILE_POINTS = 100_000


@attrs.frozen(kw_only=True)
class GridRanks:
    """The rank interval of every grid point in a data set: ``below[j] = #{x < g_j}`` and
    ``at_most[j] = #{x <= g_j}`` (int64 arrays, one entry per grid point), and ``size``,
    the number of values. All the exponential-mechanism quantile reads from the data, so
    a caller can compute it where the data live (e.g. summed per partition on Spark) and
    release from it without collecting the data (:meth:`ExponentialQuantile.release`
    accepts it in place of the values)."""

    below: np.ndarray
    at_most: np.ndarray
    size: int


def grid_ranks(data: np.ndarray, grid: np.ndarray) -> GridRanks:
    """The :class:`GridRanks` of ``data`` at the points of ``grid``."""
    x = np.sort(np.asarray(data, dtype=np.float64).reshape(-1))
    below = np.searchsorted(x, grid, side="left").astype(np.int64)
    at_most = np.searchsorted(x, grid, side="right").astype(np.int64)
    return GridRanks(below=below, at_most=at_most, size=int(x.size))


def rank_errors(ranks: GridRanks, alpha: float) -> list[Fraction]:
    """For each grid point: the distance from the target rank ``alpha n`` to its rank
    interval ``[below, at_most]``, as exact rationals (see :func:`quantile_rank_errors`)."""
    target = Fraction(alpha) * ranks.size
    return [max(lo - target, target - hi, Fraction(0)) for lo, hi in zip(ranks.below.tolist(), ranks.at_most.tolist())]


def quantile_rank_errors(data: np.ndarray, grid: np.ndarray, alpha: float) -> list[Fraction]:
    """For each grid point ``g``: the distance from the target rank ``alpha n`` to the rank
    interval ``[#{x < g}, #{x <= g}]`` of ``g`` in the data, as exact rationals (0 when
    ``g`` is an exact ``alpha``-quantile, ties included). The utility is minus this.

    Sensitivity 1: replacing one record moves each end of every rank interval by at most
    1 (``n`` fixed); adding or removing one moves an end by 1 or 0 and ``alpha n`` by
    ``alpha``, so the distance moves by at most ``max(alpha, 1 - alpha) <= 1``."""
    return rank_errors(grid_ranks(data, grid), alpha)


def _check_ranks(ranks: GridRanks, points: int) -> GridRanks:
    """``ranks`` as int64 arrays after checking they can be the ranks of a data set."""
    fix = "compute them with grid_ranks(data, mechanism.grid), or pass the data"
    size = ranks.size
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise PrivregTypeError(f"ranks.size must be a non-negative int; got {type(size).__name__}. {fix}")
    out = []
    for name in ("below", "at_most"):
        arr = np.asarray(getattr(ranks, name))
        if arr.shape != (points,) or not np.issubdtype(arr.dtype, np.integer):
            raise PrivregValueError(f"ranks.{name} must be {points} integers, one per grid point; {fix}")
        out.append(arr.astype(np.int64))
    below, at_most = out
    ok = (
        np.all(below >= 0)
        and np.all(below <= at_most)
        and np.all(at_most <= size)
        and np.all(np.diff(below) >= 0)
        and np.all(np.diff(at_most) >= 0)
    )
    if not ok:
        raise PrivregValueError(
            f"ranks are not the ranks of a data set on this grid (need 0 <= below <= at_most <= size, both "
            f"non-decreasing); {fix}"
        )
    return GridRanks(below=below, at_most=at_most, size=int(size))


def _bound(name: str, value: Any) -> float:
    x = v.check_real(name, value)
    if not math.isfinite(x):
        raise PrivregValueError(f"{name} must be finite; got {value!r}. Declare it from domain knowledge.")
    return x


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class ExponentialQuantile(Mechanism):
    """The ``quantile``-quantile of data declared to lie in ``[lower, upper]``, released as
    one of ``points`` equally spaced public grid values ``g_j = lower + j (upper - lower) /
    (points - 1)`` chosen by the exponential mechanism.

    **Utility.** ``u(g) = -d(g)``, where ``d(g)`` is the distance from the target rank
    ``alpha n`` to the rank interval ``[#{x < g}, #{x <= g}]`` (:func:`quantile_rank_errors`;
    Smith 2011, Section 3, with ties handled by the interval). Its sensitivity is
    ``Delta = 1`` both when one record is added or removed and when one is replaced, and
    ``Delta = k`` when a neighbour adds or removes (or replaces) one person with up to ``k``
    records: each record moves the distance by at most 1. Pass ``sensitivity=k`` then.

    **Privacy.** Candidate ``j`` is drawn with probability proportional to
    ``exp(epsilon u(g_j) / (2 Delta))``: ``epsilon``-DP (McSherry-Talwar 2007, Theorem 6), and
    ``epsilon``-bounded-range, hence ``epsilon**2 / 8``-zCDP (Cesar-Rogers 2021). Charged as
    ``Exponential(epsilon, variant="exponential")``. No delta.

    **Accuracy** (McSherry-Talwar 2007, Theorem 8; Dwork-Roth 2014, Theorem 3.11): with
    probability at least ``1 - beta`` the released point's rank error ``d(q)`` is at most
    ``OPT + 2 Delta ln(points / beta) / epsilon`` (:meth:`rank_error_bound`), where
    ``OPT = min_j d(g_j)`` is 0 whenever the grid holds a true ``alpha``-quantile (e.g.
    integer data on an integer grid) and otherwise at most the number of records strictly
    between two neighbouring grid points. The bound is in ranks, not in data units: how
    far a rank error moves the value depends on the data's density, which is private.

    **The (epsilon, delta) alternative.** The smooth-sensitivity median
    (:func:`privreg.mechanisms.median.smooth_median_mechanism`, registered as
    ``smooth-gaussian``) adds Gaussian noise in data units and needs delta > 0; its noise
    grows sharply when the data are sparse around the median (the accuracy cliff
    documented there). This mechanism needs no delta and degrades only with
    ``ln(points)``.

    **Exact sampling.** The ``d(g_j)`` are exact rationals (``alpha`` read as the exact
    rational value of its float); ``gamma_j = epsilon (d_j - min d) / (2 Delta)`` is drawn by
    :func:`privreg.mechanisms.selection.exponential_index` (uniform candidate accepted by a
    Canonne-Kamath-Steinke 2020 Algorithm 1 coin), so the released index follows the
    exponential mechanism's law exactly. The output is the float ``g_j``, a public value.

    **Input range.** A 1-d array (possibly empty: every point is then equally likely) of
    finite values within ``[lower, upper]``; anything else is refused before the charge
    with an error naming the rule, never a value or its position. Clip or drop
    out-of-range values first (``privreg.analysis`` does, by a declared rule). Or the
    data's :class:`GridRanks` on :attr:`grid` (all the utility reads), computed by the
    caller from values within the bounds: checked for consistency only.
    **Timing depends on the data**: the rejection sampler needs about
    ``points / sum_j exp(-gamma_j)`` trials (1 to ``points``). Run releases where their
    timing is not observable.
    """

    name: ClassVar[str] = "exponential-quantile"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    quantile: float = param_field(doc="the quantile alpha in [0, 1] (0.5: the median)", minimum=0, maximum=1)
    lower: float = param_field(doc="declared lower bound of the data (the first grid point)")
    upper: float = param_field(doc="declared upper bound of the data (the last grid point)")
    points: int = param_field(
        default=1025,
        minimum=2,
        maximum=MAX_QUANTILE_POINTS,
        doc="number of equally spaced public grid points from lower to upper (the candidates)",
    )
    sensitivity: int = param_field(
        default=1,
        minimum=1,
        doc="sensitivity of the rank-distance utility: the most records one person adds or removes "
        "(1 for one record each; k when a person may contribute k rows)",
    )

    def __attrs_post_init__(self) -> None:
        lower, upper = _bound("lower", self.lower), _bound("upper", self.upper)
        if not lower < upper or not math.isfinite(upper - lower):
            raise PrivregValueError(
                f"need finite lower < upper with a finite difference; got lower={lower!r}, upper={upper!r}. "
                f"Declare the range from domain knowledge, never from the data"
            )

    @property
    def grid(self) -> np.ndarray:
        """The public candidates: ``points`` equally spaced floats, ``lower`` and ``upper``
        included (a function of the configuration only)."""
        g = self.lower + (self.upper - self.lower) * (np.arange(self.points, dtype=np.float64) / (self.points - 1))
        g[-1] = self.upper
        return np.asarray(np.clip(g, self.lower, self.upper))

    @property
    def weight_exponent(self) -> Fraction:
        """``c = epsilon / (2 Delta)`` in the weights ``exp(c u)``, exactly."""
        return Fraction(self.epsilon) / (2 * self.sensitivity)

    def privacy_event(self) -> PrivacyEvent:
        eps = epsilon_spent(weight_exponent=self.weight_exponent, sensitivity=self.sensitivity)
        return Exponential(epsilon=eps, variant="exponential")

    def rank_error_bound(self, beta: float) -> float:
        """``2 Delta ln(points / beta) / epsilon``: with probability at least ``1 - beta``
        the released point's rank error exceeds the best grid point's by at most this."""
        beta = v.check_probability("beta", beta, open_low=True, open_high=True)
        return 2 * self.sensitivity * math.log(self.points / beta) / self.epsilon

    def validate_input(self, value: Any) -> GridRanks:
        if isinstance(value, GridRanks):
            return _check_ranks(value, self.points)
        x = finite_array("data", value).reshape(-1)
        if np.any((x < self.lower) | (x > self.upper)):
            raise PrivregValueError(
                f"data has values outside the declared bounds [{self.lower:g}, {self.upper:g}]; "
                f"clip or drop them by a declared rule first (privreg.analysis does), or widen the bounds"
            )
        return grid_ranks(x, self.grid)

    def output_law(self, value: GridRanks) -> OutputLaw | None:
        """The law of the released grid point, coded by its index in :attr:`grid`."""
        grid = self.grid
        if np.unique(grid).size != grid.size:
            return None  # grid points that coincide in float: indices are not observable
        errors = rank_errors(value, self.quantile)
        best = min(errors)
        c = self.weight_exponent

        def index(outputs: Any) -> np.ndarray:
            return np.searchsorted(grid, np.asarray(outputs, dtype=np.float64).reshape(-1))

        return categorical_law(exponential_pmf([c * (d - best) for d in errors]), encode=index)

    def _sample(self, value: GridRanks, rng: RandomSource, data: Any) -> float:
        grid = self.grid
        errors = rank_errors(value, self.quantile)
        best = min(errors)
        c = self.weight_exponent
        return float(grid[exponential_index([c * (d - best) for d in errors], rng)])
