"""Kissing numbers and the global sensitivity of the outlier count (Okada et al. 2015,
paper 003, Theorem 4 and eq. (18)).

The kissing number ``K_d`` is the largest number of non-overlapping unit balls in
``R^d`` that touch one unit ball. Known exactly for d = 1, 2, 3, 4, 8 and 24; elsewhere
only bounds are known. Privacy only ever uses an *upper* bound (a larger sensitivity
is safe), so :data:`KISSING_UPPER` holds the semidefinite-programming bounds of
Mittelmann-Vallentin 2010, Table 1 (the paper's own reference [19]); later work
tightened a few of them slightly (e.g. 363 in d = 9), which only makes ours
conservative. :data:`KISSING_LOWER` holds the best constructions listed by Conway-Sloane,
*Sphere Packings, Lattices and Groups*, 3rd ed. 1999, Table 1.5 (display only; later
constructions improved some, e.g. Cohn-Li 2024 in d = 17-21). Beyond d = 24,
:func:`kissing_upper_bound` uses the spherical-cap packing bound.
"""

from __future__ import annotations

import math

from scipy.special import betainc

from privreg.core import validation as v

__all__ = [
    "KISSING_LOWER",
    "KISSING_UPPER",
    "kissing_upper_bound",
    "cap_packing_bound",
    "global_sensitivity_upper",
    "global_sensitivity_lower",
    "paper_lower_bound",
]

#: Upper bounds on K_d, d = 1..24 (exact for d = 1, 2, 3, 4, 8, 24; Musin 2006/2008 for
#: d = 3, 4; otherwise Mittelmann-Vallentin 2010, Table 1).
KISSING_UPPER: dict[int, int] = {
    1: 2,
    2: 6,
    3: 12,
    4: 24,
    5: 44,
    6: 78,
    7: 134,
    8: 240,
    9: 364,
    10: 554,
    11: 870,
    12: 1357,
    13: 2069,
    14: 3183,
    15: 4866,
    16: 7355,
    17: 11072,
    18: 16572,
    19: 24812,
    20: 36764,
    21: 54584,
    22: 82340,
    23: 124416,
    24: 196560,
}

#: Best known constructions, d = 1..24 (Conway-Sloane 1999, Table 1.5).
KISSING_LOWER: dict[int, int] = {
    1: 2,
    2: 6,
    3: 12,
    4: 24,
    5: 40,
    6: 72,
    7: 126,
    8: 240,
    9: 306,
    10: 500,
    11: 582,
    12: 840,
    13: 1130,
    14: 1582,
    15: 2564,
    16: 4320,
    17: 5346,
    18: 7398,
    19: 10668,
    20: 17400,
    21: 27720,
    22: 49896,
    23: 93150,
    24: 196560,
}


def cap_packing_bound(d: int) -> int:
    """``floor(2 / I_{1/4}((d-1)/2, 1/2))``: an upper bound on ``K_d`` for every ``d >= 2``.

    Kissing points on the unit sphere are at angular distance >= 60 degrees, so the caps
    of angular radius 30 degrees around them have disjoint interiors; one such cap covers
    the fraction ``I_{sin^2 30}((d-1)/2, 1/2) / 2`` of the sphere (regularised incomplete
    beta function). Rounded up by a relative 1e-9 before the floor, so floating-point
    error can only make it larger (safe)."""
    d = v.check_int("d", d, minimum=2)
    fraction = float(betainc((d - 1) / 2.0, 0.5, 0.25)) / 2.0
    if not fraction > 1e-300:  # underflow (d above about 1900): any larger bound is still safe
        return 1 << 1000
    return int(math.floor((1.0 / fraction) * (1.0 + 1e-9)))


def kissing_upper_bound(d: int) -> int:
    """An upper bound on the kissing number ``K_d``: the table for ``d <= 24``, the cap
    packing bound beyond."""
    d = v.check_int("d", d, minimum=1)
    if d in KISSING_UPPER:
        return KISSING_UPPER[d]
    return cap_packing_bound(d)


def global_sensitivity_upper(*, n: int, k: int, d: int) -> int:
    """``min(n, k K_d + 1)`` (paper 003, Theorem 4, upper bound), with ``K_d`` replaced by
    :func:`kissing_upper_bound`: no substitution of one of ``n`` records changes the
    number of ``(k, r)``-outliers in a ``d``-dimensional subspace by more.

    Why (our proof; the paper's is a sketch). Moving ``x0`` to ``x0'`` changes the count by
    ``a - b + c`` with ``c`` in {-1, 0, 1} (``x0`` itself), ``a`` = the points of degree
    exactly ``k`` within ``r`` of ``x0`` (they lose a neighbour) and ``b`` = the points of
    degree ``k - 1`` within ``r`` of ``x0'`` (they gain one). Points within ``r`` of a centre
    that are pairwise more than ``r`` apart subtend angles above 60 degrees at the centre,
    so at most ``K_d`` of them exist; a maximal such subset covers the others, and each of
    its points has at most ``k - 1`` other such neighbours besides ``x0`` (for ``a``) or at
    most ``k - 1`` neighbours in all (for ``b``). Hence ``a, b <= k K_d``.
    """
    n = v.check_int("n", n, minimum=1)
    k = v.check_int("k", k, minimum=1)
    return min(n, k * kissing_upper_bound(d) + 1)


def global_sensitivity_lower(*, n: int, k: int, d: int) -> int:
    """A global sensitivity that is attained: ``0`` if ``n <= k`` (every record is then
    always an outlier), else ``1 + k min(2d, floor((n - 1)/k))``.

    This is eq. (18)'s lower bound ``min(n, 2dk + 1)`` corrected for small ``n``: the
    witness puts ``x0`` at the origin and ``k`` records at each of ``c`` of the ``2d``
    points ``+-r e_i`` (any remaining records far away); every clustered record then has
    exactly ``k`` neighbours (its ``k - 1`` twins and ``x0``), and moving ``x0`` far away
    turns all ``ck`` of them and ``x0`` into outliers. For ``n >= 2dk + 1`` it equals the
    paper's value; for ``n <= k`` the paper's value is positive although the count is
    constant (see :func:`paper_lower_bound`)."""
    n = v.check_int("n", n, minimum=1)
    k = v.check_int("k", k, minimum=1)
    d = v.check_int("d", d, minimum=1)
    if n <= k:
        return 0
    return 1 + k * min(2 * d, (n - 1) // k)


def paper_lower_bound(*, n: int, k: int, d: int) -> int:
    """eq. (18) as printed, ``min(n, 2dk + 1)``; not a valid lower bound when ``n < 2dk + 1``
    (for ``n <= k`` the true global sensitivity is 0). Kept to reproduce Figures 3-4."""
    return min(v.check_int("n", n, minimum=1), 2 * v.check_int("d", d, minimum=1) * v.check_int("k", k, minimum=1) + 1)
