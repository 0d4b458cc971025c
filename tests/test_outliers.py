"""Plugin ``outliers`` (paper 003): outlier definitions, kissing-number bounds of the
global sensitivity, smallest enclosing balls and the max-ball-cover methods.

Deterministic: data come from seeded numpy generators (simulated data, not privacy
noise) and hypothesis runs derandomized in the ci profile (tests/conftest.py).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.outliers.ball_cover import max_cover
from privreg.plugins.outliers.cover_algorithm1 import BudgetExhausted, algorithm1_reference
from privreg.plugins.outliers.cover_core import PairCore, max_cover_core
from privreg.plugins.outliers.cover_exact import max_cover_1d, max_cover_2d, max_cover_branch_and_bound
from privreg.plugins.outliers.cover_projection import max_cover_projection
from privreg.plugins.outliers.cover_truss import FitTruss, max_cover_truss
from privreg.plugins.outliers.definitions import (
    OutlierCountQuery,
    as_dataset,
    degrees,
    outlier_count,
    outlier_mask,
    subspace_points,
)
from privreg.plugins.outliers.kissing import (
    KISSING_LOWER,
    KISSING_UPPER,
    cap_packing_bound,
    global_sensitivity_lower,
    global_sensitivity_upper,
    kissing_upper_bound,
    paper_lower_bound,
)
from privreg.plugins.outliers.seb import enclosing_ball, fits_in_ball

# --- Definitions 7-8 -----------------------------------------------------------------------


def _degrees_by_hand(x: np.ndarray, r: float, subspace) -> np.ndarray:
    s = list(subspace)
    out = np.zeros(len(x), dtype=int)
    for i, j in itertools.permutations(range(len(x)), 2):
        dist = math.sqrt(sum((x[i, a] - x[j, a]) ** 2 for a in s) / len(s))
        out[i] += dist <= r
    return out


def test_degrees_and_outliers_match_the_definition_with_duplicates_and_subspaces():
    gen = np.random.default_rng(1)
    x = np.round(gen.normal(size=(40, 4)), 1)
    x[5] = x[6]  # duplicates are neighbours of each other (by index)
    for subspace, r in [((0,), 0.2), ((1, 3), 0.5), ((0, 1, 2, 3), 0.7)]:
        want = _degrees_by_hand(x, r, subspace)
        np.testing.assert_array_equal(degrees(subspace_points(x, subspace), r), want)
        np.testing.assert_array_equal(outlier_mask(x, k=3, radius=r, subspace=subspace), want < 3)
        assert outlier_count(x, k=3, radius=r, subspace=subspace) == int((want < 3).sum())


def test_distance_is_normalised_by_the_square_root_of_the_subspace_size():
    x = np.array([[0.0, 0.0], [1.0, 1.0]])  # dist_S = sqrt(2 / 2) = 1 in S = {0, 1}
    assert outlier_count(x, k=1, radius=1.0) == 0
    assert outlier_count(x, k=1, radius=0.999) == 2
    assert outlier_count(x, k=1, radius=1.0, subspace=(1,)) == 0


def test_query_is_a_callable_with_a_ledger_name():
    q = OutlierCountQuery(k=2, radius=0.5, subspace=[2, 0])
    assert q.subspace == (0, 2) and "k=2" in q.__name__
    assert q(np.zeros((3, 3))) == 0.0 and q(np.eye(3) * 10) == 3.0


@pytest.mark.parametrize(
    "data, error, match",
    [
        (np.array([[np.nan, 1.0]]), PrivregValueError, "must be finite"),  # the rule, not the cell
        (np.array([[2e100, 1.0]]), PrivregValueError, r"\[-1e100, 1e100\]"),
        (np.zeros((0, 2)), PrivregValueError, "empty"),
        (np.zeros((2, 2, 2)), PrivregValueError, "2-d"),
        ("abc", PrivregTypeError, "array of numbers"),
    ],
)
def test_bad_data_are_refused_with_a_clear_error(data, error, match):
    with pytest.raises(error, match=match):
        as_dataset(data)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"k": 0, "radius": 1.0}, "k must be >= 1"),
        ({"k": 2, "radius": 0.0}, "radius"),
        ({"k": 2, "radius": 1.0, "subspace": (0, 0)}, "repeats"),
        ({"k": 2, "radius": 1.0, "subspace": (5,)}, "has 2 attributes|names attribute 5"),
        ({"k": 2, "radius": 1.0, "subspace": ()}, "empty"),
    ],
)
def test_bad_parameters_are_refused(kwargs, match):
    with pytest.raises((PrivregValueError, PrivregTypeError), match=match):
        outlier_count(np.zeros((3, 2)), **kwargs)


# --- Theorem 4 and eq. (18) ----------------------------------------------------------------


def test_kissing_table_is_consistent_and_exact_where_known():
    assert set(KISSING_UPPER) == set(KISSING_LOWER) == set(range(1, 25))
    for d in range(1, 25):
        assert KISSING_LOWER[d] <= KISSING_UPPER[d]
        if d >= 2:
            assert KISSING_UPPER[d] <= cap_packing_bound(d)  # the table is tighter than the cap bound
    for d, exact in {1: 2, 2: 6, 3: 12, 4: 24, 8: 240, 24: 196560}.items():
        assert KISSING_LOWER[d] == KISSING_UPPER[d] == exact


def test_cap_bound_is_exact_in_the_plane_and_used_beyond_24():
    assert cap_packing_bound(2) == 6
    assert kissing_upper_bound(25) == cap_packing_bound(25) > KISSING_UPPER[24]
    assert cap_packing_bound(34) > cap_packing_bound(25)


def test_global_bounds_bracket_each_other_and_cap_at_n():
    for n, k, d in itertools.product([1, 3, 10, 50, 10**6], [1, 3, 7], [1, 2, 7, 24, 34]):
        lo, up = global_sensitivity_lower(n=n, k=k, d=d), global_sensitivity_upper(n=n, k=k, d=d)
        assert 0 <= lo <= up <= n
        if n >= 2 * d * k + 1:
            assert lo == paper_lower_bound(n=n, k=k, d=d) == 2 * d * k + 1
    assert global_sensitivity_upper(n=10**6, k=3, d=2) == 19  # 6k + 1
    assert global_sensitivity_upper(n=50, k=3, d=7) == 50


def test_paper_lower_bound_is_wrong_for_tiny_datasets():
    # n <= k: every record is always an outlier, the count never moves (GS = 0), yet
    # eq. (18) claims min(n, 2dk + 1) = n
    assert paper_lower_bound(n=3, k=3, d=2) == 3
    assert global_sensitivity_lower(n=3, k=3, d=2) == 0
    gen = np.random.default_rng(0)
    for _ in range(20):
        x = gen.normal(size=(3, 2))
        assert outlier_count(x, k=3, radius=100.0) == 3


@pytest.mark.parametrize("n, k, d", [(9, 2, 2), (13, 3, 2), (7, 1, 3), (12, 2, 3), (30, 2, 2), (6, 2, 2)])
def test_lower_bound_witness_attains_the_lower_bound(n, k, d):
    """The construction in global_sensitivity_lower's docstring, checked by counting."""
    r = 1.0
    clusters = min(2 * d, (n - 1) // k)
    centres = [s * r * math.sqrt(d) * np.eye(d)[i] for i in range(d) for s in (1, -1)][:clusters]
    rows = [np.zeros(d)] + [c for c in centres for _ in range(k)]
    rows += [np.full(d, 1000.0 * (j + 1)) for j in range(n - len(rows))]  # isolated, far apart
    x = np.array(rows)
    moved = x.copy()
    moved[0] = np.full(d, -5000.0)
    change = abs(outlier_count(x, k=k, radius=r) - outlier_count(moved, k=k, radius=r))
    assert change == global_sensitivity_lower(n=n, k=k, d=d)
    assert change <= global_sensitivity_upper(n=n, k=k, d=d)


def test_upper_bound_is_tight_on_the_line():
    # d = 1: GS = 2k + 1 = k K_1 + 1 (the paper's empirical remark), attained by the witness
    assert global_sensitivity_upper(n=100, k=4, d=1) == global_sensitivity_lower(n=100, k=4, d=1) == 9


# --- smallest enclosing ball -----------------------------------------------------------------


def _minimax_radius(p: np.ndarray) -> float:
    f = lambda c: float(np.max(np.sum((p - c) ** 2, axis=1)))  # noqa: E731
    res = minimize(f, p.mean(axis=0), method="Nelder-Mead", options={"maxiter": 40000, "xatol": 1e-12, "fatol": 1e-14})
    return math.sqrt(res.fun)


@pytest.mark.parametrize("d", [1, 2, 3, 7])
def test_enclosing_ball_bounds_are_certified(d):
    gen = np.random.default_rng(d)
    for n in (1, 2, 3, 6, 12):
        for grid in (False, True):
            p = gen.normal(size=(n, d))
            p = np.round(p) if grid else p  # duplicates and degenerate supports
            ball = enclosing_ball(p)
            assert ball.lower <= ball.upper <= ball.lower * (1 + 1e-9) + 1e-12
            assert np.max(np.linalg.norm(p - ball.centre, axis=1)) <= ball.upper * (1 + 1e-12)
            if d <= 3:
                assert ball.upper <= _minimax_radius(p) * (1 + 1e-6) + 1e-9


def test_fits_in_ball_never_refuses_a_set_that_fits():
    gen = np.random.default_rng(7)
    for d in (2, 3, 7, 34):
        for n in (2, 5, 12):
            for _ in range(3):
                p = gen.normal(size=(n, d)) + gen.normal() * 50
                seb = enclosing_ball(p)
                for factor in (0.9, 0.999, 1.0, 1.001, 1.5):
                    dec = fits_in_ball(p, seb.upper * factor)
                    assert dec.lower <= seb.upper * (1 + 1e-12)
                    if factor >= 1.0:
                        assert dec.fits
                    if factor <= 0.999:
                        assert not dec.fits
                    if dec.fits and dec.upper <= seb.upper * factor:
                        assert np.max(np.linalg.norm(p - dec.centre, axis=1)) <= seb.upper * factor * (1 + 1e-12)


# --- Algorithm 1 and the shipped cover methods ---------------------------------------------


def _cover_brute_force_1d(x: np.ndarray, r: float) -> int:
    return max(int(np.sum((x >= a) & (x - a <= 2 * r))) for a in x)  # a window [a, a + 2r]


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_cover_methods_agree_with_the_papers_algorithm_1(d):
    gen = np.random.default_rng(10 + d)
    for trial in range(15):
        n = int(gen.integers(1, 10))
        p = gen.normal(size=(n, d))
        if trial % 3 == 0:
            p = np.round(p * 2) / 2  # ties and duplicates
        r = float(gen.uniform(0.2, 1.5))
        want = algorithm1_reference(p, r)
        assert max_cover(p, r, method="exact") == want
        assert max_cover_branch_and_bound(p, r) == want
        assert max_cover(p, r, method="projection") >= want
        assert max_cover(p, r, method="core") >= max_cover(p, r, method="truss") >= want
        if d == 1:
            assert max_cover_1d(p, r) == want == _cover_brute_force_1d(p[:, 0], r)
        if d == 2:
            assert max_cover_2d(p, r) == want


def test_sweep_and_branch_and_bound_agree_on_larger_planar_sets():
    gen = np.random.default_rng(3)
    for n, r in [(60, 0.3), (150, 0.2), (80, 1.0)]:
        p = gen.normal(size=(n, 2))
        assert max_cover_2d(p, r) == max_cover_branch_and_bound(p, r)


def test_algorithm_1_reference_enforces_its_budget():
    p = np.random.default_rng(0).normal(size=(30, 2)) * 0.1
    with pytest.raises(BudgetExhausted):
        algorithm1_reference(p, 1.0, budget=200)


def test_cover_of_coincident_points_and_empty_sets():
    assert max_cover(np.zeros((0, 3)), 1.0) == 0
    assert max_cover(np.zeros((5, 2)), 1e-6) == 5
    assert max_cover(np.zeros((5, 3)), 1e-6, method="projection") == 5
    for method in ("truss", "core"):
        assert max_cover(np.zeros((0, 4)), 1.0, method=method) == 0
        assert max_cover(np.zeros((1, 4)), 1.0, method=method) == 1
        assert max_cover(np.zeros((5, 4)), 1e-6, method=method) == 5  # duplicates count
        assert max_cover(np.eye(4) * 10, 1.0, method=method) == 1  # no pair fits
    with pytest.raises(PrivregValueError, match="method"):
        max_cover(np.zeros((2, 2)), 1.0, method="greedy")


_points_2d = st.lists(st.tuples(st.integers(-4, 4), st.integers(-4, 4)), min_size=1, max_size=9)
_points_3d = st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=8)


@settings(max_examples=60)  # exact covers are exponential in the points: keep it small
@given(
    pts=st.one_of(_points_2d, _points_3d),
    drop=st.integers(0, 100),
    radius=st.sampled_from([0.5, 1.0, 1.5, 2.0]),
    method=st.sampled_from(["exact", "projection", "truss", "core"]),
)
def test_covers_are_monotone_and_1_lipschitz(pts, drop, radius, method):
    """What beta-smoothness of Algorithm 2 relies on: removing one point never raises a
    cover and lowers it by at most one (grid points: many ties and duplicates)."""
    p = np.array(pts, dtype=np.float64) / 2
    full = max_cover(p, radius, method=method)
    rest = max_cover(np.delete(p, drop % len(p), axis=0), radius, method=method)
    assert full - 1 <= rest <= full
    assert full >= algorithm1_reference(p, radius)


_dense_points = st.integers(3, 5).flatmap(
    lambda d: st.lists(st.tuples(*[st.integers(-3, 3)] * d), min_size=2, max_size=14)
)


@settings(max_examples=80)  # exact covers of dense sets: costly examples
@given(
    pts=_dense_points,
    drop=st.integers(0, 100),
    radius=st.sampled_from([0.4, 0.6, 0.9]),
    method=st.sampled_from(["truss", "core"]),
)
def test_safe_bounds_are_monotone_and_1_lipschitz_on_dense_sets(pts, drop, radius, method):
    """The same two properties where the bounds have structure: 3-5 dimensions, up to 14
    grid points (many ties, duplicates, fit triangles)."""
    p = np.array(pts, dtype=np.float64) / 4
    full = max_cover(p, radius, method=method)
    rest = max_cover(np.delete(p, drop % len(p), axis=0), radius, method=method)
    assert full - 1 <= rest <= full
    assert full >= max_cover(p, radius, method="exact")


def test_projection_bound_is_loose_but_safe_in_higher_dimensions():
    gen = np.random.default_rng(4)
    p = gen.normal(size=(40, 5)) / math.sqrt(5)
    exact, bound = max_cover(p, 0.35), max_cover_projection(p, 0.35)
    assert exact <= bound <= 40


# --- the fit-truss and core bounds (d >= 3) --------------------------------------------------


def _fits_reference(q: np.ndarray, r: float) -> bool:
    return enclosing_ball(q).lower <= r * (1 + 1e-9)


def _truss_reference(p: np.ndarray, r: float) -> int:
    """The definition, by a slow sequential peel: edges are pairs that fit, triangles triples
    that fit (smallest enclosing ball of :mod:`.seb`); repeatedly drop an edge of least
    support and keep the best minimum seen."""
    n = len(p)
    if n <= 1:
        return n
    edges = {frozenset(e) for e in itertools.combinations(range(n), 2) if _fits_reference(p[list(e)], r)}
    if not edges:
        return 1
    tris = [
        frozenset(t)
        for t in itertools.combinations(range(n), 3)
        if all(frozenset(e) in edges for e in itertools.combinations(t, 2)) and _fits_reference(p[list(t)], r)
    ]
    best = 2
    while edges:
        sup = {
            e: 2 + sum(1 for t in tris if e < t and all(frozenset(f) in edges for f in itertools.combinations(t, 2)))
            for e in edges
        }
        low = min(sup, key=lambda e: (sup[e], sorted(e)))
        best = max(best, sup[low])
        edges.discard(low)
    return best


def _core_reference(p: np.ndarray, r: float) -> int:
    n = len(p)
    if n <= 1:
        return n
    near = np.linalg.norm(p[:, None] - p[None], axis=2) <= 2 * r * (1 + 1e-9)
    np.fill_diagonal(near, False)
    alive, best = np.ones(n, dtype=bool), 0
    while alive.any():
        deg = near[np.ix_(alive, alive)].sum(axis=1)
        best = max(best, int(deg.min()))
        alive[np.flatnonzero(alive)[deg == deg.min()][0]] = False
    return best + 1


@pytest.mark.parametrize("d", [3, 4, 6])
def test_truss_and_core_match_their_definitions_and_bound_the_cover(d):
    """Vectorised peels against slow references, and Algorithm 1 <= truss <= core."""
    gen = np.random.default_rng(40 + d)
    for trial in range(12):
        n = int(gen.integers(2, 11))
        p = gen.normal(size=(n, d))
        if trial % 4 == 3:
            p[1] = p[0]  # a duplicate
        r = float(gen.uniform(0.5, 1.6))
        truss, core = max_cover_truss(p, r), max_cover_core(p, r)
        assert truss == _truss_reference(p, r)
        assert core == _core_reference(p, r)
        assert algorithm1_reference(p, r) <= truss <= core


def test_truss_is_tight_on_separate_clusters():
    # three clusters far apart, each inside one ball: tau = the largest cluster, while the
    # 7-d projection bound and the core bound are no better
    gen = np.random.default_rng(2)
    clusters = [gen.normal(size=(size, 7)) * 0.05 + 10 * c for c, size in enumerate((4, 9, 6))]
    p = np.vstack(clusters)
    assert max_cover_truss(p, 0.5) == 9 == max_cover(p, 0.5)
    assert max_cover_core(p, 0.5) == 9


def test_truss_is_much_tighter_than_projection_in_seven_dimensions():
    gen = np.random.default_rng(4)
    p = gen.normal(size=(60, 7)) / math.sqrt(7)
    exact, truss = max_cover(p, 0.6), max_cover_truss(p, 0.6)
    assert exact <= truss < max_cover_projection(p, 0.6)
    assert truss <= max_cover_core(p, 0.6)


def test_triangle_fit_test_agrees_with_the_smallest_enclosing_ball():
    """The closed form used for fit triangles never refuses a triple that fits."""
    from privreg.plugins.outliers.cover_geometry import squared_distances
    from privreg.plugins.outliers.cover_truss import triangle_fits

    gen = np.random.default_rng(8)
    for d in (2, 3, 7):
        for _ in range(300):
            q = gen.normal(size=(3, d))
            if gen.random() < 0.2:
                q[2] = q[0] + gen.random() * (q[1] - q[0])  # collinear
            seb = enclosing_ball(q)
            sq = squared_distances(q[[0, 0, 1]], q[[1, 2, 2]])
            for r in (seb.upper, seb.upper * 1.001, seb.upper * 0.999):
                got = bool(triangle_fits(sq[0:1], sq[1:2], sq[2:3], r * r)[0])
                got_permuted = bool(triangle_fits(sq[2:3], sq[0:1], sq[1:2], r * r)[0])
                assert got == got_permuted
                if r >= seb.upper:
                    assert got
                if r < seb.lower * (1 - 1e-6):
                    assert not got


def test_squared_distances_sum_coordinates_in_order_and_broadcast():
    """One array of squared distances for any number of coordinates (zero: all coincide)."""
    from privreg.plugins.outliers.cover_geometry import squared_distances

    a, b = np.array([[0.0, 3.0], [1.0, 1.0]]), np.array([[4.0, 0.0]])
    np.testing.assert_array_equal(squared_distances(a, b), [25.0, 10.0])
    np.testing.assert_array_equal(squared_distances(a[:, :0], b[:, :0]), [0.0, 0.0])


@pytest.mark.parametrize("kind", ["truss", "core"])
def test_prefix_queries_equal_fresh_computations_and_keep_the_threshold_contract(kind):
    """A keyed structure answers every prefix like a fresh computation on that prefix;
    below the threshold it returns an upper bound below the threshold."""
    gen = np.random.default_rng(11)
    p = gen.normal(size=(70, 5)) / math.sqrt(5)
    keys = gen.integers(0, 9, size=70)
    r = 0.55
    structure = FitTruss(p, r, keys) if kind == "truss" else PairCore(p, r, keys)
    fresh = max_cover_truss if kind == "truss" else max_cover_core
    for top in range(9):
        want = fresh(p[keys <= top], r)
        for at_least in (0, want - 2, want, want + 1, want + 4):
            got = structure.truss(top, at_least=at_least) if kind == "truss" else structure.core(top, at_least=at_least)
            if want >= at_least:
                assert got == want
            else:
                assert want <= got < at_least


def test_truss_without_distance_matrices_gives_the_same_numbers(monkeypatch):
    """Above 2,500 points the structure computes blocks of distances on the fly and looks
    edges up by binary search; forced here on a small set, it must agree exactly."""
    import privreg.plugins.outliers.cover_truss as cover_truss

    gen = np.random.default_rng(13)
    p = gen.normal(size=(80, 5)) / math.sqrt(5)
    keys = gen.integers(0, 6, size=80)
    dense = FitTruss(p, 0.6, keys)
    monkeypatch.setattr(cover_truss, "_DENSE_LIMIT", 0)
    sparse_ = FitTruss(p, 0.6, keys)
    assert sparse_._sqm is None and dense._sqm is not None
    assert sparse_.T == dense.T > 0
    for top in range(6):
        assert sparse_.truss(top) == dense.truss(top)


def test_branch_and_bound_honours_lower_and_upper_bounds():
    gen = np.random.default_rng(6)
    p = gen.normal(size=(25, 3)) * 0.6
    exact = max_cover_branch_and_bound(p, 0.7)
    assert max_cover_branch_and_bound(p, 0.7, upper=max_cover_truss(p, 0.7)) == exact
    assert max_cover_branch_and_bound(p, 0.7, lower=exact + 3) == exact + 3  # max(cover, lower)
    assert max_cover_branch_and_bound(p, 0.7, lower=exact - 1) == exact


def test_keyed_structures_check_their_keys():
    with pytest.raises(PrivregValueError, match="keys"):
        FitTruss(np.zeros((3, 3)), 1.0, keys=[0, 1])
    with pytest.raises(PrivregValueError, match="keys"):
        PairCore(np.zeros((3, 3)), 1.0, keys=[0, 1, 2, 3])
