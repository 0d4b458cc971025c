"""Local and smooth sensitivity of the outlier count (paper 003, Section 4.2-4.3:
Theorems 5-6, Lemma 1, Propositions 1-2, Algorithm 2).

Neighbours replace one of ``n`` records (``n`` public). With ``deg`` the degrees of
Definition 7, ``V(j)`` the records of degree ``j`` and ``cover(P)`` the most points of
``P`` one ball of radius ``r`` can hold (:mod:`.ball_cover`), define for ``t >= 0``

    P_k(t)   = union_{|i| <= t} V(k + i),        P_{k-1}(t) = union_{|i| <= t} V(k - 1 + i),
    L(t)     = min(n, GS_UB, max(cover(P_k(t)), cover(P_{k-1}(t))) + t + 1)     (Theorem 6)
    L(0)     = min(n, GS_UB, max(a, cover(V(k - 1))) + 1)                       (Theorem 5)

with ``a = max_{x in X} |{y != x : dist(x, y) <= r, deg(y) = k}|`` and ``GS_UB`` the
global bound of Theorem 4 (:func:`.kissing.global_sensitivity_upper`). The smooth bound
is ``S(X) = max_{t >= 0} e^(-beta t) L(t)``. What it guarantees:

* ``S(X) >= L(0) >= LS(X)``, the local sensitivity (Theorem 5; ``a`` drops the moved
  record itself from ``CV(X, x, k, r)``, which the change of the count does not involve).
* ``S`` is beta-smooth: for neighbours ``X ~ X'``, ``L_X(t) <= L_X'(t + 1)`` for every
  ``t`` -- a record unchanged by the move changes degree by at most one, so
  ``P_X(t)`` minus the moved record lies in ``P_X'(t + 1)`` (the argument of Lemma 1),
  and ``cover`` is monotone and changes by at most one per point; the Theorem-5 term is
  at most the Theorem-6 one. Hence ``S(X) <= e^beta S(X')`` (Nissim-Raskhodnikova-Smith
  2007, Lemma 2.3's argument). This is why only covers that are exactly monotone and
  1-Lipschitz are used, and why the method never changes with the data.

Algorithm 2 evaluates ``L(t)`` for ``t = 0, 1, ...`` and stops at the first ``T`` where
Proposition 1's cheap bound on every later term,
``L(t) <= min(n, GS_UB, max_j(cover(P_j(T)) + |P_j(t) \\ P_j(T)|) + t + 1)``, times
``e^(-beta t)`` is at most the best term so far (Proposition 2): the value returned is
then exactly ``S(X)``, not an approximation. Proposition 1's bound is vectorised over
all ``t`` with the degree histogram.

Covers are computed at radius ``r (1 + 1e-9)``: floating-point rounding of distances can
then only enlarge them, keeping every inequality above on the safe side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
from scipy.spatial import cKDTree

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.sensitivity import Norm, Sensitivity, SensitivityKind
from privreg.plugins.outliers.ball_cover import COVER_METHODS, algorithm1_reference, max_cover
from privreg.plugins.outliers.definitions import check_subspace, degrees, subspace_points
from privreg.plugins.outliers.kissing import global_sensitivity_upper

__all__ = [
    "COVER_SLACK",
    "SmoothBound",
    "local_sensitivity_bound",
    "local_bound_at_distance",
    "smooth_upper_bound",
    "smooth_upper_bound_reference",
    "OutlierCountSmoothSensitivity",
]

#: Relative enlargement of the radius used for covers (see the module docstring).
COVER_SLACK = 1e-9


def _method(method: Any) -> str:
    if method not in COVER_METHODS:
        raise PrivregValueError(
            f"cover must be one of {list(COVER_METHODS)}; got {method!r}. 'exact' is exact in "
            f"every dimension (exponential worst case for d >= 3); 'projection' is polynomial"
        )
    return method


class _Degrees:
    """Degrees of one dataset and the sets ``P_j(t)`` built from them."""

    def __init__(self, points: np.ndarray, k: int, radius: float) -> None:
        self.points, self.k, self.radius = points, k, radius
        self.n = points.shape[0]
        self.deg = degrees(points, radius)
        hist = np.bincount(self.deg, minlength=self.n + 2 * self.n + 4)
        self.cum = np.r_[0, np.cumsum(hist)]  # cum[j] = #records with degree < j

    def size(self, centre: int, t: np.ndarray) -> np.ndarray:
        """|P_centre(t)| = #records with degree in [centre - t, centre + t], vectorised."""
        lo = np.clip(centre - t, 0, self.cum.size - 1)
        hi = np.clip(centre + t + 1, 0, self.cum.size - 1)
        return self.cum[hi] - self.cum[lo]

    def members(self, centre: int, t: int) -> np.ndarray:
        return self.points[(self.deg >= centre - t) & (self.deg <= centre + t)]


def _theorem5_a(d: _Degrees) -> int:
    """``max_{x in X} |{y != x within r of x : deg(y) = k}|``."""
    vk = np.flatnonzero(d.deg == d.k)
    if vk.size == 0:
        return 0
    near = cKDTree(d.points[vk]).query_ball_point(d.points, d.radius, return_length=True)
    near = near - (d.deg == d.k)  # x itself is in V(k) and within r of itself
    return int(near.max())


@attrs.frozen(kw_only=True)
class SmoothBound:
    """The result of Algorithm 2: ``value`` = ``S(X)``; ``terms[t]`` = ``L(t)`` for the
    distances visited (``None`` where Proposition 1 showed the term cannot win);
    ``argmax`` = the ``t`` attaining ``value``; ``global_upper`` = ``GS_UB``.
    Data-dependent: never release any of it."""

    value: float
    terms: tuple[int | None, ...]
    argmax: int
    global_upper: int
    beta: float


def _prepare(data: Any, k: Any, radius: Any, subspace: Any) -> tuple[np.ndarray, int, float]:
    k = v.check_int("k", k, minimum=1)
    radius = v.check_sensitivity("radius", radius)
    return subspace_points(data, check_subspace(subspace)), k, radius


def local_bound_at_distance(data: Any, t: int, *, k: int, radius: float,
                            subspace: Sequence[int] | None = None, cover: str = "exact") -> int:
    """``L(t)``: an upper bound on ``LS^(t)(X)``, the largest local sensitivity of any
    dataset at distance ``t`` from ``X`` (Theorem 6 with Lemma 1; Theorem 5 at ``t = 0``)."""
    pts, k, radius = _prepare(data, k, radius, subspace)
    t = v.check_int("t", t, minimum=0)
    d = _Degrees(pts, k, radius)
    gs = global_sensitivity_upper(n=d.n, k=k, d=pts.shape[1])
    return _term(d, t, gs, _Covers(d, _cover_function(_method(cover))))[0]


def local_sensitivity_bound(data: Any, *, k: int, radius: float,
                            subspace: Sequence[int] | None = None, cover: str = "exact") -> int:
    """Theorem 5: an upper bound on the local sensitivity of ``q_count`` at ``data``.
    Data-dependent: never calibrate noise to it (use :class:`OutlierCountSmoothSensitivity`)."""
    return local_bound_at_distance(data, 0, k=k, radius=radius, subspace=subspace, cover=cover)


def _cover_function(method: str) -> Callable[..., int]:
    def cover(points: np.ndarray, radius: float, lower: int) -> int:
        return max_cover(points, radius, method=method, lower=lower)

    return cover


class _Covers:
    """``cover(P_j(t))`` for the nested sets of one dataset, memoised by membership (the
    sets stop growing once they hold every record, and the two families often agree)."""

    def __init__(self, d: _Degrees, cover: Callable[..., int]) -> None:
        self.d, self.cover, self.memo = d, cover, {}
        self.radius = d.radius * (1 + COVER_SLACK)

    def __call__(self, centre: int, t: int, lower: int = 0) -> int:
        mask = (self.d.deg >= centre - t) & (self.d.deg <= centre + t)
        key = np.packbits(mask).tobytes()
        if key not in self.memo:
            self.memo[key] = self.cover(self.d.points[mask], self.radius, lower)
        return self.memo[key]


def _term(d: _Degrees, t: int, gs: int, covers: _Covers, lower: tuple[int, int] = (0, 0)) -> tuple[int, int, int]:
    """``(L(t), cover(P_k(t)), cover(P_{k-1}(t)))``; ``lower`` are known lower bounds."""
    ck = covers(d.k, t, lower[0])
    ck1 = covers(d.k - 1, t, lower[1])
    inner = max(_theorem5_a(d), ck1) if t == 0 else max(ck, ck1)
    return min(d.n, gs, inner + t + 1), ck, ck1


def smooth_upper_bound(data: Any, *, k: int, radius: float, beta: float,
                       subspace: Sequence[int] | None = None, cover: str = "exact") -> SmoothBound:
    """Algorithm 2: the beta-smooth upper bound ``S(X) = max_t e^(-beta t) L(t)`` on the
    local sensitivity of ``q_count(X, k, r, S)`` (module docstring for the guarantee)."""
    pts, k, radius = _prepare(data, k, radius, subspace)
    beta = v.check_epsilon("beta", beta)
    return _algorithm2(pts, k, radius, beta, _cover_function(_method(cover)))


def smooth_upper_bound_reference(data: Any, *, k: int, radius: float, beta: float,
                                 subspace: Sequence[int] | None = None,
                                 budget: int | None = None) -> SmoothBound:
    """The same bound with every cover computed by the paper's Algorithm 1 as printed
    (:func:`~.ball_cover.algorithm1_reference`, ``O(2^|P|)``): the baseline of
    ``benchmarks/outliers.py``. ``budget`` caps the enclosing-ball calls of each cover
    (:class:`~.ball_cover.BudgetExhausted` beyond)."""
    pts, k, radius = _prepare(data, k, radius, subspace)
    beta = v.check_epsilon("beta", beta)
    return _algorithm2(pts, k, radius, beta, lambda p, r, lower: algorithm1_reference(p, r, budget=budget))


def _algorithm2(pts: np.ndarray, k: int, radius: float, beta: float,
                cover: Callable[..., int]) -> SmoothBound:
    """Algorithm 2 with Propositions 1-2, plus two shortcuts that keep the value exact:
    a term whose Proposition-1 bound cannot beat the best so far is not computed, and
    once a lower bound on the covers saturates ``L(t)`` at ``min(n, GS_UB)`` the term is
    known without computing any cover."""
    d = _Degrees(pts, k, radius)
    covers = _Covers(d, cover)
    gs = global_sensitivity_upper(n=d.n, k=k, d=pts.shape[1])
    ts = np.arange(d.n + 1)
    weight = np.exp(-beta * ts)
    cap = min(d.n, gs)
    best, arg, terms = 0.0, 0, []
    level = -1  # last level T with cover bounds (-1: none, covers 0)
    hi_k = hi_k1 = 0  # upper bounds on cover(P_k(T)), cover(P_{k-1}(T)) (Proposition 1)
    lo_k = lo_k1 = 0  # exact covers of an earlier level: lower bounds (the sets are nested)
    for t in range(d.n + 1):
        later = ts[t:]
        base_k = d.size(k, np.array([level]))[0] if level >= 0 else 0
        base_k1 = d.size(k - 1, np.array([level]))[0] if level >= 0 else 0
        grow_k, grow_k1 = d.size(k, later) - base_k, d.size(k - 1, later) - base_k1
        bound = np.minimum(cap, np.maximum(hi_k + grow_k, hi_k1 + grow_k1) + later + 1)
        if float(np.max(weight[t:] * bound)) <= best:  # Proposition 2: no later term can win
            break
        if weight[t] * bound[0] <= best:  # this term cannot win: carry Proposition 1's bounds
            hi_k, hi_k1, level = int(hi_k + grow_k[0]), int(hi_k1 + grow_k1[0]), t
            terms.append(None)
            continue
        if t > 0 and max(lo_k, lo_k1) + t + 1 >= cap:  # saturated: L(t) = cap, no cover needed
            term = cap
            hi_k, hi_k1 = int(hi_k + grow_k[0]), int(hi_k1 + grow_k1[0])
        else:
            term, lo_k, lo_k1 = _term(d, t, gs, covers, lower=(lo_k, lo_k1))
            hi_k, hi_k1 = lo_k, lo_k1
        level = t
        terms.append(term)
        if weight[t] * term > best:
            best, arg = float(weight[t] * term), t
    return SmoothBound(value=best, terms=tuple(terms), argmax=arg, global_upper=gs, beta=beta)


def _beta(x: Any) -> float:
    return v.check_epsilon("beta", x)


@attrs.frozen(kw_only=True)
class OutlierCountSmoothSensitivity(Sensitivity):
    """The beta-smooth upper bound of Algorithm 2 on the local sensitivity of the outlier
    count ``q_count(X, k, r, S)`` (paper 003, Theorems 5-6, Propositions 1-2), for
    neighbours that replace one of ``n`` records. ``bound(data)`` is at least the local
    sensitivity at ``data`` and satisfies ``bound(X) <= e^beta bound(X')`` for neighbours
    (module docstring). ``cover`` picks the max-ball-cover method (``exact`` or
    ``projection``; :mod:`.ball_cover`)."""

    kind: ClassVar[SensitivityKind] = SensitivityKind.SMOOTH
    k: int = attrs.field(converter=lambda x: v.check_int("k", x, minimum=1))
    radius: float = attrs.field(converter=lambda x: v.check_sensitivity("radius", x))
    beta: float = attrs.field(converter=_beta)
    subspace: tuple[int, ...] | None = attrs.field(default=None, converter=check_subspace)
    cover: str = attrs.field(default="exact", converter=_method)
    norm: Norm = Norm.L1

    def details(self, data: Any) -> SmoothBound:
        """The full :class:`SmoothBound` at ``data`` (data-dependent: never release it)."""
        if data is None:
            raise PrivregValueError("OutlierCountSmoothSensitivity needs data: pass bound(data)")
        return smooth_upper_bound(data, k=self.k, radius=self.radius, beta=self.beta,
                                  subspace=self.subspace, cover=self.cover)

    def bound(self, data: Any = None) -> float:
        return self.details(data).value
