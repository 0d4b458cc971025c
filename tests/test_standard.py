"""The standard plugin's Laplace mechanism, randomized response and workflow."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privreg import (
    EventLog,
    GlobalSensitivity,
    InsecureReproducibleRandom,
    LocalSensitivity,
    PrivregTypeError,
    PrivregValueError,
    WorkflowContext,
)
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.noise import Grid
from privreg.plugins.standard.workflows import bounded_mean


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), -1.0, 0.0, True, "1"])
def test_laplace_rejects_bad_epsilon(eps):
    with pytest.raises((PrivregValueError, PrivregTypeError), match="epsilon"):
        LaplaceMechanism(epsilon=eps, sensitivity=1.0)


@pytest.mark.parametrize("sens", [float("nan"), float("inf"), -1.0, 0.0])
def test_laplace_rejects_bad_sensitivity(sens):
    with pytest.raises(PrivregValueError, match="sensitivity"):
        LaplaceMechanism(epsilon=1.0, sensitivity=sens)


def test_laplace_refuses_local_sensitivity_and_wrong_norm():
    with pytest.raises(PrivregValueError, match="SmoothSensitivity"):
        LaplaceMechanism(epsilon=1.0, sensitivity=LocalSensitivity(function=lambda d: 1.0))
    with pytest.raises(PrivregValueError, match="norm"):
        LaplaceMechanism(epsilon=1.0, sensitivity=GlobalSensitivity(value=1.0, norm="l2"))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1.0, float("-inf")], "abc"])
def test_laplace_rejects_non_finite_data_and_charges_nothing(value):
    log = EventLog()
    with pytest.raises((PrivregValueError, PrivregTypeError), match="value"):
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0).release(value, charger=log)
    assert log.charges == ()


@pytest.mark.parametrize("path", ["fast", "exact"])
@pytest.mark.parametrize("eps, dim", [(0.3, 1), (0.3, 7), (5.0, 1), (1e-3, 2)])
def test_laplace_charges_the_discrete_noise_it_adds(path, eps, dim):
    mech = LaplaceMechanism(epsilon=eps, sensitivity=2.0, dimension=dim, path=path)
    event = mech.privacy_event()
    grid = Grid.for_query(sensitivity=2.0, epsilon=eps, dimension=dim)
    assert event.sensitivity == (grid.multiple if dim == 1 else grid.multiple + dim)
    realised = Fraction(event.sensitivity) / mech.noise_scale  # epsilon of the noise drawn
    assert realised <= Fraction(eps), "rounding may only add noise"
    assert Fraction(event.sensitivity) / Fraction(event.scale) >= realised, "the charge may not understate"
    assert event.epsilon == pytest.approx(eps, rel=1e-9)


def test_laplace_event_and_grid_output():
    mech = LaplaceMechanism(epsilon=0.3, sensitivity=2.0)
    grid = Grid.for_query(sensitivity=2.0, epsilon=0.3, dimension=1)
    rng = InsecureReproducibleRandom(seed=4)
    for x in (0.1, 1e6 + 0.3, -7.77):
        out = mech.release(x, charger=EventLog(), rng=rng).output
        assert (Fraction(out) / grid.step).denominator == 1, "output must lie on the grid"


def test_laplace_vector_release_keeps_shape():
    mech = LaplaceMechanism(epsilon=1.0, sensitivity=1.0, dimension=5)
    out = mech.release(np.arange(5.0), charger=EventLog(), rng=InsecureReproducibleRandom(seed=1)).output
    assert out.shape == (5,)
    with pytest.raises(PrivregValueError, match="dimension=5"):
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0).release(np.arange(5.0), charger=EventLog())


def test_laplace_noise_follows_the_laplace_distribution():
    """KS test of 20,000 noise draws against Laplace(0, sensitivity/epsilon).
    False-alarm rate: we reject at p < 1e-4 (the seed makes the outcome deterministic).
    The grid is 1/1024 of the scale, so discretisation moves the CDF by < 1e-3, far below
    the KS critical value (~0.014) at this sample size."""
    mech = LaplaceMechanism(epsilon=0.5, sensitivity=1.0)
    out = mech.release_many(0.0, 20_000, charger=EventLog(), rng=InsecureReproducibleRandom(seed=11)).output
    scale = float(mech.noise_scale * mech.grid.step)  # = sensitivity / epsilon on the grid
    assert stats.kstest(out, stats.laplace(scale=scale).cdf).pvalue > 1e-4
    wrong = stats.kstest(out, stats.laplace(scale=0.8 * scale).cdf).pvalue
    assert wrong < 1e-4, "the test must be able to tell a 20% smaller scale apart"


def test_randomized_response_keep_probability_is_conservative():
    for eps, k in [(0.1, 2), (1.0, 4), (5.0, 100), (12.0, 3)]:
        rr = RandomizedResponse(epsilon=eps, k=k)
        p = rr.keep_probability
        q = (1 - p) / (k - 1)
        assert math.log(p / q) <= eps, "realised LDP epsilon must not exceed the claimed one"
        assert eps - math.log(p / q) < 1e-9, "and must not waste noticeable budget"


def test_randomized_response_estimator_is_unbiased():
    """Each estimate is compared with the truth in units of its standard deviation.
    With 1e6 users the estimate is normal to high accuracy; |z| > 5 has probability
    5.7e-7 per category, so the false-alarm rate of this test is < 3e-6 (seeded)."""
    rr = RandomizedResponse(epsilon=1.0, k=4)
    truth = np.array([100_000, 200_000, 300_000, 400_000])
    x = np.repeat(np.arange(4), truth)
    out = rr.randomize(x, charger=EventLog(), rng=InsecureReproducibleRandom(seed=8))
    est = rr.estimate(out.reports)
    z = (est.counts - truth) / np.sqrt(est.variance)
    assert np.all(np.abs(z) < 5), z
    # keep rate itself: the first category's reports
    kept = np.mean(out.reports[: truth[0]] == 0)
    p = float(rr.keep_probability)
    assert abs(kept - p) < 5 * math.sqrt(p * (1 - p) / truth[0])


def test_randomized_response_other_values_are_uniform():
    """Reports that differ from the input are uniform over the other k-1 categories.
    Chi-square test, rejected at p < 1e-4 (seeded, deterministic)."""
    rr = RandomizedResponse(epsilon=0.5, k=6)
    out = rr.randomize(np.full(200_000, 2), charger=EventLog(), rng=InsecureReproducibleRandom(seed=2))
    changed = out.reports[out.reports != 2]
    counts = np.bincount(changed, minlength=6)
    assert counts[2] == 0
    assert stats.chisquare(np.delete(counts, 2)).pvalue > 1e-4


@pytest.mark.parametrize(
    "inputs, error, words",
    [
        (np.array([0, 4]), PrivregValueError, "outside the declared domain"),
        (np.array([-1]), PrivregValueError, "outside the declared domain"),
        (np.array([0.5]), PrivregTypeError, "integer"),
        (np.array([[0, 1]]), PrivregValueError, "1-d"),
    ],
)
def test_randomized_response_rejects_inputs_outside_the_domain(inputs, error, words):
    log = EventLog()
    with pytest.raises(error, match=words):
        RandomizedResponse(epsilon=1.0, k=4).randomize(inputs, charger=log)
    assert log.charges == ()


def _ctx():
    return WorkflowContext(rng=InsecureReproducibleRandom(seed=3))


def test_bounded_mean_refuses_data_outside_declared_bounds():
    # only the curator's check refuses by the data; the bounds themselves are checked for all
    with pytest.raises(PrivregValueError, match="outside"):
        bounded_mean(context=_ctx(), input=None, column="age", lower=17, upper=50, epsilon=1, curator=True)
    with pytest.raises(PrivregValueError, match="lower"):
        bounded_mean(context=_ctx(), input=None, column="age", lower=5, upper=5, epsilon=1)


def test_bounded_mean_on_a_csv_with_header(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x,y\n" + "\n".join(f"{i % 10},{i}" for i in range(1000)) + "\n")
    ctx = _ctx()
    result = bounded_mean(context=ctx, input=path, column="x", lower=0, upper=9, epsilon=4)
    assert abs(result.metrics["mean"] - 4.5) < 0.5
    assert [c.event.epsilon for c in ctx.charger.charges] == pytest.approx([2.0, 2.0], rel=1e-9)
    assert [c.label for c in ctx.charger.charges] == ["count(x)", "sum(x)"]
    with pytest.raises(PrivregValueError, match="column 'z'"):
        bounded_mean(context=ctx, input=path, column="z", lower=0, upper=9, epsilon=4)


def test_shuffle_permutation_is_uniform():
    """All 24 orders of 4 reports are equally likely. Chi-square over 24,000 shuffles,
    rejected at p < 1e-4 (seeded, deterministic)."""
    from itertools import permutations

    from privreg.core.randomizer import secure_permutation

    rng = InsecureReproducibleRandom(seed=6)
    index = {p: i for i, p in enumerate(permutations(range(4)))}
    counts = np.zeros(24)
    for _ in range(24_000):
        counts[index[tuple(secure_permutation(4, rng))]] += 1
    assert stats.chisquare(counts).pvalue > 1e-4
    assert counts.min() > 0


def test_discrete_laplace_mechanism_pmf_event_and_validation():
    """Noise frequencies match the exact two-sided geometric pmf (chi-square, rejected at
    p < 1e-4, seeded); the event is the DiscreteLaplace applied; non-integers are refused."""
    from privreg.core import DiscreteLaplace
    from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism

    for path in ("fast", "exact"):
        mech = DiscreteLaplaceMechanism(epsilon=0.7, sensitivity=2, path=path)
        event = mech.privacy_event()
        assert isinstance(event, DiscreteLaplace) and event.sensitivity == 2
        assert event.scale == pytest.approx(2 / 0.7, rel=1e-12)
        assert Fraction(event.scale) <= mech.noise_scale, "claim no more noise than applied"
        n = 40_000 if path == "fast" else 4_000
        out = mech.release_many(10, n, charger=EventLog(), rng=InsecureReproducibleRandom(seed=9)).output
        z = np.asarray(out) - 10
        a = 0.7 / 2
        support = np.arange(-12, 13)
        pmf = np.tanh(a / 2) * np.exp(-a * np.abs(support))
        observed = np.array([np.sum(z == s) for s in support] + [np.sum(np.abs(z) > 12)])
        expected = n * np.append(pmf, 1 - pmf.sum())
        assert stats.chisquare(observed, expected).pvalue > 1e-4
    log = EventLog()
    with pytest.raises(PrivregTypeError, match="integers"):
        DiscreteLaplaceMechanism(epsilon=1.0, sensitivity=1).release(2.5, charger=log)
    with pytest.raises(PrivregValueError, match="dimension=3"):
        DiscreteLaplaceMechanism(epsilon=1.0, sensitivity=1).release([1, 2, 3], charger=log)
    assert log.charges == ()
