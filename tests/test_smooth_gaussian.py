"""The smooth-sensitivity Gaussian (paper 003, Theorem 2) and the median's smooth bound."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privreg.audit import audit_mechanism
from privreg.core import EventLog
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import ApproxDP
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.sensitivity import GlobalSensitivity, Norm, Sensitivity, SensitivityKind
from privreg.mechanisms.median import (
    MedianQuery,
    median_local_sensitivity,
    median_smooth_sensitivity,
    smooth_median_mechanism,
)
from privreg.mechanisms.smooth_gaussian import (
    SmoothGaussianMechanism,
    privacy_loss_bound,
    smooth_gaussian_parameters,
)


def test_alpha_beta_are_theorem_2_with_p_1() -> None:
    # paper 003, Theorem 2: alpha = eps / (5 sqrt(2 ln(2/delta))), beta = eps / (4 (p + ln(2/delta)))
    alpha, beta = smooth_gaussian_parameters(epsilon=2.0, delta=1e-5)
    assert alpha == pytest.approx(2.0 / (5 * math.sqrt(2 * math.log(2e5))), rel=1e-12)
    assert beta == pytest.approx(2.0 / (4 * (1 + math.log(2e5))), rel=1e-12)


@pytest.mark.parametrize(
    "epsilon, delta",
    [
        *itertools.product([0.01, 0.1, 0.5, 1.0, 2.0], [1e-12, 1e-9, 1e-6, 1e-3, 0.1]),
        *itertools.product([4.0, 8.0], [1e-12, 1e-9, 1e-6]),
    ],
)
def test_paper_constants_are_certified_by_the_lemma(epsilon: float, delta: float) -> None:
    alpha, beta = smooth_gaussian_parameters(epsilon=epsilon, delta=delta)
    assert privacy_loss_bound(alpha=alpha, beta=beta, delta=delta) < 0.95 * epsilon
    _median_mech(epsilon=epsilon, delta=delta)  # accepted


@pytest.mark.parametrize("epsilon, delta", [(8.0, 0.1), (20.0, 1e-6), (50.0, 1e-12)])
def test_large_epsilon_with_large_delta_is_not_certified(epsilon: float, delta: float) -> None:
    with pytest.raises(PrivregValueError, match="cannot be certified"):
        _median_mech(epsilon=epsilon, delta=delta)


def test_privacy_loss_bound_grows_with_alpha_and_beta() -> None:
    base = privacy_loss_bound(alpha=0.05, beta=0.01, delta=1e-6)
    assert privacy_loss_bound(alpha=0.1, beta=0.01, delta=1e-6) > base
    assert privacy_loss_bound(alpha=0.05, beta=0.02, delta=1e-6) > base


def _median_mech(**kw: object) -> SmoothGaussianMechanism:
    params = {"epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 1.0}
    params.update(kw)
    return smooth_median_mechanism(**params)  # type: ignore[arg-type]


def test_uncertifiable_configuration_is_refused() -> None:
    with pytest.raises(PrivregValueError, match="cannot be certified"):
        _median_mech(epsilon=50.0)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"lower": 1.0, "upper": 0.0}, "lower"),
        ({"upper": float("inf")}, "upper"),
        ({"step": 0.0}, "step"),
        ({"step": float("nan")}, "step"),
    ],
)
def test_bad_configuration_names_the_argument(kw: dict, match: str) -> None:
    with pytest.raises(PrivregValueError, match=match):
        _median_mech(**kw)


def test_sensitivity_must_be_smooth_with_small_enough_beta() -> None:
    q = MedianQuery(lower=0.0, upper=1.0)
    _, beta = smooth_gaussian_parameters(epsilon=1.0, delta=1e-6)
    for wrong in (GlobalSensitivity(value=1.0), median_local_sensitivity(lower=0.0, upper=1.0)):
        with pytest.raises(PrivregTypeError, match="smooth"):
            SmoothGaussianMechanism(epsilon=1.0, delta=1e-6, query=q, sensitivity=wrong, step=1e-6)
    too_loose = median_smooth_sensitivity(lower=0.0, upper=1.0, beta=2 * beta)
    with pytest.raises(PrivregValueError, match="beta"):
        SmoothGaussianMechanism(epsilon=1.0, delta=1e-6, query=q, sensitivity=too_loose, step=1e-6)


def test_bad_data_is_refused_before_anything_is_charged() -> None:
    mech = _median_mech()
    log = EventLog()
    for data, match in [
        ([0.5, 1.5], "outside the declared bounds"),
        ([0.5, float("nan")], "finite"),
        ([], "empty"),
        (None, "dataset"),
    ]:
        with pytest.raises(PrivregValueError, match=match):
            mech.release(data, charger=log)
    assert len(log.events) == 0


def test_release_charges_approx_dp_and_lands_on_the_public_grid() -> None:
    mech = _median_mech(step=2.0**-10)
    log = EventLog()
    out = mech.release(np.linspace(0, 1, 101), charger=log, rng=InsecureReproducibleRandom(seed=3))
    assert log.events[0] == ApproxDP(epsilon=1.0, delta=1e-6, neighbouring="replace_one")
    assert (out.output / 2.0**-10) == round(out.output / 2.0**-10)


def test_noise_scale_follows_the_smooth_bound() -> None:
    """Sample variance matches sigma^2 = ((S + g) / (alpha g))^2 grid units, within a
    chi-square interval of false-alarm rate 1e-6 (fixed seed)."""
    mech = _median_mech(step=2.0**-12)
    rng = InsecureReproducibleRandom(seed=11)
    x = np.random.default_rng(0).uniform(0, 1, 501)
    centre, sigma2 = mech.noise_parameters(x)
    s = mech.sensitivity.bound(x)
    g = Fraction(2) ** -12
    exact = (Fraction(s) + g) / (Fraction(mech.alpha) * g)
    assert exact**2 <= sigma2 <= exact**2 * (1 + 2.0**-21)
    n = 20_000
    draws = mech.release_many(x, n, charger=EventLog(), rng=rng).output / 2.0**-12 - centre
    var = float(np.var(draws, ddof=1))
    lo, hi = stats.chi2.ppf([0.5e-6, 1 - 0.5e-6], n - 1) / (n - 1)
    assert lo * float(sigma2) <= var <= hi * float(sigma2)
    assert abs(np.mean(draws)) < 5.5 * math.sqrt(float(sigma2) / n)


def _brute_local(q: MedianQuery, x: np.ndarray, values: np.ndarray) -> float:
    """max over one-record replacements (by any value in ``values``) of |median change|."""
    base = q(x)
    best = 0.0
    for i, val in itertools.product(range(x.size), values):
        y = x.copy()
        y[i] = val
        best = max(best, abs(q(y) - base))
    return best


def _brute_at_distance(q: MedianQuery, x: np.ndarray, k: int, values: np.ndarray) -> float:
    """max over datasets within k replacements of their local sensitivity (tiny inputs)."""
    best = 0.0
    for idx in itertools.combinations(range(x.size), k):
        for vals in itertools.product(values, repeat=k):
            y = x.copy()
            y[list(idx)] = vals
            best = max(best, _brute_local(q, y, values))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_median_local_sensitivity_at_distance_matches_brute_force(seed: int) -> None:
    # on a finite value grid containing the bounds, replacing by a grid value attains the max
    r = np.random.default_rng(seed)
    values = np.linspace(0.0, 1.0, 6)
    x = r.choice(values, size=int(r.integers(1, 6)))
    q = MedianQuery(lower=0.0, upper=1.0)
    for k in range(3):
        assert q.local_at_distance(x, k) == pytest.approx(_brute_at_distance(q, x, k, values))


@pytest.mark.parametrize("seed", range(6))
def test_smooth_bound_dominates_local_sensitivity(seed: int) -> None:
    r = np.random.default_rng(100 + seed)
    values = np.linspace(0.0, 1.0, 11)
    x = r.choice(values, size=int(r.integers(1, 9)))
    q = MedianQuery(lower=0.0, upper=1.0)
    smooth = median_smooth_sensitivity(lower=0.0, upper=1.0, beta=0.3)
    assert smooth.bound(x) >= _brute_local(q, x, values) - 1e-12
    assert median_local_sensitivity(lower=0.0, upper=1.0).bound(x) == pytest.approx(_brute_local(q, x, values))


@settings(max_examples=200)  # cheap examples over many neighbour pairs
@given(
    data=st.lists(st.floats(0, 1), min_size=1, max_size=15),
    index=st.integers(0, 14),
    value=st.floats(0, 1),
    beta=st.floats(0.01, 1.0),
)
def test_smooth_bound_is_beta_smooth(data: list, index: int, value: float, beta: float) -> None:
    x = np.array(data)
    y = x.copy()
    y[index % x.size] = value
    s = median_smooth_sensitivity(lower=0.0, upper=1.0, beta=beta)
    a, b = s.bound(x), s.bound(y)
    assert a <= math.exp(beta) * b * (1 + 1e-12) + 1e-15
    assert b <= math.exp(beta) * a * (1 + 1e-12) + 1e-15


@attrs.frozen(kw_only=True)
class _LocalPretendingSmooth(Sensitivity):
    """A bug: local sensitivity passed off as a smooth bound."""

    kind = SensitivityKind.SMOOTH
    beta: float
    norm: Norm = Norm.L1

    def bound(self, data: object = None) -> float:
        return MedianQuery(lower=0.0, upper=1.0).local_at_distance(data, 0)


@pytest.mark.slow
def test_auditor_catches_local_sensitivity_noise() -> None:
    """Negative control: noise scaled to local sensitivity leaks (NRS 2007, Section 1.2).
    At x the median's local sensitivity is 0, at its neighbour 1; the auditor's lower bound
    exceeds the claimed epsilon (false-alarm rate of a correct claim: alpha = 1e-6)."""
    _, beta = smooth_gaussian_parameters(epsilon=1.0, delta=1e-6)
    broken = SmoothGaussianMechanism(
        epsilon=1.0,
        delta=1e-6,
        query=MedianQuery(lower=0.0, upper=1.0),
        sensitivity=_LocalPretendingSmooth(beta=beta),
        step=2.0**-20,
    )
    x = np.array([0.0] * 6 + [1.0] * 3)
    y = np.array([0.0] * 5 + [1.0] * 4)
    result = audit_mechanism(
        broken,
        neighbours=(x, y),
        samples=20_000,
        alpha=1e-6,
        claimed_delta=1e-6,
        rng=InsecureReproducibleRandom(seed=5),
    )
    assert not result.passed
    fixed = _median_mech(step=2.0**-20)
    ok = audit_mechanism(
        fixed, neighbours=(x, y), samples=20_000, alpha=1e-6, claimed_delta=1e-6, rng=InsecureReproducibleRandom(seed=5)
    )
    assert ok.passed


def test_a_smooth_release_is_a_replace_one_guarantee_and_budgets_treat_it_so() -> None:
    """NRS smooth bounds compare datasets of one size: an add/remove budget must refuse
    the release (nothing charged) instead of reading it as an add/remove guarantee, and a
    replace-one budget must charge it as it is, without the group-privacy doubling."""
    from privreg.budget.session import BudgetSession, PrivacyBudget
    from privreg.core.errors import BudgetExceededError

    data = np.linspace(0, 1, 101)
    add_remove = BudgetSession(budget=PrivacyBudget(epsilon=10.0, delta=1e-3), ledger=":memory:")
    with pytest.raises(BudgetExceededError):
        _median_mech().release(data, charger=add_remove, rng=InsecureReproducibleRandom(seed=1))
    assert add_remove.remaining().epsilon == 10.0  # nothing charged
    replace = BudgetSession(
        budget=PrivacyBudget(epsilon=1.0, delta=1e-6, neighbouring="replace_one"),
        ledger=":memory:",
        filters=("basic",),
    )
    _median_mech().release(data, charger=replace, rng=InsecureReproducibleRandom(seed=1))
    assert replace.spent().by_filter["basic"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "epsilon, delta, fix",
    [(50.0, 1e-6, "use a smaller epsilon"), (8.0, 0.1, "use a smaller epsilon"), (1e-6, 1e-9, "use a larger epsilon")],
)
def test_an_uncertifiable_epsilon_is_told_which_way_to_move(epsilon: float, delta: float, fix: str) -> None:
    """The lemma fails at both ends; the remedy names the direction that certifies."""
    with pytest.raises(PrivregValueError, match=fix):
        _median_mech(epsilon=epsilon, delta=delta)
