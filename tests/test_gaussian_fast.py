"""The fast exact discrete Gaussian sampler (privreg.noise.gaussian.discrete_gaussian_many)
and the exact-comparison machinery it rests on (privreg.noise.coins: exp_neg_bounds,
LazyUniform, exp_neg_approx).

Two kinds of checks:

* *Deterministic proofs-by-checking* of each step the exactness argument uses: the float
  filter's error bounds against exact rational / 100-digit mpmath arithmetic, on random and
  adversarial inputs; every decision the filter takes against the exact answer; the
  geometric table cell by cell; LazyUniform on scripted bits. These cannot false-alarm.
* *Statistical tests* against the exact pmf, computed with mpmath at 50 digits. All draw
  from ``InsecureReproducibleRandom`` with a fixed seed, so each outcome is deterministic;
  for a correct sampler and a fresh seed each would raise a false alarm with probability at
  most ALPHA = 1e-4 (we reject only when a p-value is below ALPHA). Negative controls show
  the same checks reject a slightly wrong law, so they can fail.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.noise import coins, trials
from privreg.noise import gaussian as g
from privreg.noise.gaussian import discrete_gaussian_many

ALPHA = 1e-4
U = 2.0**-53
mpmath.mp.dps = 50


def _rng(seed: int) -> InsecureReproducibleRandom:
    return InsecureReproducibleRandom(seed=seed)


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


# --- the exact pmf and a chi-square goodness-of-fit test ------------------------------------


def _pmf(sigma2: Fraction, lo: int, hi: int) -> np.ndarray:
    """P(Z = z) for z in [lo, hi], in 50-digit arithmetic. The normaliser is a direct sum
    for small sigma2, else Poisson summation: sum_y exp(-y^2/2s) = sqrt(2 pi s) *
    sum_k exp(-2 pi^2 s k^2), both exact identities truncated far below 1e-50."""
    s = _mp(sigma2)
    if sigma2 < 4:
        norm = 1 + 2 * mpmath.nsum(lambda y: mpmath.exp(-y * y / (2 * s)), [1, mpmath.inf])
    else:
        norm = mpmath.sqrt(2 * mpmath.pi * s) * (
            1 + 2 * mpmath.nsum(lambda k: mpmath.exp(-2 * mpmath.pi**2 * s * k * k), [1, mpmath.inf])
        )
    # exp(-z^2/2s) for z = 0, 1, ...: multiply by exp(-(2z+1)/2s) = a b^z, a = exp(-1/2s),
    # b = exp(-1/s); relative rounding error ~ 10**-50 per step, negligible over 10**5 steps
    top = max(abs(lo), abs(hi))
    a, b = mpmath.exp(-1 / (2 * s)), mpmath.exp(-1 / s)
    half, p, step = [], mpmath.mpf(1) / norm, a
    for _ in range(top + 1):
        half.append(float(p))
        p, step = p * step, step * b
    return np.array([half[abs(z)] for z in range(lo, hi + 1)])


def _chi2_pvalue(samples: np.ndarray, sigma2: Fraction, bins: int = 150) -> float:
    """Chi-square goodness of fit of integer samples against the exact discrete Gaussian:
    the integers in [-edge, edge] (each end expecting >= 5 counts) grouped into about
    ``bins`` equal-width bins, both tails pooled into the outermost bins."""
    n = samples.size
    sd = math.sqrt(float(sigma2))
    edge = int(6 * sd) + 2
    pmf = _pmf(sigma2, -edge, edge)
    while edge > 0 and n * pmf[-1] < 5:  # shrink to where the end bins expect >= 5
        pmf, edge = pmf[1:-1], edge - 1
    width = max(1, (2 * edge + 1) // bins)
    starts = np.arange(-edge, edge + 1, width)
    expected = np.add.reduceat(pmf, starts + edge) * n
    tail = (n - expected.sum()) / 2
    expected[0] += tail
    expected[-1] += tail
    observed = np.bincount(
        np.searchsorted(starts, np.clip(samples, -edge, edge), side="right") - 1, minlength=starts.size
    )
    assert observed.sum() == n and np.all(expected >= 5 * 0.999)
    return float(stats.chisquare(observed, expected).pvalue)


def _default_sigma2() -> Fraction:
    return GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0).noise_sigma2


SIGMA2S = [
    Fraction(1, 10),  # t = 1: no uniform part, one nonzero in 150 draws
    Fraction(1, 2),
    Fraction(1),
    Fraction(9, 4),  # non-integer rational
    Fraction(50, 3),
    Fraction(10**4) + Fraction(1, 7),
    _default_sigma2(),  # ~3820.4^2: what GaussianMechanism(1, 1e-5, 1) draws, denominator 2**38
]


@pytest.mark.parametrize("sigma2", SIGMA2S, ids=lambda s: f"{float(s):.6g}")
def test_draws_follow_the_exact_pmf(sigma2):
    z = discrete_gaussian_many(sigma2, 500_000, _rng(11))
    assert z.dtype == np.int64 and z.shape == (500_000,)
    assert _chi2_pvalue(z, sigma2) > ALPHA


def test_large_sigma_follows_the_exact_pmf():
    sigma2 = Fraction(10**6, 3)  # sigma ~ 577, 3500 integers pooled into bins
    z = discrete_gaussian_many(sigma2, 300_000, _rng(12))
    assert _chi2_pvalue(z, sigma2) > ALPHA


@pytest.mark.parametrize(
    "sigma2, wrong",
    [
        (Fraction(9, 4), Fraction(9, 4) * Fraction(105, 100)),
        (_default_sigma2(), _default_sigma2() * Fraction(105, 100)),
    ],
)
def test_the_chi_square_check_has_power(sigma2, wrong):
    """Negative control: draws with a 5% larger sigma2 are rejected by the same check."""
    z = discrete_gaussian_many(wrong, 200_000, _rng(13))
    assert _chi2_pvalue(z, sigma2) < ALPHA


def test_consecutive_draws_are_uncorrelated_and_symmetric():
    """Lag-1 correlation within 4.5 standard errors of 0 (two-sided p < 1e-5) and a
    binomial sign test, on the default mechanism's sigma2."""
    n = 300_000
    z = discrete_gaussian_many(_default_sigma2(), n, _rng(14)).astype(float)
    r = np.corrcoef(z[:-1], z[1:])[0, 1]
    assert abs(r) < 4.5 / math.sqrt(n)
    pos, neg = int((z > 0).sum()), int((z < 0).sum())
    assert stats.binomtest(pos, pos + neg, 0.5).pvalue > ALPHA


@pytest.mark.parametrize(
    "sigma2",
    [
        Fraction(10**12) + Fraction(1, 3),  # 32-bit uniform words
        Fraction((2**35 + 12345) ** 2, 7),  # 64-bit uniform words
        Fraction((2**40 - 1) ** 2),
    ],  # t = 2**40, the limit
    ids=["sigma=1e6", "sigma=2^35/sqrt7", "sigma=2^40-1"],
)
def test_huge_sigma_moments_and_residues(sigma2):
    """At huge sigma the pmf is the rounded normal to within exp(-2 pi^2 sigma^2), so we
    check the variance and mean (4.5 standard errors, p < 1e-5), a KS test against the
    normal, and that z mod 3 is uniform (chi-square) -- the low digits come from the
    uniform part U, so a wrong mask or word width would show there."""
    n = 100_000
    z = discrete_gaussian_many(sigma2, n, _rng(15))
    s = math.sqrt(float(sigma2))
    zf = z.astype(float)
    assert abs(zf.var() / float(sigma2) - 1) < 4.5 * math.sqrt(2 / n)
    assert abs(zf.mean()) < 4.5 * s / math.sqrt(n)
    assert stats.kstest(zf / s, "norm").pvalue > ALPHA
    assert stats.chisquare(np.bincount(z % 3, minlength=3)).pvalue > ALPHA


# --- the exact finishing paths, forced -----------------------------------------------------


def test_exact_finishing_alone_gives_the_exact_law(monkeypatch):
    """With the float band widened so that no coin is decided by the filter and every
    geometric word treated as a tie, every trial is finished by LazyUniform: the law must
    still be exact (this checks the rare paths at full rate)."""
    monkeypatch.setattr(trials, "BAND", 1e9)
    monkeypatch.setattr(trials, "GEOMETRIC_TIE", np.ones_like(trials.GEOMETRIC_TIE))
    sigma2 = Fraction(9, 4)
    z = discrete_gaussian_many(sigma2, 30_000, _rng(16))
    assert _chi2_pvalue(z, sigma2, bins=15) > ALPHA


# --- determinism and edge cases -------------------------------------------------------------


def test_fixed_seed_gives_the_same_draws_and_seeds_differ():
    sigma2 = Fraction(9, 4)
    a = discrete_gaussian_many(sigma2, 50_000, _rng(1))
    b = discrete_gaussian_many(sigma2, 50_000, _rng(1))
    c = discrete_gaussian_many(sigma2, 50_000, _rng(2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_size_zero_and_one():
    rng = _rng(3)
    empty = discrete_gaussian_many(Fraction(2), 0, rng)
    assert empty.dtype == np.int64 and empty.shape == (0,)
    one = discrete_gaussian_many(Fraction(2), 1, rng)
    assert one.dtype == np.int64 and one.shape == (1,)
    assert discrete_gaussian_many(Fraction(2), np.int32(5), rng).shape == (5,)


@pytest.mark.parametrize("sigma2", [Fraction(1, 100), Fraction(1, 10**4), Fraction(1, 2**59), Fraction(1, 2**70)])
def test_tiny_sigma_is_zero(sigma2):
    """P(Z != 0) = 2 exp(-1 / (2 sigma2)) / norm <= 2e-22 here: every draw is 0. (2**-70
    is below the float filter's range and takes the scalar exact sampler.)"""
    z = discrete_gaussian_many(sigma2, 20_000 if sigma2 > Fraction(1, 2**60) else 200, _rng(4))
    assert z.dtype == np.int64 and not z.any()


def test_sigma_limit_is_enforced():
    ok = Fraction((2**40 - 1) ** 2)  # floor(sigma) + 1 = 2**40, the largest allowed t
    assert discrete_gaussian_many(ok, 10, _rng(5)).shape == (10,)
    with pytest.raises(PrivregValueError, match=r"2\*\*40.*discrete_gaussian"):
        discrete_gaussian_many(Fraction(2**80), 10, _rng(5))


@pytest.mark.parametrize(
    "bad, err",
    [
        ("2", PrivregTypeError),
        (None, PrivregTypeError),
        (True, PrivregTypeError),
        ([2], PrivregTypeError),
        (0, PrivregValueError),
        (-1, PrivregValueError),
        (Fraction(-9, 4), PrivregValueError),
        (float("nan"), PrivregValueError),
        (float("inf"), PrivregValueError),
    ],
)
def test_bad_sigma2_names_the_argument(bad, err):
    with pytest.raises(err, match="sigma2"):
        discrete_gaussian_many(bad, 3, _rng(0))


@pytest.mark.parametrize(
    "size, err", [(-1, PrivregValueError), (2.0, PrivregTypeError), (True, PrivregTypeError), ("3", PrivregTypeError)]
)
def test_bad_size_names_the_argument(size, err):
    with pytest.raises(err, match="size"):
        discrete_gaussian_many(Fraction(2), size, _rng(0))


def test_rng_must_be_a_privreg_random_source():
    with pytest.raises(PrivregTypeError, match="rng"):
        discrete_gaussian_many(Fraction(2), 3, np.random.default_rng(0))
    with pytest.raises(PrivregTypeError, match="rng"):
        g.discrete_gaussian(Fraction(2), np.random.default_rng(0))
    assert discrete_gaussian_many(Fraction(2), 3, None).shape == (3,)  # None: the OS CSPRNG


def test_float_sigma2_is_taken_exactly():
    a = discrete_gaussian_many(2.25, 1000, _rng(6))
    b = discrete_gaussian_many(Fraction(9, 4), 1000, _rng(6))
    assert np.array_equal(a, b)


# --- the exactness argument, step by step ---------------------------------------------------


def test_exp_neg_bounds_bracket_exp_and_shrink():
    rng = np.random.default_rng(0)  # picks test inputs only
    lams = [
        Fraction(0),
        Fraction(1),
        Fraction(64),
        Fraction(1, 3),
        Fraction(2**70 + 1, 2**10),
        Fraction(10**30 + 7, 10**29),
    ]
    lams += [Fraction(int(a), int(b)) for a, b in zip(rng.integers(0, 10**9, 60), rng.integers(1, 10**8, 60))]
    with mpmath.workdps(100):  # ~330 bits, beyond the largest prec checked
        for lam in lams:
            exact = mpmath.exp(-_mp(lam))
            for prec in (16, 48, 112, 200):
                lo, hi = coins.exp_neg_bounds(lam, prec)
                assert lo <= exact * 2**prec <= hi <= 2**prec
            assert hi - lo <= 8 + 4 * (lam.numerator // lam.denominator).bit_length()


def _exact_exp_neg_float(x: float) -> mpmath.mpf:
    return mpmath.exp(-_mp(Fraction(x)))


def test_exp_neg_approx_is_within_its_proven_bound():
    """Every float, including ones just around integers (where m = floor(x) switches) and
    around 64 (where the table ends): |exp_neg_approx(x) - exp(-x)| <= 2**-32."""
    rng = np.random.default_rng(1)
    xs = [rng.uniform(0, 70, 3000), rng.uniform(0, 1, 1000), np.array([0.0, 5e-324, 1e-300, 64.0, 1e300])]
    ints = np.arange(0.0, 66.0)
    xs += [ints, np.nextafter(ints, -1)[1:], np.nextafter(ints, 100), ints + 0.5]
    x = np.concatenate(xs)
    p = coins.exp_neg_approx(x)
    worst = max(abs(mpmath.mpf(float(a)) - _exact_exp_neg_float(float(b))) for a, b in zip(p, x))
    assert worst <= coins.EXP_NEG_APPROX_ERROR
    assert worst > coins.EXP_NEG_APPROX_ERROR / 64  # the bound is not vacuous: degree 12 is near it


PLANS = [
    Fraction(1, 10),
    Fraction(9, 4),
    Fraction(50, 3),
    _default_sigma2(),
    Fraction(10**12) + Fraction(1, 3),
    Fraction((2**40 - 1) ** 2),
    Fraction(1, 2**59),
    Fraction(3**40, 7**20),
]


def _adversarial_trials(sigma2: Fraction, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(u, x) pairs: random ones, x next to s = sigma2/t (d ~ 0), lambda just around
    integers (m switches), and x up to the float path's limit 65 t."""
    plan = g._plan(sigma2)
    t = plan.t
    u = rng.integers(0, t, 400)
    x = u + t * rng.integers(0, 65, 400)
    near_s = int(plan.shift) + np.arange(-3, 4)
    near_s = near_s[near_s >= 0]
    u2 = rng.integers(0, t, near_s.size)
    x2 = np.maximum(near_s, u2)  # x >= u
    u2 = np.minimum(u2, x2)
    # x with gamma(x) = (x - s)^2 c close to k for k = 1..30: x ~ s + sqrt(k / c)
    ks = np.arange(1, 31)
    x3 = np.floor(float(plan.shift) + np.sqrt(ks / plan.inv2s2_f)).astype(np.int64)
    x3 = np.clip(x3, 0, 64 * t)
    u3 = np.zeros_like(x3)
    return np.concatenate([u, u2, u3]).astype(np.int64), np.concatenate([x, x2, x3]).astype(np.int64)


@pytest.mark.parametrize("sigma2", PLANS, ids=lambda s: f"{float(s):.4g}")
def test_lambda_float_error_is_within_the_proven_bound(sigma2):
    rng = np.random.default_rng(2)
    plan = g._plan(sigma2)
    u, x = _adversarial_trials(sigma2, rng)
    approx = g._lambda_approx(plan, u, x)
    for ui, xi, a in zip(u.tolist(), x.tolist(), approx.tolist()):
        exact = g._lambda(plan, ui, xi)
        assert abs(Fraction(a) - exact) <= 8 * Fraction(U) * (exact + 1)


@pytest.mark.parametrize("sigma2", PLANS, ids=lambda s: f"{float(s):.4g}")
def test_every_filter_decision_is_the_exact_one(sigma2):
    """For each (u, x) the words around floor(2**16 exp(-lambda)) -- the only places a wrong
    decision could happen -- and random words: a decided coin must agree with U' < p for
    *every* U' in the word's cell, checked with 160-bit exact bounds of p."""
    rng = np.random.default_rng(3)
    plan = g._plan(sigma2)
    u, x = _adversarial_trials(sigma2, rng)
    prec = 160
    bounds = [coins.exp_neg_bounds(g._lambda(plan, a, b), prec) for a, b in zip(u.tolist(), x.tolist())]
    centre = np.array([lo >> (prec - 16) for lo, _ in bounds])
    offsets = np.array([-2, -1, 0, 1, 2])
    words = np.clip(centre[:, None] + offsets[None, :], 0, 2**16 - 1)
    words = np.concatenate([words, rng.integers(0, 2**16, (u.size, 20))], axis=1)
    uu = np.repeat(u, words.shape[1])
    xx = np.repeat(x, words.shape[1])
    ww = words.reshape(-1)
    accept, decided = g._coin_filter(plan, uu, xx, ww.astype(np.uint16))
    for i in np.flatnonzero(decided).tolist():
        lo, hi = bounds[i // words.shape[1]]
        w = int(ww[i])
        if accept[i]:
            assert (w + 1) << prec <= lo << 16, "accepted although U' could exceed p"
        else:
            assert w << prec >= hi << 16, "rejected although U' could be below p"
    random_part = np.zeros(words.shape, dtype=bool)
    random_part[:, 5:] = True
    assert decided[random_part.reshape(-1)].mean() > 0.999  # the filter does decide almost always


def test_geometric_table_is_exact_cell_by_cell():
    """V(w) = #{v : U < exp(-v)} for every U in [w, w+1)/2**16 unless w is flagged a tie;
    ties are exactly the cells containing some exp(-v), v >= 1."""
    # c_v = 2**16 exp(-v) is irrational, so for integer w: w + 1 <= c_v iff w + 1 <= floor(c_v)
    # (cell below exp(-v)), w >= c_v iff w >= floor(c_v) + 1 (cell above), else w = floor(c_v)
    floors = np.array([int(mpmath.floor(mpmath.exp(-v) * 2**16)) for v in range(1, 40)])
    w = np.arange(2**16)[:, None]
    below = (w + 1 <= floors).sum(axis=1)
    above = (w >= floors + 1).sum(axis=1)
    straddles = below + above < floors.size
    assert np.array_equal(g._GEOMETRIC_TIE, straddles)
    assert np.array_equal(g._GEOMETRIC[~straddles], below[~straddles])
    assert straddles.sum() == 12  # the cells of exp(-1), ..., exp(-11), and 0 for all v >= 12


class ScriptedBits(RandomSource):
    """Hands out chosen integers from randbits; no bytes."""

    def __init__(self, bits):
        self.bits = list(bits)

    def randbits(self, k):
        return self.bits.pop(0)

    def random_bytes(self, n):
        raise AssertionError("not used")


def test_lazy_uniform_reads_bits_only_when_needed_and_decides_exactly():
    # exp(-1) * 2**16 = 24109.3...: prefix 24109 straddles it, 24108 / 24110 do not
    assert coins.LazyUniform(24108, 16, ScriptedBits([])).below_exp_neg(Fraction(1)) is True
    assert coins.LazyUniform(24110, 16, ScriptedBits([])).below_exp_neg(Fraction(1)) is False
    # the next 32 bits r: the cell [r, r + 1) / 2**48 is below exp(-1) iff r + 1 <= frac * 2**32
    frac = mpmath.exp(-1) * 2**16 - 24109
    r = int(mpmath.floor(frac * 2**32))
    assert coins.LazyUniform(24109, 16, ScriptedBits([r - 1])).below_exp_neg(Fraction(1)) is True
    assert coins.LazyUniform(24109, 16, ScriptedBits([r + 1])).below_exp_neg(Fraction(1)) is False
    # r itself straddles again: 32 more bits decide
    assert coins.LazyUniform(24109, 16, ScriptedBits([r, 0])).below_exp_neg(Fraction(1)) is True
    assert coins.LazyUniform(24109, 16, ScriptedBits([r, 2**32 - 1])).below_exp_neg(Fraction(1)) is False
    # lambda = 0: U < 1 always, without reading anything
    assert coins.LazyUniform(2**16 - 1, 16, ScriptedBits([])).below_exp_neg(Fraction(0)) is True
    # a huge exponent: only the all-zero prefix is undecided, and it stays so for a while
    lu = coins.LazyUniform(0, 16, ScriptedBits([0, 0, 1]))
    assert lu.below_exp_neg(Fraction(2**40)) is False and lu.bits == 16 + 3 * 32


def test_lazy_uniform_conditional_probability():
    """Given the straddling prefix 24109, P(U < exp(-1)) = 2**16 e^-1 - 24109 ~ 0.33
    (binomial test, p > ALPHA)."""
    rng = _rng(7)
    n = 20_000
    hits = sum(coins.LazyUniform(24109, 16, rng).below_exp_neg(Fraction(1)) for _ in range(n))
    p = float(mpmath.exp(-1) * 2**16 - 24109)
    assert stats.binomtest(hits, n, p).pvalue > ALPHA


def test_randomness_comes_only_from_the_given_source():
    """A source that records its calls: the sampler asks it for bulk bytes (and randbits
    for exact finishes) and never uses anything else -- same source state, same output."""

    class Counting(InsecureReproducibleRandom):
        calls = 0

        def random_bytes(self, n):
            Counting.calls += 1
            return super().random_bytes(n)

    a = discrete_gaussian_many(_default_sigma2(), 100_000, Counting(seed=8))
    assert Counting.calls >= 1
    np.random.seed(0)  # noqa: NPY002 -- moves numpy's global RNG: b must not change
    b = discrete_gaussian_many(_default_sigma2(), 100_000, Counting(seed=8))
    assert np.array_equal(a, b)


def test_exp_neg_bounds_refuses_a_negative_exponent():
    with pytest.raises(PrivregValueError, match="lam"):
        coins.exp_neg_bounds(Fraction(-1, 3), 64)
