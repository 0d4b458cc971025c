"""The largest subset of a point set that one ball of radius ``r`` can cover
(paper 003, Section 4.3.1, eqs. (45)-(46), Algorithm 1).

``max_cover(P, r) = max_{x in R^d} |P n B(x, r)|`` (closed balls) is the quantity the
smooth bound of the outlier count needs. A subset fits in some ball of radius ``r``
exactly when its smallest enclosing ball has radius ``<= r``, which is what the paper's
Algorithm 1 tests for subsets of ``P`` -- ``O(2^|P|)`` smallest-enclosing-ball calls.

What is shipped (``m = |P|``, ``n_2r(p)`` = points of ``P`` within ``2r`` of ``p``):

* ``d = 1``, ``d = 2`` and any ``d`` -- exact: a sliding window, an angular sweep, and a
  branch and bound exponential in the local density of ``P`` only (:mod:`.cover_exact`).
* any ``d >= 3`` -- the projection bound, a safe *upper* bound in polynomial time from the
  exact 2-d covers of the coordinate planes (:mod:`.cover_projection`).
* any ``d >= 3`` -- the fit-truss bound ``tau(P)``, a safe *upper* bound in polynomial time
  that stays close to ``max_cover`` in high dimensions (:mod:`.cover_truss`).
* any ``d >= 3`` -- the core bound ``kappa(P)``, one plus the degeneracy of the graph of
  pairs within ``2r``: always fast, but looser (:mod:`.cover_core`).
* :func:`~.cover_algorithm1.algorithm1_reference` -- the paper's Algorithm 1 verbatim, for
  comparison (:mod:`.cover_algorithm1`).

The point arrays, distances and pair lists they share are in :mod:`.cover_geometry`.

Ordered: ``max_cover <= tau <= kappa <= |P|``; the projection
bound is not comparable with ``tau`` in general but is far looser in 7-d.

"Exact" is up to the floating-point resolution of distances; :mod:`.smooth` calls these
with the radius enlarged by a relative 1e-9, so rounding can only enlarge a cover.

Every function here is *monotone* (``P c Q`` gives ``cover(P) <= cover(Q)``) and
*1-Lipschitz* (adding or removing one point changes it by at most 1) -- the exact ones
because ``max_cover`` is, the projection bound because a minimum of such functions is, the
fit-truss and core bounds by the arguments in their modules.
:mod:`.smooth` needs both properties for the smooth bound to be beta-smooth, which is why
no method switches to another depending on the data. All are deterministic, but their
running time depends on the data (a timing side channel: run releases where timing is
not observable).
"""

from __future__ import annotations

from typing import Any

from privreg.core.errors import PrivregValueError
from privreg.plugins.outliers.cover_core import max_cover_core
from privreg.plugins.outliers.cover_exact import max_cover_1d, max_cover_2d, max_cover_branch_and_bound
from privreg.plugins.outliers.cover_geometry import points_array
from privreg.plugins.outliers.cover_projection import max_cover_projection
from privreg.plugins.outliers.cover_truss import max_cover_truss

__all__ = ["COVER_METHODS", "max_cover"]

#: ``exact``: 1-d window, 2-d sweep, branch and bound for d >= 3; ``projection``: exact
#: for d <= 2, the coordinate-plane projection bound for d >= 3; ``truss``: exact for
#: d <= 2, the fit-truss bound for d >= 3 (polynomial, the tightest safe bound here);
#: ``core``: exact for d <= 2, the core bound for d >= 3 (near-linear, loosest).
COVER_METHODS = ("exact", "projection", "truss", "core")


def max_cover(points: Any, radius: float, *, method: str = "exact", lower: int = 0) -> int:
    """``max_cover(P, radius)`` by ``method`` (see :data:`COVER_METHODS`). The choice
    depends only on the dimension and ``method``, never on the data. ``lower``: a known
    lower bound (speeds up the branch and bound; the result is the same)."""
    if method not in COVER_METHODS:
        raise PrivregValueError(f"method must be one of {list(COVER_METHODS)}; got {method!r}")
    p = points_array(points)
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
