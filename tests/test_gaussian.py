"""Tests of the exact discrete Gaussian samplers and the Gaussian mechanism.

Statistical tests draw from ``InsecureReproducibleRandom`` with a fixed seed, so each
outcome is deterministic. Thresholds: for a *correct* sampler and a fresh seed, each test
would raise a false alarm with probability at most ALPHA = 1e-4 (we reject only when a
p-value is below ALPHA); the auditor test uses the auditor's own alpha = 1e-6. Negative
controls show that the same checks reject a wrong distribution, so they can fail.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privreg.accountant import make_accountant
from privreg.accountant.calibration import calibrate_gaussian_sigma
from privreg.audit import audit_mechanism
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.events import DiscreteGaussian
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.sensitivity import GlobalSensitivity, Norm
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.noise import snap_to_grid
from privreg.noise.fast import discrete_laplace_many
from privreg.noise.gaussian import discrete_gaussian, discrete_gaussian_many

ALPHA = 1e-4
SIGMA2S = [Fraction(1, 2), Fraction(2), Fraction(9)]


def _rng(seed: int = 20260101) -> InsecureReproducibleRandom:
    return InsecureReproducibleRandom(seed=seed)


def _pmf(sigma2: Fraction, support: np.ndarray) -> np.ndarray:
    """Exact discrete Gaussian pmf, normalised numerically over +-(40 sigma + 50)."""
    s2 = float(sigma2)
    wide = np.arange(-int(40 * math.sqrt(s2)) - 50, int(40 * math.sqrt(s2)) + 51)
    norm = np.exp(-(wide.astype(float) ** 2) / (2 * s2)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * s2)) / norm


def _chi2_pvalue(samples: np.ndarray, sigma2: Fraction) -> float:
    """Chi-square goodness of fit against the discrete Gaussian; the outermost bins take
    the tails, and every interior bin expects at least 5 counts."""
    n = samples.size
    edge = 0
    while n * _pmf(sigma2, np.array([edge + 1]))[0] >= 5:
        edge += 1
    support = np.arange(-edge, edge + 1)
    expected = n * _pmf(sigma2, support)
    tail = (1 - expected.sum() / n) / 2 * n
    expected[0] += tail
    expected[-1] += tail
    clipped = np.clip(samples, -edge, edge)
    observed = np.array([(clipped == z).sum() for z in support])
    assert observed.sum() == n
    return float(stats.chisquare(observed, expected).pvalue)


# --- samplers ---------------------------------------------------------------------------


@pytest.mark.parametrize("sigma2", SIGMA2S)
def test_scalar_sampler_matches_the_exact_pmf(sigma2):
    rng = _rng(1)
    samples = np.array([discrete_gaussian(sigma2, rng) for _ in range(12_000)])
    assert _chi2_pvalue(samples, sigma2) > ALPHA


@pytest.mark.parametrize("sigma2", SIGMA2S)
def test_vectorised_sampler_matches_the_exact_pmf(sigma2):
    samples = discrete_gaussian_many(sigma2, 200_000, _rng(2))
    assert samples.dtype == np.int64 and samples.shape == (200_000,)
    assert _chi2_pvalue(samples, sigma2) > ALPHA


def test_chi_square_check_has_power():
    """Negative controls: the same check rejects a 10% wrong sigma2 and a discrete Laplace
    of the same variance, so the two tests above can fail."""
    wrong = discrete_gaussian_many(Fraction(22, 10), 200_000, _rng(3))
    assert _chi2_pvalue(wrong, Fraction(2)) < ALPHA
    lap = discrete_laplace_many(Fraction(1), 200_000, _rng(4))  # variance ~ 2 as well
    assert _chi2_pvalue(lap, Fraction(2)) < ALPHA


@pytest.mark.parametrize("sampler", ["scalar", "vector"])
def test_samplers_are_symmetric(sampler):
    sigma2 = Fraction(9)
    rng = _rng(5)
    if sampler == "scalar":
        samples = np.array([discrete_gaussian(sigma2, rng) for _ in range(10_000)])
    else:
        samples = discrete_gaussian_many(sigma2, 200_000, rng)
    pos, neg = int((samples > 0).sum()), int((samples < 0).sum())
    assert stats.binomtest(pos, pos + neg, 0.5).pvalue > ALPHA
    # means: a t-test against 0
    assert stats.ttest_1samp(samples, 0.0).pvalue > ALPHA


def test_variance_is_sigma2_for_large_sigma2():
    """For sigma >= 1 the discrete Gaussian's variance is sigma2 up to exp(-2 pi^2 sigma^2)
    (CKS 2020, Corollary 9 and Proposition 19); the sample variance has standard error
    sigma2 sqrt(2 / n), and we reject beyond 4.5 of them (p < 1e-5)."""
    sigma2 = Fraction(10**8) + Fraction(1, 3)  # sigma ~ 1e4, odd denominator
    n = 200_000
    samples = discrete_gaussian_many(sigma2, n, _rng(6))
    ratio = samples.astype(float).var() / float(sigma2)
    assert abs(ratio - 1) < 4.5 * math.sqrt(2 / n)
    assert abs(samples.mean()) < 4.5 * math.sqrt(float(sigma2) / n)
    # a 5%-off variance would be caught: the tolerance is far tighter than that
    assert 4.5 * math.sqrt(2 / n) < 0.05


def test_sampler_argument_errors():
    for bad in (0, -1, Fraction(-1, 2), float("nan"), float("inf")):
        with pytest.raises(PrivregValueError, match="sigma2"):
            discrete_gaussian(bad, _rng())
        with pytest.raises(PrivregValueError, match="sigma2"):
            discrete_gaussian_many(bad, 3, _rng())
    with pytest.raises(PrivregTypeError, match="sigma2"):
        discrete_gaussian("2", _rng())
    with pytest.raises(PrivregError, match="size"):
        discrete_gaussian_many(Fraction(2), -1, _rng())
    assert discrete_gaussian_many(Fraction(2), 0, _rng()).shape == (0,)


# --- mechanism --------------------------------------------------------------------------

CONFIGS = [
    dict(epsilon=1.0, delta=1e-5, sensitivity=1.0),
    dict(epsilon=0.3, delta=1e-6, sensitivity=2.5),
    dict(epsilon=5.0, delta=1e-5, sensitivity=1.0),
    dict(epsilon=0.5, delta=1e-5, sensitivity=1.0, calibration="classic"),
    dict(epsilon=1.0, delta=1e-5, sensitivity=1.0, dimension=10),
    dict(epsilon=0.01, delta=1e-5, sensitivity=1.0),  # sigma_int > 2e5: the RDP route
]


@pytest.mark.parametrize("kw", CONFIGS)
def test_charged_event_is_the_noise_applied_and_verifies_the_target(kw):
    mech = GaussianMechanism(**kw)
    event = mech.privacy_event()
    assert isinstance(event, DiscreteGaussian)
    assert Fraction(event.sigma) == mech.sigma_int  # exactly the applied sigma, not above
    assert mech.noise_sigma2 == mech.sigma_int**2
    assert event.sensitivity == mech.integer_sensitivity
    expected = "pld" if kw.get("dimension", 1) == 1 and mech.sigma_int <= 2e5 else "rdp"
    assert mech.verification_accountant == expected
    acc = make_accountant(expected)
    acc.compose(event)
    assert acc.epsilon(kw["delta"]) <= kw["epsilon"]
    # it is not wildly over-noised either: 10% less noise fails the same check
    weaker = make_accountant(expected)
    weaker.compose(DiscreteGaussian(sigma=event.sigma * 0.9, sensitivity=event.sensitivity))
    if kw.get("calibration") != "classic":
        assert weaker.epsilon(kw["delta"]) > kw["epsilon"]


@pytest.mark.parametrize(
    "kw",
    [c for c in CONFIGS if c.get("dimension", 1) == 1 and c["epsilon"] >= 0.1 and c.get("calibration") != "classic"],
)
def test_sigma_int_is_close_to_the_continuous_analytic_calibration(kw):
    mech = GaussianMechanism(**kw)
    sigma = calibrate_gaussian_sigma(epsilon=kw["epsilon"], delta=kw["delta"], sensitivity=kw["sensitivity"])
    continuous_int = sigma / kw["sensitivity"] * mech.integer_sensitivity
    assert continuous_int <= float(mech.sigma_int) <= 1.01 * continuous_int


def test_classic_calibration_formula_and_refusal():
    mech = GaussianMechanism(epsilon=0.5, delta=1e-5, sensitivity=2.0, calibration="classic")
    formula = 2.0 * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert mech.continuous_sigma == pytest.approx(formula, rel=1e-12)
    # the classic sigma passes the discrete check unchanged (it is far from tight)
    assert float(mech.sigma_int) == pytest.approx(formula / 2.0 * mech.integer_sensitivity, rel=1e-9)
    for eps in (1.0, 2.0):
        with pytest.raises(PrivregValueError, match=r"epsilon < 1.*analytic"):
            GaussianMechanism(epsilon=eps, delta=1e-5, sensitivity=1.0, calibration="classic")


@pytest.mark.parametrize("d", [1, 2, 4, 5, 10, 17])
def test_integer_sensitivity_and_grid(d):
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, dimension=d)
    m = mech.grid.multiple
    assert m & (m - 1) == 0 and m >= 1024 * math.ceil(math.sqrt(d))
    assert mech.integer_sensitivity == (m if d == 1 else m + math.ceil(math.sqrt(d)))


def test_snapped_l2_shift_never_exceeds_the_integer_sensitivity():
    """Worst cases for rounding: coordinates just around half-grid points, shifted by a
    vector of L2 norm exactly (up to float rounding, downwards) the sensitivity."""
    rng = np.random.default_rng(7)
    for d in (2, 4, 9, 10):
        mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, dimension=d)
        grid, bound = mech.grid, mech.integer_sensitivity
        step = float(grid.step)
        worst = 0.0
        for _ in range(300):
            x = (rng.integers(-50, 50, d) + 0.5 + rng.uniform(-1e-3, 1e-3, d)) * step
            u = rng.normal(size=d)
            u /= np.linalg.norm(u) * (1 + 1e-12)
            y = x + u
            k = np.array([snap_to_grid(float(a), grid) for a in x])
            k2 = np.array([snap_to_grid(float(a), grid) for a in y])
            worst = max(worst, float(np.linalg.norm(k - k2)))
        assert worst <= bound
        assert worst > grid.multiple  # the rounding slack is really used


def test_outputs_lie_on_the_grid_and_have_the_right_shape():
    log = EventLog()
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    step = mech.grid.step
    out = mech.release(0.3, charger=log, rng=_rng()).output
    assert isinstance(out, float) and (Fraction(out) / step).denominator == 1
    many = mech.release_many(0.3, 1000, charger=log, rng=_rng()).output
    assert many.shape == (1000,)
    assert all((Fraction(float(o)) / step).denominator == 1 for o in many)
    vec = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, dimension=3, path="exact")
    out = vec.release(np.array([1.0, 2.0, 3.0]), charger=log, rng=_rng()).output
    assert out.shape == (3,)
    assert all((Fraction(float(o)) / vec.grid.step).denominator == 1 for o in out)
    assert vec.release_many([1.0, 2.0, 3.0], 50, charger=log, rng=_rng()).output.shape == (50, 3)


def test_noise_scale_of_outputs():
    """Released values around 0 have std sigma_int * step (both paths; 4.5 standard errors)."""
    for path, n in (("fast", 50_000), ("exact", 3_000)):
        mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, path=path)
        out = mech.release_many(0.0, n, charger=EventLog(), rng=_rng(8)).output
        want = float(mech.sigma_int * mech.grid.step)
        assert abs(out.std() / want - 1) < 4.5 * math.sqrt(1 / (2 * n))


def test_wrong_dimension_and_bad_data_are_refused_before_charging():
    log = EventLog()
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, dimension=3)
    with pytest.raises(PrivregValueError, match="dimension=2"):
        mech.release([1.0, 2.0], charger=log)
    with pytest.raises(PrivregValueError, match="dimension=1"):
        mech.release(1.0, charger=log)
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(PrivregValueError, match="finite"):
            mech.release([1.0, bad, 2.0], charger=log)
        with pytest.raises(PrivregValueError, match="finite"):
            mech.release_many([1.0, bad, 2.0], 10, charger=log)
    with pytest.raises(PrivregTypeError, match="value"):
        mech.release(["a", "b", "c"], charger=log)
    assert log.charges == ()
    mech.release([1.0, 2.0, 3.0], charger=log)
    assert len(log.charges) == 1 and log.events[0] == mech.privacy_event()


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(epsilon=float("inf")), "epsilon"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(delta=-1e-5), "delta"),
        (dict(delta=float("nan")), "delta"),
        (dict(sensitivity=float("nan")), "sensitivity"),
        (dict(sensitivity=float("inf")), "sensitivity"),
        (dict(sensitivity=-1.0), "sensitivity"),
        (dict(sensitivity=0.0), "sensitivity"),
        (dict(sensitivity=GlobalSensitivity(value=1.0, norm=Norm.L1)), "l2"),
        (dict(dimension=0), "dimension"),
        (dict(dimension=1.5), "dimension"),
        (dict(calibration="tight"), "calibration"),
        (dict(path="slow"), "path"),
    ],
)
def test_bad_arguments_name_the_argument(kw, name):
    base = dict(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    with pytest.raises(PrivregError, match=name):
        GaussianMechanism(**{**base, **kw})


def test_sensitivity_object_in_l2_is_accepted():
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=GlobalSensitivity(value=2.0, norm=Norm.L2))
    assert mech.sensitivity.value == 2.0 and mech.grid.step == Fraction(2, mech.grid.multiple)


# --- empirical audit --------------------------------------------------------------------


def test_the_empirical_auditor_passes():
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    result = audit_mechanism(mech, neighbours=(0.0, 1.0), samples=100_000, alpha=1e-6, claimed_delta=1e-5, rng=_rng(9))
    assert result.claimed_epsilon <= 1.0 + 1e-9
    assert result.passed, result


class _TooLittleNoise(GaussianMechanism):
    """Negative control: draws a third of the noise it charges for."""

    @property
    def noise_sigma2(self) -> Fraction:
        return (self.sigma_int / 3) ** 2


def test_the_empirical_auditor_catches_too_little_noise():
    mech = _TooLittleNoise(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    result = audit_mechanism(mech, neighbours=(0.0, 1.0), samples=100_000, alpha=1e-6, claimed_delta=1e-5, rng=_rng(10))
    assert not result.passed, result
