"""Plugin ``outliers`` (paper 003): the local-sensitivity bound of Theorem 5, its
distance-t version (Theorem 6, Lemma 1) and the smooth upper bound of Algorithm 2.

* The bound is checked against the true local sensitivity, found by brute force over
  every neighbouring dataset of small random datasets (1-d and 2-d: the replaced record
  is moved to one point of every cell of the arrangement of radius-r balls, which
  realises every possible change of the count in general position).
* In 3-d the moved record is tried at every record, at the centre of the smallest ball
  of every pair and triple (where a ball covering the most points can be put) and far
  away: a lower bound on the local sensitivity that every cover method must dominate.
* beta-smoothness ``S(X) <= e^beta S(X')`` is checked with hypothesis (derandomized in the ci profile) on
  neighbouring datasets with ties and duplicates, for every cover method (the safe
  bounds ``truss`` and ``core`` included), and the bounds are ordered term by term:
  exact <= truss <= core.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.core.errors import PrivregValueError
from privreg.core.sensitivity import SensitivityKind
from privreg.plugins.outliers.definitions import outlier_count
from privreg.plugins.outliers.kissing import global_sensitivity_upper
from privreg.plugins.outliers.seb import enclosing_ball
from privreg.plugins.outliers.smooth import (
    OutlierCountSmoothSensitivity,
    local_bound_at_distance,
    local_sensitivity_bound,
    smooth_upper_bound,
    smooth_upper_bound_reference,
)


def _cells(y: np.ndarray, r: float) -> np.ndarray:
    """One centre in every cell of the arrangement of closed radius-``r`` balls about the
    rows of ``y`` (d = 1 exactly; d = 2 in general position), plus a far-away point."""
    d = y.shape[1]
    far = y.max(axis=0) + 10 * r + 1
    if d == 1:
        crit = np.sort(np.r_[y[:, 0] - r, y[:, 0] + r])
        return np.r_[crit, (crit[1:] + crit[:-1]) / 2, far].reshape(-1, 1)
    dirs = np.array([[math.cos(a), math.sin(a)] for a in np.linspace(0, 2 * math.pi, 16, endpoint=False)])
    base = list(y) + [c + r * u for c in y for u in dirs[::2]]
    for a, b in itertools.combinations(y, 2):  # vertices: pairwise circle intersections
        dist = float(np.linalg.norm(b - a))
        if 0 < dist <= 2 * r:
            mid, h = (a + b) / 2, math.sqrt(max(r * r - dist * dist / 4, 0.0))
            perp = np.array([a[1] - b[1], b[0] - a[0]]) / dist
            base += [mid + h * perp, mid - h * perp]
    base = np.array(base)
    near = (base[:, None, :] + 1e-7 * r * dirs[None, :, :]).reshape(-1, 2)  # the cells around each
    return np.vstack([base, near, far])


def _true_local_sensitivity(x: np.ndarray, k: int, r: float) -> int:
    q0 = outlier_count(x, k=k, radius=r)
    best = 0
    for i in range(len(x)):
        for c in _cells(np.delete(x, i, axis=0), r):
            moved = x.copy()
            moved[i] = c
            best = max(best, abs(outlier_count(moved, k=k, radius=r) - q0))
    return best


@pytest.mark.parametrize("d", [1, 2])
def test_bound_is_at_least_the_true_local_sensitivity(d):
    """Theorem 5 (the t = 0 term of Algorithm 2) and the smooth bound both dominate the
    brute-force local sensitivity; they are tight on most datasets."""
    gen = np.random.default_rng(20 + d)
    gaps = []
    for trial in range(14 if d == 1 else 9):
        n = int(gen.integers(3, 9 if d == 1 else 7))
        k = int(gen.integers(1, 4))
        r = float(gen.uniform(0.3, 1.2))
        x = gen.normal(size=(n, d))
        if trial % 4 == 3:
            x[1] = x[0]  # a duplicate record
        truth = _true_local_sensitivity(x, k, r)
        bound = local_sensitivity_bound(x, k=k, radius=r)
        assert bound >= truth, (x.tolist(), k, r)
        assert truth <= global_sensitivity_upper(n=n, k=k, d=d)  # Theorem 4
        assert smooth_upper_bound(x, k=k, radius=r, beta=0.1).value >= bound
        gaps.append(bound - truth)
    assert gaps.count(0) >= len(gaps) // 2  # not a vacuous bound


def test_bound_is_tight_on_the_global_sensitivity_witness():
    # x0 at the origin, k = 2 records at each of +-e_1, +-e_2 (r = 1 after the sqrt(2)
    # normalisation): moving x0 away turns 9 records into outliers
    x = np.array([[0, 0], [1, 0], [1, 0], [-1, 0], [-1, 0], [0, 1], [0, 1], [0, -1], [0, -1.0]])
    r = 1 / math.sqrt(2)
    assert local_sensitivity_bound(x, k=2, radius=r) == 9 == global_sensitivity_upper(n=9, k=2, d=2)
    assert _true_local_sensitivity(x, 2, r) == 9


def test_distance_t_bounds_grow_and_cap_at_the_global_bound():
    gen = np.random.default_rng(5)
    x = np.vstack([gen.normal(size=(40, 2)), gen.normal(15, 8, size=(4, 2))])
    terms = [local_bound_at_distance(x, t, k=3, radius=0.6) for t in range(12)]
    gs = global_sensitivity_upper(n=len(x), k=3, d=2)
    assert all(1 <= a <= gs for a in terms)
    assert all(a <= b for a, b in itertools.pairwise(terms[1:]))  # Theorem 6's sets are nested
    assert terms[-1] == gs


COVERS = ["exact", "projection", "truss", "core"]


@pytest.mark.parametrize("cover", COVERS)
@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_algorithm_2_equals_the_maximum_over_every_distance(d, cover):
    """Propositions 1-2 only skip terms that cannot win: the early-stopped value is
    exactly max_t e^(-beta t) L(t) over t = 0..n."""
    gen = np.random.default_rng(30 + d)
    for trial in range(4):
        n = int(gen.integers(8, 20))
        x = np.vstack([gen.normal(size=(n, d)), gen.normal(6, 4, size=(3, d))])
        beta = [0.02, 0.1, 0.5, 2.0][trial]
        got = smooth_upper_bound(x, k=2, radius=0.5, beta=beta, cover=cover)
        full = max(
            math.exp(-beta * t) * local_bound_at_distance(x, t, k=2, radius=0.5, cover=cover) for t in range(len(x) + 1)
        )
        assert got.value == pytest.approx(full, rel=1e-12)
        assert len(got.terms) <= len(x) + 1


@pytest.mark.parametrize("cover, k, beta", [("truss", 4, 0.03), ("truss", 2, 0.1), ("core", 4, 0.03)])
def test_staged_structures_give_the_exact_maximum_on_a_larger_set(cover, k, beta):
    """Many levels, several rebuilt stages, windows of degrees and (larger beta) levels
    settled by the stage's decomposition alone: Algorithm 2 still returns exactly
    max_t e^(-beta t) L(t), with every L(t) recomputed from scratch on its own set."""
    gen = np.random.default_rng(21)
    x = np.vstack([gen.normal(size=(84, 4)), gen.normal(6, 3, size=(6, 4))])
    got = smooth_upper_bound(x, k=k, radius=0.8, beta=beta, cover=cover)
    cap = min(len(x), global_sensitivity_upper(n=len(x), k=k, d=4))
    full = 0.0
    for t in range(len(x) + 1):
        term = local_bound_at_distance(x, t, k=k, radius=0.8, cover=cover)
        full = max(full, math.exp(-beta * t) * term)
        if term == cap:  # L(t) is non-decreasing: every later term is cap e^(-beta t)
            break
    assert got.value == pytest.approx(full, rel=1e-12)
    assert len(got.terms) > 10  # the structures were exercised over many levels


def test_reference_with_the_papers_algorithm_1_gives_the_same_bound():
    gen = np.random.default_rng(9)
    x = np.vstack([gen.normal(size=(12, 2)), gen.normal(5, 3, size=(2, 2))])
    assert smooth_upper_bound_reference(x, k=2, radius=0.6, beta=0.05, budget=10**6) == smooth_upper_bound(
        x, k=2, radius=0.6, beta=0.05
    )


def _moves_3d(y: np.ndarray) -> np.ndarray:
    """Every record, the centre of the smallest ball of every pair and triple of records,
    and a far point: where the moved record can gain or lose the most neighbours."""
    centres = list(y)
    for size in (2, 3):
        centres += [enclosing_ball(y[list(c)]).centre for c in itertools.combinations(range(len(y)), size)]
    centres.append(y.max(axis=0) + 50.0)
    return np.array(centres)


@pytest.mark.parametrize("cover", COVERS)
def test_every_cover_method_dominates_the_local_sensitivity_in_3d(cover):
    gen = np.random.default_rng(77)
    for trial in range(6):
        n, k = int(gen.integers(4, 8)), int(gen.integers(1, 3))
        r = float(gen.uniform(0.4, 1.0))
        x = gen.normal(size=(n, 3)) * 0.7
        if trial % 3 == 2:
            x[1] = x[0]
        q0 = outlier_count(x, k=k, radius=r)
        seen = 0
        for i in range(n):
            for c in _moves_3d(np.delete(x, i, axis=0) / math.sqrt(3)):
                moved = x.copy()
                moved[i] = c * math.sqrt(3)  # centres were found in subspace units
                seen = max(seen, abs(outlier_count(moved, k=k, radius=r) - q0))
        assert local_sensitivity_bound(x, k=k, radius=r, cover=cover) >= seen
        assert smooth_upper_bound(x, k=k, radius=r, beta=0.1, cover=cover).value >= seen


def test_safe_bounds_are_ordered_term_by_term():
    """exact <= truss <= core for every L(t), hence for S(X); the truss bound is close to
    exact on these data while the core bound is not."""
    gen = np.random.default_rng(12)
    x = np.vstack([gen.normal(size=(40, 4)), gen.normal(8, 4, size=(3, 4))])
    for t in (0, 1, 3, 6, 12):
        values = [local_bound_at_distance(x, t, k=3, radius=0.9, cover=c) for c in ("exact", "truss", "core")]
        assert values == sorted(values)
    s = {c: smooth_upper_bound(x, k=3, radius=0.9, beta=0.05, cover=c).value for c in ("exact", "truss", "core")}
    assert s["exact"] <= s["truss"] <= s["core"]
    assert s["truss"] <= 1.25 * s["exact"]


def _dataset(draw, d):
    coord = st.integers(-6, 6).map(lambda v: v / 4)  # a coarse grid: ties at distance r
    row = st.tuples(*[coord] * d)
    return draw(st.lists(row, min_size=2, max_size=9))


@st.composite
def _neighbours(draw):
    d = draw(st.integers(1, 4))
    rows = _dataset(draw, d)
    i = draw(st.integers(0, len(rows) - 1))
    new = draw(st.one_of(st.sampled_from(rows), st.tuples(*[st.integers(-8, 8).map(lambda v: v / 4)] * d)))
    moved = list(rows)
    moved[i] = new
    return np.array(rows, float), np.array(moved, float)


@settings(max_examples=120)  # the central smoothness law: a larger budget than the default
@given(
    pair=_neighbours(),
    k=st.integers(1, 3),
    radius=st.sampled_from([0.25, 0.5, 0.75, 1.0]),
    beta=st.sampled_from([0.01, 0.1, 0.7]),
    cover=st.sampled_from(COVERS),
)
def test_smooth_bound_is_beta_smooth(pair, k, radius, beta, cover):
    """Definition 4, eq. (7): S(X) <= e^beta S(X') for every neighbouring pair (and the
    term-wise L_X(t) <= L_X'(t + 1) the proof rests on)."""
    _assert_beta_smooth(*pair, k=k, radius=radius, beta=beta, cover=cover)


def _assert_beta_smooth(x, y, *, k, radius, beta, cover) -> float:
    """Asserts eq. (7) both ways and the term-wise step; returns S(x)."""
    sx = smooth_upper_bound(x, k=k, radius=radius, beta=beta, cover=cover).value
    sy = smooth_upper_bound(y, k=k, radius=radius, beta=beta, cover=cover).value
    assert sx <= math.exp(beta) * sy * (1 + 1e-12)
    assert sy <= math.exp(beta) * sx * (1 + 1e-12)
    for t in range(3):
        assert local_bound_at_distance(x, t, k=k, radius=radius, cover=cover) <= local_bound_at_distance(
            y, t + 1, k=k, radius=radius, cover=cover
        )
    return sx


@st.composite
def _dense_neighbours(draw):
    """Neighbouring datasets in 3-5 dimensions on a coarse grid: many pairs and triples
    fit, so the fit-truss and core bounds have real structure to peel."""
    d = draw(st.integers(3, 5))
    coord = st.integers(-3, 3).map(lambda v: v / 4)
    rows = draw(st.lists(st.tuples(*[coord] * d), min_size=5, max_size=12))
    i = draw(st.integers(0, len(rows) - 1))
    moved = list(rows)
    moved[i] = draw(st.one_of(st.sampled_from(rows), st.tuples(*[st.integers(-6, 6).map(lambda v: v / 4)] * d)))
    return np.array(rows, float), np.array(moved, float)


@settings(max_examples=80)  # exact covers of dense data: costly examples
@given(
    pair=_dense_neighbours(),
    k=st.integers(1, 4),
    radius=st.sampled_from([0.3, 0.5, 0.8]),
    beta=st.sampled_from([0.02, 0.2, 1.0]),
    cover=st.sampled_from(["truss", "core"]),
)
def test_safe_bounds_are_beta_smooth_on_dense_data(pair, k, radius, beta, cover):
    """The new safe bounds keep Definition 4: S(X) <= e^beta S(X') and the term-wise
    L_X(t) <= L_X'(t + 1), on data dense enough for many fit triangles."""
    x, y = pair
    sx = _assert_beta_smooth(x, y, k=k, radius=radius, beta=beta, cover=cover)
    assert sx >= smooth_upper_bound(x, k=k, radius=radius, beta=beta, cover="exact").value


def test_sensitivity_object_follows_the_smooth_interface():
    s = OutlierCountSmoothSensitivity(k=3, radius=1.1, beta=0.05, subspace=[1, 0])
    assert s.kind is SensitivityKind.SMOOTH and s.data_dependent and s.subspace == (0, 1)
    x = np.random.default_rng(0).normal(size=(30, 3))
    assert s.bound(x) == smooth_upper_bound(x[:, :2], k=3, radius=1.1, beta=0.05).value
    details = s.details(x)
    assert details.value == math.exp(-0.05 * details.argmax) * details.terms[details.argmax]
    with pytest.raises(PrivregValueError, match="needs data"):
        s.bound()
    with pytest.raises(PrivregValueError, match="cover"):
        OutlierCountSmoothSensitivity(k=3, radius=1.0, beta=0.1, cover="greedy")
    exact3 = OutlierCountSmoothSensitivity(k=3, radius=0.9, beta=0.05)
    safe3 = OutlierCountSmoothSensitivity(k=3, radius=0.9, beta=0.05, cover="truss")
    assert safe3.cover == "truss" and safe3.bound(x) >= exact3.bound(x)
    with pytest.raises(PrivregValueError, match="beta"):
        OutlierCountSmoothSensitivity(k=3, radius=1.0, beta=0.0)
