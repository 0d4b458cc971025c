"""From pairwise threshold decisions to consistent multi-party groups.

The linkage unit of the recommended protocol learns, per candidate pair, only whether the
pair's Dice similarity reaches the threshold (and, for pairs in conflicting clusters,
which of a few stricter thresholds it reaches: its *level*). :func:`greedy_groups` turns
these decisions into groups holding at most one record per party, in the manner of
anonlink's greedy solver (which orders pairs by exact similarity; here the order is by
level, then canonical): pairs are taken in decreasing level; two clusters merge only if
they share no party and at least ``merge_fraction`` of the record pairs between them are
accepted matches. :func:`conflict_pairs` names the accepted pairs whose connected
component holds two records of one party: only those need levels.

Determinism: the result depends only on the decisions, never on input order; groups come
out sorted (each by party index, the list by its first member).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError

__all__ = ["conflict_pairs", "greedy_groups", "group_pairs"]


def _check_edges(edges: np.ndarray) -> np.ndarray:
    e = np.asarray(edges, dtype=np.int64)
    if e.ndim != 2 or e.shape[1] != 4:
        raise PrivregValueError(f"edges must be a (k, 4) array of (party, record, party, record); got {e.shape}")
    if e.size and (np.any(e < 0) or np.any(e[:, 0] == e[:, 2])):
        raise PrivregValueError("edges must join records of two different parties with non-negative indices")
    return e


class _Clusters:
    def __init__(self) -> None:
        self.parent: dict[tuple[int, int], tuple[int, int]] = {}
        self.members: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def find(self, x: tuple[int, int]) -> tuple[int, int]:
        if x not in self.parent:
            self.parent[x] = x
            self.members[x] = [x]
            return x
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        if len(self.members[a]) < len(self.members[b]):
            a, b = b, a
        self.parent[b] = a
        self.members[a].extend(self.members.pop(b))


def conflict_pairs(edges: np.ndarray) -> np.ndarray:
    """Boolean mask of the accepted ``edges`` whose connected component holds two records
    of one party."""
    e = _check_edges(edges)
    cl = _Clusters()
    for pa, ra, pb, rb in e.tolist():
        x, y = cl.find((pa, ra)), cl.find((pb, rb))
        if x != y:
            cl.union(x, y)
    bad = set()
    for root, members in cl.members.items():
        parties = [p for p, _ in members]
        if len(set(parties)) != len(parties):
            bad.add(root)
    return np.array([cl.find((pa, ra)) in bad for pa, ra, _, _ in e.tolist()], dtype=bool)


def greedy_groups(
    edges: np.ndarray, *, levels: Sequence[int] | np.ndarray | None = None, merge_fraction: float = 0.5
) -> list[list[tuple[int, int]]]:
    """Groups of ``(party, record)`` from accepted ``edges`` (module docstring).

    ``edges``: (k, 4) rows ``(party a, record a, party b, record b)`` of accepted pairs;
    ``levels``: an integer per edge (higher = more similar; default all equal)."""
    e = _check_edges(edges)
    lv = np.zeros(len(e), dtype=np.int64) if levels is None else np.asarray(levels, dtype=np.int64)
    if lv.shape != (len(e),):
        raise PrivregValueError(f"levels must hold one integer per edge ({len(e)}); got shape {lv.shape}")
    frac = v.check_probability("merge_fraction", merge_fraction)
    # canonical edge form: lower (party, record) first, so input order and orientation do not matter
    swap = (e[:, 0] > e[:, 2]) | ((e[:, 0] == e[:, 2]) & (e[:, 1] > e[:, 3]))
    e = np.where(swap[:, None], e[:, [2, 3, 0, 1]], e)
    order = np.lexsort((e[:, 3], e[:, 2], e[:, 1], e[:, 0], -lv))
    accepted = {((int(a), int(b)), (int(c), int(d))) for a, b, c, d in e}
    cl = _Clusters()
    for k in order.tolist():
        pa, ra, pb, rb = (int(x) for x in e[k])
        x, y = cl.find((pa, ra)), cl.find((pb, rb))
        if x == y:
            continue
        mx, my = cl.members[x], cl.members[y]
        if {p for p, _ in mx} & {p for p, _ in my}:
            continue
        if len(mx) > 1 or len(my) > 1:
            hits = sum(((s, t) if s < t else (t, s)) in accepted for s in mx for t in my)
            if hits < frac * len(mx) * len(my):
                continue
        cl.union(x, y)
    groups = [sorted(m) for m in cl.members.values() if len(m) > 1]
    return sorted(groups)


def group_pairs(groups: Sequence[Sequence[tuple[int, int]]]) -> set[tuple[tuple[int, int], tuple[int, int]]]:
    """Every record pair inside the groups, lower member first."""
    out = set()
    for g in groups:
        members = sorted(g)
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                out.add((members[i], members[j]))
    return out
