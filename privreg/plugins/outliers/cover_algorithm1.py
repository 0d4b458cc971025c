"""Paper 003's Algorithm 1 (Section 4.3.1) as printed: the reference ``max_cover``
(:mod:`.ball_cover`) that tests every subset of ``P`` with a smallest enclosing ball --
``O(2^|P|)`` calls -- for comparison in benchmarks and tests."""

from __future__ import annotations

import sys
from typing import Any

from privreg.plugins.outliers.cover_geometry import points_array
from privreg.plugins.outliers.seb import enclosing_ball

__all__ = ["BudgetExhausted", "algorithm1_reference"]


class BudgetExhausted(Exception):
    """Raised by :func:`algorithm1_reference` when it exceeds its call budget."""


def algorithm1_reference(points: Any, radius: float, *, budget: int | None = None) -> int:
    """Paper 003's Algorithm 1 as printed: the recursion ``E(r, P, C, i)`` over all
    subsets ``C`` of ``P`` in index order, calling the smallest enclosing ball of every
    subset visited and abandoning a branch once ``seb(C) > r``. ``O(2^|P|)`` calls;
    raises :class:`BudgetExhausted` after ``budget`` calls. For benchmarks and tests."""
    p = points_array(points)
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
