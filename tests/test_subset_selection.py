"""Subset Selection (Sun et al. 2024, Algorithm 1; Wang et al. 2016; Ye-Barg 2018).

Every statistical test is seeded with InsecureReproducibleRandom, so its outcome is
deterministic; each states the false-alarm rate it would have with a fresh seed, and the
tests that could pass vacuously also check that they reject a wrong distribution.
"""

import math
from collections import defaultdict
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from ldp_helpers import at_most_exp, exp_exact, seeded
from scipy import stats

from privreg import (
    EventLog,
    InsecureReproducibleRandom,
    LocalDP,
    PrivregTypeError,
    PrivregValueError,
    Shuffled,
)
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.mechanisms.subset_selection import SubsetSelection, uniform_subsets

# --- the paper's parameters -------------------------------------------------------------


@pytest.mark.parametrize(
    "s, eps, d",
    [  # d = ceil(s / (e^eps + 1)) worked by hand
        (100, 1.0, 27),  # 100 / 3.71828 = 26.89
        (10, 0.5, 4),  # 10 / 2.64872 = 3.775
        (2, 3.0, 1),
        (7, 0.05, 4),  # 7 / 2.05127 = 3.41
        (1_000_001, 10.0, 46),  # eta_max |X| + 1 = 10^4 * 100 + 1; 1000001 / 22027.47 = 45.40
        (10_000, 10.0, 1),
        (5, 800.0, 1),  # e^eps overflows a float
        (3, math.log(2), 1),  # 3 / (2 + 1) = 1 exactly for the intended epsilon
        (12, math.log(3), 3),  # 12 / 4 = 3 exactly for the intended epsilon
        (12, math.log(3) + 1e-6, 3),  # 2.99999 -> 3
        (12, math.log(3) - 1e-6, 4),  # 3.000002 -> 4
    ],
)
def test_subset_size_and_keep_probability_follow_the_paper(s, eps, d):
    ss = SubsetSelection(epsilon=eps, s=s)
    assert ss.subset_size == d
    e = exp_exact(eps)
    p_paper = d * e / (d * e + s - d)  # Algorithm 1, line 2
    p = ss.keep_probability
    assert p.denominator <= 2**53 and p <= p_paper, "rounded down, never up"
    assert p_paper - p < Fraction(1, 2**49), "and by no more than a few 2^-53 steps"
    # the paper's q (proof of Lemma 1): an item other than the user's is reported w.p. (d-p)/(s-1)
    assert ss.other_probability == (d - p) / (s - 1)


@pytest.mark.parametrize(
    "eps, s",
    [
        (1e-12, 2),
        (1e-12, 1000),
        (0.01, 3),
        (0.1, 50),
        (0.5, 10**6),
        (1.0, 100),
        (2.0, 4),
        (4.0, 1000),
        (10.0, 10**4),
        (20.0, 7),
        (30.0, 2),
        (50.0, 10),
        (800.0, 5),
    ],
)
def test_realised_privacy_ratio_is_conservative_and_tight(eps, s):
    ss = SubsetSelection(epsilon=eps, s=s)
    r = ss.privacy_ratio
    d, p = ss.subset_size, ss.keep_probability
    assert r == p * (s - d) / ((1 - p) * d)
    assert r > 1, "the reverse ratio 1/r must not exceed e^eps either"
    assert at_most_exp(r, eps), "realised LDP epsilon must not exceed the claimed one"
    # no budget may be wasted beyond the rounding: one 2^-53 step of p and the 2^-50
    # margin of the certified lower bound on e^eps (a factor 2 of slack on each)
    pf = float(p)
    if pf < 1 - 2**-40:
        assert eps - math.log(r) < 2**-49 + 2 * 2**-53 / (pf * (1 - pf))
    if eps <= 10:
        assert eps - math.log(r) < 1e-12


def test_tiny_epsilon_that_cannot_be_realised_is_refused():
    with pytest.raises(PrivregValueError, match="too small"):
        SubsetSelection(epsilon=1e-17, s=10)


# --- exact output distribution ----------------------------------------------------------


def _algorithm_1_law(s: int, d: int, p: Fraction, z: int) -> dict:
    """Pr[S | z] over all d-subsets, following Algorithm 1 step by step with Fractions:
    keep z w.p. p and add d-1 uniform others; else d uniform others."""
    others = [x for x in range(s) if x != z]
    law = defaultdict(Fraction)
    kept = list(combinations(others, d - 1))
    for c in kept:
        law[tuple(sorted(c + (z,)))] += p / len(kept)
    dropped = list(combinations(others, d))
    for c in dropped:
        law[c] += (1 - p) / len(dropped)
    return dict(law)


CONFIGS = [(5, 0.5), (6, 0.2), (4, 2.0), (7, 0.05), (8, 1.5)]  # d = 2, 3, 1, 4, 2


@pytest.mark.parametrize("s, eps", CONFIGS + [(6, 3.0), (2, 0.7), (9, 1.0), (3, 0.01)])
def test_fmt23_membership_is_the_shuffle_modules_matrix_check(s, eps):
    """SubsetSelection.admits_fmt23_decomposition (closed form) agrees with the project's
    membership test run on the randomizer's exact output law: d = 1 in, d >= 2 out."""
    from privreg.accountant.shuffle import admits_fmt23_decomposition

    ss = SubsetSelection(epsilon=eps, s=s)
    d = ss.subset_size
    laws = [_algorithm_1_law(s, d, ss.keep_probability, z) for z in range(s)]
    subsets = list(combinations(range(s), d))
    matrix = np.array([[float(law[S]) for S in subsets] for law in laws])
    assert ss.admits_fmt23_decomposition == admits_fmt23_decomposition(matrix, epsilon0=eps)
    assert ss.admits_fmt23_decomposition == (d == 1)


@pytest.mark.parametrize("s, eps", CONFIGS)
def test_exact_output_distribution_is_eps_ldp_and_tight(s, eps):
    ss = SubsetSelection(epsilon=eps, s=s)
    d, p = ss.subset_size, ss.keep_probability
    laws = [_algorithm_1_law(s, d, p, z) for z in range(s)]
    subsets = list(combinations(range(s), d))
    for law in laws:
        assert sum(law.values()) == 1 and set(law) == set(subsets)
    worst = max(a[S] / b[S] for a in laws for b in laws for S in subsets)
    assert worst == ss.privacy_ratio
    assert at_most_exp(worst, eps)
    assert eps - math.log(worst) < 1e-12


@pytest.mark.parametrize("s, eps", CONFIGS)
def test_reported_subsets_follow_the_exact_distribution(s, eps):
    """Chi-square goodness of fit of 60,000 reports of one input (z = 1) against the exact
    law of Algorithm 1; rejected at p < 1e-4 (false-alarm rate 1e-4 per configuration).
    (7, 0.05) draws 4 of the 6 other items, so most first draws collide and the redraw
    path of uniform_subsets is exercised heavily. The same statistic must reject the law
    with p lowered by 0.03, so the test has power."""
    ss = SubsetSelection(epsilon=eps, s=s)
    d, p, n = ss.subset_size, ss.keep_probability, 60_000
    reports = ss.randomize(np.ones(n, dtype=np.int64), charger=EventLog(), rng=seeded(s)).reports
    subsets = list(combinations(range(s), d))
    index = {S: i for i, S in enumerate(subsets)}
    observed = np.bincount([index[tuple(r)] for r in reports.tolist()], minlength=len(subsets))

    def expected(keep):
        law = _algorithm_1_law(s, d, keep, 1)
        return np.array([float(law[S]) for S in subsets]) * n

    assert stats.chisquare(observed, expected(p)).pvalue > 1e-4
    assert stats.chisquare(observed, expected(p - Fraction(3, 100))).pvalue < 1e-4


def test_pairwise_inclusion_matches_the_exact_law_for_a_large_subset():
    """s = 50, eps = 0.1, so d = 24 of 49 other items (collision-heavy). For a fixed input
    z, every item and every pair of items is in the report with the probability Algorithm 1
    gives; each of the 50 + 1225 counts is a Binomial(n, pi) and must lie within 5.5
    standard deviations (two-sided 3.8e-8 each; family-wise false-alarm rate < 5e-5)."""
    s, eps, z, n = 50, 0.1, 7, 40_000
    ss = SubsetSelection(epsilon=eps, s=s)
    d, p = ss.subset_size, float(ss.keep_probability)
    assert d == 24
    reports = ss.randomize(np.full(n, z), charger=EventLog(), rng=seeded(50)).reports
    member = np.zeros((n, s), dtype=np.int64)
    np.put_along_axis(member, reports, 1, axis=1)
    pairs = member.T @ member  # diagonal: single-item counts
    C = math.comb
    single = np.full(s, (d - p) / (s - 1))
    single[z] = p
    both_other = p * C(s - 3, d - 3) / C(s - 1, d - 1) + (1 - p) * C(s - 3, d - 2) / C(s - 1, d)
    pi = np.full((s, s), both_other)
    pi[z, :] = pi[:, z] = p * (d - 1) / (s - 1)
    np.fill_diagonal(pi, single)
    iu = np.triu_indices(s)
    zscores = (pairs[iu] - n * pi[iu]) / np.sqrt(n * pi[iu] * (1 - pi[iu]))
    assert np.abs(zscores).max() < 5.5, np.abs(zscores).max()


def test_uniform_subsets_is_uniform_even_when_nearly_every_draw_collides():
    """Rows are uniform 3-subsets of 6 items (first draws collide with probability 4/9):
    chi-square over the 20 subsets, rejected at p < 1e-4; and d = m gives the full set."""
    rows = np.sort(uniform_subsets(60_000, 3, 6, seeded(4)), axis=1)
    assert (np.diff(rows, axis=1) > 0).all()
    subsets = {S: i for i, S in enumerate(combinations(range(6), 3))}
    counts = np.bincount([subsets[tuple(r)] for r in rows.tolist()], minlength=20)
    assert stats.chisquare(counts).pvalue > 1e-4
    full = np.sort(uniform_subsets(100, 4, 4, seeded(5)), axis=1)
    assert (full == np.arange(4)).all()
    with pytest.raises(PrivregValueError, match="distinct"):
        uniform_subsets(1, 5, 4, seeded(5))


# --- reports ----------------------------------------------------------------------------


@pytest.mark.parametrize("s, eps", [(2, 1.0), (50, 0.1), (1000, 3.0), (10_000, 10.0)])
def test_reports_are_sorted_sets_of_d_items_in_the_domain(s, eps):
    ss = SubsetSelection(epsilon=eps, s=s)
    x = np.arange(5000) % s
    out = ss.randomize(x, charger=EventLog(), rng=seeded(9))
    r = out.reports
    assert r.shape == (5000, ss.subset_size) and r.dtype == np.int64
    assert r.min() >= 0 and r.max() < s
    assert (np.diff(r, axis=1) > 0).all(), "rows are strictly increasing: distinct, canonical order"
    assert np.array_equal(ss.validate_reports(r), r)
    empty = ss.randomize(np.array([], dtype=np.int64), charger=EventLog(), rng=seeded(9)).reports
    assert empty.shape == (0, ss.subset_size)


def test_charges_local_dp_and_shuffles():
    ss = SubsetSelection(epsilon=2.0, s=30)
    log = EventLog()
    x = np.arange(300) % 30
    a = ss.randomize(x, charger=log, rng=seeded(1))
    b = ss.randomize(x, charger=log, rng=seeded(1))
    assert np.array_equal(a.reports, b.reports), "a seed replays the same reports"
    sh = ss.randomize(x, charger=log, rng=seeded(1), shuffle=True)
    assert [c.event for c in log.charges] == [LocalDP(epsilon0=2.0, randomizer="subset-selection")] * 2 + [
        Shuffled(event=LocalDP(epsilon0=2.0, randomizer="subset-selection"), num_reports=300)
    ]
    assert log.charges[0].parameters["s"] == 30 and log.charges[0].parameters["epsilon"] == 2.0
    assert sh.shuffled and sh.reports.shape == a.reports.shape


# --- estimator --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "s, eps, n, z_max",
    [(20, 1.0, 300_000, 5.0), (1000, 4.0, 200_000, 5.5), (3, 0.3, 200_000, 5.0), (10_000, 10.0, 500_000, 6.0)],
)
def test_estimator_is_unbiased(s, eps, n, z_max):
    """Each estimate is compared with the truth in units of its exact standard deviation
    (ss.variance at the truth). The estimates are sums of many independent reports, so
    nearly normal; the per-item two-sided tail is 5.7e-7 (|z| > 5), 3.8e-8 (5.5) or 2e-9
    (6), so the family-wise false-alarm rate is below 4e-5 for every configuration.
    The estimates also sum to n exactly (sum of c_j is n d), and the plug-in variance is
    positive."""
    ss = SubsetSelection(epsilon=eps, s=s)
    weights = 1.0 / np.arange(1, s + 1)  # Zipf-like truth
    truth = np.floor(n * weights / weights.sum()).astype(np.int64)
    truth[0] += n - truth.sum()
    x = np.repeat(np.arange(s), truth)
    out = ss.randomize(x, charger=EventLog(), rng=seeded(s))
    est = ss.estimate(out.reports)
    z = (est.counts - truth) / np.sqrt(ss.variance(truth))
    assert np.abs(z).max() < z_max, np.abs(z).max()
    assert est.counts.sum() == pytest.approx(n, rel=1e-9)
    assert est.counts.shape == est.variance.shape == (s,) and (est.variance > 0).all()


def test_variance_formula_matches_the_empirical_variance():
    """2,000 independent blocks of 1,000 users (s = 8, eps = 1, d = 3). For each item j,
    T_j = sum over blocks of (estimate - truth)^2 / Var_j is chi-square with 2,000 degrees
    of freedom when Var_j is right (estimates are unbiased and nearly normal). Two-sided
    test at 1.25e-4 per item, family-wise 1e-3. A variance 20% too large must be rejected
    for every item (T/2000 would be about 0.83, 5 standard deviations low)."""
    s, blocks, m = 8, 2000, 1000
    ss = SubsetSelection(epsilon=1.0, s=s)
    truth = np.array([300, 200, 150, 100, 100, 50, 50, 50])
    x = np.tile(np.repeat(np.arange(s), truth), blocks)
    reports = ss.randomize(x, charger=EventLog(), rng=seeded(77)).reports.reshape(blocks, m, -1)
    errors = np.array([ss.estimate(r).counts for r in reports]) - truth
    var = ss.variance(truth)
    chi2 = stats.chi2(blocks)

    def pvalues(v):
        t = (errors**2 / v).sum(axis=0)
        return 2 * np.minimum(chi2.cdf(t), chi2.sf(t))

    assert pvalues(var).min() > 1e-3 / s, pvalues(var)
    assert pvalues(1.2 * var).max() < 1e-3 / s


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), float("-inf"), -1.0, 0.0, True, "1", None])
def test_rejects_bad_epsilon(eps):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="epsilon"):
        SubsetSelection(epsilon=eps, s=10)


@pytest.mark.parametrize("s", [1, 0, -5, 2.0, True, "10", None, 2**62 + 1])
def test_rejects_bad_domain_size(s):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="s must"):
        SubsetSelection(epsilon=1.0, s=s)


@pytest.mark.parametrize(
    "inputs, error, words",
    [
        (np.array([0, 4, 5]), PrivregValueError, r"outside the declared domain \[0, 5\)"),
        (np.array([-1]), PrivregValueError, r"outside the declared domain \[0, 5\)"),
        (np.array([0.5]), PrivregTypeError, "integer"),
        (np.array([1.0, float("nan")]), PrivregTypeError, "integer"),
        (np.array([True, False]), PrivregTypeError, "integer"),
        (np.array(["a"]), PrivregTypeError, "integer"),
        (np.array([[0, 1]]), PrivregValueError, "1-d"),
        (3, PrivregValueError, "1-d"),
    ],
)
def test_refuses_inputs_outside_the_domain_and_charges_nothing(inputs, error, words):
    log = EventLog()
    with pytest.raises(error, match=words):
        SubsetSelection(epsilon=1.0, s=5).randomize(inputs, charger=log, rng=seeded(1))
    assert log.charges == ()


@pytest.mark.parametrize(
    "reports, error, words",
    [
        (np.array([[0, 1, 2]]), PrivregValueError, r"shape \(n, 2\)"),
        (np.array([0, 1]), PrivregValueError, r"shape \(n, 2\)"),
        (np.array([[0, 1], [3, 3]]), PrivregValueError, r"reports\[1\] repeats"),
        (np.array([[0, 5]]), PrivregValueError, r"reports\[0, 1\] = 5 is outside"),
        (np.array([[0.0, 1.0]]), PrivregTypeError, "integer"),
    ],
)
def test_estimate_refuses_malformed_reports(reports, error, words):
    ss = SubsetSelection(epsilon=0.5, s=5)
    assert ss.subset_size == 2
    with pytest.raises(error, match=words):
        ss.estimate(reports)


def test_a_million_users_over_ten_thousand_items():
    """The vectorised path at the scale of paper 001 (no timing assertion)."""
    ss = SubsetSelection(epsilon=10.0, s=10_000)
    x = np.arange(1_000_000) % 10_000
    out = ss.randomize(x, charger=EventLog(), rng=seeded(2024))
    assert out.reports.shape == (1_000_000, 1)
    assert out.reports.min() >= 0 and out.reports.max() < 10_000
    kept = float(np.mean(out.reports[:, 0] == x))
    p = float(ss.keep_probability)
    assert abs(kept - p) < 5 * math.sqrt(p * (1 - p) / 1e6)  # false alarm 5.7e-7
    assert ss.estimate(out.reports).counts.sum() == pytest.approx(1e6, rel=1e-9)


# --- defects found in existing code (reported, not fixed here) --------------------------


def test_insecure_reproducible_random_serves_large_byte_requests():
    assert len(InsecureReproducibleRandom(seed=0).random_bytes(1 << 28)) == 1 << 28


@pytest.mark.parametrize("eps", [1e-17, 1e-15, 1e-13])
def test_randomized_response_tiny_epsilon_is_refused_or_safe(eps):
    """Subset Selection with d = 1 is k-RR: both must refuse an epsilon they cannot round
    safely, or keep both ratios within e^eps."""
    try:
        rr = RandomizedResponse(epsilon=eps, k=2)
    except PrivregValueError as exc:
        assert "too small" in str(exc)  # noqa: PT017 -- refusing is allowed, not required
        return
    p = rr.keep_probability
    q = (1 - p) / (rr.k - 1)
    assert at_most_exp(p / q, eps) and at_most_exp(q / p, eps)
