"""Privacy amplification by shuffling: central (eps, delta) of shuffled eps0-LDP reports.

``n`` users each send one report produced by an ``eps0``-LDP local randomizer, and a
shuffler releases the reports in uniformly random order. Changing one user's input
(replacement neighbours) changes the shuffled output by far less than ``eps0``. Every
function here returns an *upper* bound on that central privacy loss, and never more than
``eps0``: the shuffled output is a post-processing of one ``eps0``-LDP report given the
others, so shuffling never hurts.

Bounds (``SHUFFLE_BOUNDS``)
===========================
``"fmt21-closed-form"``
    Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly optimal
    analysis of privacy amplification by shuffling", FOCS 2021 (arXiv:2012.12803),
    Theorem 3.1: if ``eps0 <= log(n / (16 log(2/delta)))`` then the shuffle is
    (eps, delta)-DP with ``eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0
    log(4/delta)) / sqrt(n) + 8 e^eps0 / n))``. Outside that condition the bound does not
    apply and ``shuffle_epsilon`` falls back to ``eps0``; ``shuffle_delta`` falls back to
    the delta of ``eps0``-DP itself, ``(e^eps0 - e^eps)/(e^eps0 + 1)`` (binary randomized
    response is the worst ``eps0``-DP mechanism at every eps).
``"fmt21-numerical"`` (the default)
    Same paper, the reduction behind Theorem 3.1 evaluated numerically by the project's
    own method (see "Numerics" below; the paper's Appendix E and the authors' script
    ``computeamplification.py`` evaluate the same reduction more coarsely, see
    :mod:`privreg.accountant.shuffle_reference`): the shuffled outputs on
    neighbouring datasets are post-processings of ``P = (A + D, C - A + 1 - D)`` and
    ``Q = (A + 1 - D, C - A + D)`` with ``C ~ Bin(n - 1, e^-eps0)`` (the "clones" of the
    changed user), ``A ~ Bin(C, 1/2)`` and ``D ~ Bern(e^eps0 / (e^eps0 + 1))``. Holds for
    every ``eps0``-LDP randomizer (also adaptive ones). The delta returned is an upper
    bound on the hockey-stick divergence ``D_{e^eps}(P || Q)``; epsilon is the upper end
    of a bisection on it.
``"fmt23-numerical"``
    Feldman, McMillan, Talwar, "Stronger privacy amplification by shuffling for Renyi and
    approximate differential privacy", SODA 2023 (arXiv:2208.04591), Theorem 3.2: the same
    pair with more clones, ``C ~ Bin(n - 1, 2/(e^eps0 + 1))``, hence a smaller epsilon.

Erratum, and why the default is the 2021 bound
==============================================
The 2023 paper carries an erratum (arXiv:2208.04591, "Errata"): "The error occurs in the
proof of Lemma 3.5 when p < 1/(e^eps0 + 1). The error affects ... Theorem 3.1, Theorem
3.2, Corollary 4.3 and Theorem 5.2", and Theorems 3.1 and 3.2, "previously stated for any
sequence of adaptive local randomizers, hold for a restricted class of local randomizers
that contains several important local randomizers"; for any *specific* randomizer Lemma
3.5 holds with a slightly different (randomizer-dependent) decomposition.

Our reading of the class. Theorem 3.2's clone probability ``2/(e^eps0 + 1)`` needs every
user's output distribution to split as ``R(x) = p Q0 + p Q1 + (1 - 2p) LO(x)`` with
``p = 1/(e^eps0 + 1)``, where ``R(x0) = (e^eps0 Q0 + Q1)/(e^eps0 + 1)`` and ``R(x1) =
(Q0 + e^eps0 Q1)/(e^eps0 + 1)`` for the changed user's two inputs ``x0 != x1``. Those two
equations fix ``Q0 + Q1 = R(x0) + R(x1)``, so the split exists exactly when, for all
inputs ``x`` and every output ``y``::

    R(x)(y) >= (R(x0)(y) + R(x1)(y)) / (e^eps0 + 1)

Randomizers meeting this are covered by the original proof; the erratum's own definition
of the class was not available to us and may be wider. :func:`admits_fmt23_decomposition`
checks the condition for a finite randomizer. Binary and k-ary randomized response meet it
(with equality); subset selection with subsets of size ``2 <= d < k`` does not (take ``y``
containing ``x0`` and ``x1`` but not ``x``). Paper 001 (Sun et al., Theorem 2) cites FMT23
Theorem 3.2 for subset selection, whose ``d = ceil(s/(e^eps + 1))`` exceeds 1 once the
candidate set has more than ``e^eps + 1`` elements; its published eps = 0.315 is in fact
the output of the FMT21 authors' script (see ``tests/test_shuffle.py``).

The default bound is therefore ``"fmt21-numerical"``, valid for every ``eps0``-LDP
randomizer. Passing ``bound="fmt23-numerical"`` is the caller's declaration that the
randomizer is in the restricted class; record in the ledger which bound was used.

Numerics and complexity
=======================
Given ``C = c`` the pair is one-dimensional (the first coordinate) and its likelihood
ratio increases with the coordinate, so ``D_{e^eps}(P_c || Q_c)`` is a closed form in one
``Bin(c, 1/2)`` pmf and survival value (:func:`_pair_divergence`). It is non-increasing
in ``c``: ``P_{c+1}`` and ``Q_{c+1}`` are ``P_c`` and ``Q_c`` plus the same independent
``Bern(1/2)``, a post-processing. The total is ``E_C[D(P_C || Q_C)]`` (``C`` is
observable). We cover ``mean(C) +- 40 sd(C)`` by at most ``4096`` intervals, charge each
interval the divergence at its left end (an upper bound, by monotonicity), charge the mass
below the window the divergence at ``c = 0`` and the mass above it the divergence at the
window's end; binomial masses come from ``cdf`` below the mean and ``sf`` above it (no
cancellation), and the sum is inflated by a relative ``1e-6`` against rounding (against
mpmath, our per-``c`` divergences at ``c`` up to ``1e9`` are within ``1e-8``). A delta
costs ``O(4096)`` vectorised scipy calls (``n`` up to ``2**53``; above ``10**12`` the
bound for ``10**12`` reports is used, valid by monotonicity in ``n``, because scipy's
binomial tails slow down with ``n``; the accuracy was checked up to ``n = 1e9``); an
epsilon is a bisection of about 40 such steps (relative tolerance ``1e-9``), well under a
second at ``n = 1e9``. For
``eps0 > 700`` (no clone is expected among ``2**53`` reports, and ``e^eps0`` overflows)
the numerical bounds return the randomized-response values directly.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.events import SHUFFLE_BOUNDS as EVENT_SHUFFLE_BOUNDS

__all__ = [
    "SHUFFLE_BOUNDS",
    "DEFAULT_SHUFFLE_BOUND",
    "shuffle_epsilon",
    "shuffle_delta",
    "admits_fmt23_decomposition",
]

#: Every bound by name; see the module docstring for what each guarantees.
SHUFFLE_BOUNDS = EVENT_SHUFFLE_BOUNDS  # one list, shared with the Shuffled event

#: Valid for every eps0-LDP randomizer (the 2023 bound is not: see the erratum above).
DEFAULT_SHUFFLE_BOUND = "fmt21-numerical"

_MAX_INTERVALS = 4096  # grid over the clone count C; cost per delta is O(_MAX_INTERVALS)
_WINDOW_SDS = 40.0  # mass of C outside mean +- 40 sd is charged the worst divergence
_ROUNDING_SLACK = 1e-6  # relative inflation of every numerical delta against rounding
_REL_TOL = 1e-9  # bisection stops when the bracket is this narrow relative to epsilon
_MAX_REPORTS = 2**53  # counts beyond this are not exact floats
_NO_CLONES_EPS0 = 700.0  # beyond, Pr[C > 0] < 2**53 e^-700 and e^eps0 overflows: use RR
#: The numerical bounds use at most this many reports. Valid for more: the bound is
#: non-increasing in n (C grows stochastically with n and the divergence is non-increasing
#: in c), so the bound for 10**12 reports holds for any larger n. Needed because scipy's
#: binomial tails cost grows with c: one epsilon took 25 s at n = 2**53, 1.4 s at 10**12.
_MAX_NUMERICAL_REPORTS = 10**12


def shuffle_epsilon(*, epsilon0: float, num_reports: int, delta: float, bound: str = DEFAULT_SHUFFLE_BOUND) -> float:
    """Upper bound on the central epsilon, at ``delta``, of shuffling ``num_reports``
    reports of an ``epsilon0``-LDP randomizer (one report per user).

    Never more than ``epsilon0``. ``bound`` is one of :data:`SHUFFLE_BOUNDS`; the default
    holds for every randomizer, ``"fmt23-numerical"`` only for the class described in the
    module docstring (FMT23 erratum).
    """
    eps0, n, bound = _check_common(epsilon0, num_reports, bound)
    delta = v.check_delta("delta", delta, allow_zero=False)
    if bound == "fmt21-closed-form":
        return min(_closed_form_epsilon(eps0, n, delta), eps0)
    if eps0 > _NO_CLONES_EPS0:
        return _rr_epsilon(delta, eps0)
    return _cached_numerical_epsilon(eps0, min(n, _MAX_NUMERICAL_REPORTS), delta, bound)


@functools.lru_cache(maxsize=512)
def _cached_numerical_epsilon(eps0: float, n: int, delta: float, bound: str) -> float:
    """The numerical epsilon (cached: accountants and filters ask for the same shuffle's
    bound repeatedly, and one costs up to a second at 10**12 reports)."""
    grid = _clone_grid(n, _clone_probability(eps0, bound))
    return min(_numerical_epsilon(grid, eps0, delta), eps0)


def shuffle_delta(*, epsilon0: float, num_reports: int, epsilon: float, bound: str = DEFAULT_SHUFFLE_BOUND) -> float:
    """Upper bound on the central delta, at ``epsilon``, of shuffling ``num_reports``
    reports of an ``epsilon0``-LDP randomizer; ``0.0`` when ``epsilon >= epsilon0``.

    Never more than ``(e^epsilon0 - e^epsilon)/(e^epsilon0 + 1)``, the delta of
    ``epsilon0``-DP without shuffling. Same ``bound`` names and caveats as
    :func:`shuffle_epsilon`, of which it is the inverse.
    """
    eps0, n, bound = _check_common(epsilon0, num_reports, bound)
    eps = v.check_epsilon("epsilon", epsilon, allow_zero=True)
    if eps >= eps0:
        return 0.0
    if bound == "fmt21-closed-form":
        return min(_closed_form_delta(eps0, n, eps), _rr_delta(eps, eps0))
    if eps0 > _NO_CLONES_EPS0:
        return _rr_delta(eps, eps0)
    grid = _clone_grid(min(n, _MAX_NUMERICAL_REPORTS), _clone_probability(eps0, bound))
    return min(_numerical_delta(grid, eps, eps0)[0], _rr_delta(eps, eps0))


def admits_fmt23_decomposition(probabilities: Any, *, epsilon0: float) -> bool:
    """Whether a finite randomizer admits the decomposition of FMT23 Lemma 3.5.

    ``probabilities[x, y]`` is the probability that input ``x`` yields output ``y`` (rows
    sum to 1, at least two rows). True iff the randomizer is ``epsilon0``-LDP and, for
    every output ``y``, ``min_x R(x)(y) * (e^eps0 + 1) >= `` the sum of the two largest
    ``R(x)(y)``: then the decomposition behind FMT23 Theorem 3.2 (``"fmt23-numerical"``)
    exists for it (module docstring). False means: use a 2021 bound.
    """
    e0 = math.exp(min(v.check_epsilon("epsilon0", epsilon0), _NO_CLONES_EPS0))
    p = _check_probability_matrix(probabilities)
    column_max = p.max(axis=0)
    column_min = p.min(axis=0)
    tol = 1e-12 * column_max  # rounding in the caller's matrix, never a real violation
    if np.any(column_max > e0 * column_min + tol):
        return False
    top_two = np.sort(p, axis=0)[-2:].sum(axis=0)
    return bool(np.all(column_min * (e0 + 1.0) >= top_two - tol))


# ----------------------------------------------------------------------------- checks


def _check_common(epsilon0: Any, num_reports: Any, bound: Any) -> tuple[float, int, str]:
    if not isinstance(bound, str) or bound not in SHUFFLE_BOUNDS:
        raise PrivregValueError(
            f"unknown shuffle bound {bound!r}; choose one of {list(SHUFFLE_BOUNDS)} "
            f"(default {DEFAULT_SHUFFLE_BOUND!r}, valid for every eps0-LDP randomizer)"
        )
    eps0 = v.check_epsilon("epsilon0", epsilon0)
    n = v.check_count("num_reports", num_reports)
    if n > _MAX_REPORTS:
        raise PrivregValueError(f"num_reports must be <= 2**53; got {num_reports!r}.")
    return eps0, n, bound


def _check_probability_matrix(probabilities: Any) -> NDArray[np.float64]:
    try:
        p = np.asarray(probabilities, dtype=float)
    except (TypeError, ValueError):
        raise PrivregValueError("probabilities must be a 2-D array of numbers") from None
    if p.ndim != 2 or p.shape[0] < 2 or p.shape[1] < 1:
        raise PrivregValueError(f"probabilities must be 2-D with at least two rows (inputs); got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or not np.allclose(p.sum(axis=1), 1.0, atol=1e-9):
        raise PrivregValueError("probabilities must be finite, non-negative, rows summing to 1")
    return p


# ------------------------------------------------------------------------ closed form


def _closed_form_applies(eps0: float, n: int, delta: float) -> bool:
    """FMT21 Theorem 3.1's condition ``eps0 <= log(n / (16 log(2/delta)))``."""
    return eps0 <= math.log(n) - math.log(16.0 * math.log(2.0 / delta))


def _closed_form_epsilon(eps0: float, n: int, delta: float) -> float:
    """FMT21 Theorem 3.1, or ``eps0`` where its condition fails."""
    if not _closed_form_applies(eps0, n, delta):
        return eps0
    e0 = math.exp(eps0)
    bracket = 8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n) + 8.0 * e0 / n
    return math.log1p(math.tanh(eps0 / 2.0) * bracket)  # tanh(x/2) = (e^x - 1)/(e^x + 1)


def _closed_form_delta(eps0: float, n: int, eps: float) -> float:
    """Smallest delta < 1 at which Theorem 3.1 certifies ``eps`` (1.0 if none does).

    Solves the bound for ``log(4/delta)``, then raises delta to the least value meeting
    the condition, ``delta >= 2 exp(-n / (16 e^eps0))`` (a larger delta only helps)."""
    if eps0 >= math.log(n) - math.log(16.0 * math.log(2.0)):  # fails for every delta < 1
        return 1.0
    e0 = math.exp(eps0)
    root = (math.expm1(eps) / math.tanh(eps0 / 2.0) - 8.0 * e0 / n) * math.sqrt(n / e0) / 8.0
    if root <= 0.0:
        return 1.0
    delta = max(4.0 * math.exp(-root * root), 2.0 * math.exp(-n / (16.0 * e0)))
    return min(delta, 1.0)


# -------------------------------------------------------------------------- numerical


def _rr_delta(eps: float, eps0: float) -> float:
    """Delta of binary randomized response, the worst eps0-DP mechanism, at ``eps``."""
    if eps >= eps0:
        return 0.0
    return -math.expm1(eps - eps0) / (1.0 + math.exp(-eps0))


def _rr_epsilon(delta: float, eps0: float) -> float:
    """Epsilon of binary randomized response at ``delta`` (inverse of :func:`_rr_delta`)."""
    shrink = delta * (1.0 + math.exp(-eps0))
    return 0.0 if shrink >= 1.0 else max(eps0 + math.log1p(-shrink), 0.0)


def _clone_probability(eps0: float, bound: str) -> float:
    """Probability that another user's report is a clone of the changed user's."""
    if bound == "fmt23-numerical":
        return 2.0 * math.exp(-eps0) / (1.0 + math.exp(-eps0))  # 2/(e^eps0 + 1)
    return math.exp(-eps0)


def _pair_divergence(c: NDArray[np.int64 | np.float64], eps: float, eps0: float) -> NDArray[np.float64]:
    """``D_{e^eps}(P_c || Q_c)`` for each clone count ``c`` (vectorised, exact).

    Given ``C = c`` the first coordinate is ``A + D`` under P and ``A + 1 - D`` under Q,
    ``A ~ Bin(c, 1/2)``: ``P_c(k) = a b(k-1) + (1-a) b(k)``, ``Q_c(k) = (1-a) b(k-1) +
    a b(k)`` with ``a = e^eps0/(e^eps0+1)`` and ``b`` the ``Bin(c, 1/2)`` pmf. Their ratio
    increases in ``k``, so the divergence is ``sum_{k >= m} (P_c - e^eps Q_c)`` for the
    first ``k = m`` where the ratio exceeds ``e^eps``, which equals
    ``w b(m-1) - (e^eps - 1) Pr[A >= m]`` with ``w = a - e^eps (1 - a)``. Every ``m`` gives
    a lower bound, so we take the largest of ``m - 1, m, m + 1`` against rounding of ``m``.
    By symmetry (``k -> c + 1 - k``) ``D(Q_c || P_c)`` is the same.
    """
    c = np.asarray(c, dtype=float)
    if eps >= eps0:
        return np.zeros_like(c)
    weight = -math.expm1(eps - eps0) / (1.0 + math.exp(-eps0))
    slope = math.expm1(eps)
    # ratio threshold: P_c(k)/Q_c(k) > e^eps  <=>  k/(c + 1 - k) > r
    r = (math.expm1(eps) - math.expm1(-eps0)) / -math.expm1(eps - eps0)
    m = np.clip(np.floor(r / (1.0 + r) * (c + 1.0)) + 1.0, 1.0, c + 1.0)
    b_prev: NDArray[np.float64] = stats.binom.pmf(m - 1.0, c, 0.5)  # b(m-1)
    tail: NDArray[np.float64] = stats.binom.sf(m - 1.0, c, 0.5)  # Pr[A >= m]
    b_here = b_prev * (c - m + 1.0) / m  # b(m)
    b_back = b_prev * (m - 1.0) / (c - m + 2.0)  # b(m-2)
    at_m = weight * b_prev - slope * tail
    after = weight * b_here - slope * (tail - b_here)
    before = weight * b_back - slope * (tail + b_prev)
    best: NDArray[np.float64] = np.maximum(np.maximum(at_m, 0.0), np.maximum(after, before))
    return best


class _CloneGrid(NamedTuple):
    """Intervals ``[edges[j], edges[j+1])`` covering a window of ``C ~ Bin(trials, q)``."""

    edges: NDArray[np.int64]  # increasing; the window is [edges[0], edges[-1] - 1]
    masses: NDArray[np.float64]  # Pr[C in interval j]
    below: float  # Pr[C < edges[0]]
    above: float  # Pr[C >= edges[-1]]


def _clone_grid(n: int, q: float) -> _CloneGrid:
    """Cover ``mean(C) +- 40 sd(C)`` with at most ``_MAX_INTERVALS`` integer intervals."""
    trials = n - 1
    mean = trials * q
    sd = math.sqrt(trials * q * (1.0 - q))
    low = max(0, math.floor(mean - _WINDOW_SDS * sd))
    high = min(trials, math.ceil(mean + _WINDOW_SDS * sd))
    if high - low + 1 <= _MAX_INTERVALS:
        edges = np.arange(low, high + 2, dtype=np.int64)
    else:
        edges = np.unique(np.linspace(low, high + 1, _MAX_INTERVALS + 1).round().astype(np.int64))
    lower_side = edges[1:] - 1 < mean  # use cdf below the mean, sf above: no cancellation
    by_cdf = stats.binom.cdf(edges[1:] - 1, trials, q) - stats.binom.cdf(edges[:-1] - 1, trials, q)
    by_sf = stats.binom.sf(edges[:-1] - 1, trials, q) - stats.binom.sf(edges[1:] - 1, trials, q)
    masses = np.maximum(np.where(lower_side, by_cdf, by_sf), 0.0)
    below = float(stats.binom.cdf(low - 1, trials, q)) if low > 0 else 0.0
    above = float(stats.binom.sf(high, trials, q))
    return _CloneGrid(edges, masses, below, above)


def _numerical_delta(grid: _CloneGrid, eps: float, eps0: float) -> tuple[float, float]:
    """(upper, lower) bounds on ``E_C[D_{e^eps}(P_C || Q_C)]`` over ``grid``.

    Upper: each interval at its left end (the divergence is non-increasing in ``c``), the
    mass below the window at ``c = 0``, the mass above at the window's end, times
    ``1 + 1e-6``. Lower: one-value intervals exact, wider ones at the next interval's left
    end, tails dropped (so ``upper - lower`` bounds the discretisation error).
    """
    at_edges = _pair_divergence(grid.edges, eps, eps0)
    upper = float(grid.masses @ at_edges[:-1])
    upper += grid.below * _rr_delta(eps, eps0) + grid.above * float(at_edges[-1])
    single = np.diff(grid.edges) == 1
    lower = float(grid.masses @ np.where(single, at_edges[:-1], at_edges[1:]))
    return min(upper * (1.0 + _ROUNDING_SLACK), 1.0), lower


def _numerical_epsilon(grid: _CloneGrid, eps0: float, delta: float) -> float:
    """Upper end of a bisection for the smallest eps whose upper delta is <= ``delta``."""
    low, high = 0.0, eps0  # the delta at eps0 is 0, so ``high`` always qualifies
    if _numerical_delta(grid, 0.0, eps0)[0] <= delta:
        return 0.0
    while high - low > _REL_TOL * high + 1e-15 * eps0:
        mid = 0.5 * (low + high)
        if _numerical_delta(grid, mid, eps0)[0] <= delta:
            high = mid
        else:
            low = mid
    return high
