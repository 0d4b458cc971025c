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

``cover`` may be replaced by any function ``c`` that is at least ``cover`` (then ``L(t)``
still bounds ``LS^(t)``) and is monotone and 1-Lipschitz (then the argument above goes
through word for word): the ``cover`` methods of :mod:`.ball_cover` are ``exact``,
``truss`` (the fit-truss number, polynomial, close to exact), ``core`` (near-linear,
looser) and ``projection``. A rule that switched between such functions according to
the data (a work budget, say) would in general break ``c_X(P_X(t)) <= c_X'(P_X'(t+1)) + 1``
-- a set just over the budget could jump to the looser bound -- so the method is fixed
by the caller and the dimension only.

Algorithm 2 evaluates ``L(t)`` for ``t = 0, 1, ...`` and stops at the first ``T`` where
Proposition 1's cheap bound on every later term,
``L(t) <= min(n, GS_UB, max_j(c(P_j(T)) + |P_j(t) \\ P_j(T)|) + t + 1)``, times
``e^(-beta t)`` is at most the best term so far (Proposition 2): the value returned is
then exactly ``S(X) = max_t e^(-beta t) L(t)`` for the chosen ``c``, not an
approximation. Proposition 1's bound is vectorised over all ``t`` with the degree
histogram. The computation is tiered, and every tier only decides *whether* a term can
win, never its value: a term is skipped when Proposition 1 already shows it cannot beat
the best so far; otherwise the covers are asked whether they exceed the largest value
that cannot win (a threshold test, much cheaper than the exact value for the truss and
core bounds and a pruning floor for the branch and bound) and are computed exactly only
when they do; for ``exact`` in ``d >= 3`` the fit-truss bound comes first and the branch
and bound runs only where it can exceed that floor, stopping once it meets the bound.

Cost of one evaluation, ``n`` records, ``m_t = |P(t)|``, ``D_t`` the degeneracy of the
graph of pairs within ``2r`` on ``P(t)``, ``T*`` the last level visited: ``O(n log n)``
for the degrees, then per level ``O(m_t D_t^2)`` for ``truss`` (the sets of consecutive
levels are nested prefixes of one degree-keyed structure: listing fit triangles is paid
once per 15% growth of the set, each level then peels ``O(E_t + T_t)`` at most, usually
only the triangles that can reach the threshold), ``O(E_t)`` for ``core``, and for
``exact`` the truss cost plus a branch and bound exponential in the local density
(:mod:`.ball_cover`). Polynomial overall for ``truss`` and ``core``:
``O(T* n D^2)`` and ``O(T* n D)`` with ``D <= n``, and ``T* <= n``.

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
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.sensitivity import Norm, Sensitivity, SensitivityKind
from privreg.plugins.outliers.ball_cover import COVER_METHODS, max_cover
from privreg.plugins.outliers.cover_algorithm1 import algorithm1_reference
from privreg.plugins.outliers.cover_core import PairCore
from privreg.plugins.outliers.cover_exact import max_cover_branch_and_bound
from privreg.plugins.outliers.cover_truss import FitTruss, max_cover_truss
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
            f"every dimension (exponential worst case for d >= 3); 'truss' is a polynomial upper "
            f"bound close to exact; 'core' is near-linear and looser; 'projection' is the "
            f"coordinate-plane bound"
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


def local_bound_at_distance(
    data: Any, t: int, *, k: int, radius: float, subspace: Sequence[int] | None = None, cover: str = "exact"
) -> int:
    """``L(t)``: an upper bound on ``LS^(t)(X)``, the largest local sensitivity of any
    dataset at distance ``t`` from ``X`` (Theorem 6 with Lemma 1; Theorem 5 at ``t = 0``)."""
    pts, k, radius = _prepare(data, k, radius, subspace)
    t = v.check_int("t", t, minimum=0)
    d = _Degrees(pts, k, radius)
    gs = global_sensitivity_upper(n=d.n, k=k, d=pts.shape[1])
    return _term(d, t, gs, _covers(d, _method(cover)))[0]


def local_sensitivity_bound(
    data: Any, *, k: int, radius: float, subspace: Sequence[int] | None = None, cover: str = "exact"
) -> int:
    """Theorem 5: an upper bound on the local sensitivity of ``q_count`` at ``data``.
    Data-dependent: never calibrate noise to it (use :class:`OutlierCountSmoothSensitivity`)."""
    return local_bound_at_distance(data, 0, k=k, radius=radius, subspace=subspace, cover=cover)


class _Covers:
    """``cover(P_j(t))`` for the nested sets of one dataset, memoised by membership (the
    sets stop growing once they hold every record, and the two families often agree).

    ``covers(centre, t, at_least, lower)`` returns ``max(cover(P_centre(t)), at_least - 1)``:
    the exact cover when it is at least ``at_least``, else the certified upper bound
    ``at_least - 1`` -- Algorithm 2 only needs to know that a term cannot win. ``lower`` is a
    known lower bound (the exact cover of a nested subset). ``cover(points, radius, lower)``
    must return ``max(cover(points), lower)`` for any ``lower``."""

    #: the largest degree Algorithm 2 can still need; unused here (each set is built when
    #: asked for), kept so that every cover oracle takes the same updates
    horizon: int = 0

    def __init__(self, d: _Degrees, cover: Callable[..., int]) -> None:
        self.d, self.cover = d, cover
        self.memo: dict[bytes, tuple[int, bool]] = {}  # degree mask -> (cover or upper bound, exact)
        self.radius = d.radius * (1 + COVER_SLACK)

    def __call__(self, centre: int, t: int, at_least: int = 0, lower: int = 0) -> int:
        mask = (self.d.deg >= centre - t) & (self.d.deg <= centre + t)
        key = np.packbits(mask).tobytes()
        if key in self.memo:
            value, exact = self.memo[key]
            if exact or value < at_least:  # known, or a known upper bound already settles it
                return max(value, at_least - 1)
        got = int(self.cover(self.d.points[mask], self.radius, max(int(lower), at_least - 1)))
        # exact when above the threshold, or when the floor was a true lower bound
        self.memo[key] = (got, got >= at_least or lower >= at_least - 1)
        return max(got, at_least - 1)


class _PrefixCovers:
    """A bound ``c(P_centre(t))`` for ``d >= 3`` computed on degree-keyed structures: the
    fit-truss number (:class:`~.cover_truss.FitTruss`) or the core bound
    (:class:`~.cover_core.PairCore`), with the contract of :class:`_Covers` relaxed: the
    exact value when it is at least ``at_least``, else *some* upper bound below
    ``at_least`` (a tighter one than ``at_least - 1`` lets Proposition 1 carry further).

    From ``t >= centre - min(deg)`` on the sets are the prefixes ``{deg <= centre + t}`` of
    one degree-keyed structure (a *stage*), built for all records of degree at most some
    ``D`` and rebuilt for a larger ``D`` (15% more records, but never past
    :attr:`horizon`, the largest degree Proposition 2 still needs) when Algorithm 2 goes
    further; the first query on a stage decomposes it, after which most levels are settled
    by its truss numbers alone. Smaller ``t`` give windows of degrees, each its own
    structure. Upper bounds found for a prefix also bound every smaller prefix."""

    _GROWTH = 1.15

    def __init__(self, d: _Degrees, structure: type) -> None:
        self.d, self.structure = d, structure
        self.radius = d.radius * (1 + COVER_SLACK)
        self.low = int(d.deg.min()) if d.n else 0
        self.horizon = int(d.deg.max()) if d.n else 0
        self.prefix: Any = None
        self.prefix_top = -1
        self.windows: dict[tuple[int, int], Any] = {}
        self.exact: dict[int, int] = {}  # prefix top degree -> tau
        self.upper: dict[int, int] = {}  # prefix top degree -> an upper bound on tau

    def __call__(self, centre: int, t: int, at_least: int = 0, lower: int = 0) -> int:
        lo, hi = centre - t, centre + t
        if lo > self.low:
            if (lo, hi) not in self.windows:
                mask = (self.d.deg >= lo) & (self.d.deg <= hi)
                self.windows[(lo, hi)] = self.structure(self.d.points[mask], self.radius)
            return self._query(self.windows[(lo, hi)], None, at_least)
        if hi in self.exact:
            return self.exact[hi]
        bound = min((u for top, u in self.upper.items() if top >= hi), default=None)
        if bound is not None and bound < at_least:
            return bound
        if hi > self.prefix_top:
            self._grow(hi)
        got = self._query(self.prefix, hi, at_least)
        if got >= at_least:
            self.exact[hi] = got
        self.upper[hi] = min(got, self.upper.get(hi, got))
        return got

    def _grow(self, hi: int) -> None:
        held = int(self.d.cum[self.prefix_top + 1]) if self.prefix_top >= 0 else 0
        top, last = hi, max(hi, min(int(self.d.deg.max()), self.horizon))
        while top < last and int(self.d.cum[top + 1]) < self._GROWTH * held:
            top += 1
        mask = self.d.deg <= top
        self.prefix = None  # free the old stage first: stages can be large
        self.prefix = self.structure(self.d.points[mask], self.radius, keys=self.d.deg[mask])
        self.prefix_top = top

    @staticmethod
    def _query(structure: Any, key_max: int | None, at_least: int) -> int:
        if isinstance(structure, FitTruss):
            return structure.truss(key_max, at_least=at_least)
        return structure.core(key_max, at_least=at_least)


def _covers(d: _Degrees, method: str) -> Any:
    """The cover oracle for ``method``: degree-keyed structures for ``truss`` and ``core`` in
    ``d >= 3``, else the memoised set functions of :mod:`.ball_cover`. The choice depends on
    the method and the dimension only."""
    if method in ("truss", "core") and d.points.shape[1] >= 3:
        return _PrefixCovers(d, FitTruss if method == "truss" else PairCore)

    def cover(points: np.ndarray, radius: float, lower: int) -> int:
        if method == "exact" and points.shape[1] >= 3:
            # tiered: the polynomial fit-truss bound first; branch and bound only if it can
            # exceed the floor, and it stops as soon as it meets that bound
            upper = max_cover_truss(points, radius)
            if upper <= lower:
                return int(lower)
            return max_cover_branch_and_bound(points, radius, lower=lower, upper=upper)
        return max(int(lower), max_cover(points, radius, method=method))

    return _Covers(d, cover)


def _term(
    d: _Degrees, t: int, gs: int, covers: Any, lower: tuple[int, int] = (0, 0), at_least: int = 0
) -> tuple[int, int, int]:
    """``(L(t), c_k, c_{k-1})`` where ``c_j`` is the cover bound of ``P_j(t)`` if it is at
    least ``at_least``, else an upper bound on it below ``at_least``: ``L(t)`` is exact
    when it needs a cover of at least ``at_least``, otherwise ``L(t) <= min(n, GS_UB,
    at_least + t)``. ``lower`` are known lower bounds (exact covers of nested subsets)."""
    ck = covers(d.k, t, at_least, lower[0])
    ck1 = covers(d.k - 1, t, at_least, lower[1])
    inner = max(_theorem5_a(d), ck1) if t == 0 else max(ck, ck1)
    return min(d.n, gs, inner + t + 1), ck, ck1


def smooth_upper_bound(
    data: Any, *, k: int, radius: float, beta: float, subspace: Sequence[int] | None = None, cover: str = "exact"
) -> SmoothBound:
    """Algorithm 2: the beta-smooth upper bound ``S(X) = max_t e^(-beta t) L(t)`` on the
    local sensitivity of ``q_count(X, k, r, S)`` (module docstring for the guarantee)."""
    pts, k, radius = _prepare(data, k, radius, subspace)
    beta = v.check_epsilon("beta", beta)
    d = _Degrees(pts, k, radius)
    return _algorithm2(d, beta, _covers(d, _method(cover)))


def smooth_upper_bound_reference(
    data: Any, *, k: int, radius: float, beta: float, subspace: Sequence[int] | None = None, budget: int | None = None
) -> SmoothBound:
    """The same bound with every cover computed by the paper's Algorithm 1 as printed
    (:func:`~.cover_algorithm1.algorithm1_reference`, ``O(2^|P|)``): the baseline of
    ``benchmarks/outliers.py``. ``budget`` caps the enclosing-ball calls of each cover
    (:class:`~.cover_algorithm1.BudgetExhausted` beyond)."""
    pts, k, radius = _prepare(data, k, radius, subspace)
    beta = v.check_epsilon("beta", beta)
    d = _Degrees(pts, k, radius)
    return _algorithm2(
        d, beta, _Covers(d, lambda p, r, lower: max(int(lower), algorithm1_reference(p, r, budget=budget)))
    )


def _need(weight: float, best: float, t: int, cap: int) -> int:
    """The largest cover ``c >= -1`` whose term ``weight * min(cap, c + t + 1)`` is at most
    ``best`` (the same floating-point comparison as the skip test; ``cap`` if every cover
    is): a term whose covers are at most this cannot raise the maximum."""

    def loses(c: int) -> bool:
        return weight * min(cap, c + t + 1) <= best

    if loses(cap):
        return cap
    c = max(-1, min(cap - 1, int(np.floor(best / weight)) - t - 1))
    while c >= 0 and not loses(c):
        c -= 1
    while c + 1 < cap and loses(c + 1):
        c += 1
    return c if loses(c) else -1


def _algorithm2(d: _Degrees, beta: float, covers: Any) -> SmoothBound:
    """Algorithm 2 with Propositions 1-2, plus shortcuts that keep the value exact: a term
    whose Proposition-1 bound cannot beat the best so far is not computed; once a lower
    bound on the covers saturates ``L(t)`` at ``min(n, GS_UB)`` the term is known without
    computing any cover; and every other term asks the covers only whether they exceed
    the largest value that cannot win (:func:`_need`), computing them exactly only then
    (tiered: a threshold test, then the exact value where it matters)."""
    k = d.k
    gs = global_sensitivity_upper(n=d.n, k=k, d=d.points.shape[1])
    ts = np.arange(d.n + 1)
    weight = np.exp(-beta * ts)
    cap = min(d.n, gs)
    best, arg = 0.0, 0
    terms: list[int | None] = []
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
            need = _need(float(weight[t]), best, t, cap)
            # the largest degree any later term can still need (Proposition 2 with the bounds)
            covers.horizon = k + t + int(np.flatnonzero(weight[t:] * bound > best)[-1])
            term, ck, ck1 = _term(d, t, gs, covers, lower=(lo_k, lo_k1), at_least=need + 1)
            hi_k, hi_k1 = min(ck, int(hi_k + grow_k[0])), min(ck1, int(hi_k1 + grow_k1[0]))
            lo_k, lo_k1 = (ck if ck > need else lo_k), (ck1 if ck1 > need else lo_k1)
            if weight[t] * term <= best:  # certified not to win; the bound is not L(t) itself
                level = t
                terms.append(None)
                continue
        level = t
        terms.append(term)
        if weight[t] * term > best:
            best, arg = float(weight[t] * term), t
    return SmoothBound(value=best, terms=tuple(terms), argmax=arg, global_upper=gs, beta=beta)


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class OutlierCountSmoothSensitivity(Sensitivity):
    """The beta-smooth upper bound of Algorithm 2 on the local sensitivity of the outlier
    count ``q_count(X, k, r, S)`` (paper 003, Theorems 5-6, Propositions 1-2), for
    neighbours that replace one of ``n`` records. ``bound(data)`` is at least the local
    sensitivity at ``data`` and satisfies ``bound(X) <= e^beta bound(X')`` for neighbours
    (module docstring). ``cover`` picks the max-ball-cover method (:mod:`.ball_cover`):
    ``exact``; ``truss``, a polynomial upper bound, within a few percent of ``exact`` on
    most data and the choice for 3+ attributes when ``exact`` is too slow; ``core``,
    near-linear and looser; or ``projection``. Every method gives a valid beta-smooth
    bound; the looser ones only add noise."""

    kind: ClassVar[SensitivityKind] = SensitivityKind.SMOOTH
    k: int = param_field(minimum=1, doc="a record is an outlier with fewer than k neighbours")
    radius: float = param_field(doc="neighbourhood radius r (distance divided by sqrt(|S|))", **POSITIVE)
    beta: float = param_field(doc="smoothness parameter beta", **POSITIVE)
    subspace: tuple[int, ...] | None = attrs.field(default=None, converter=check_subspace)
    cover: str = param_field(default="exact", choices=COVER_METHODS, doc="max-ball-cover method")
    norm: Norm = Norm.L1

    def details(self, data: Any) -> SmoothBound:
        """The full :class:`SmoothBound` at ``data`` (data-dependent: never release it)."""
        if data is None:
            raise PrivregValueError("OutlierCountSmoothSensitivity needs data: pass bound(data)")
        return smooth_upper_bound(
            data, k=self.k, radius=self.radius, beta=self.beta, subspace=self.subspace, cover=self.cover
        )

    def bound(self, data: Any = None) -> float:
        return self.details(data).value
