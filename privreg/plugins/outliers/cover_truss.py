"""The fit-truss bound on ``max_cover(P, r)`` (:mod:`.ball_cover`) for ``d >= 3``
(``m = |P|``, ``n_2r(p)`` = points of ``P`` within ``2r`` of ``p``).

:func:`max_cover_truss` / :class:`FitTruss` give a safe *upper* bound in polynomial
time that stays close to ``max_cover`` in high dimensions (the projection
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
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from privreg.plugins.outliers.cover_geometry import (
    FIT_SLACK,
    close_pairs,
    index_ranges,
    keyed_points,
    squared_distances,
)

__all__ = ["FitTruss", "max_cover_truss", "triangle_fits"]

_DENSE_LIMIT = 2500  # up to this many points, squared distances and edge ids are kept as matrices


def triangle_fits(x: np.ndarray, y: np.ndarray, z: np.ndarray, r2: float) -> np.ndarray:
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
    return rad2 <= r2 * (1.0 + FIT_SLACK)


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
        alive_deg[nbrs[ptr[v] : ptr[v + 1]]] -= 1
    return rank


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
        self.points, self.keys = keyed_points(points, keys)
        m = self.m = self.points.shape[0]
        r2 = float(radius) * float(radius)
        thr = 4.0 * r2 * (1.0 + FIT_SLACK)
        ends, sq = close_pairs(self.points, radius)
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
        self._eid: np.ndarray | None
        self._sqm: np.ndarray | None
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
                block = squared_distances(q[:, None, :], q[None, :, :])
            i, j = np.nonzero(np.triu(block <= thr, 1))
            if i.size == 0:
                continue
            fit = triangle_fits(self._out_sq[a + i], self._out_sq[a + j], block[i, j], r2)
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
                te[at : at + part.shape[0]] = part
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
        by_tri = sparse.csr_matrix(
            (np.ones(3 * nt, dtype=np.int8), self._tri.ravel(), np.arange(0, 3 * nt + 1, 3, dtype=np.int32)),
            shape=(nt, self.E),
        )
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


def _peel(
    tri: np.ndarray,
    inc: tuple[np.ndarray, np.ndarray],
    count: np.ndarray,
    tri_alive: np.ndarray,
    k0: int,
    phi: np.ndarray | None = None,
) -> int:
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
            tr = tri_of[index_ranges(ptr[drop], count[drop])]
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


def max_cover_truss(points: Any, radius: float) -> int:
    """The fit-truss number ``tau(P) >= max_cover(P, radius)`` (module docstring): a
    polynomial, monotone, 1-Lipschitz upper bound, the tightest safe bound shipped for
    ``d >= 3``. Duplicates count with their multiplicity (they are distinct points at
    distance 0)."""
    return FitTruss(points, radius).truss()
