"""Tests of the exact noise samplers, the snapping grid and uniform_below (privreg.noise).

Statistical tests. Every randomised test draws from ``InsecureReproducibleRandom`` with a
fixed seed, so its outcome is deterministic: it either always passes or always fails for
a given implementation. The thresholds are chosen so that, for a *correct* sampler and a
fresh random seed, each test would raise a false alarm with probability at most
ALPHA = 1e-4 (we reject only when the p-value is below ALPHA). For a broken sampler
(e.g. P(0) counted twice, a biased Bernoulli, modulo bias) the deviations are many
standard errors wide at the sample sizes used, so the tests have high power.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.noise import (
    Grid,
    bernoulli,
    bernoulli_exp_neg,
    discrete_laplace,
    snap_to_grid,
    uniform_below,
)

ALPHA = 1e-4  # per-test false-alarm rate (p-value threshold)
Z_ALPHA = stats.norm.isf(ALPHA / 2)  # two-sided normal quantile, ~3.89


def rng(seed: int) -> InsecureReproducibleRandom:
    return InsecureReproducibleRandom(seed=seed)


def chi2_pvalue(observed, expected) -> float:
    observed = np.asarray(observed, dtype=float)
    expected = np.asarray(expected, dtype=float)
    assert expected.min() >= 5, "chi-square bins need expected count >= 5"
    expected = expected * observed.sum() / expected.sum()  # guard against float drift
    return float(stats.chisquare(observed, expected).pvalue)


# ----------------------------------------------------------------- discrete Laplace

SCALES = [Fraction(1, 2), Fraction(1), Fraction(3), Fraction(7, 3)]
N_LAPLACE = 20_000


@pytest.fixture(scope="module", params=SCALES, ids=lambda s: f"scale={s}")
def laplace_sample(request):
    scale = request.param
    r = rng(seed=1000 + scale.numerator * 31 + scale.denominator)
    return scale, np.array([discrete_laplace(scale, r) for _ in range(N_LAPLACE)], dtype=np.int64)


def dlap_pmf(z: int, scale: Fraction) -> float:
    q = math.exp(-1 / float(scale))
    return (1 - q) / (1 + q) * q ** abs(z)


def dlap_tail(k: int, scale: Fraction) -> float:
    """P(Z >= k) for k >= 1 (= P(Z <= -k))."""
    q = math.exp(-1 / float(scale))
    return q**k / (1 + q)


def test_discrete_laplace_goodness_of_fit(laplace_sample):
    """Chi-square against the exact pmf P(z) = (1-q)/(1+q) q^|z|, q = exp(-1/scale).

    Bins: each integer in [-K, K] plus the two pooled tails, K as large as keeps every
    expected count >= 5. False-alarm rate ALPHA = 1e-4; deterministic under the fixed seed."""
    scale, z = laplace_sample
    n = len(z)
    K = 0
    while n * dlap_pmf(K + 1, scale) >= 5 and n * dlap_tail(K + 2, scale) >= 5:
        K += 1
    assert K >= 2  # the test has some resolution for every scale used
    observed = [np.sum(z < -K)] + [np.sum(z == k) for k in range(-K, K + 1)] + [np.sum(z > K)]
    expected = [n * dlap_tail(K + 1, scale)] + [n * dlap_pmf(k, scale) for k in range(-K, K + 1)]
    expected += [n * dlap_tail(K + 1, scale)]
    assert math.isclose(sum(expected), n, rel_tol=1e-9)
    p = chi2_pvalue(observed, expected)
    assert p >= ALPHA, f"scale {scale}: chi-square p-value {p:.3g} < {ALPHA}"


def test_discrete_laplace_symmetric_with_mean_zero(laplace_sample):
    """Sign symmetry: among non-zero draws, #positive ~ Binomial(n, 1/2) (exact binomial test,
    alpha 1e-4). Mean: |mean| <= z_{1-alpha/2} * sd / sqrt(n) with the exact variance
    2q/(1-q)^2 (normal approximation, n = 20000, alpha 1e-4)."""
    scale, z = laplace_sample
    nonzero = z[z != 0]
    pos = int(np.sum(nonzero > 0))
    assert stats.binomtest(pos, len(nonzero), 0.5).pvalue >= ALPHA
    q = math.exp(-1 / float(scale))
    sd = math.sqrt(2 * q / (1 - q) ** 2)
    assert abs(z.mean()) <= Z_ALPHA * sd / math.sqrt(len(z))
    # the variance matches too (loose: 10% relative, > 7 standard errors at n=20000)
    assert abs(z.var() / sd**2 - 1) < 0.10


def test_discrete_laplace_returns_python_ints_and_is_reproducible():
    r1, r2 = rng(7), rng(7)
    s1 = [discrete_laplace(Fraction(5, 2), r1) for _ in range(200)]
    s2 = [discrete_laplace(Fraction(5, 2), r2) for _ in range(200)]
    assert s1 == s2  # all randomness comes from the given source
    assert all(type(x) is int for x in s1)
    assert len(set(s1)) > 5  # it is not constant


def test_discrete_laplace_accepts_int_and_float_scale():
    r1, r2, r3 = rng(3), rng(3), rng(3)
    a = [discrete_laplace(Fraction(2), r1) for _ in range(50)]
    assert a == [discrete_laplace(2, r2) for _ in range(50)]
    assert a == [discrete_laplace(2.0, r3) for _ in range(50)]


@pytest.mark.parametrize("scale", [Fraction(0), Fraction(-1), Fraction(-1, 3), 0, -2.5])
def test_discrete_laplace_rejects_nonpositive_scale(scale):
    with pytest.raises(PrivregValueError, match="scale"):
        discrete_laplace(scale, rng(0))


@pytest.mark.parametrize("scale", [math.nan, math.inf])
def test_discrete_laplace_rejects_nonfinite_scale(scale):
    with pytest.raises(PrivregValueError, match="scale"):
        discrete_laplace(scale, rng(0))


# ----------------------------------------------------------------- Bernoulli samplers

N_BERN = 20_000


@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(1), Fraction(5, 2)], ids=str)
def test_bernoulli_exp_neg_frequency(gamma):
    """#True ~ Binomial(n, exp(-gamma)); exact two-sided binomial test, alpha = 1e-4."""
    r = rng(seed=int(gamma * 6) + 11)
    hits = sum(bernoulli_exp_neg(gamma, r) for _ in range(N_BERN))
    p = stats.binomtest(hits, N_BERN, math.exp(-float(gamma))).pvalue
    assert p >= ALPHA, f"gamma {gamma}: {hits}/{N_BERN} vs {math.exp(-float(gamma)):.4f}, p={p:.3g}"


def test_bernoulli_exp_neg_gamma_zero_always_true():
    r = rng(5)
    assert all(bernoulli_exp_neg(Fraction(0), r) is True for _ in range(2000))


def test_bernoulli_exp_neg_large_gamma_is_rare():
    # exp(-20) ~ 2e-9: over 2000 draws a True has probability ~4e-6 (below ALPHA)
    r = rng(6)
    assert not any(bernoulli_exp_neg(Fraction(20), r) for _ in range(2000))


@pytest.mark.parametrize("gamma", [0, 1, 2])
def test_bernoulli_exp_neg_accepts_int_gamma(gamma):
    r1, r2 = rng(9), rng(9)
    a = [bernoulli_exp_neg(gamma, r1) for _ in range(100)]
    assert a == [bernoulli_exp_neg(Fraction(gamma), r2) for _ in range(100)]


@pytest.mark.parametrize("p", [Fraction(1, 3), Fraction(5, 7)], ids=str)
def test_bernoulli_frequency(p):
    """Exact binomial test, alpha = 1e-4."""
    r = rng(seed=p.denominator)
    hits = sum(bernoulli(p, r) for _ in range(N_BERN))
    assert stats.binomtest(hits, N_BERN, float(p)).pvalue >= ALPHA


def test_bernoulli_degenerate_probabilities_are_deterministic():
    r = rng(8)
    assert all(bernoulli(Fraction(0), r) is False for _ in range(2000))
    assert all(bernoulli(Fraction(1), r) is True for _ in range(2000))
    assert all(bernoulli(Fraction(3, 3), r) is True for _ in range(200))


@pytest.mark.parametrize("p", [Fraction(-1, 2), Fraction(3, 2), Fraction(-1), Fraction(2)], ids=str)
def test_bernoulli_rejects_out_of_range(p):
    with pytest.raises(PrivregValueError, match="p must lie in"):
        bernoulli(p, rng(0))


@pytest.mark.parametrize("gamma", [Fraction(-1), Fraction(-1, 10**9)], ids=str)
def test_bernoulli_exp_neg_rejects_negative(gamma):
    with pytest.raises(PrivregValueError, match="gamma"):
        bernoulli_exp_neg(gamma, rng(0))


# ----------------------------------------------------------------- uniform_below


def _bucket_counts(values: np.ndarray, buckets: int) -> np.ndarray:
    return np.bincount(values, minlength=buckets)


@pytest.mark.parametrize("bound", [2, 3, 7, 1000, 1025])
def test_uniform_below_small_bounds_exactly_uniform(bound):
    """Chi-square against the uniform distribution on [0, bound), alpha = 1e-4."""
    n = max(50_000, 100 * bound)
    x = uniform_below(bound, n, rng(bound))
    assert x.min() >= 0 and x.max() < bound
    counts = _bucket_counts(x, bound)
    assert len(counts) == bound
    p = chi2_pvalue(counts, np.full(bound, n / bound))
    assert p >= ALPHA, f"bound {bound}: p={p:.3g}"


@pytest.mark.parametrize(
    "bound, shift",
    [(2**40, 30), (3 * 2**39, 30), (2**62, 52), (5 * 2**59, 50)],
    ids=["2^40", "3*2^39", "2^62", "5*2^59"],
)
def test_uniform_below_large_bounds_bucketed(bound, shift):
    """Large bounds: bucket by the high bits (bound is a multiple of 2**shift, so the
    buckets are equally likely) and by the low 10 bits; chi-square, alpha = 1e-4 each."""
    n = 200_000
    x = uniform_below(bound, n, rng(bound % 1000))
    assert x.dtype == np.int64
    assert x.min() >= 0 and int(x.max()) < bound
    buckets = bound >> shift
    high = _bucket_counts(x >> shift, buckets)
    assert len(high) == buckets
    assert chi2_pvalue(high, np.full(buckets, n / buckets)) >= ALPHA
    low = _bucket_counts(x & 1023, 1024)
    assert chi2_pvalue(low, np.full(1024, n / 1024)) >= ALPHA


def test_uniform_below_values_in_range_dtype_and_shape():
    for bound in (1, 2, 5, 2**31 + 1, 2**61 + 3, 2**62):
        x = uniform_below(bound, 3000, rng(1))
        assert x.dtype == np.int64 and x.shape == (3000,)
        assert int(x.min()) >= 0 and int(x.max()) < bound


def test_uniform_below_size_zero_and_bound_one():
    empty = uniform_below(10, 0, rng(0))
    assert empty.shape == (0,) and empty.dtype == np.int64
    ones = uniform_below(1, 500, rng(0))
    assert ones.dtype == np.int64 and ones.shape == (500,)
    assert not ones.any()


def test_uniform_below_reproducible_and_numpy_int_args():
    a = uniform_below(1000, 100, rng(42))
    b = uniform_below(np.int64(1000), np.int32(100), rng(42))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, uniform_below(1000, 100, rng(43)))


@pytest.mark.parametrize("bound", [2**62 + 1, 2**63, 2**100])
def test_uniform_below_rejects_too_large_bound(bound):
    with pytest.raises(PrivregValueError, match="2\\*\\*62"):
        uniform_below(bound, 3, rng(0))


@pytest.mark.parametrize("bound", [0, -1, -(2**70)])
def test_uniform_below_rejects_bound_below_one(bound):
    with pytest.raises(PrivregValueError, match="bound"):
        uniform_below(bound, 3, rng(0))


def test_uniform_below_rejects_bad_types_and_sizes():
    with pytest.raises(PrivregValueError, match="size"):
        uniform_below(5, -1, rng(0))
    with pytest.raises(PrivregTypeError, match="bound"):
        uniform_below(5.0, 3, rng(0))
    with pytest.raises(PrivregTypeError, match="size"):
        uniform_below(5, 3.0, rng(0))


# ----------------------------------------------------------------- Grid / snap_to_grid

sensitivities = st.sampled_from([1.0, 0.5, 2.0, 3.0, 10.0, 0.1, 1e-3, 7.25, 1234.5])
epsilons = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)


def exact_want(dimension: int, epsilon: float) -> Fraction:
    return 1024 * max(1, dimension) * max(Fraction(1), Fraction(epsilon))


@settings(max_examples=300)  # cheap examples; the grids must hold across magnitudes
@given(
    sensitivity=st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
    epsilon=epsilons,
    dimension=st.integers(min_value=1, max_value=10_000),
)
def test_grid_for_query_multiple(sensitivity, epsilon, dimension):
    g = Grid.for_query(sensitivity=sensitivity, epsilon=epsilon, dimension=dimension)
    m = g.multiple
    assert isinstance(m, int) and m > 0 and m & (m - 1) == 0  # a power of two
    want = exact_want(dimension, epsilon)
    assert m >= want
    assert m < 2 * want  # the smallest such power of two: no needlessly fine grid
    assert g.step * m == Fraction(sensitivity)  # exact: sensitivity is a whole number of steps


@pytest.mark.parametrize(
    "epsilon, dimension, expected",
    [(1.0, 1, 1024), (0.1, 1, 1024), (1.5, 1, 2048), (2.0, 1, 2048), (1.0, 3, 4096), (8.0, 4, 32768)],
)
def test_grid_for_query_examples(epsilon, dimension, expected):
    assert Grid.for_query(sensitivity=1.0, epsilon=epsilon, dimension=dimension).multiple == expected


def test_grid_for_query_multiple_not_below_want_just_above_power_of_two():
    eps = math.nextafter(1.0, 2.0)
    g = Grid.for_query(sensitivity=1.0, epsilon=eps, dimension=1)
    assert g.multiple >= exact_want(1, eps)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(sensitivity=0.0, epsilon=1.0, dimension=1),
        dict(sensitivity=-1.0, epsilon=1.0, dimension=1),
        dict(sensitivity=math.nan, epsilon=1.0, dimension=1),
        dict(sensitivity=1.0, epsilon=0.0, dimension=1),
        dict(sensitivity=1.0, epsilon=math.inf, dimension=1),
    ],
)
def test_grid_for_query_rejects_bad_parameters(kwargs):
    with pytest.raises(PrivregValueError):
        Grid.for_query(**kwargs)


def test_snap_to_grid_rounds_exactly_half_to_even():
    g = Grid(step=Fraction(1, 4), multiple=4)
    assert snap_to_grid(0.125, g) == 0  # 0.5 steps -> 0
    assert snap_to_grid(0.375, g) == 2  # 1.5 steps -> 2
    assert snap_to_grid(-0.125, g) == 0
    assert snap_to_grid(0.126, g) == 1
    assert snap_to_grid(10.0, g) == 40
    # exact rational arithmetic: 0.1 is not 1/10, and the grid step 1/3 is not a float
    g3 = Grid(step=Fraction(1, 3), multiple=6)
    assert snap_to_grid(0.5, g3) == 2  # 1.5 steps -> 2 (ties to even)
    assert snap_to_grid(1 / 6, g3) == 0  # float(1/6) < 1/6, so < 0.5 steps, rounds down
    # float(11/6) is just below 11/6 = 5.5 steps: exact arithmetic rounds down to 5, whereas
    # float division x / float(step) would give exactly 5.5 and round (to even) up to 6
    assert snap_to_grid(11 / 6, g3) == 5
    assert g3.to_float(2) == pytest.approx(2 / 3)


def _tie_heavy(step: Fraction, max_units: int = 4000):
    """Floats on the quarter-step lattice (lots of exact ties when snapped)."""
    return st.integers(-max_units, max_units).map(lambda k: float(k * step / 4))


@settings(max_examples=400)  # cheap examples; ties on the grid are rare draws
@given(data=st.data(), sensitivity=sensitivities, epsilon=epsilons)
def test_snap_scalar_moves_at_most_multiple(data, sensitivity, epsilon):
    g = Grid.for_query(sensitivity=sensitivity, epsilon=epsilon, dimension=1)
    D = Fraction(sensitivity)
    x = data.draw(st.one_of(st.floats(-1e4, 1e4), _tie_heavy(g.step)), label="x")
    kind = data.draw(st.sampled_from(["float", "lattice", "extreme"]), label="kind")
    if kind == "float":
        delta = data.draw(st.floats(-sensitivity, sensitivity), label="delta")
    elif kind == "lattice":
        delta = float(data.draw(st.integers(-4 * g.multiple, 4 * g.multiple), label="q") * g.step / 4)
    else:
        delta = data.draw(st.sampled_from([sensitivity, -sensitivity]), label="delta")
    x2 = x + delta
    assume(abs(Fraction(x2) - Fraction(x)) <= D)  # exact neighbourhood condition
    diff = abs(snap_to_grid(x, g) - snap_to_grid(x2, g))
    assert diff <= g.multiple == g.integer_sensitivity(1)


@settings(max_examples=300)  # cheap examples; ties on the grid are rare draws
@given(data=st.data(), sensitivity=sensitivities, epsilon=epsilons, d=st.integers(1, 6))
def test_snap_vector_l1_moves_at_most_integer_sensitivity(data, sensitivity, epsilon, d):
    g = Grid.for_query(sensitivity=sensitivity, epsilon=epsilon, dimension=d)
    D = Fraction(sensitivity)
    coords = st.one_of(st.floats(-1e4, 1e4), _tie_heavy(g.step))
    x = data.draw(st.lists(coords, min_size=d, max_size=d), label="x")
    delta_units = st.one_of(
        st.floats(-sensitivity, sensitivity),
        # whole and half steps: with ties these can reach the bound multiple + d exactly
        st.integers(-2 * g.multiple, 2 * g.multiple).map(lambda k: float(k * g.step / 2)),
    )
    raw = data.draw(st.lists(delta_units, min_size=d, max_size=d), label="raw")
    l1 = sum(abs(Fraction(r)) for r in raw)
    if l1 > D:  # rescale onto the L1 ball (floats: checked exactly below)
        raw = [float(Fraction(r) * D / l1) for r in raw]
    x2 = [a + r for a, r in zip(x, raw)]
    assume(sum(abs(Fraction(b) - Fraction(a)) for a, b in zip(x, x2)) <= D)
    moved = sum(abs(snap_to_grid(a, g) - snap_to_grid(b, g)) for a, b in zip(x, x2))
    assert moved <= g.integer_sensitivity(d)


def test_vector_rounding_slack_is_needed_and_attained():
    """With d = 2 the snapped vector can move by more than ``multiple``: the '+ d' in
    integer_sensitivity is needed, and with ties to even the bound is attained."""
    g = Grid.for_query(sensitivity=1.0, epsilon=1.0, dimension=2)
    m, step = g.multiple, g.step
    # no ties: movement 0.2 + (m - 0.2) steps = m, snapped movement 1 + m
    x = [float(Fraction(4, 10) * step), float(Fraction(4, 10) * step)]
    x2 = [float(Fraction(6, 10) * step), float((m - Fraction(2, 10) + Fraction(4, 10)) * step)]
    assert sum(abs(Fraction(b) - Fraction(a)) for a, b in zip(x, x2)) <= 1
    moved = sum(abs(snap_to_grid(a, g) - snap_to_grid(b, g)) for a, b in zip(x, x2))
    assert moved == m + 1
    # ties: 0.5 -> 1.5 steps snaps 0 -> 2, and 0.5 -> m - 0.5 steps snaps 0 -> m
    x = [float(step / 2), float(step / 2)]
    x2 = [float(3 * step / 2), float((m - Fraction(1, 2)) * step)]
    assert sum(abs(Fraction(b) - Fraction(a)) for a, b in zip(x, x2)) == 1
    moved = sum(abs(snap_to_grid(a, g) - snap_to_grid(b, g)) for a, b in zip(x, x2))
    assert moved == m + 2 == g.integer_sensitivity(2)
    assert g.integer_sensitivity(1) == m


def test_grid_with_odd_multiple_is_refused_or_still_sound():
    try:
        g = Grid(step=Fraction(1), multiple=1)
    except (ValueError, TypeError):
        return  # refusing the unsound grid is a fix
    assert abs(snap_to_grid(0.5, g) - snap_to_grid(1.5, g)) <= g.integer_sensitivity(1)
