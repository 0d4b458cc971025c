"""Optimized Unary Encoding (Wang, Blocki, Li, Jha, USENIX Security 2017).

Every statistical test is seeded with InsecureReproducibleRandom, so its outcome is
deterministic; each states the false-alarm rate it would have with a fresh seed, and the
tests that could pass vacuously also check that they reject a wrong distribution.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from ldp_helpers import at_most_exp, exp_exact, seeded
from scipy import stats

from privreg import (
    EventLog,
    LocalDP,
    PrivregTypeError,
    PrivregValueError,
    RandomSource,
)
from privreg.mechanisms.unary_encoding import OptimizedUnaryEncoding, bernoulli_dyadic

# --- parameters and exact privacy -------------------------------------------------------


@pytest.mark.parametrize("eps", [1e-14, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 40.0, 800.0])
def test_probabilities_are_the_papers_rounded_conservatively(eps):
    oue = OptimizedUnaryEncoding(epsilon=eps, k=4)
    p, q = oue.keep_probability, oue.other_probability
    assert p == Fraction(1, 2)
    q_paper = 1 / (exp_exact(eps) + 1)
    assert q.denominator <= 2**53 and q >= q_paper, "q is rounded up, never down"
    assert q - q_paper <= Fraction(1, 2**51), "by at most one 2^-53 step plus the margin on e^eps"
    r = oue.privacy_ratio
    assert r == p * (1 - q) / ((1 - p) * q)
    assert r > 1 and at_most_exp(r, eps), "realised LDP epsilon must not exceed the claimed one"
    qf = float(q)
    if qf > 2**-40:  # budget lost only to rounding: one 2^-53 step of q and the 2^-50 margin
        assert eps - math.log(r) < 2**-49 + 2 * 2**-53 / (qf * (1 - qf))
    if eps <= 5:
        assert eps - math.log(r) < 1e-12


def test_tiny_epsilon_that_cannot_be_realised_is_refused():
    with pytest.raises(PrivregValueError, match="too small"):
        OptimizedUnaryEncoding(epsilon=1e-16, k=3)


def _exact_law(k: int, x: int, p: Fraction, q: Fraction) -> dict:
    """Pr[B | x] for every bit vector B: independent bits, bit x is 1 w.p. p, others q."""
    law = {}
    for bits in itertools.product((0, 1), repeat=k):
        prob = Fraction(1)
        for j, b in enumerate(bits):
            one = p if j == x else q
            prob *= one if b else 1 - one
        law[bits] = prob
    return law


@pytest.mark.parametrize("k, eps", [(2, 0.5), (3, 1.0), (4, 2.0), (5, 0.1)])
def test_exact_output_distribution_is_eps_ldp_and_tight(k, eps):
    oue = OptimizedUnaryEncoding(epsilon=eps, k=k)
    laws = [_exact_law(k, x, oue.keep_probability, oue.other_probability) for x in range(k)]
    assert all(sum(law.values()) == 1 for law in laws)
    worst = max(a[B] / b[B] for a in laws for b in laws for B in a)
    assert worst == oue.privacy_ratio
    assert at_most_exp(worst, eps) and eps - math.log(worst) < 1e-12


@pytest.mark.parametrize("k, eps, x", [(3, 1.0, 0), (4, 2.0, 2), (5, 0.1, 4)])
def test_reports_follow_the_exact_distribution(k, eps, x):
    """Chi-square goodness of fit of 100,000 reports of input x over the 2^k bit vectors;
    rejected at p < 1e-4 (false-alarm rate 1e-4 per configuration). The statistic must
    also reject the law with q raised by 0.01 (power check)."""
    oue = OptimizedUnaryEncoding(epsilon=eps, k=k)
    n = 100_000
    reports = oue.randomize(np.full(n, x), charger=EventLog(), rng=seeded(k)).reports
    codes = reports.astype(np.int64) @ (1 << np.arange(k))
    observed = np.bincount(codes, minlength=2**k)

    def expected(q):
        law = _exact_law(k, x, oue.keep_probability, q)
        return np.array([float(law[tuple((c >> j) & 1 for j in range(k))]) for c in range(2**k)]) * n

    assert stats.chisquare(observed, expected(oue.other_probability)).pvalue > 1e-4
    assert stats.chisquare(observed, expected(oue.other_probability + Fraction(1, 100))).pvalue < 1e-4


class _ScriptedBytes(RandomSource):
    """Serves a fixed byte string (to check the lazy comparison deterministically)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def randbits(self, k):
        raise AssertionError("not used")

    def random_bytes(self, n):
        out, self.data = self.data[:n], self.data[n:]
        assert len(out) == n, "sampler asked for more bytes than scripted"
        return out


def test_bernoulli_dyadic_compares_byte_by_byte_and_ties_are_false():
    # threshold 0x1234 / 2^16: U < 0x1234 exactly
    first = bytes([0x11, 0x13, 0x12, 0x12, 0x12])  # <, >, tie, tie, tie
    second = bytes([0xFF, 0x33, 0x34])  # resolves the ties: 0x12FF > , 0x1233 <, 0x1234 ==
    out = bernoulli_dyadic(0x1234, 16, 5, _ScriptedBytes(first + second))
    assert out.tolist() == [True, False, False, True, False]
    # 53-bit threshold padded to 7 bytes; all-zero bytes are below any positive threshold
    assert bernoulli_dyadic(1, 53, 3, _ScriptedBytes(bytes(3) + bytes(3) * 6)).tolist() == [True] * 3
    assert bernoulli_dyadic(0, 53, 4, _ScriptedBytes(bytes(4) * 7)).tolist() == [False] * 4
    assert bernoulli_dyadic(2**53, 53, 4, _ScriptedBytes(b"")).tolist() == [True] * 4
    with pytest.raises(PrivregValueError):
        bernoulli_dyadic(2**53 + 1, 53, 1, _ScriptedBytes(b""))


def test_bernoulli_dyadic_frequency():
    """2e6 draws at probability 12345/2^16; |z| < 5 (false-alarm rate 5.7e-7)."""
    n, prob = 2_000_000, 12345 / 2**16
    hits = bernoulli_dyadic(12345, 16, n, seeded(3)).sum()
    assert abs(hits - n * prob) < 5 * math.sqrt(n * prob * (1 - prob))


# --- reports, charging ------------------------------------------------------------------


def test_reports_are_boolean_rows_of_length_k():
    oue = OptimizedUnaryEncoding(epsilon=1.0, k=7)
    log = EventLog()
    out = oue.randomize(np.arange(700) % 7, charger=log, rng=seeded(1))
    assert out.reports.shape == (700, 7) and out.reports.dtype == bool
    assert [c.event for c in log.charges] == [LocalDP(epsilon0=1.0, randomizer="optimized-unary-encoding")]
    again = oue.randomize(np.arange(700) % 7, charger=log, rng=seeded(1)).reports
    assert np.array_equal(out.reports, again), "a seed replays the same reports"
    assert oue.randomize(np.array([], dtype=int), charger=log, rng=seeded(1)).reports.shape == (0, 7)
    assert np.array_equal(oue.validate_reports(out.reports.astype(np.uint8)), out.reports)


# --- estimator --------------------------------------------------------------------------


@pytest.mark.parametrize("k, eps, n", [(50, 1.0, 200_000), (2, 0.2, 200_000), (1000, 5.0, 20_000)])
def test_estimator_is_unbiased(k, eps, n):
    """Each estimate is compared with the truth in units of its exact standard deviation;
    |z| < 5.5 per item (two-sided 3.8e-8), family-wise false-alarm rate < 4e-5."""
    oue = OptimizedUnaryEncoding(epsilon=eps, k=k)
    weights = 1.0 / np.arange(1, k + 1)
    truth = np.floor(n * weights / weights.sum()).astype(np.int64)
    truth[0] += n - truth.sum()
    x = np.repeat(np.arange(k), truth)
    est = oue.estimate(oue.randomize(x, charger=EventLog(), rng=seeded(k)).reports)
    z = (est.counts - truth) / np.sqrt(oue.variance(truth))
    assert np.abs(z).max() < 5.5, np.abs(z).max()
    assert est.counts.shape == est.variance.shape == (k,) and (est.variance > 0).all()


def test_variance_formula_matches_the_empirical_variance():
    """2,000 independent blocks of 1,000 users (k = 8, eps = 1). For each item j,
    T_j = sum over blocks of (estimate - truth)^2 / Var_j is chi-square with 2,000 degrees
    of freedom when Var_j is right. Two-sided test at 1.25e-4 per item, family-wise 1e-3.
    A variance 20% too large must be rejected for every item."""
    k, blocks, m = 8, 2000, 1000
    oue = OptimizedUnaryEncoding(epsilon=1.0, k=k)
    truth = np.array([300, 200, 150, 100, 100, 50, 50, 50])
    x = np.tile(np.repeat(np.arange(k), truth), blocks)
    reports = oue.randomize(x, charger=EventLog(), rng=seeded(78)).reports.reshape(blocks, m, k)
    errors = np.array([oue.estimate(r).counts for r in reports]) - truth
    var = oue.variance(truth)
    chi2 = stats.chi2(blocks)

    def pvalues(v):
        t = (errors**2 / v).sum(axis=0)
        return 2 * np.minimum(chi2.cdf(t), chi2.sf(t))

    assert pvalues(var).min() > 1e-3 / k, pvalues(var)
    assert pvalues(1.2 * var).max() < 1e-3 / k


def test_variance_reduces_to_the_papers_closed_form():
    """With no user holding item j, Var = n q (1-q) / (p-q)^2 = n 4 e^eps / (e^eps - 1)^2."""
    eps, n = 1.3, 10_000
    oue = OptimizedUnaryEncoding(epsilon=eps, k=3)
    var = oue.variance(np.array([n, 0, 0]))
    e = math.exp(eps)
    assert var[1] == pytest.approx(n * 4 * e / (e - 1) ** 2, rel=1e-12)


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), -0.5, 0.0, True, "1", None])
def test_rejects_bad_epsilon(eps):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="epsilon"):
        OptimizedUnaryEncoding(epsilon=eps, k=4)


@pytest.mark.parametrize("k", [1, 0, -2, 4.0, False, "4", None])
def test_rejects_bad_domain_size(k):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="k must"):
        OptimizedUnaryEncoding(epsilon=1.0, k=k)


@pytest.mark.parametrize(
    "inputs, error, words",
    [
        (np.array([0, 3, 4]), PrivregValueError, r"outside the declared domain \[0, 4\)"),
        (np.array([-2]), PrivregValueError, r"outside the declared domain \[0, 4\)"),
        (np.array([1.5]), PrivregTypeError, "integer"),
        (np.array([float("inf")]), PrivregTypeError, "integer"),
        (np.array([True]), PrivregTypeError, "integer"),
        (np.array([[0], [1]]), PrivregValueError, "1-d"),
    ],
)
def test_refuses_inputs_outside_the_domain_and_charges_nothing(inputs, error, words):
    log = EventLog()
    with pytest.raises(error, match=words):
        OptimizedUnaryEncoding(epsilon=1.0, k=4).randomize(inputs, charger=log, rng=seeded(1))
    assert log.charges == ()


@pytest.mark.parametrize(
    "reports, error, words",
    [
        (np.zeros((2, 3), dtype=bool), PrivregValueError, r"shape \(n, 4\)"),
        (np.zeros(4, dtype=bool), PrivregValueError, r"shape \(n, 4\)"),
        (np.array([[0, 1, 2, 0]]), PrivregValueError, r"reports\[0, 2\] = 2 is not a bit"),
        (np.array([[0.0, 1.0, 0.0, 0.0]]), PrivregTypeError, "bits"),
    ],
)
def test_estimate_refuses_malformed_reports(reports, error, words):
    with pytest.raises(error, match=words):
        OptimizedUnaryEncoding(epsilon=1.0, k=4).estimate(reports)


def test_a_million_users():
    """The vectorised path at scale (1e6 users x 32 bits; no timing assertion)."""
    oue = OptimizedUnaryEncoding(epsilon=2.0, k=32)
    x = np.arange(1_000_000) % 32
    reports = oue.randomize(x, charger=EventLog(), rng=seeded(2017)).reports
    assert reports.shape == (1_000_000, 32)
    own = float(reports[np.arange(1_000_000), x].mean())
    assert abs(own - 0.5) < 5 * math.sqrt(0.25 / 1e6)  # the user's bit is a fair coin; 5.7e-7
