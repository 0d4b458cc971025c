"""The projection bound on ``max_cover(P, r)`` (:mod:`.ball_cover`) for ``d >= 3``:
:func:`max_cover_projection`, a safe *upper* bound in polynomial time. An ``r``-ball
projects onto every coordinate plane inside an ``r``-disk, so the exact 2-d cover of
every projection bounds ``max_cover``; the minimum over the ``d (d - 1) / 2`` coordinate
planes is returned, ``O(d^2 m^2 log m)`` for ``m = |P|``.
"""

from __future__ import annotations

import itertools
from typing import Any

from privreg.plugins.outliers.cover_exact import max_cover_1d, max_cover_2d
from privreg.plugins.outliers.cover_geometry import points_array

__all__ = ["max_cover_projection"]


def max_cover_projection(points: Any, radius: float) -> int:
    """A safe upper bound on ``max_cover`` for ``d >= 3``: the minimum over coordinate
    planes of the exact 2-d cover of the projected points (exact for ``d <= 2``)."""
    p = points_array(points)
    d = p.shape[1]
    if d == 1:
        return max_cover_1d(p, radius)
    if d == 2:
        return max_cover_2d(p, radius)
    best = p.shape[0]
    for a, b in itertools.combinations(range(d), 2):
        best = min(best, max_cover_2d(p[:, [a, b]], radius))
    return best
