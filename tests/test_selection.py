"""Selection mechanisms: exponential mechanism, report-noisy-max, permute-and-flip.

Statistical tests are seeded with InsecureReproducibleRandom, so their outcome is
deterministic; each chi-square / binomial test rejects at p < 1e-4 (its false-alarm rate
for a correct sampler over a random seed), and ``test_chi_square_has_power`` shows that
the same tests reject a sampler of the wrong distribution.
"""

import itertools
import math
from fractions import Fraction

import attrs
import numpy as np
import pytest
from scipy import integrate, stats

from privreg import (
    EventLog,
    Exponential,
    InsecureReproducibleRandom,
    PrivregTypeError,
    PrivregValueError,
    SelfComposed,
)
from privreg.core.randomness import RandomSource
from privreg.mechanisms.selection import (
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    epsilon_spent,
)
from privreg.noise import coins as coins_mod

ALPHA = 1e-4  # false-alarm rate of each statistical test


# --- independent reference distributions -------------------------------------------------


def em_probs(u, c):
    """Exponential mechanism: P(i) proportional to exp(c u_i) (closed form)."""
    z = c * (np.asarray(u, dtype=float) - np.max(u))
    w = np.exp(z)
    return w / w.sum()


def pf_probs(u, c):
    """Permute-and-flip by enumerating all k! orders: the first candidate whose coin
    exp(c (u_i - u_max)) succeeds is returned."""
    u = np.asarray(u, dtype=float)
    p = np.exp(c * (u - u.max()))
    k = len(u)
    out = np.zeros(k)
    perms = list(itertools.permutations(range(k)))
    for order in perms:
        survive = 1.0
        for i in order:
            out[i] += survive * p[i]
            survive *= 1.0 - p[i]
        assert survive == 0.0  # the maximiser always stops the walk
    return out / len(perms)


def rnm_exponential_probs(u, scale):
    """Report-noisy-max with one-sided Exponential(scale) noise, by numerical integration:
    P(i) = int f(z - u_i) prod_{j != i} F(z - u_j) dz with f, F the noise's pdf and cdf."""
    u = np.asarray(u, dtype=float)

    def integrand(z, i):
        others = np.delete(u, i)
        cdf = np.where(z > others, -np.expm1(-(z - others) / scale), 0.0)
        return np.exp(-(z - u[i]) / scale) / scale * np.prod(cdf)

    kinks = sorted(set(u.tolist()))
    out = []
    for i in range(len(u)):
        pieces = [x for x in kinks if x > u[i]]
        edges = [u[i], *pieces]
        total = sum(
            integrate.quad(integrand, lo, hi, args=(i,), epsabs=1e-14, epsrel=1e-12)[0]
            for lo, hi in itertools.pairwise(edges)
        )
        total += integrate.quad(integrand, edges[-1], np.inf, args=(i,), epsabs=1e-14, epsrel=1e-12)[0]
        out.append(total)
    return np.array(out)


def rnm_gumbel_probs(u, scale):
    """Report-noisy-max with Gumbel(scale) noise, by numerical integration (the same
    formula with the Gumbel pdf and cdf)."""
    u = np.asarray(u, dtype=float)

    def integrand(z, i):
        t = (z - u) / scale
        with np.errstate(over="ignore"):
            log_cdf = -np.exp(-t)  # log F(t) = -exp(-t)
        log_pdf_i = -t[i] + log_cdf[i] - math.log(scale)
        return math.exp(log_pdf_i + log_cdf.sum() - log_cdf[i]) if np.isfinite(log_cdf.sum()) else 0.0

    return np.array(
        [
            integrate.quad(integrand, -np.inf, np.inf, args=(i,), epsabs=1e-14, epsrel=1e-12, limit=200)[0]
            for i in range(len(u))
        ]
    )


def reference(mech, u):
    c = float(mech.weight_exponent)
    if isinstance(mech, PermuteAndFlip) or (isinstance(mech, ReportNoisyMax) and mech.noise == "exponential"):
        return pf_probs(u, c)
    return em_probs(u, c)


def chi_square_p(samples, probs):
    """p-value of the chi-square goodness-of-fit test; cells with expected count < 5 are
    pooled, and a sample in a cell of probability 0 gives p = 0."""
    k = len(probs)
    counts = np.bincount(np.asarray(samples, dtype=np.int64), minlength=k)
    assert counts.size == k, "an index outside the candidates was returned"
    n = counts.sum()
    expected = n * np.asarray(probs)
    if np.any(counts[expected == 0] > 0):
        return 0.0
    small = expected < 5
    obs = list(counts[~small]) + ([counts[small].sum()] if small.any() else [])
    exp = list(expected[~small]) + ([expected[small].sum()] if small.any() else [])
    if len(obs) == 1:
        return 1.0
    exp = np.asarray(exp) * (sum(obs) / sum(exp))
    return stats.chisquare(obs, exp).pvalue


# --- distribution of the samplers ------------------------------------------------------------

CASES = [
    pytest.param(ExponentialMechanism(epsilon=1.0, sensitivity=1.0), [3.0, 2.0, 1.0, 0.0, 2.0], id="em"),
    pytest.param(ExponentialMechanism(epsilon=0.7, sensitivity=0.5, monotonic=True), [0.1, -0.3, 1.2], id="em-mono"),
    pytest.param(ExponentialMechanism(epsilon=1.0, sensitivity=1.0), [0.0, 5.0, 30.0, 29.5], id="em-far"),
    pytest.param(ReportNoisyMax(epsilon=2.0, sensitivity=1.0), [0.31, -1.7, 2.2, 1.05], id="rnm-gumbel"),
    pytest.param(ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="exponential"), [3.0, 2.0, 1.0, 0.0], id="rnm-exp"),
    pytest.param(PermuteAndFlip(epsilon=1.0, sensitivity=1.0), [3.0, 2.0, 1.0, 0.0, 2.0], id="pf"),
    pytest.param(PermuteAndFlip(epsilon=0.3, sensitivity=0.1, monotonic=True), [0.05, 0.4, -0.2], id="pf-mono"),
]


@pytest.mark.parametrize("mech,u", CASES)
def test_release_many_matches_exact_distribution(mech, u):
    out = mech.release_many(np.array(u), 60_000, charger=EventLog(), rng=InsecureReproducibleRandom(seed=3)).output
    assert isinstance(out, list) and all(type(x) is int for x in out[:100])
    assert chi_square_p(out, reference(mech, u)) > ALPHA


@pytest.mark.parametrize("mech,u", CASES)
def test_release_matches_exact_distribution(mech, u):
    rng = InsecureReproducibleRandom(seed=4)
    log = EventLog()
    out = [mech.release(np.array(u), charger=log, rng=rng).output for _ in range(5_000)]
    assert all(type(x) is int for x in out)
    assert len(log.charges) == 5_000
    assert chi_square_p(out, reference(mech, u)) > ALPHA


def test_chi_square_has_power():
    """The distribution tests can fail: 60,000 exponential-mechanism draws are rejected
    against permute-and-flip's probabilities and vice versa (and against the wrong scaling)."""
    u = np.array([3.0, 2.0, 1.0, 0.0, 2.0])
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    pf = PermuteAndFlip(epsilon=1.0, sensitivity=1.0)
    rng = InsecureReproducibleRandom(seed=3)
    em_out = em.release_many(u, 60_000, charger=EventLog(), rng=rng).output
    pf_out = pf.release_many(u, 60_000, charger=EventLog(), rng=rng).output
    assert chi_square_p(em_out, pf_probs(u, 0.5)) < ALPHA
    assert chi_square_p(pf_out, em_probs(u, 0.5)) < ALPHA
    assert chi_square_p(em_out, em_probs(u, 1.0)) < ALPHA  # monotonic scaling is distinguishable


def test_integer_utilities_are_not_rounded():
    """2**60 and 2**60 - 1 are the same float64; as integers they differ by one, so the
    exponential mechanism must prefer the first with odds e^(1/2) : 1."""
    u = np.array([2**60, 2**60 - 1], dtype=np.int64)
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    out = mech.release_many(u, 40_000, charger=EventLog(), rng=InsecureReproducibleRandom(seed=8)).output
    assert chi_square_p(out, em_probs([1.0, 0.0], 0.5)) > ALPHA
    assert chi_square_p(out, [0.5, 0.5]) < ALPHA


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip, ReportNoisyMax])
def test_single_candidate_and_ties(cls):
    mech = cls(epsilon=1.0, sensitivity=1.0)
    assert mech.release(np.array([7.5]), charger=EventLog()).output == 0
    assert mech.release_many(np.array([-2.0]), 50, charger=EventLog()).output == [0] * 50
    out = mech.release_many(np.zeros(4), 20_000, charger=EventLog(), rng=InsecureReproducibleRandom(seed=2)).output
    assert chi_square_p(out, np.full(4, 0.25)) > ALPHA


def test_many_candidates_vectorised_path():
    """50 candidates: too many orders to enumerate, so permute-and-flip is compared with
    report-noisy-max with exponential noise (equal by Ding et al. 2021), integrated."""
    u = np.arange(50, dtype=float) / 5
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    pf = PermuteAndFlip(epsilon=1.0, sensitivity=1.0)
    rng = InsecureReproducibleRandom(seed=6)
    out = em.release_many(u, 40_000, charger=EventLog(), rng=rng).output
    assert chi_square_p(out, em_probs(u, 0.5)) > ALPHA
    out = pf.release_many(u, 40_000, charger=EventLog(), rng=rng).output
    ref = rnm_exponential_probs(u, 2.0)
    assert abs(ref.sum() - 1) < 1e-7
    assert chi_square_p(out, ref) > ALPHA


# --- exact Bernoulli building blocks -------------------------------------------------------


@pytest.mark.parametrize(
    "gamma",
    [
        Fraction(0),
        Fraction(1, 3),
        Fraction(1),
        Fraction(5, 2),
        Fraction(0.1),
        Fraction(7.3) / Fraction(3.7),
        Fraction(9),
    ],
)
def test_vectorised_bernoulli_exp_neg(gamma):
    n = 200_000
    coins = coins_mod.ExpCoins([gamma])
    hits = int(coins(np.zeros(n, dtype=np.int64), InsecureReproducibleRandom(seed=1)).sum())
    p = math.exp(-float(gamma))
    if p == 1.0:
        assert hits == n
    else:
        assert stats.binomtest(hits, n, p).pvalue > ALPHA


def test_vectorised_bernoulli_exp_neg_mixed_candidates():
    """One call, coins of different candidates interleaved: each candidate's coins
    succeed at rate exp(-gamma_i)."""
    gammas = [Fraction(0), Fraction(2, 7), Fraction(0.3) * 7, Fraction(13, 4), Fraction(1)]
    coins = coins_mod.ExpCoins(gammas)
    rng = InsecureReproducibleRandom(seed=9)
    cands = np.tile(np.arange(len(gammas)), 40_000)
    got = coins(cands, rng)
    for i, g in enumerate(gammas):
        hits, n = int(got[cands == i].sum()), int((cands == i).sum())
        p = math.exp(-float(g))
        assert hits == n if p == 1.0 else stats.binomtest(hits, n, p).pvalue > ALPHA


@pytest.mark.parametrize("p", [Fraction(3, 8), Fraction(1, 3), Fraction(2, 3**40), Fraction(0.7)])
def test_vectorised_bernoulli(p):
    n = 200_000
    hits = int(coins_mod.bernoulli_many(p, n, InsecureReproducibleRandom(seed=2)).sum())
    assert stats.binomtest(hits, n, float(p)).pvalue > ALPHA


class ScriptedWords(RandomSource):
    """Feeds chosen 64-bit words to uniform_below (which masks them to 62 bits) and
    chosen integers to randbits."""

    def __init__(self, words, bits=()):
        self.data = b"".join(int(w).to_bytes(8, "little") for w in words)
        self.bits = list(bits)

    def randbits(self, k):
        return self.bits.pop(0)

    def random_bytes(self, n):
        out, self.data = self.data[:n], self.data[n:]
        assert len(out) == n, "script exhausted"
        return out


def test_vectorised_bernoulli_resolves_ties_digit_by_digit():
    """U < p is decided at the first base-2**62 digit where U and p differ."""
    b = 1 << 62
    p = Fraction(3, 8)  # digits: 3 * 2**59, then zeros
    d1 = 3 << 59
    assert coins_mod.bernoulli_many(p, 1, ScriptedWords([d1 - 1])).tolist() == [True]
    assert coins_mod.bernoulli_many(p, 1, ScriptedWords([d1 + 1])).tolist() == [False]
    assert coins_mod.bernoulli_many(p, 1, ScriptedWords([d1, 0, 0, 5])).tolist() == [False]  # U > p
    third = Fraction(1, 3)  # digits: (2**62 - 1) / 3 repeated
    d = (b - 1) // 3
    assert coins_mod.bernoulli_many(third, 1, ScriptedWords([d, d, d - 1])).tolist() == [True]
    assert coins_mod.bernoulli_many(third, 1, ScriptedWords([d, d, d + 1])).tolist() == [False]
    # three draws at once: decided ones stop consuming words, the tied one continues
    assert coins_mod.bernoulli_many(third, 3, ScriptedWords([0, d, b - 1, 0])).tolist() == [True, True, False]


def test_per_candidate_coins_resolve_ties_with_the_exact_remainder():
    """Bernoulli(frac / k) per candidate: the first digit decides, a tie falls back to an
    exact Bernoulli of the remainder. For p = 1/3: digit (2**62 - 1) / 3, remainder 1/3
    (2**62 = 1 mod 3), drawn as randbelow(3) < 1."""
    coins = coins_mod.ExpCoins([Fraction(0), Fraction(1, 3), Fraction(7, 3)])  # fracs 0, 1/3, 1/3
    d = ((1 << 62) - 1) // 3
    cands = np.array([1, 1, 2, 2, 0])
    words = [d - 1, d + 1, d, d, 5]
    got = coins._frac_over(1, cands, ScriptedWords(words, bits=[0, 1]))
    assert got.tolist() == [True, False, True, False, False]
    # k = 2: p = 1/6, digit floor(2**62 / 6), remainder 4/6 = 2/3 (2**62 = 4 mod 6):
    # randbelow(3) < 2
    d2 = (1 << 62) // 6
    got = coins._frac_over(2, np.array([2, 2]), ScriptedWords([d2, d2], bits=[1, 2]))
    assert got.tolist() == [True, False]


# --- permute-and-flip and report-noisy-max: exact probabilities ----------------------------


def test_permute_and_flip_enumeration_matches_closed_forms():
    c = 0.5
    u = [1.0, 0.0]
    p = math.exp(-c)
    np.testing.assert_allclose(pf_probs(u, c), [1 - p / 2, p / 2], rtol=1e-14)
    u = [2.0, 0.5, -1.0]
    q = np.exp(c * (np.array(u) - 2.0))
    closed = [
        q[i] * (1 / 3 + (1 - q[j]) / 6 + (1 - q[m]) / 6 + (1 - q[j]) * (1 - q[m]) / 3)
        for i, j, m in [(0, 1, 2), (1, 0, 2), (2, 0, 1)]
    ]
    np.testing.assert_allclose(pf_probs(u, c), closed, rtol=1e-14)


@pytest.mark.parametrize("u", [[1.0, 0.0], [2.0, 0.5, -1.0], [0.3, 0.3, 1.0]])
def test_permute_and_flip_equals_report_noisy_max_exponential(u):
    """Ding et al. 2021: PF with coins exp(c (u_i - u_max)) is RNM with Exponential(1/c)
    noise. Checked against numerical integration, independently of the samplers."""
    np.testing.assert_allclose(pf_probs(u, 0.5), rnm_exponential_probs(u, 2.0), atol=1e-8)


@pytest.mark.parametrize("u", [[1.0, 0.0], [2.0, 0.5, -1.0], [0.3, 0.3, 1.0]])
def test_exponential_mechanism_equals_report_noisy_max_gumbel(u):
    """Gumbel-max: argmax(u_i + Gumbel(1/c)) has P(i) proportional to exp(c u_i)."""
    np.testing.assert_allclose(em_probs(u, 0.5), rnm_gumbel_probs(u, 2.0), atol=1e-8)


# --- privacy: exact output probabilities on neighbours -------------------------------------

BASES = [np.array(x) for x in ([0.0, 0.0, 0.0], [3.0, 1.0, 0.0], [0.5, 0.4, -2.0], [5.0, -5.0, 0.2])]


def worst_log_ratio(mech, shifts):
    """max over base vectors, shifts and outputs of |ln P(u)_i - ln P(u + shift)_i|."""
    worst = 0.0
    for base in BASES:
        for s in shifts:
            a = reference(mech, base)
            b = reference(mech, base + mech.sensitivity * np.asarray(s))
            worst = max(worst, float(np.max(np.abs(np.log(a) - np.log(b)))))
    return worst


ANY = list(itertools.product((-1, 0, 1), repeat=3))
UP = list(itertools.product((0, 1), repeat=3))
DOWN = [tuple(-x for x in s) for s in UP]


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip])
@pytest.mark.parametrize("eps,sens", [(1.0, 1.0), (0.3, 2.5), (4.0, 0.1)])
def test_neighbouring_utilities_respect_epsilon(cls, eps, sens):
    mech = cls(epsilon=eps, sensitivity=sens)
    charged = mech.privacy_event().epsilon
    assert charged == eps
    worst = worst_log_ratio(mech, ANY)
    assert worst <= charged * (1 + 1e-9)
    assert worst > 0.75 * charged  # the grid reaches the worst case: the bound is nearly tight


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip])
@pytest.mark.parametrize("eps,sens", [(1.0, 1.0), (0.3, 2.5), (4.0, 0.1)])
def test_monotonic_neighbours_respect_epsilon_at_double_exponent(cls, eps, sens):
    mech = cls(epsilon=eps, sensitivity=sens, monotonic=True)
    assert mech.privacy_event().epsilon == eps
    worst = worst_log_ratio(mech, UP + DOWN)
    assert 0.75 * eps < worst <= eps * (1 + 1e-9)


@pytest.mark.parametrize("cls", [ExponentialMechanism, PermuteAndFlip])
def test_monotonic_scaling_breaks_on_non_monotonic_neighbours(cls):
    """The privacy check can fail: the eps/Delta scaling is not eps-DP when utilities
    may move in opposite directions (it is 2 eps-DP)."""
    mech = cls(epsilon=1.0, sensitivity=1.0, monotonic=True)
    worst = worst_log_ratio(mech, ANY)
    assert 1.5 < worst <= 2.0 * (1 + 1e-9)


# --- events, scaling and the paper-003 helper ----------------------------------------------


@pytest.mark.parametrize(
    "mech,variant,bounded",
    [
        (ExponentialMechanism(epsilon=0.7, sensitivity=3.0), "exponential", True),
        (ReportNoisyMax(epsilon=0.7, sensitivity=3.0), "report_noisy_max_gumbel", True),
        (ReportNoisyMax(epsilon=0.7, sensitivity=3.0, noise="exponential"), "report_noisy_max_exponential", False),
        (PermuteAndFlip(epsilon=0.7, sensitivity=3.0), "permute_and_flip", False),
    ],
)
def test_events(mech, variant, bounded):
    event = mech.privacy_event()
    assert event == Exponential(epsilon=0.7, variant=variant)
    assert event.bounded_range is bounded
    log = EventLog()
    release = mech.release(np.array([1.0, 2.0]), charger=log, label="pick")
    assert log.events == (event,) and release.event == event and release.mechanism == mech.name
    mono = attrs.evolve(mech, monotonic=True)
    assert mono.privacy_event() == event  # same epsilon, twice the exponent
    assert mono.weight_exponent == 2 * mech.weight_exponent == Fraction(0.7) / Fraction(3.0)


def test_names():
    assert ExponentialMechanism.name == "exponential"
    assert ReportNoisyMax.name == "report-noisy-max"
    assert PermuteAndFlip.name == "permute-and-flip"


def test_epsilon_spent_paper_003_trap():
    """Okada et al. write weights exp(eps' u) and claim 2 eps' Delta_u: that is the charge."""
    assert epsilon_spent(weight_exponent=0.5, sensitivity=1.0) == 1.0
    assert epsilon_spent(weight_exponent=0.5, sensitivity=1.0, monotonic=True) == 0.5
    assert epsilon_spent(weight_exponent=0.25, sensitivity=3.0) == 1.5
    # rounded up, never down: the smallest float >= 2 * 0.1 * 0.3 exactly
    got = epsilon_spent(weight_exponent=0.1, sensitivity=0.3)
    exact = 2 * Fraction(0.1) * Fraction(0.3)
    assert Fraction(got) >= exact and Fraction(math.nextafter(got, 0)) < exact
    # a mechanism configured with the spent epsilon has exactly the paper's weights and
    # its worst-case loss is 2 eps' Delta, not eps'
    mech = ExponentialMechanism(epsilon=epsilon_spent(weight_exponent=0.25, sensitivity=2.0), sensitivity=2.0)
    assert mech.weight_exponent == Fraction(1, 4)
    assert mech.privacy_event().epsilon == 1.0
    assert worst_log_ratio(mech, ANY) > 0.25 * 1.5


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "0.5"])
def test_epsilon_spent_rejects_bad_weight_exponent(bad):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="weight_exponent"):
        epsilon_spent(weight_exponent=bad, sensitivity=1.0)
    with pytest.raises((PrivregValueError, PrivregTypeError), match="sensitivity"):
        epsilon_spent(weight_exponent=1.0, sensitivity=bad)


def test_epsilon_spent_refuses_overflow_and_bad_flag():
    with pytest.raises(PrivregValueError, match="largest float"):
        epsilon_spent(weight_exponent=1e308, sensitivity=1e308)
    with pytest.raises(PrivregTypeError, match="monotonic"):
        epsilon_spent(weight_exponent=1.0, sensitivity=1.0, monotonic="yes")


# --- bad inputs ------------------------------------------------------------------------

MECHS = [ExponentialMechanism, PermuteAndFlip, ReportNoisyMax]


@pytest.mark.parametrize("cls", MECHS)
@pytest.mark.parametrize("eps", [float("nan"), float("inf"), -1.0, 0.0, True, "1", None])
def test_rejects_bad_epsilon(cls, eps):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="epsilon"):
        cls(epsilon=eps, sensitivity=1.0)


@pytest.mark.parametrize("cls", MECHS)
@pytest.mark.parametrize("sens", [float("nan"), float("inf"), -1.0, 0.0, "1"])
def test_rejects_bad_sensitivity(cls, sens):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="sensitivity"):
        cls(epsilon=1.0, sensitivity=sens)


@pytest.mark.parametrize("cls", MECHS)
def test_rejects_bad_flags_and_positional_arguments(cls):
    with pytest.raises(PrivregTypeError, match="monotonic"):
        cls(epsilon=1.0, sensitivity=1.0, monotonic="no")
    with pytest.raises(PrivregTypeError, match="monotonic"):
        cls(epsilon=1.0, sensitivity=1.0, monotonic=1)
    with pytest.raises(TypeError):
        cls(1.0, 1.0)


def test_report_noisy_max_rejects_unknown_noise():
    with pytest.raises(PrivregValueError, match=r"noise.*'laplace'"):
        ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="laplace")


@pytest.mark.parametrize("cls", MECHS)
@pytest.mark.parametrize(
    "value,pattern",
    [
        ([1.0, float("nan"), 2.0], "must be finite"),
        (np.array([0.0, 1.0, 2.0, -np.inf]), "must be finite"),
        ([np.inf], "must be finite"),
        ([], "at least one candidate"),
        (np.zeros((2, 3)), r"1-d.*\(2, 3\)"),
        (1.0, r"1-d.*\(\)"),
        (["a", "b"], "real numbers"),
        ([True, False], "real numbers"),
        ([1 + 2j], "real numbers"),
    ],
)
def test_rejects_bad_utilities_and_charges_nothing(cls, value, pattern):
    mech = cls(epsilon=1.0, sensitivity=1.0)
    log = EventLog()
    with pytest.raises((PrivregValueError, PrivregTypeError), match=pattern):
        mech.release(value, charger=log)
    with pytest.raises((PrivregValueError, PrivregTypeError), match=pattern):
        mech.release_many(value, 10, charger=log)
    assert log.charges == ()


def test_release_many_is_charged_once_as_self_composed():
    mech = PermuteAndFlip(epsilon=0.5, sensitivity=1.0)
    log = EventLog()
    out = mech.release_many([1.0, 2.0, 3.0], 25, charger=log, rng=InsecureReproducibleRandom(seed=1))
    assert log.events == (SelfComposed(event=mech.privacy_event(), count=25),)
    assert len(out.output) == 25 and set(out.output) <= {0, 1, 2}
