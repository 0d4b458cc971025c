"""Key thresholding (partition selection): thresholds, release probabilities, events, inputs."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

import privreg
from privreg.accountant import make_accountant
from privreg.core.charging import EventLog
from privreg.core.errors import BudgetExceededError, PrivregTypeError, PrivregValueError, UnsupportedEventError
from privreg.core.events import ApproxDP, Composed, DiscreteLaplace
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mechanisms.thresholding import GaussianThresholding, LaplaceThresholding
from privreg.plugins.ngrams.calibration import calibrate_dpne
from privreg.testing import CountingRandom, SpyCharger

# Significance level of every statistical test here (each is a single binomial test).
ALPHA = 1e-4


def _released_fraction(mech, value, key, n, seed):
    out = mech.release_many(value, n, charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed)).output
    assert len(out) == n
    return sum(key in o for o in out)


def _dgauss_tail(sigma: float, j: int) -> float:
    """P[Z >= j] for the discrete Gaussian N_Z(0, sigma^2), by direct summation."""
    z = np.arange(-int(40 * sigma) - 1, int(40 * sigma) + 2, dtype=np.float64)
    w = np.exp(-(z * z) / (2 * sigma * sigma))
    return float(w[z >= j].sum() / w.sum())


# --- thresholds match independent computations ------------------------------------------


@pytest.mark.parametrize("eps,delta,d0,dinf", [(1.0, 1e-2, 1, 1.0), (0.5, 1e-6, 4, 2.0), (3.0, 1e-9, 10, 0.25)])
def test_laplace_threshold_formula(eps, delta, d0, dinf):
    mech = LaplaceThresholding(epsilon=eps, delta=delta, max_partitions=d0, max_contribution=dinf)
    m = 2 ** math.ceil(math.log2(1024 * max(1.0, eps)))
    s = d0 * m / eps  # exact here: fast_scale leaves dyadic scales alone
    assert float(mech.noise_scale) == pytest.approx(s, rel=1e-11)
    p_star = 1 - (1 - delta) ** (1 / d0)
    # smallest integer T with P[Z >= T + 1 - m] <= p_star, P[Z >= j] = e^(-j/s)/(1+e^(-1/s))
    j = math.ceil(s * math.log(1 / (p_star * (1 + math.exp(-1 / s)))))
    assert mech.threshold_int in (m - 1 + j, m + j)  # ceil of a value just above an integer
    assert mech.threshold == pytest.approx((mech.threshold_int) * dinf / m)
    # the continuous textbook tau = Delta_inf + b ln(1/(2 p*)), b = Delta_0 Delta_inf / eps
    b = d0 * dinf / eps
    assert mech.threshold == pytest.approx(dinf + b * math.log(1 / (2 * p_star)), abs=3 * dinf / m)
    # and the union-bound form of Wilson et al. is never below it
    assert mech.threshold <= dinf + b * math.log(d0 / (2 * delta)) + 3 * dinf / m
    # exact per-key release probability of a single-user key meets the target
    q = mech.key_release_probability()
    assert q <= p_star and 1 - (1 - q) ** d0 <= delta
    assert mech.key_release_probability(mech.threshold_int - 2) > p_star  # T is (nearly) minimal


@pytest.mark.parametrize("eps,delta,d0", [(1.0, 1e-5, 1), (1.0, 1e-5, 5), (4.0, 1e-7, 30)])
def test_gaussian_threshold_formula(eps, delta, d0):
    mech = GaussianThresholding(epsilon=eps, delta=delta, max_partitions=d0)
    # paper 002's rho_1 with the continuous analytic sigma at delta/2 (T = 1 length)
    ref = calibrate_dpne(epsilon=eps, delta=delta, max_n=1, delta_1=d0)
    assert mech.paper_threshold == pytest.approx(ref.rho_1, rel=1e-9)
    # independent evaluation of max_t 1/sqrt(t) + sigma PhiInv((1 - delta/2)^(1/t))
    sigma = mech.noise_mechanism.continuous_sigma
    nd = NormalDist()
    rho = max(1 / math.sqrt(t) + sigma * nd.inv_cdf((1 - delta / 2) ** (1 / t)) for t in range(1, d0 + 1))
    assert mech.paper_threshold == pytest.approx(rho, rel=1e-6)
    # discrete version in grid units, recomputed here
    g = mech.noise_mechanism.grid
    m, sint = g.multiple, float(mech.noise_mechanism.sigma_int)
    need = max(m / math.sqrt(t) + 0.5 + sint * nd.inv_cdf((1 - delta / 2) ** (1 / t)) for t in range(1, d0 + 1))
    assert abs(mech.threshold_int - need) <= 2
    assert mech.threshold >= mech.paper_threshold
    slack = 1.002 if d0 == 1 else 1.2  # PLD-verified scalar vs RDP-verified vector sigma
    assert mech.threshold <= slack * mech.paper_threshold
    assert mech.sigma >= mech.noise_mechanism.continuous_sigma


# --- single-user keys are released with probability <= delta -------------------------------


def test_laplace_single_user_key_release_probability():
    delta = 1e-2
    mech = LaplaceThresholding(epsilon=1.0, delta=delta, max_partitions=1)
    p = mech.key_release_probability()  # exact for a total of max_contribution
    assert 0.9 * delta < p <= delta
    n = 60_000
    hits = _released_fraction(mech, {"lonely": 1.0, "heavy": 500}, "lonely", n, seed=11)
    assert stats.binomtest(hits, n, p).pvalue > ALPHA
    # and it is not the (wrong) probability with tau lowered by one noise scale
    assert stats.binomtest(hits, n, min(1.0, p * math.e)).pvalue < ALPHA


def test_laplace_any_of_several_single_user_keys():
    delta = 2e-2
    mech = LaplaceThresholding(epsilon=1.0, delta=delta, max_partitions=3, max_contribution=2.0)
    p_any = 1 - (1 - mech.key_release_probability()) ** 3
    assert p_any <= delta
    n = 30_000
    value = {"u1": 2.0, "u2": 2.0, "u3": 2.0}
    out = mech.release_many(value, n, charger=EventLog(), rng=InsecureReproducibleRandom(seed=12)).output
    hits = sum(len(o) > 0 for o in out)
    assert stats.binomtest(hits, n, p_any).pvalue > ALPHA


def test_gaussian_single_user_key_release_probability():
    delta = 2e-2
    mech = GaussianThresholding(epsilon=1.0, delta=delta, max_partitions=1)
    m, sint = mech.noise_mechanism.grid.multiple, float(mech.noise_mechanism.sigma_int)
    p = _dgauss_tail(sint, mech.threshold_int + 1 - m)  # exact for weight 1 (k = m)
    assert 0.8 * delta / 2 < p <= delta / 2
    n = 40_000
    hits = _released_fraction(mech, {"lonely": 1.0}, "lonely", n, seed=13)
    assert stats.binomtest(hits, n, p).pvalue > ALPHA


def test_gaussian_dpsu_weights_several_keys():
    delta = 4e-2
    d0 = 4
    mech = GaussianThresholding(epsilon=2.0, delta=delta, max_partitions=d0)
    n = 20_000
    for t in (1, 4):  # a user with t keys, weight 1/sqrt(t) each
        value = {f"k{i}": 1 / math.sqrt(t) for i in range(t)}
        out = mech.release_many(value, n, charger=EventLog(), rng=InsecureReproducibleRandom(seed=20 + t)).output
        hits = sum(len(o) > 0 for o in out)
        # one-sided: the release probability must not exceed delta/2
        assert stats.binomtest(hits, n, delta / 2, alternative="greater").pvalue > ALPHA


# --- heavy keys ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [LaplaceThresholding, GaussianThresholding])
def test_heavy_keys_always_released_with_accurate_counts(cls):
    mech = cls(epsilon=1.0, delta=1e-6, max_partitions=2)
    heavy = {("a", 1): 1000 * mech.threshold, 7: 400 * mech.threshold}
    value = {**heavy, "zero": 0, "light": 0.5}
    out = mech.release_many(value, 200, charger=EventLog(), rng=InsecureReproducibleRandom(seed=3)).output
    for o in out:
        assert set(heavy) <= set(o)
        assert all(v > mech.threshold for v in o.values())
        for k, c in heavy.items():
            assert abs(o[k] - c) < 0.05 * c
    assert sum("zero" in o for o in out) == 0


def test_pair_input_equals_mapping_input():
    mech = LaplaceThresholding(epsilon=1.0, delta=1e-6, max_partitions=1)
    a = mech.release({"x": 100, "y": 3}, charger=EventLog(), rng=InsecureReproducibleRandom(seed=4)).output
    b = mech.release(
        (["x", "y"], np.array([100, 3])), charger=EventLog(), rng=InsecureReproducibleRandom(seed=4)
    ).output
    assert a == b and "x" in a
    assert mech.release({}, charger=EventLog()).output == {}


# --- events -------------------------------------------------------------------------------


def test_events_are_data_independent_and_accountable():
    lap = LaplaceThresholding(epsilon=1.0, delta=1e-6, max_partitions=3, max_contribution=2.0)
    ev = lap.privacy_event()
    assert ev == Composed(
        events=(DiscreteLaplace(scale=float(lap.noise_scale), sensitivity=3 * 1024), ApproxDP(epsilon=0.0, delta=1e-6))
    )
    gau = GaussianThresholding(epsilon=1.0, delta=1e-6, max_partitions=3)
    assert gau.privacy_event() == ApproxDP(epsilon=1.0, delta=1e-6)
    for mech in (lap, gau):
        log = EventLog()
        r = mech.release({"a": 5.0, "b": 1e6}, charger=log)
        assert r.event == mech.privacy_event() and log.charges[0].event == mech.privacy_event()
        assert privreg.event_from_json(r.event.to_json()) == r.event
        for name in ("basic", "pld"):
            acc = make_accountant(name)
            acc.compose(mech.privacy_event())
            # PLD reserves 2**-52 of delta per FFT composition (pld.FFT_ERROR) on top of the
            # event's own 1e-6, so it is asked at a hair above the budget's delta
            assert acc.epsilon(1e-6 if name == "basic" else 1e-6 * (1 + 1e-9)) <= 1.0 + 1e-9
        with pytest.raises(UnsupportedEventError):
            make_accountant("rdp").compose(mech.privacy_event())


# --- bad inputs and refusals --------------------------------------------------------------


@pytest.mark.parametrize(
    "bad,err,needle",
    [
        (np.array([np.nan]), PrivregTypeError, "mapping"),
        ({"a": float("nan")}, PrivregValueError, "finite"),  # the rule, never the key
        ({"a": -1}, PrivregValueError, ">= 0"),
        ({"a": float("inf")}, PrivregValueError, "finite"),
        ({"a": "3"}, PrivregTypeError, "real number"),
        ({"a": True}, PrivregTypeError, "real number"),
        ((["a", "b"], [1.0]), PrivregValueError, "equal length"),
        ((["a", "a"], [1.0, 2.0]), PrivregValueError, "twice"),
        (([["unhashable"]], [1.0]), PrivregTypeError, "hashable"),
        (5.0, PrivregTypeError, "mapping"),
    ],
)
@pytest.mark.parametrize("cls", [LaplaceThresholding, GaussianThresholding])
def test_bad_inputs_refused_before_charging(cls, bad, err, needle):
    mech = cls(epsilon=1.0, delta=1e-6, max_partitions=2)
    log = EventLog()
    with pytest.raises(err, match=needle):
        mech.release(bad, charger=log)
    with pytest.raises(err):
        mech.release_many(bad, 3, charger=log)
    assert log.charges == ()


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(epsilon=0.0, delta=1e-6, max_partitions=1), "epsilon"),
        (dict(epsilon=1.0, delta=0.0, max_partitions=1), "delta"),
        (dict(epsilon=1.0, delta=1.0, max_partitions=1), "delta"),
        (dict(epsilon=1.0, delta=1e-6, max_partitions=0), "max_partitions"),
        (dict(epsilon=1.0, delta=1e-6, max_partitions=1.5), "max_partitions"),
    ],
)
def test_bad_parameters(kwargs, needle):
    for cls in (LaplaceThresholding, GaussianThresholding):
        with pytest.raises(privreg.PrivregError, match=needle):
            cls(**kwargs)
    with pytest.raises(privreg.PrivregError, match="max_contribution"):
        LaplaceThresholding(epsilon=1.0, delta=1e-6, max_partitions=1, max_contribution=-1.0)
    with pytest.raises(privreg.PrivregError, match="sensitivity"):
        GaussianThresholding(epsilon=1.0, delta=1e-6, max_partitions=1, sensitivity=float("nan"))
    with pytest.raises(TypeError):
        LaplaceThresholding(1.0, 1e-6, 1)  # keyword-only


@pytest.mark.parametrize("cls", [LaplaceThresholding, GaussianThresholding])
def test_refused_charge_draws_nothing(cls):
    mech = cls(epsilon=1.0, delta=1e-6, max_partitions=1)
    rng = CountingRandom(seed=1)
    with pytest.raises(BudgetExceededError):
        mech.release({"a": 1.0}, charger=SpyCharger(rng, refuse=True), rng=rng)
    assert rng.draws == 0
    mech.release({"a": 1.0}, charger=EventLog(), rng=rng)
    assert rng.draws > 0  # the counter does see draws
