"""Exact ``max_cover(P, r)`` (:mod:`.ball_cover`) in one, two and any dimension
(``m = |P|``, ``n_2r(p)`` = points of ``P`` within ``2r`` of ``p``):

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
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from privreg.plugins.outliers.cover_geometry import points_array
from privreg.plugins.outliers.seb import fits_in_ball, fits_in_ball_batch

__all__ = ["max_cover_1d", "max_cover_2d", "max_cover_branch_and_bound"]

_EVENTS_PER_BLOCK = 1 << 21  # sweep events processed at once (memory bound)


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
    p = points_array(points)
    m = p.shape[0]
    if m == 0:
        return 0
    tree = cKDTree(p)
    counts = tree.query_ball_point(p, 2.0 * radius, return_length=True)
    order = np.argsort(-counts, kind="stable")  # densest anchors first: raise the best early
    best, start = 1, 0
    while start < m and counts[order[start]] > best:  # count bounds the depth of an anchor
        rows = max(1, _EVENTS_PER_BLOCK // (4 * int(counts[order[start]])))
        anchors = order[start : start + rows]
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
    bound (e.g. :func:`~.cover_truss.max_cover_truss`): the search stops as soon as it finds a ball that
    covers that many points. Never below the true value: a subset is discarded only when a
    certified test (:mod:`.seb`, or the closed-form ball of three points with slack)
    shows it does not fit.
    """
    p = points_array(points)
    if p.shape[0] == 0:
        return max(0, int(lower))
    upper = p.shape[0] if upper is None else int(upper)
    u, mult = np.unique(p, axis=0, return_counts=True)
    m = u.shape[0]
    tree = cKDTree(u)
    near_r = tree.query_ball_point(u, radius)
    best = max(int(lower), *(int(mult[nb].sum()) for nb in near_r))
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
        local = np.vstack([u[i : i + 1], u[cand_of[i]]])
        search = _Search(local, np.r_[mult[i], mult[cand_of[i]]], radius, best, upper)
        search.run([0], int(mult[i]), search.compatible([0], np.ones(1), list(range(1, local.shape[0]))))
        best = search.best
    return best
