"""The largest subset of a point set that one ball of radius ``r`` can cover
(paper 003, Section 4.3.1, eqs. (45)-(46), Algorithm 1).

``max_cover(P, r) = max_{x in R^d} |P n B(x, r)|`` (closed balls) is the quantity the
smooth bound of the outlier count needs. A subset fits in some ball of radius ``r``
exactly when its smallest enclosing ball has radius ``<= r``, which is what the paper's
Algorithm 1 tests for subsets of ``P`` -- ``O(2^|P|)`` smallest-enclosing-ball calls.

What is shipped (``m = |P|``, ``n_2r(p)`` = points of ``P`` within ``2r`` of ``p``):

* ``d = 1`` -- :func:`max_cover_1d`, exact: a sliding window of width ``2r`` over the
  sorted points, ``O(m log m)``.
* ``d = 2`` -- :func:`max_cover_2d`, exact: for each anchor ``p`` on the boundary of the
  ball, the centres on the circle of radius ``r`` about ``p`` that also cover ``q`` form
  an arc; the deepest point of the arcs is found by a vectorised angular sweep,
  ``O(sum_p n_2r(p) log n_2r(p)) <= O(m^2 log m)``. (The deepest cell of the arrangement
  of radius-``r`` disks has a boundary point on some circle, and closed disks make that
  point at least as deep.)
* any ``d`` -- :func:`max_cover_branch_and_bound`, exact: duplicates are merged (with
  their multiplicity); every covered subset lies in ``B(p, 2r)`` for each of its
  members, so each subset is searched once, from its member with the fewest
  ``2r``-neighbours, over those neighbours only. The search is Tomita-style
  (maximum clique with a greedy-colouring bound): two candidates can only be together if
  they fit with the anchor (closed-form ball of three points), the colouring of that
  graph bounds what a branch can still gain, and each branch keeps only the candidates
  that fit with its subset (certified Frank-Wolfe, :func:`~.seb.fits_in_ball_batch`).
  Worst case ``O(m 2^c)`` ball tests with ``c = max_p n_2r(p)`` -- exponential in the
  local density of ``P``, not in ``|P|`` as Algorithm 1 -- and in practice far fewer
  (``benchmarks/outliers.py``).
* any ``d >= 3`` -- :func:`max_cover_projection`, a safe *upper* bound in polynomial time:
  an ``r``-ball projects onto every coordinate plane inside an ``r``-disk, so the exact
  2-d cover of every projection bounds ``max_cover``; the minimum over the
  ``d (d - 1) / 2`` coordinate planes is returned, ``O(d^2 m^2 log m)``.
* any ``d >= 3`` -- :func:`max_cover_truss` / :class:`FitTruss`, a safe *upper* bound in
  polynomial time that stays close to ``max_cover`` in high dimensions (the projection
  bound does not: in 7-d it is often 3x too large). Call a pair of points an *edge* if it
  fits in a ball of radius ``r`` (distance ``<= 2r``) and a triple a *fit triangle* if it
  does. For a set ``F`` of edges, the support of an edge ``{u, w}`` in ``F`` is
  ``2 + #{l : {u, l}, {w, l} in F and {u, w, l} a fit triangle}``; the *fit-truss number*

      tau(P) = max over non-empty edge sets F of  min_{e in F} support_F(e)

  (``tau = |P|`` for ``|P| <= 1``, ``1`` without edges). It is an upper bound: the pairs of
  a set ``Q`` inside one ``r``-ball all have support ``|Q|`` (every triple of ``Q`` fits).
  It is monotone (more points, more edge sets) and 1-Lipschitz: dropping the edges of a
  removed point ``x`` from an optimal ``F`` lowers every other support by at most one (only
  ``l = x`` is lost; if nothing is left, ``F`` was a star about ``x`` with supports 2).
  The fit test of a triple uses its three squared side lengths only, sorted (half the
  longest side if the triangle is not acute, else the circumradius, in a cancellation-free
  form), and every squared distance is computed coordinate by coordinate: the predicates
  are deterministic functions of the points involved, so ``tau`` is a well-defined function
  of the multiset. ``tau`` is computed exactly by peeling (remove every edge of support
  below ``k``, raise ``k``; Cohen's truss decomposition), on the fit triangles listed once
  each with the edges oriented along a smallest-last (degeneracy) order:
  ``O(m^2 + m D^2)`` time and ``O(m + E + T)`` memory (about 35 bytes per fit triangle,
  70 at the peak while the edge-to-triangle index is built;
  plus two ``m x m`` matrices up to ``m = 2500``), ``D`` the degeneracy of the edge graph
  (``D <= max_p n_2r(p)``), ``E <= m D`` edges, ``T <= m D^2 / 2`` fit triangles --
  polynomial, but cubic in ``m`` when nearly every pair is an edge (dense data in high
  dimensions with a large ``r``).
* any ``d >= 3`` -- :func:`max_cover_core` / :class:`PairCore`, the *core bound*
  ``kappa(P)``: one plus the degeneracy of the edge graph (the largest ``s`` such that
  some subset has each member within ``2r`` of ``s - 1`` others). ``kappa >= tau`` (the
  vertices of an optimal ``F`` each have ``>= s - 1`` neighbours in ``F``), monotone,
  1-Lipschitz, ``O(m log m + E)``: always fast, but in 7-d typically 2-3x ``tau``.
* :func:`algorithm1_reference` -- the paper's Algorithm 1 verbatim, for comparison.

Ordered: ``max_cover <= tau <= kappa <= |P|``; the projection
bound is not comparable with ``tau`` in general but is far looser in 7-d.

"Exact" is up to the floating-point resolution of distances; :mod:`.smooth` calls these
with the radius enlarged by a relative 1e-9, so rounding can only enlarge a cover.

Every function here is *monotone* (``P c Q`` gives ``cover(P) <= cover(Q)``) and
*1-Lipschitz* (adding or removing one point changes it by at most 1) -- the exact ones
because ``max_cover`` is, the projection bound because a minimum of such functions is, the
fit-truss and core bounds by the arguments above.
:mod:`.smooth` needs both properties for the smooth bound to be beta-smooth, which is why
no method switches to another depending on the data. All are deterministic, but their
running time depends on the data (a timing side channel: run releases where timing is
not observable).
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np
from scipy import sparse
from scipy.spatial import cKDTree

from privreg.core.errors import PrivregValueError
from privreg.plugins.outliers.seb import enclosing_ball, fits_in_ball, fits_in_ball_batch

__all__ = [
    "COVER_METHODS",
    "max_cover",
    "max_cover_1d",
    "max_cover_2d",
    "max_cover_branch_and_bound",
    "max_cover_projection",
    "max_cover_truss",
    "max_cover_core",
    "FitTruss",
    "PairCore",
    "algorithm1_reference",
    "BudgetExhausted",
]

#: ``exact``: 1-d window, 2-d sweep, branch and bound for d >= 3; ``projection``: exact
#: for d <= 2, the coordinate-plane projection bound for d >= 3; ``truss``: exact for
#: d <= 2, the fit-truss bound for d >= 3 (polynomial, the tightest safe bound here);
#: ``core``: exact for d <= 2, the core bound for d >= 3 (near-linear, loosest).
COVER_METHODS = ("exact", "projection", "truss", "core")

_EVENTS_PER_BLOCK = 1 << 21  # sweep events processed at once (memory bound)


def _points(points: Any) -> np.ndarray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2:
        raise PrivregValueError(f"points must be a 2-d array (points x coordinates); got shape {p.shape}")
    return p


def max_cover_1d(points: Any, radius: float) -> int:
    """Exact ``max_cover`` on the line: the most points in a closed window of width
    ``2 radius`` (an optimal window can start at a point). ``O(m log m)``."""
    x = np.sort(np.asarray(points, dtype=np.float64).reshape(-1))
    if x.size == 0:
        return 0
    ends = np.searchsorted(x, x + 2.0 * radius, side="right")
    return int(np.max(ends - np.arange(x.size)))


def _sweep_block(points: np.ndarray, anchors: np.ndarray, neighbours: list, radius: float) -> np.ndarray:
    """Max depth over the circle of radius ``radius`` about each anchor (the anchor
    itself included), for one block of anchors; one padded row of arc events per anchor,
    sorted row-wise (stable, starts before ends at equal angles: closed arcs)."""
    lengths = np.fromiter((len(nb) for nb in neighbours), dtype=np.int64, count=len(neighbours))
    src = np.repeat(np.arange(anchors.size), lengths)
    dst = np.concatenate([np.asarray(nb, dtype=np.int64) for nb in neighbours])
    keep = dst != anchors[src]
    src, dst = src[keep], dst[keep]
    vec = points[dst] - points[anchors[src]]
    dist = np.hypot(vec[:, 0], vec[:, 1])
    same = dist == 0.0  # a duplicate is covered from every centre on the circle
    depth = np.bincount(src[same], minlength=anchors.size) + 1
    src, vec, dist = src[~same], vec[~same], dist[~same]
    if src.size == 0:
        return depth
    phi = np.arctan2(vec[:, 1], vec[:, 0])
    half = np.arccos(np.minimum(1.0, dist / (2.0 * radius)))
    start = np.mod(phi - half, 2.0 * np.pi)
    end = start + 2.0 * half
    # Each arc and its copy shifted by -2 pi: on [0, 2 pi) the count on the line is the
    # circular count, and elsewhere it never exceeds it (arcs are at most pi long).
    per_row = np.bincount(src, minlength=anchors.size)
    width = 2 * int(per_row.max())
    first = np.r_[0, np.cumsum(per_row)[:-1]]
    col = np.arange(src.size) - first[src]
    starts = np.full((anchors.size, width), np.inf)
    ends = np.full((anchors.size, width), np.inf)
    starts[src, 2 * col], starts[src, 2 * col + 1] = start, start - 2.0 * np.pi
    ends[src, 2 * col], ends[src, 2 * col + 1] = end, end - 2.0 * np.pi
    order = np.argsort(np.hstack([starts, ends]), axis=1, kind="stable")
    is_start = order < width
    slot = np.where(is_start, order, order - width)
    valid = slot < 2 * per_row[:, None]
    step = np.where(is_start, 1, -1) * valid
    depth += np.maximum(np.cumsum(step, axis=1).max(axis=1), 0)
    return depth


def max_cover_2d(points: Any, radius: float) -> int:
    """Exact ``max_cover`` in the plane by the angular sweep (module docstring)."""
    p = _points(points)
    m = p.shape[0]
    if m == 0:
        return 0
    tree = cKDTree(p)
    counts = tree.query_ball_point(p, 2.0 * radius, return_length=True)
    order = np.argsort(-counts, kind="stable")  # densest anchors first: raise the best early
    best, start = 1, 0
    while start < m and counts[order[start]] > best:  # count bounds the depth of an anchor
        rows = max(1, _EVENTS_PER_BLOCK // (4 * int(counts[order[start]])))
        anchors = order[start:start + rows]
        anchors = anchors[counts[anchors] > best]
        neighbours = tree.query_ball_point(p[anchors], 2.0 * radius)
        best = max(best, int(_sweep_block(p, anchors, list(neighbours), radius).max()))
        start += rows
    return best


def _triples_fit(anchor: np.ndarray, q: np.ndarray, radius: float) -> np.ndarray:
    """``fit[i, j]``: the smallest ball of ``{anchor, q_i, q_j}`` has radius at most
    ``radius`` (closed form: half the longest side if the triangle has an angle of at
    least 90 degrees, else the circumradius). Rounding errs towards "fits" (slack 1e-9):
    this is only ever used to rule subsets out."""
    u = q - anchor
    g = u @ u.T  # Gram matrix at the anchor
    nu = np.diag(g)
    dij = nu[:, None] + nu[None, :] - 2.0 * g  # |q_i - q_j|^2
    longest = np.maximum(np.maximum(nu[:, None], nu[None, :]), dij)
    # angles: at the anchor (g), at q_i ((a - q_i).(q_j - q_i)), at q_j
    at_i = nu[:, None] - g
    at_j = nu[None, :] - g
    blunt = (g <= 0) | (at_i <= 0) | (at_j <= 0)
    area4 = np.maximum(nu[:, None] * nu[None, :] - g * g, 0.0)  # (2 * area)^2
    with np.errstate(divide="ignore", invalid="ignore"):
        circ2 = nu[:, None] * nu[None, :] * dij / (4.0 * area4)
    r2 = np.where(blunt | (area4 <= 0), longest / 4.0, circ2)
    return r2 <= radius * radius * (1 + 1e-9)


class _Search:
    """Branch and bound over the subsets of the distinct points ``q`` (multiplicities
    ``mult``) that contain row 0 (the anchor) and fit in a ball of ``radius``, in the
    style of Tomita's maximum-clique algorithm: two candidates can only be together if
    they fit with the anchor (a static graph), a greedy colouring of that graph bounds
    what a branch can still gain (the heaviest point of each colour class), and every
    branch keeps only the candidates that fit with its subset (certified by
    :func:`~.seb.fits_in_ball_batch`)."""

    def __init__(self, q: np.ndarray, mult: np.ndarray, radius: float, best: int, upper: int) -> None:
        self.q, self.mult, self.radius, self.best, self.upper = q, mult, radius, best, upper
        self.adj = _triples_fit(q[0], q, radius)
        np.fill_diagonal(self.adj, False)

    def compatible(self, members: list[int], start: np.ndarray, ys: list[int]) -> list[tuple[int, np.ndarray]]:
        """The ``y`` in ``ys`` for which ``members + [y]`` fits (one vectorised batch), each
        with Frank-Wolfe weights over ``members + [y]`` to warm-start the next level."""
        if not ys:
            return []
        fits, lam, _ = fits_in_ball_batch(self.q[members], self.q[ys], self.radius, start=start)
        return [(y, lam[i]) for i, y in enumerate(ys) if fits[i]]

    def _colour(self, cand: list[int]) -> tuple[list[int], list[int]]:
        """Candidates ordered by greedy colour class, and for each the most the classes up
        to its own can add (sum of the classes' heaviest multiplicities)."""
        classes: list[list[int]] = []
        for v in sorted(cand, key=lambda v: -self.mult[v]):
            for cls in classes:
                if not self.adj[v, cls].any():
                    cls.append(v)
                    break
            else:
                classes.append([v])
        order, gain, total = [], [], 0
        for cls in classes:
            total += int(max(self.mult[v] for v in cls))
            order += cls
            gain += [total] * len(cls)
        return order, gain

    def run(self, members: list[int], weight: int, cand: list[tuple[int, np.ndarray]]) -> None:
        self.best = max(self.best, weight)
        if not cand or self.best >= self.upper:  # nothing left, or a known upper bound is met
            return
        ids = [y for y, _ in cand]
        if weight + int(self.mult[ids].sum()) <= self.best:
            return
        if fits_in_ball(self.q[members + ids], self.radius).fits:
            self.best = weight + int(self.mult[ids].sum())
            return
        start = dict(cand)
        order, gain = self._colour(ids)
        for idx in range(len(order) - 1, -1, -1):
            if weight + gain[idx] <= self.best or self.best >= self.upper:
                return
            v = order[idx]
            grown = members + [v]
            rest = [u for u in order[:idx] if self.adj[v, u]]
            self.run(grown, weight + int(self.mult[v]), self.compatible(grown, start[v], rest))


def max_cover_branch_and_bound(points: Any, radius: float, *, lower: int = 0, upper: int | None = None) -> int:
    """Exact ``max_cover`` in any dimension by branch and bound (module docstring).
    Duplicate points are merged and counted with their multiplicity.

    Returns ``max(max_cover, lower)``: ``lower`` is a known lower bound on the answer (e.g.
    the cover of a subset of ``points``), or a threshold below which the caller does not
    need the exact value; either way it only prunes the search. ``upper`` is a known upper
    bound (e.g. :func:`max_cover_truss`): the search stops as soon as it finds a ball that
    covers that many points. Never below the true value: a subset is discarded only when a
    certified test (:mod:`.seb`, or the closed-form ball of three points with slack)
    shows it does not fit.
    """
    p = _points(points)
    if p.shape[0] == 0:
        return max(0, int(lower))
    upper = p.shape[0] if upper is None else int(upper)
    u, mult = np.unique(p, axis=0, return_counts=True)
    m = u.shape[0]
    tree = cKDTree(u)
    near_r = tree.query_ball_point(u, radius)
    best = max(int(lower), max(int(mult[nb].sum()) for nb in near_r))
    near = tree.query_ball_point(u, 2.0 * radius)
    mass = np.array([int(mult[nb].sum()) for nb in near])
    rank = np.empty(m, dtype=np.int64)
    rank[np.argsort(mass, kind="stable")] = np.arange(m)
    # every subset is searched once, from its member of lowest rank (fewest 2r-neighbours)
    cand_of = [[j for j in near[i] if rank[j] > rank[i]] for i in range(m)]
    reach = [int(mult[i] + mult[c].sum()) for i, c in enumerate(cand_of)]
    for i in sorted(range(m), key=lambda i: -reach[i]):
        if reach[i] <= best or best >= upper:
            break
        local = np.vstack([u[i:i + 1], u[cand_of[i]]])
        search = _Search(local, np.r_[mult[i], mult[cand_of[i]]], radius, best, upper)
        search.run([0], int(mult[i]), search.compatible([0], np.ones(1), list(range(1, local.shape[0]))))
        best = search.best
    return best


# --- the fit-truss bound ----------------------------------------------------------------------

_TRUSS_SLACK = 1e-9  # relative slack on squared radii: rounding can only add edges and triangles
_DENSE_LIMIT = 2500  # up to this many points, squared distances and edge ids are kept as matrices


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared distances between broadcast rows of ``a`` and ``b``, summed coordinate by
    coordinate in a fixed order: the value for a pair is the same whatever else is computed
    with it (no BLAS, no reassociation)."""
    out = None
    for c in range(a.shape[-1]):
        diff = a[..., c] - b[..., c]
        sq = diff * diff
        out = sq if out is None else out + sq
    return out


def _triangle_fits(x: np.ndarray, y: np.ndarray, z: np.ndarray, r2: float) -> np.ndarray:
    """Whether three points with squared side lengths ``x, y, z`` fit in a closed ball of
    squared radius ``r2``. The sides are sorted first (``lo <= mid <= hi``), so the answer
    does not depend on the argument order. The smallest enclosing ball has squared radius
    ``hi / 4`` unless the triangle is acute (``s = lo + mid - hi > 0``), then the squared
    circumradius ``lo mid hi / (4 lo mid - s^2)``, whose denominator is at least
    ``3 lo mid`` (``s <= lo, mid``): no cancellation. Relative slack 1e-9 towards "fits"."""
    lo = np.minimum(np.minimum(x, y), z)
    hi = np.maximum(np.maximum(x, y), z)
    mid = np.maximum(np.minimum(x, y), np.minimum(np.maximum(x, y), z))
    s = (lo + mid) - hi
    prod = lo * mid
    acute = s > 0
    den = np.where(acute, 4.0 * prod - s * s, 1.0)
    rad2 = np.where(acute, prod * hi / den, hi * 0.25)
    return rad2 <= r2 * (1.0 + _TRUSS_SLACK)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` over ``zip(starts, lengths)`` (vectorised)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total)


def _smallest_last(m: int, ends: np.ndarray) -> np.ndarray:
    """Rank of every vertex in a smallest-last order of the graph with edge list ``ends``:
    orienting each edge towards the later vertex leaves at most ``D`` (the degeneracy)
    out-neighbours per vertex. ``O(m^2)`` vectorised steps of ``O(m)``."""
    rank = np.empty(m, dtype=np.int64)
    deg = np.bincount(ends.ravel(), minlength=m).astype(np.int64)
    if ends.shape[0] == 0:
        rank[np.arange(m)] = np.arange(m)
        return rank
    both = np.r_[ends[:, 0], ends[:, 1]]
    other = np.r_[ends[:, 1], ends[:, 0]]
    order = np.argsort(both, kind="stable")
    ptr = np.searchsorted(both[order], np.arange(m + 1))
    nbrs = other[order]
    alive_deg = deg.copy()
    done = np.iinfo(np.int64).max
    for i in range(m):
        v = int(np.argmin(alive_deg))
        rank[v] = i
        alive_deg[v] = done
        alive_deg[nbrs[ptr[v]:ptr[v + 1]]] -= 1
    return rank


def _keyed_points(points: Any, keys: Any) -> tuple[np.ndarray, np.ndarray]:
    """The points sorted by their integer keys (stable; all keys 0 when ``None``)."""
    p = _points(points)
    m = p.shape[0]
    keys = np.zeros(m, dtype=np.int64) if keys is None else np.asarray(keys, dtype=np.int64).reshape(-1)
    if keys.shape[0] != m:
        raise PrivregValueError(f"keys must have one entry per point ({m}); got {keys.shape[0]}")
    order = np.argsort(keys, kind="stable")
    return p[order], keys[order]


def _edges(p: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(i < j)`` within ``2 radius`` (relative slack 1e-9 towards inclusion)
    and their squared distances, by the coordinate-by-coordinate predicate: KD-tree
    candidates at a wider radius, then the deterministic test."""
    if p.shape[0] >= 2:
        cand = cKDTree(p).query_pairs(2.0 * float(radius) * (1.0 + 1e-6), output_type="ndarray")
    else:
        cand = np.zeros((0, 2), dtype=np.int64)
    cand = np.sort(cand.astype(np.int64).reshape(-1, 2), axis=1)
    sq = _squared_distances(p[cand[:, 0]], p[cand[:, 1]])
    keep = sq <= 4.0 * float(radius) * float(radius) * (1.0 + _TRUSS_SLACK)
    return cand[keep], sq[keep]


class FitTruss:
    """The fit triangles of a point set and the fit-truss numbers ``tau`` of its prefixes
    (module docstring: ``tau`` is a monotone, 1-Lipschitz upper bound on ``max_cover``).

    ``keys`` (integers, default all 0) order the points; :meth:`truss` answers for the
    prefix ``{p : key(p) <= key_max}``, so the nested sets of Algorithm 2 (records of degree
    at most ``D``) share one enumeration. Building costs ``O(m D^2)`` time for the triangle
    listing plus ``O(m^2)`` for the orientation, and ``O(m + E + T)`` memory (plus two
    ``m x m`` matrices when ``m <= 2500``); :meth:`truss` costs ``O(E + T_prefix)``.
    ``radius`` should already include any rounding slack the caller wants.
    """

    def __init__(self, points: Any, radius: float, keys: Any = None) -> None:
        self.points, self.keys = _keyed_points(points, keys)
        m = self.m = self.points.shape[0]
        r2 = float(radius) * float(radius)
        thr = 4.0 * r2 * (1.0 + _TRUSS_SLACK)
        ends, sq = _edges(self.points, radius)
        o = np.lexsort((ends[:, 1], ends[:, 0]))
        ends, sq = ends[o], sq[o]
        self.E = ends.shape[0]
        self.edge_key = np.maximum(self.keys[ends[:, 0]], self.keys[ends[:, 1]])
        self._pair_key = ends[:, 0] * m + ends[:, 1]
        rank = _smallest_last(m, ends)
        tail = np.where(rank[ends[:, 0]] < rank[ends[:, 1]], ends[:, 0], ends[:, 1])
        head = ends[:, 0] + ends[:, 1] - tail
        o = np.lexsort((head, tail))
        self._head, self._out_eid, self._out_sq = head[o], o.astype(np.int64), sq[o]
        self._out_ptr = np.searchsorted(tail[o], np.arange(m + 1))
        #: the largest out-degree: the degeneracy of the edge graph
        self.degeneracy = int(np.max(np.diff(self._out_ptr))) if m else 0
        if m <= _DENSE_LIMIT:
            self._eid = np.full((m, m), -1, dtype=np.int32)
            self._sqm = np.full((m, m), np.inf)
            ids = np.arange(self.E, dtype=np.int32)
            self._eid[ends[:, 0], ends[:, 1]] = self._eid[ends[:, 1], ends[:, 0]] = ids
            self._sqm[ends[:, 0], ends[:, 1]] = self._sqm[ends[:, 1], ends[:, 0]] = sq
        else:
            self._eid = self._sqm = None
        self._list_triangles(r2, thr)

    def _list_triangles(self, r2: float, thr: float) -> None:
        """Every fit triangle once, from its earliest vertex (the apex) in the orientation:
        the pairs of the apex's out-neighbours that are edges and pass the fit test.
        Triangles are sorted by key (the largest key of their vertices)."""
        ptr, head, keys = self._out_ptr, self._head, self.keys
        buckets: dict[int, list[np.ndarray]] = {}  # key -> triangle rows (sorted at the end by key)
        for u in np.flatnonzero(np.diff(ptr) >= 2):
            a, b = ptr[u], ptr[u + 1]
            out = head[a:b]
            if self._sqm is not None:
                block = self._sqm[np.ix_(out, out)]
            else:
                q = self.points[out]
                block = _squared_distances(q[:, None, :], q[None, :, :])
            i, j = np.nonzero(np.triu(block <= thr, 1))
            if i.size == 0:
                continue
            fit = _triangle_fits(self._out_sq[a + i], self._out_sq[a + j], block[i, j], r2)
            i, j = i[fit], j[fit]
            if i.size == 0:
                continue
            vi, vj = out[i], out[j]
            if self._eid is not None:
                base = self._eid[vi, vj]
            else:
                base = np.searchsorted(self._pair_key, np.minimum(vi, vj) * self.m + np.maximum(vi, vj))
            rows = np.stack([self._out_eid[a + i], self._out_eid[a + j], base], axis=1).astype(np.int32)
            tk = np.maximum(keys[u], np.maximum(keys[vi], keys[vj]))
            o = np.argsort(tk, kind="stable")
            rows, tk = rows[o], tk[o]
            cut = np.flatnonzero(np.diff(tk)) + 1
            for part, key in zip(np.split(rows, cut), tk[np.r_[0, cut]]):
                buckets.setdefault(int(key), []).append(part)
        order = sorted(buckets)
        sizes = [sum(part.shape[0] for part in buckets[key]) for key in order]
        te = np.empty((sum(sizes), 3), dtype=np.int32)
        at = 0
        for key in order:  # concatenation in key order, freeing the pieces as it goes
            for part in buckets.pop(key):
                te[at:at + part.shape[0]] = part
                at += part.shape[0]
        self._tri, self.T = te, te.shape[0]
        self._tri_key = np.repeat(np.asarray(order, dtype=np.int32), sizes)
        self._phi: np.ndarray | None = None

    def size(self, key_max: int | None = None) -> int:
        """Number of points with key at most ``key_max`` (all if ``None``)."""
        return self.m if key_max is None else int(np.searchsorted(self.keys, key_max, side="right"))

    def _decompose(self) -> None:
        """Truss numbers of the whole structure (``phi[e]``: the largest ``k`` whose
        ``k``-truss holds edge ``e``), and the edge-to-triangle incidence (CSR; a linear-time
        counting sort that keeps each row in triangle order, so a prefix of the triangles is
        a prefix of every row). The ``k``-truss of any prefix lies in the ``k``-truss of the
        whole, so a prefix query at threshold ``k`` only needs the triangles whose three edges
        have ``phi >= k``, and ``max phi`` over a prefix's edges bounds its ``tau`` (exact
        truss numbers here, not just bounds above a threshold: the tighter bounds let
        Proposition 1 carry further in Algorithm 2)."""
        nt = self.T
        by_tri = sparse.csr_matrix((np.ones(3 * nt, dtype=np.int8), self._tri.ravel(),
                                    np.arange(0, 3 * nt + 1, 3, dtype=np.int32)), shape=(nt, self.E))
        inc = by_tri.tocsc()  # linear-time counting sort; each column keeps triangle order
        del by_tri
        self._inc = (inc.indptr.astype(np.int64), inc.indices.astype(np.int32, copy=False))
        del inc
        self._phi = np.full(self.E, 2, dtype=np.int32)
        count = np.bincount(self._tri.ravel(), minlength=self.E)
        _peel(self._tri, self._inc, count, np.ones(nt, dtype=bool), 3, phi=self._phi)
        by_key = np.argsort(self.edge_key, kind="stable")
        self._edge_key_sorted = self.edge_key[by_key]
        self._phi_upto = np.maximum.accumulate(self._phi[by_key])
        tri_phi = self._phi[self._tri[:, 0]]  # column by column: no (T, 3) temporary
        np.minimum(tri_phi, self._phi[self._tri[:, 1]], out=tri_phi)
        np.minimum(tri_phi, self._phi[self._tri[:, 2]], out=tri_phi)
        self._tri_phi = tri_phi

    def truss(self, key_max: int | None = None, *, at_least: int = 0) -> int:
        """``tau`` of the prefix with keys ``<= key_max`` if it is at least ``at_least``;
        otherwise a certified upper bound on it below ``at_least`` (a threshold test is
        much cheaper than the exact value). The first call decomposes the whole structure
        (``O(E + T)``); each call then peels only the triangles of the prefix whose edges
        all have truss number ``>= max(at_least, 3)`` in the whole structure
        (``O(E + T_prefix)``, mostly far less)."""
        nv = self.size(key_max)
        has_edge = self.E > 0 and (key_max is None or bool(np.min(self.edge_key) <= key_max))
        if nv <= 1 or not has_edge:
            return max(min(nv, 1), int(at_least) - 1)
        k0 = max(int(at_least), 3)
        if self._phi is None:
            self._decompose()
        ne = self.E if key_max is None else int(np.searchsorted(self._edge_key_sorted, key_max, side="right"))
        if self._phi_upto[ne - 1] < k0:  # no edge of the prefix reaches a k0-truss
            return int(self._phi_upto[ne - 1])
        nt = self.T if key_max is None else int(np.searchsorted(self._tri_key, key_max, side="right"))
        te = self._tri[:nt]
        count = np.bincount(te.ravel(), minlength=self.E)  # row e: its first count[e] triangles
        return max(2, _peel(te, self._inc, count, self._tri_phi[:nt] >= k0, k0))


def _count_edges(tri: np.ndarray, rows: np.ndarray, n_edges: int) -> np.ndarray:
    """How many of the triangles ``tri[rows]`` each edge lies in (column by column)."""
    out = np.bincount(tri[rows, 0], minlength=n_edges)
    out += np.bincount(tri[rows, 1], minlength=n_edges)
    out += np.bincount(tri[rows, 2], minlength=n_edges)
    return out


def _peel(tri: np.ndarray, inc: tuple[np.ndarray, np.ndarray], count: np.ndarray,
          tri_alive: np.ndarray, k0: int, phi: np.ndarray | None = None) -> int:
    """``max(t, k0 - 1)`` for ``k0 >= 3``, where ``t`` is the truss number of the triangles
    ``tri[i]`` with ``tri_alive[i]`` (rows of three edge ids; an edge takes part if it lies
    in one of them). ``inc`` lists every edge's triangles in increasing order (CSR), of
    which the first ``count[e]`` are rows of ``tri``. Peeling: every edge of support
    (2 + alive triangles) below ``k`` is removed, its alive triangles die and lower the
    supports of their other edges, until none is left; if edges remain, their smallest
    support ``s >= k`` is the next lower bound and ``k = s + 1``. With ``phi``, each edge's
    truss number (``k - 1`` when removed at threshold ``k``) is written there.

    A round that drops many edges recounts the supports over the alive triangles (kept
    compacted); a round that drops few visits only their triangles through ``inc``. Either
    way the result is the same; the choice (by counts, never by time) keeps the work near
    ``O(len(tri) + n_edges)`` plus ``O(n_edges)`` per value of ``k``. ``tri_alive`` is
    modified."""
    ptr, tri_of = inc
    n_edges = count.size
    live = np.flatnonzero(tri_alive).astype(np.int32)  # alive triangles, compacted by recounts
    sup = _count_edges(tri, live, n_edges) + 2
    edge_alive = sup > 2
    if not edge_alive.any():
        return k0 - 1
    stamp = np.zeros(tri.shape[0], dtype=np.int32)
    k, found = k0, k0 - 1
    drop = np.flatnonzero(edge_alive & (sup < k))
    while True:
        while drop.size:
            edge_alive[drop] = False
            if phi is not None:
                phi[drop] = k - 1
            if int(count[drop].sum()) > live.size // 2:  # recount over the alive triangles
                live = live[tri_alive[live]]
                keep = edge_alive[tri[live, 0]]
                keep &= edge_alive[tri[live, 1]]
                keep &= edge_alive[tri[live, 2]]
                tri_alive[live[~keep]] = False
                live = live[keep]
                sup = _count_edges(tri, live, n_edges) + 2
                drop = np.flatnonzero(edge_alive & (sup < k))
                continue
            tr = tri_of[_ranges(ptr[drop], count[drop])]
            tr = tr[tri_alive[tr]]
            if tr.size == 0:
                break
            seq = np.arange(tr.size, dtype=np.int32)
            stamp[tr] = seq
            tr = tr[stamp[tr] == seq]  # a triangle of two dropped edges dies once
            tri_alive[tr] = False
            hit = tri[tr].ravel()
            hit = hit[edge_alive[hit]]
            np.subtract.at(sup, hit, 1)
            drop = np.unique(hit[sup[hit] < k])
        alive = np.flatnonzero(edge_alive)
        if alive.size == 0:
            return max(found, k - 1)
        found = int(sup[alive].min())
        k = found + 1
        drop = alive[sup[alive] < k]


class PairCore:
    """The edge graph of a point set (pairs at distance ``<= 2r``, the same predicate as
    :class:`FitTruss`) and the *core bound* ``kappa(P) = degeneracy + 1`` of its prefixes
    (``kappa = |P|`` for ``|P| <= 1``): the largest ``s`` such that some subset of ``P`` has
    every member within ``2r`` of at least ``s - 1`` others.

    ``kappa >= tau >= max_cover`` (the vertices of an optimal fit-truss edge set ``F`` with
    supports ``>= s`` each have ``>= s - 1`` neighbours in ``F``), and ``kappa`` is monotone
    and 1-Lipschitz (removing a point from a subset lowers each remaining degree by at most
    one). Far looser than ``tau`` in high dimensions, but cheap: ``O(m log m + E)`` to build
    (KD-tree pairs), ``O(E)`` to decompose (batch peeling), and each prefix query peels only
    the vertices whose core number in the whole structure reaches the threshold."""

    def __init__(self, points: Any, radius: float, keys: Any = None) -> None:
        self.points, self.keys = _keyed_points(points, keys)
        m = self.m = self.points.shape[0]
        ends, _ = _edges(self.points, radius)
        both, other = np.r_[ends[:, 0], ends[:, 1]], np.r_[ends[:, 1], ends[:, 0]]
        o = np.argsort(both, kind="stable")
        self._nbr, self._ptr = other[o], np.searchsorted(both[o], np.arange(m + 1))
        self._core = _peel_vertices(self._ptr, self._nbr, np.ones(m, dtype=bool), 1, record=True)[1]
        self._core_upto = np.maximum.accumulate(self._core) if m else np.zeros(0, dtype=np.int64)

    def core(self, key_max: int | None = None, *, at_least: int = 0) -> int:
        """``kappa`` of the prefix with keys ``<= key_max`` if it is at least ``at_least``;
        otherwise an upper bound on it below ``at_least`` (same contract as
        :meth:`FitTruss.truss`)."""
        nv = self.m if key_max is None else int(np.searchsorted(self.keys, key_max, side="right"))
        if nv <= 1:
            return nv
        bound = int(self._core_upto[nv - 1]) + 1  # core numbers only shrink in a prefix
        if bound < at_least:
            return bound
        alive = np.zeros(self.m, dtype=bool)
        alive[:nv] = self._core[:nv] + 1 >= at_least
        return _peel_vertices(self._ptr, self._nbr, alive, max(int(at_least) - 1, 1))[0] + 1


def _peel_vertices(ptr: np.ndarray, nbr: np.ndarray, alive: np.ndarray, k0: int,
                   record: bool = False) -> tuple[int, np.ndarray | None]:
    """``(max(c, k0 - 1), core numbers)`` where ``c`` is the degeneracy of the graph
    (adjacency ``nbr[ptr[v]:ptr[v + 1]]``) induced by ``alive`` (at least one vertex):
    vertices of degree below ``k`` are removed in rounds until none is left, then ``k``
    rises to the smallest remaining degree plus one. ``O(E)`` plus ``O(m)`` per round."""
    m = alive.size
    core = np.zeros(m, dtype=np.int64) if record else None
    src = np.repeat(np.arange(m), np.diff(ptr))
    deg = np.bincount(src[alive[src] & alive[nbr]], minlength=m)
    k, found = max(int(k0), 1), max(int(k0), 1) - 1
    while True:
        drop = np.flatnonzero(alive & (deg < k))
        while drop.size:
            alive[drop] = False
            if record:
                core[drop] = k - 1
            hit = nbr[_ranges(ptr[drop], np.diff(ptr)[drop])]
            hit = hit[alive[hit]]
            np.subtract.at(deg, hit, 1)
            drop = np.unique(hit[deg[hit] < k])
        left = np.flatnonzero(alive)
        if left.size == 0:
            return max(found, k - 1), core
        found = int(deg[left].min())
        k = found + 1


def max_cover_core(points: Any, radius: float) -> int:
    """The core bound ``kappa(P) >= max_cover(P, radius)`` (:class:`PairCore`): the
    degeneracy of the graph of pairs within ``2 radius``, plus one. ``O(m log m + E)``."""
    return PairCore(points, radius).core()


def max_cover_truss(points: Any, radius: float) -> int:
    """The fit-truss number ``tau(P) >= max_cover(P, radius)`` (module docstring): a
    polynomial, monotone, 1-Lipschitz upper bound, the tightest safe bound shipped for
    ``d >= 3``. Duplicates count with their multiplicity (they are distinct points at
    distance 0)."""
    return FitTruss(points, radius).truss()


def max_cover_projection(points: Any, radius: float) -> int:
    """A safe upper bound on ``max_cover`` for ``d >= 3``: the minimum over coordinate
    planes of the exact 2-d cover of the projected points (exact for ``d <= 2``)."""
    p = _points(points)
    d = p.shape[1]
    if d == 1:
        return max_cover_1d(p, radius)
    if d == 2:
        return max_cover_2d(p, radius)
    best = p.shape[0]
    for a, b in itertools.combinations(range(d), 2):
        best = min(best, max_cover_2d(p[:, [a, b]], radius))
    return best


def max_cover(points: Any, radius: float, *, method: str = "exact", lower: int = 0) -> int:
    """``max_cover(P, radius)`` by ``method`` (see :data:`COVER_METHODS`). The choice
    depends only on the dimension and ``method``, never on the data. ``lower``: a known
    lower bound (speeds up the branch and bound; the result is the same)."""
    if method not in COVER_METHODS:
        raise PrivregValueError(f"method must be one of {list(COVER_METHODS)}; got {method!r}")
    p = _points(points)
    if p.shape[0] == 0:
        return 0
    d = p.shape[1]
    if d == 1:
        return max_cover_1d(p, radius)
    if d == 2:
        return max_cover_2d(p, radius)
    if method == "projection":
        return max_cover_projection(p, radius)
    if method == "truss":
        return max_cover_truss(p, radius)
    if method == "core":
        return max_cover_core(p, radius)
    return max_cover_branch_and_bound(p, radius, lower=lower)


class BudgetExhausted(Exception):
    """Raised by :func:`algorithm1_reference` when it exceeds its call budget."""


def algorithm1_reference(points: Any, radius: float, *, budget: int | None = None) -> int:
    """Paper 003's Algorithm 1 as printed: the recursion ``E(r, P, C, i)`` over all
    subsets ``C`` of ``P`` in index order, calling the smallest enclosing ball of every
    subset visited and abandoning a branch once ``seb(C) > r``. ``O(2^|P|)`` calls;
    raises :class:`BudgetExhausted` after ``budget`` calls. For benchmarks and tests."""
    p = _points(points)
    n = p.shape[0]
    calls = 0
    limit = sys.getrecursionlimit()
    if n + 50 > limit:
        sys.setrecursionlimit(n + 100)

    def e(members: list[int], i: int) -> int:
        nonlocal calls
        br = 0.0
        if members:
            calls += 1
            if budget is not None and calls > budget:
                raise BudgetExhausted(f"Algorithm 1 needed more than {budget} enclosing-ball calls")
            br = enclosing_ball(p[members]).lower
        if br <= radius:
            m = len(members)
            if i < n:
                b1 = e(members + [i], i + 1)
                b2 = e(members, i + 1)
                m = max(m, b1, b2)
            return m
        return 0

    try:
        return e([], 0)
    finally:
        sys.setrecursionlimit(limit)
