"""The scalar fast paths (plain Python, no arrays, cached per mechanism) release exactly
the values of the general array path under the same seed, and leave the stream in the
same state; the rare exact finishing paths included (forced here at full rate)."""

import functools
import math
from fractions import Fraction

import numpy as np
import pytest

from privreg import EventLog
from privreg.core import InsecureReproducibleRandom
from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.mechanisms.grid_mechanism import round_ratio
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.mechanisms.randomized_response import RandomizedResponse, category_array
from privreg.mechanisms.selection import ExponentialMechanism, PermuteAndFlip, ReportNoisyMax
from privreg.noise import trials
from privreg.noise.coins import exp_neg_approx, exp_neg_approx_one
from privreg.noise.exact import bernoulli, bernoulli_exp_neg, bernoulli_exp_neg_ratio, randbelow
from privreg.noise.fast import discrete_laplace_many, discrete_laplace_one, laplace_plan_of
from privreg.noise.gaussian import discrete_gaussian_many, discrete_gaussian_one
from privreg.noise.one_draw import one_sampler
from privreg.noise.vector import uniform_below, uniform_below_one

SEEDS = range(60)
LAPLACE_SCALES = [
    Fraction(2048),
    Fraction(1),
    Fraction(1, 3),
    Fraction(7, 2),
    Fraction(1, 1000),  # t = 1: no uniform word
    Fraction(10**9),
    Fraction(2**40 - 1, 3),  # 8-byte uniform words
    Fraction(1) / Fraction(0.7),  # a float: rounded up by fast_scale
]
SIGMA2S = [Fraction(9, 4), Fraction(1, 100), Fraction(3820) ** 2, Fraction(10**8), Fraction(1, 2**61)]


def _rng(seed):
    return InsecureReproducibleRandom(seed=seed)


def _same_stream(a, b):
    return a.randbits(64) == b.randbits(64)


@pytest.fixture(params=["filter", "forced exact"])
def finishing(request, monkeypatch):
    """Run once as shipped and once with every geometric word a tie and no coin decided
    by the float filter, so each trial takes the exact finishing path."""
    if request.param == "forced exact":
        monkeypatch.setattr(trials, "BAND", 1e9)
        monkeypatch.setattr(trials, "GEOMETRIC_TIE", np.ones_like(trials.GEOMETRIC_TIE))
        monkeypatch.setattr(trials, "_GEOMETRIC_TIE_LIST", [True] * len(trials._GEOMETRIC_TIE_LIST))
    return request.param


@pytest.mark.parametrize("scale", LAPLACE_SCALES, ids=str)
def test_discrete_laplace_one_is_the_vector_sampler_at_size_one(scale, finishing):
    plan = laplace_plan_of(scale)
    values = set()
    for seed in SEEDS:
        a, b = _rng(seed), _rng(seed)
        x = int(discrete_laplace_many(scale, 1, a)[0])
        assert discrete_laplace_one(plan, b) == x
        assert _same_stream(a, b), "the scalar path must consume the stream as the vector path does"
        values.add(x)
    if scale >= 1:
        assert len(values) > 5, "seeds must give different draws (else the check is vacuous)"


@pytest.mark.parametrize("sigma2", SIGMA2S, ids=str)
def test_discrete_gaussian_one_is_the_vector_sampler_at_size_one(sigma2, finishing):
    values = set()
    for seed in SEEDS:
        a, b = _rng(seed), _rng(seed)
        x = int(discrete_gaussian_many(sigma2, 1, a)[0])
        assert discrete_gaussian_one(sigma2, b) == x
        assert _same_stream(a, b)
        values.add(x)
    if sigma2 >= 1:
        assert len(values) > 5


PLANS = [
    *(("gaussian", s2) for s2 in [Fraction(9, 4), Fraction(3820) ** 2, Fraction(10**8), Fraction(2**32 - 1)]),
    ("gaussian", Fraction(2**34)),  # four-byte uniforms: draw_one itself
    ("gaussian", Fraction(1, 100)),  # t = 1: no uniform
    *(("laplace", scale) for scale in [Fraction(1), Fraction(1024), Fraction(3), Fraction(65535)]),
    ("laplace", Fraction(7, 2)),  # s = 2: draw_one itself
    ("laplace", Fraction(10**9)),  # four-byte uniforms: draw_one itself
]


@pytest.mark.parametrize(("law", "parameter"), PLANS, ids=str)
def test_specialised_one_sampler_is_draw_one(law, parameter, finishing):
    """one_sampler's closure (plans of s = 1 with two-byte or no uniforms) returns
    draw_one's value and leaves the stream where draw_one leaves it; other plans get
    draw_one itself."""
    plan = trials.gaussian_plan(parameter) if law == "gaussian" else laplace_plan_of(parameter)
    sampler = one_sampler(plan)
    assert isinstance(sampler, functools.partial) == (plan.s != 1 or plan.u_bytes not in (0, 2))
    values = set()
    for seed in range(300):
        a, b = _rng(seed), _rng(seed)
        x = trials.draw_one(plan, a)
        assert sampler(b) == x
        assert _same_stream(a, b)
        values.add(x)
    if parameter >= 1:
        assert len(values) > 3 and min(values) < 0 < max(values)


def test_forced_mode_does_finish_every_trial_exactly(monkeypatch):
    """The forced mode above does send trials to the exact finish (LazyUniform), in both
    paths; as shipped, a small call takes it for none."""
    calls = []

    class Counting(trials.LazyUniform):
        def below_exp_neg(self, lam):
            calls.append(lam)
            return super().below_exp_neg(lam)

    monkeypatch.setattr(trials, "LazyUniform", Counting)
    discrete_laplace_many(Fraction(7, 2), 50, _rng(5))
    assert not calls
    monkeypatch.setattr(trials, "BAND", 1e9)
    discrete_laplace_many(Fraction(7, 2), 50, _rng(5))
    vector = len(calls)
    assert vector >= 50
    discrete_laplace_one(laplace_plan_of(Fraction(7, 2)), _rng(5))
    assert len(calls) > vector


def _mechanisms():
    return [
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0),
        LaplaceMechanism(epsilon=0.1, sensitivity=3.5),
        LaplaceMechanism(epsilon=40.0, sensitivity=1e-3),
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0, path="exact"),
        GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0),
        GaussianMechanism(epsilon=0.5, delta=1e-9, sensitivity=2.0, calibration="classic"),
        GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, path="exact"),
        DiscreteLaplaceMechanism(epsilon=1.0, sensitivity=1),
        DiscreteLaplaceMechanism(epsilon=3.0, sensitivity=7),
        DiscreteLaplaceMechanism(epsilon=1.0, sensitivity=1, path="exact"),
        DiscreteGaussianMechanism(sigma=3.0),
        DiscreteGaussianMechanism(sigma=0.05, sensitivity=2),
        DiscreteGaussianMechanism(sigma=1e-20),  # below the fast sampler's range: its fallback
        DiscreteGaussianMechanism(sigma=3.0, path="exact"),
    ]


def _general(mech, canonical, rng):
    """The array path the scalar path replaces: one noise array, the exact-sum helpers."""
    from privreg.mechanisms.grid_mechanism import GridMechanism, exact_sum, grid_values, snap_values

    noise = mech._noise(1, rng)
    if isinstance(mech, GridMechanism):
        return float(grid_values(exact_sum(snap_values(canonical, mech.grid), noise), mech.grid.step)[0])
    return int(canonical) + int(noise[0])


@pytest.mark.parametrize("mech", _mechanisms(), ids=lambda m: f"{m.name}-{m.parameters()}")
def test_scalar_releases_equal_the_general_path_under_the_same_seed(mech):
    real = not isinstance(mech, (DiscreteLaplaceMechanism, DiscreteGaussianMechanism))
    inputs = (
        [0.0, -0.0, 1.0, -2.5, 0.1, 1e-300, 5e-324, 123456.789, -9.87e15, 1e300, -1.7e308, 2.0**60]
        if real
        else [0, 1, -5, 10**9, 2**62, -(2**62)]
    )
    for x in inputs:
        for seed in range(8):
            a, b = _rng(seed), _rng(seed)
            fast = mech.release(x, charger=EventLog(), rng=a).output
            canonical = mech.validate_input(np.asarray(x))  # the array route of validation
            np.testing.assert_array_equal(mech.validate_input(x), canonical)
            assert type(mech.validate_input(x)) is type(canonical)
            general = _general(mech, canonical, b)
            assert type(fast) is type(general)
            assert fast == general or (fast != fast and general != general), (x, seed)
            assert _same_stream(a, b)


@pytest.mark.parametrize("mech", _mechanisms(), ids=lambda m: f"{m.name}-{m.parameters()}")
def test_plain_numbers_take_the_scalar_path_with_the_general_paths_values(mech):
    """release's scalar path (a plain float, or int, prepared before the charge) gives what
    a numpy scalar or 0-d array, validated and sampled by the general path, gives."""
    real = not isinstance(mech, (DiscreteLaplaceMechanism, DiscreteGaussianMechanism))
    plain = [0.5, -3.25, 1e300, 7, -(2**53), 0] if real else [7, -(2**62), 0]
    mech.release(plain[0], charger=EventLog())
    prepare, _ = mech._release_fields[-1]
    for x in plain:
        assert prepare(x) is not None
        for seed in range(6):
            a, b, c = _rng(seed), _rng(seed), _rng(seed)
            fast = mech.release(x, charger=EventLog(), rng=a).output
            assert type(fast) is (float if real else int)
            assert fast == mech.release(np.float64(x) if real else np.int64(x), charger=EventLog(), rng=b).output
            assert fast == mech.release(np.array(x), charger=EventLog(), rng=c).output
            assert len({r.randbits(64) for r in (a, b, c)}) == 1  # the same bytes read
    others = [True, 2**53 + 1, np.float64(0.5), "0.5", math.nan] if real else [True, 2**62 + 1, 0.0, np.int64(1)]
    assert all(prepare(x) is None for x in others)  # the general path validates (or refuses) these


def test_a_subclass_sampling_its_own_way_gets_no_scalar_path():
    class Rounded(LaplaceMechanism):
        def _sample(self, value, rng, data):
            return round(super()._sample(value, rng, data))

    mech = Rounded(epsilon=1.0, sensitivity=1.0)
    assert mech._scalar_path() is None and LaplaceMechanism(epsilon=1.0, sensitivity=1.0)._scalar_path() is not None
    out = mech.release(0.3, charger=EventLog(), rng=_rng(1)).output
    assert out == round(
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0).release(0.3, charger=EventLog(), rng=_rng(1)).output
    )


@pytest.mark.parametrize("mech", _mechanisms()[:1] + _mechanisms()[4:5] + _mechanisms()[7:8], ids=lambda m: m.name)
def test_vector_and_many_releases_keep_their_seeded_values(mech):
    """release_many and vector releases still go through the array samplers: a seeded
    release_many of one value equals a seeded scalar release."""
    x = 0 if isinstance(mech, DiscreteLaplaceMechanism) else 0.25
    for seed in range(10):
        one = mech.release(x, charger=EventLog(), rng=_rng(seed)).output
        many = mech.release_many(x, 1, charger=EventLog(), rng=_rng(seed)).output
        assert many.shape == (1,) and many[0] == one


@pytest.mark.parametrize(
    ("num", "den"),
    [(5, 2), (7, 2), (-5, 2), (-7, 2), (1, 3), (-1, 3), (2, 3), (0, 7), (10**40 + 1, 2), (3, 4), (-3, 4)],
)
def test_round_ratio_is_round_half_even(num, den):
    assert round_ratio(num, den) == round(Fraction(num, den))


def test_cached_values_are_the_computed_ones():
    """The cached grid, scale and event are what a fresh computation gives, and equal
    mechanisms still compare and hash equal (caches are not state)."""
    a, b = LaplaceMechanism(epsilon=0.5, sensitivity=2.0), LaplaceMechanism(epsilon=0.5, sensitivity=2.0)
    a.release(1.0, charger=EventLog(), rng=_rng(1))
    assert a == b and hash(a) == hash(b)
    assert a.privacy_event() == b.privacy_event() and a.grid == b.grid and a.noise_scale == b.noise_scale
    params = a.parameters()
    params["epsilon"] = 99.0  # a caller's copy: the cache is not changed through it
    assert a.parameters()["epsilon"] == 0.5
    rr = RandomizedResponse(epsilon=0.5, k=4)
    first = rr.parameters()
    first["k"] = 99  # the same for a randomizer's cached parameters
    assert rr.parameters() == RandomizedResponse(epsilon=0.5, k=4).parameters() and rr.parameters()["k"] == 4


@pytest.mark.parametrize("bound", [1, 2, 3, 9, 1 << 53, (1 << 62) - 1, 1 << 62])
def test_uniform_below_one_is_the_vector_draw(bound):
    for seed in range(40):
        a, b = _rng(seed), _rng(seed)
        assert uniform_below_one(bound, b) == int(uniform_below(bound, 1, a)[0])
        assert _same_stream(a, b)


@pytest.mark.parametrize(("epsilon", "k"), [(1.0, 10), (0.01, 2), (5.0, 3), (1e-3, 1000)])
def test_one_user_k_rr_equals_the_array_path(epsilon, k):
    rr = RandomizedResponse(epsilon=epsilon, k=k)
    seen = set()
    for x in {0, 1, k - 1}:
        for seed in range(40):
            a, b = _rng(seed), _rng(seed)
            fast = rr.randomize([x], charger=EventLog(), rng=a).reports
            canonical = category_array("inputs", np.asarray([x]), k)
            np.testing.assert_array_equal(rr.validate_inputs([x]), canonical)
            # the array path: what _randomize does for more than one user, on one
            keep = uniform_below(1 << 53, 1, b) < rr.keep_numerator
            other = uniform_below(k - 1, 1, b)
            other += other >= canonical
            general = np.where(keep, canonical, other)
            assert fast.dtype == general.dtype and fast.shape == (1,)
            np.testing.assert_array_equal(fast, general)
            assert _same_stream(a, b)
            seen.add(int(fast[0]))
    assert len(seen) > 1


# --- exact coins in integers, and the selection mechanisms' scalar path -------------------


@pytest.mark.parametrize("n", [1, 2, 3, 10, 255, 256, 257, 10**9 + 7, 2**64 + 1])
def test_randbelow_is_the_sources_randbelow(n):
    """The unchecked helper draws what RandomSource.randbelow draws, from the same stream,
    and defers to a source that draws its own way."""
    seen = set()
    for seed in range(40):
        a, b = _rng(seed), _rng(seed)
        x = randbelow(n, a)
        assert x == b.randbelow(n) and _same_stream(a, b)
        seen.add(x)
    assert len(seen) > min(n - 1, 25)  # the seeds give different draws

    class Own(InsecureReproducibleRandom):
        def randbelow(self, n):
            return n - 1

    assert randbelow(n, Own(seed=1)) == n - 1


def _bernoulli_exp_neg_fractions(gamma, rng):
    """CKS 2020 Algorithm 1 as privreg wrote it before, on Fractions: the reference."""
    while gamma > 1:
        if not _bernoulli_exp_neg_fractions(Fraction(1), rng):
            return False
        gamma -= 1
    k = 1
    while bernoulli(gamma / k, rng):
        k += 1
    return k % 2 == 1


@pytest.mark.parametrize(
    "gamma",
    [
        Fraction(0),
        Fraction(1),
        Fraction(1, 3),
        Fraction(7, 2),
        Fraction(5),
        Fraction(10**20 + 1, 10**19),
        Fraction(2, 7),
    ],
    ids=str,
)
def test_bernoulli_exp_neg_in_integers_draws_as_the_fraction_version(gamma):
    results = set()
    for seed in range(200):
        a, b = _rng(seed), _rng(seed)
        want = _bernoulli_exp_neg_fractions(gamma, a)
        assert bernoulli_exp_neg_ratio(gamma.numerator, gamma.denominator, b) == want
        assert bernoulli_exp_neg(gamma, _rng(seed)) == want
        assert _same_stream(a, b)
        results.add(want)
    if 0 < gamma < 5:
        assert results == {True, False}


def _selection_reference(mech, utilities, rng):
    """The selection samplers on exact Fractions with the reference coin."""
    gammas = mech.gammas(utilities)
    if isinstance(mech, ExponentialMechanism) or getattr(mech, "noise", "") == "gumbel":
        while True:
            i = rng.randbelow(len(gammas))
            if _bernoulli_exp_neg_fractions(gammas[i], rng):
                return i
    order = list(range(len(gammas)))
    for t in range(len(order)):
        j = t + rng.randbelow(len(order) - t)
        order[t], order[j] = order[j], order[t]
        if _bernoulli_exp_neg_fractions(gammas[order[t]], rng):
            return order[t]
    raise AssertionError


@pytest.mark.parametrize(
    "mech",
    [
        ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
        ExponentialMechanism(epsilon=0.3, sensitivity=2.5, monotonic=True),
        PermuteAndFlip(epsilon=1.0, sensitivity=1.0),
        ReportNoisyMax(epsilon=2.0, sensitivity=1.0),
        ReportNoisyMax(epsilon=1.0, sensitivity=0.5, noise="exponential"),
    ],
    ids=lambda m: f"{m.name}-{m.parameters()}",
)
@pytest.mark.parametrize(
    "utilities",
    [[0.0, 1.0, 2.0], [3, -7, 3, 12], [0.1, 1e-300, -2.5e15, 0.3], [2**62, -(2**63), 5], [1.0]],
    ids=str,
)
def test_selection_scalar_releases_equal_the_fraction_path(mech, utilities):
    seen = set()
    for seed in range(30):
        a, b = _rng(seed), _rng(seed)
        got = mech.release(utilities, charger=EventLog(), rng=a).output
        want = _selection_reference(mech, mech.validate_input(utilities), b)
        assert got == want
        assert _same_stream(a, b)
        seen.add(got)
    if utilities == [0.0, 1.0, 2.0]:  # close utilities: the draws must vary
        assert len(seen) > 1


def test_exp_neg_approx_one_is_the_array_filter_bit_for_bit():
    """The scalar filter computes the very doubles the array filter computes (same IEEE
    operations), so the scalar and vector paths decide the same coins."""
    gen = np.random.default_rng(1)
    x = np.concatenate([gen.random(20_000) * 70, gen.random(2_000), [0.0, 1.0, 63.999, 64.0, 100.0, 5e-324]])
    np.testing.assert_array_equal(exp_neg_approx(x), np.array([exp_neg_approx_one(float(v)) for v in x]))


class _Crafted(trials.RandomSource):
    """Bytes laid out by the test (one round per call; ``randbits``, for exact finishes,
    from a seeded stream): it shows which trial draw_one accepted."""

    def __init__(self, rounds):
        self.rounds = list(rounds)
        self._rest = _rng(0)

    def random_bytes(self, n):
        buf = self.rounds.pop(0)
        assert len(buf) == n
        return buf

    def randbits(self, k):
        return self._rest.randbits(k)


def _round_with(plan, first):
    """draw_one's round of ``plan`` (``t = 1000``, two-byte words) whose first trial has
    ``first = (u, geometric word, coin word)`` and a positive sign, and every later trial
    ``u = 1023 >= t`` (rejected before its coin)."""
    n = plan.one_trials
    us = [first[0]] + [1023] * (n - 1)
    geos = [first[1]] + [0] * (n - 1)
    coins = [first[2]] + [0] * (n - 1)
    words = b"".join(w.to_bytes(2, "little") for w in us + geos + coins)
    return words + bytes((n + 7) // 8)


def _geometric_word(count):
    """A 16-bit word giving geometric count ``count`` without a tie."""
    return int(np.flatnonzero((count == trials.GEOMETRIC) & ~trials.GEOMETRIC_TIE)[0])


@pytest.mark.parametrize(
    ("plan", "counts"),
    [
        (trials.laplace_plan(1000, 1), [1]),  # lambda = u / 1000 in [0, 1)
        (trials.gaussian_plan(Fraction(999**2)), [0, 1, 2, 3, 5]),  # lambda up to about 8
    ],
    ids=["laplace", "gaussian"],
)
@pytest.mark.parametrize(
    "draw", [trials.draw_one, lambda plan, rng: one_sampler(plan)(rng)], ids=["draw_one", "one_sampler"]
)
def test_taylor_pre_decision_gives_the_filter_decision(plan, counts, draw, monkeypatch):
    """draw_one settles most coins by Taylor bounds before the float filter: it must
    decide exactly as the filter does (accept, reject, or leave it to the exact finish),
    at uniforms across the plan and coin words across the range, near the filter's
    threshold and near the bounds' edges. An accepted first trial gives its value ``x >
    0``; a rejected one falls through to a second round whose first trial surely gives 0."""
    assert plan.t == 1000 and plan.s == 1
    sure = _round_with(plan, (0, _geometric_word(0), 0))  # lambda < 1, coin 0: accepted, value 0
    finished = []

    class Counting(trials.LazyUniform):
        def below_exp_neg(self, lam):
            finished.append(lam)
            return super().below_exp_neg(lam)

    monkeypatch.setattr(trials, "LazyUniform", Counting)
    polynomial = []
    real_polynomial, real_filter = trials._taylor_below_one, trials.exp_neg_approx_one
    monkeypatch.setattr(trials, "_taylor_below_one", lambda lam: polynomial.append(lam) or real_polynomial(lam))
    monkeypatch.setattr(trials, "exp_neg_approx_one", lambda lam: polynomial.append(lam) or real_filter(lam))
    checked = uniform = trials_made = 0
    lams = set()
    for count in counts:
        geo = _geometric_word(count)
        for u in range(1 if count == 0 else 0, 1000, 7):
            x = u + 1000 * count
            lam = trials._lambda_approx_one(plan, u, x)
            lams.add(int(lam))
            threshold = real_filter(lam) * 65536.0
            m, r = math.floor(lam), lam - math.floor(lam)
            low = 65536.0 * math.exp(-m) * (1 - r + r**2 / 2 - r**3 / 6)
            high = low + 65536.0 * math.exp(-m) * r**4 / 24
            spread = list(range(u % 97, 1 << 16, 997))  # coin words across the range
            near = [int(v) + d for v in (threshold, low, high) for d in range(-3, 4)]
            for coin in spread + [c for c in near if 0 <= c < 1 << 16]:
                rng = _Crafted([_round_with(plan, (u, geo, coin)), sure])
                finished.clear()
                value = draw(plan, rng)
                if coin + 1 <= threshold - trials.BAND:
                    assert (value, finished) == (x, []), (u, count, coin)
                elif coin >= threshold + trials.BAND:
                    assert (value, finished) == (0, []), (u, count, coin)
                else:  # the filter leaves it open: the exact finish must decide it
                    assert finished == [trials._lambda(plan, u, x)], (u, count, coin)
                checked += 1
            uniform += len(spread)
            trials_made += 1
    # the bounds settle most coins: the polynomial ran for the near words (21 per uniform
    # at most) and few of the spread ones; the Gaussian's reach exp(-m) factors m >= 1
    assert checked > 10_000 and len(polynomial) < 0.1 * uniform + 21 * trials_made
    assert max(lams) >= (4 if plan.quadratic else 0)
