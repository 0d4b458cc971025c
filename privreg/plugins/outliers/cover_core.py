"""The core bound on ``max_cover(P, r)`` (:mod:`.ball_cover`) for ``d >= 3``:
:func:`max_cover_core` / :class:`PairCore`, the *core bound* ``kappa(P)``: one plus the
degeneracy of the edge graph, pairs within ``2r`` (the largest ``s`` such that some
subset has each member within ``2r`` of ``s - 1`` others). ``kappa >= tau``, the
fit-truss number of :mod:`.cover_truss` (the vertices of an optimal edge set ``F`` each
have ``>= s - 1`` neighbours in ``F``), monotone, 1-Lipschitz, ``O(m log m + E)``:
always fast, but in 7-d typically 2-3x ``tau``.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np

from privreg.plugins.outliers.cover_geometry import close_pairs, index_ranges, keyed_points

__all__ = ["PairCore", "max_cover_core"]


class PairCore:
    """The edge graph of a point set (pairs at distance ``<= 2r``, the same predicate as
    :class:`~.cover_truss.FitTruss`) and the *core bound* ``kappa(P) = degeneracy + 1`` of its prefixes
    (``kappa = |P|`` for ``|P| <= 1``): the largest ``s`` such that some subset of ``P`` has
    every member within ``2r`` of at least ``s - 1`` others.

    ``kappa >= tau >= max_cover`` (the vertices of an optimal fit-truss edge set ``F`` with
    supports ``>= s`` each have ``>= s - 1`` neighbours in ``F``), and ``kappa`` is monotone
    and 1-Lipschitz (removing a point from a subset lowers each remaining degree by at most
    one). Far looser than ``tau`` in high dimensions, but cheap: ``O(m log m + E)`` to build
    (KD-tree pairs), ``O(E)`` to decompose (batch peeling), and each prefix query peels only
    the vertices whose core number in the whole structure reaches the threshold."""

    def __init__(self, points: Any, radius: float, keys: Any = None) -> None:
        self.points, self.keys = keyed_points(points, keys)
        m = self.m = self.points.shape[0]
        ends, _ = close_pairs(self.points, radius)
        both, other = np.r_[ends[:, 0], ends[:, 1]], np.r_[ends[:, 1], ends[:, 0]]
        o = np.argsort(both, kind="stable")
        self._nbr, self._ptr = other[o], np.searchsorted(both[o], np.arange(m + 1))
        self._core = _peel_vertices(self._ptr, self._nbr, np.ones(m, dtype=bool), 1, record=True)[1]
        self._core_upto = np.maximum.accumulate(self._core) if m else np.zeros(0, dtype=np.int64)

    def core(self, key_max: int | None = None, *, at_least: int = 0) -> int:
        """``kappa`` of the prefix with keys ``<= key_max`` if it is at least ``at_least``;
        otherwise an upper bound on it below ``at_least`` (same contract as
        :meth:`~.cover_truss.FitTruss.truss`)."""
        nv = self.m if key_max is None else int(np.searchsorted(self.keys, key_max, side="right"))
        if nv <= 1:
            return nv
        bound = int(self._core_upto[nv - 1]) + 1  # core numbers only shrink in a prefix
        if bound < at_least:
            return bound
        alive = np.zeros(self.m, dtype=bool)
        alive[:nv] = self._core[:nv] + 1 >= at_least
        return _peel_vertices(self._ptr, self._nbr, alive, max(int(at_least) - 1, 1))[0] + 1


@overload
def _peel_vertices(
    ptr: np.ndarray, nbr: np.ndarray, alive: np.ndarray, k0: int, record: Literal[False] = ...
) -> tuple[int, None]: ...


@overload
def _peel_vertices(
    ptr: np.ndarray, nbr: np.ndarray, alive: np.ndarray, k0: int, record: Literal[True]
) -> tuple[int, np.ndarray]: ...


def _peel_vertices(
    ptr: np.ndarray, nbr: np.ndarray, alive: np.ndarray, k0: int, record: bool = False
) -> tuple[int, np.ndarray | None]:
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
            if core is not None:
                core[drop] = k - 1
            hit = nbr[index_ranges(ptr[drop], np.diff(ptr)[drop])]
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
