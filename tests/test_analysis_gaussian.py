"""The Gaussian option of ``privreg.analysis`` (``noise="gaussian"``): for each of count,
sum, mean, histogram and group-by, the charged events are the discrete Gaussians drawn,
at the largest zCDP rho that implies (epsilon, delta); the stated half-width is the
smallest one the exact noise law allows; the intervals cover; and for many statistics
zCDP composition gives smaller intervals than pure DP at the same (epsilon, delta)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privreg.accountant.zcdp import ZCDPAccountant, zcdp_epsilon
from privreg.analysis import ONE_ROW_PER_USER, Query
from privreg.analysis.noise import discrete_gaussian_exact_half_width, rho_for
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregValueError
from privreg.core.events import DiscreteGaussian
from privreg.core.randomness import InsecureReproducibleRandom

N = 1_200
FRAME = pd.DataFrame(
    {
        "uid": np.arange(N) // 2,  # two rows per person
        "x": (np.arange(N) * 37 % 50).astype(float),
        "g": np.array(["b", "a", "c"])[np.arange(N) % 3],
    }
)
EPS, DELTA = 1.0, 1e-6

# statistic name -> (build on a query, exact value(s) on the frame)
STATS = {
    "count": (lambda q: q.count(epsilon=EPS, delta=DELTA, noise="gaussian"), N),
    "sum": (lambda q: q.sum("x", bounds=(0, 50), epsilon=EPS, delta=DELTA, noise="gaussian"), FRAME["x"].sum()),
    "mean": (lambda q: q.mean("x", bounds=(0, 50), epsilon=EPS, delta=DELTA, noise="gaussian"), FRAME["x"].mean()),
    "histogram": (
        lambda q: q.histogram("g", categories=["a", "b", "c"], epsilon=EPS, delta=DELTA, noise="gaussian"),
        FRAME["g"].value_counts().to_dict(),
    ),
    "groupby count": (
        lambda q: q.groupby("g", keys=["a", "b", "c"]).count(epsilon=EPS, delta=DELTA, noise="gaussian"),
        FRAME["g"].value_counts().to_dict(),
    ),
    "groupby sum": (
        lambda q: q.groupby("g", keys=["a", "b", "c"]).sum(
            "x", bounds=(0, 50), epsilon=EPS, delta=DELTA, noise="gaussian"
        ),
        FRAME.groupby("g")["x"].sum().to_dict(),
    ),
    "groupby mean": (
        lambda q: q.groupby("g", keys=["a", "b", "c"]).mean(
            "x", bounds=(0, 50), epsilon=EPS, delta=DELTA, noise="gaussian"
        ),
        FRAME.groupby("g")["x"].mean().to_dict(),
    ),
}


def query(session=None, seed=0):
    # every person's two rows are kept (k = 2), so the exact values are the frame's
    return Query(
        FRAME,
        privacy_unit="uid",
        max_rows_per_user=2,
        session=session if session is not None else EventLog(),
        rng=InsecureReproducibleRandom(seed=seed),
    )


def _coverage(sigma: float, t: int) -> float:
    """``P(|Z| <= t)`` for ``N_Z(0, sigma^2)``, its probabilities summed to 40 sigma."""
    y = np.arange(-math.ceil(40 * sigma) - 1, math.ceil(40 * sigma) + 2)
    w = np.exp(-(y.astype(np.float64) ** 2) / (2 * sigma**2))
    return float(w[np.abs(y) <= t].sum() / w.sum())


@pytest.mark.parametrize("name", list(STATS))
def test_the_charge_is_the_discrete_gaussians_at_the_rho_of_epsilon_delta(name):
    log = EventLog()
    build, _ = STATS[name]
    build(query(log)).release()
    events = log.events
    assert events and all(isinstance(e, DiscreteGaussian) for e in events)
    rho = ZCDPAccountant().compose(*events).rho if len(events) == 1 else sum(e.rho for e in events)
    target = rho_for(EPS, DELTA)
    assert 0.98 * target < rho <= target  # the budget used up to the grid's rounding (1% for a vector), never above
    assert zcdp_epsilon(rho, DELTA) <= EPS
    if name in ("count", "histogram", "groupby count"):  # a person's 2 rows move counts by 2 in L2
        (e,) = events
        assert e.sensitivity == 2 and e.sigma == pytest.approx(2 / math.sqrt(2 * target))
        assert e.dimension == (3 if name != "count" else 1)


def test_rho_for_is_the_largest_rho_within_epsilon_delta():
    rho = rho_for(EPS, DELTA)
    assert zcdp_epsilon(rho, DELTA) <= EPS < zcdp_epsilon(rho * (1 + 1e-9), DELTA)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.7, 25.0, 600.0])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999])
def test_the_half_width_is_the_smallest_the_exact_law_allows(sigma, level):
    t = discrete_gaussian_exact_half_width(sigma, level)
    assert _coverage(sigma, t) >= level
    assert t == 0 or _coverage(sigma, t - 1) < level + 1e-9


@pytest.mark.parametrize("name", ["count", "histogram"])
def test_counts_state_the_exact_law_half_width(name):
    build, _ = STATS[name]
    planned = build(query())
    acc = planned.accuracy(0.9)
    sigma = acc.noise_scale
    t = int(acc.half_width)
    assert acc.exact and acc.mechanism == "discrete-gaussian"
    assert _coverage(sigma, t) >= 0.9 > _coverage(sigma, t - 1) - 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("name", list(STATS))
def test_intervals_cover_at_their_stated_level(name):
    """300 seeded releases at level 0.8 (a low level, so that a miscalibrated interval
    misses often enough to be seen). Misses of one interval are at most Binomial(300,
    0.2); failing at more than 90 has a false-alarm rate below 1e-4 (scipy.stats.binom.sf)
    per interval, 2.1e-3 over the 21 intervals of this test. Seeds 0..299."""
    runs, limit = 300, 90
    assert stats.binom.sf(limit, runs, 0.2) < 1e-4
    build, truth = STATS[name]
    misses: dict[object, int] = {}
    for seed in range(runs):
        r = build(query(seed=seed)).release(level=0.8)
        if isinstance(truth, dict):
            for k in truth:
                misses[k] = misses.get(k, 0) + (not r.interval[k][0] <= truth[k] <= r.interval[k][1])
        else:
            misses[None] = misses.get(None, 0) + (not r.interval[0] <= truth <= r.interval[1])
    assert all(m <= limit for m in misses.values()), misses
    assert sum(misses.values()) > 0  # noise is drawn: at level 0.8 some interval misses


def _plan(q, k, noise):
    plan = q.plan(epsilon=EPS, delta=DELTA / 3 if noise == "gaussian" else None, noise=noise)
    for _ in range(k):
        plan.count()
    return plan


@pytest.mark.parametrize("k", [20, 50])
def test_zcdp_composition_beats_pure_dp_for_many_statistics(k):
    """k counts at the same (epsilon, delta) of the session: the Gaussian plan's 95%
    half-width is smaller, and both are granted within epsilon (the session's quote)."""
    widths, costs = {}, {}
    for noise in ("laplace", "gaussian"):
        session = BudgetSession(budget=PrivacyBudget(epsilon=EPS, delta=DELTA))
        plan = _plan(query(session), k, noise)
        widths[noise] = plan.accuracy(0.95).accuracies[0].half_width
        costs[noise] = plan.cost()
        plan.release()
        assert session.spent().epsilon == costs[noise].epsilon <= EPS
    assert costs["laplace"].granted and costs["gaussian"].granted
    assert widths["gaussian"] < 0.85 * widths["laplace"], widths


def test_few_statistics_are_not_better_under_zcdp():
    """The other side of the trade-off (why Laplace stays the default): one count."""
    lap = _plan(query(), 1, "laplace").accuracy(0.95).accuracies[0].half_width
    gau = _plan(query(), 1, "gaussian").accuracy(0.95).accuracies[0].half_width
    assert lap < gau


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda q: q.count(epsilon=1.0, noise="gaussian"), "delta is required with noise='gaussian'"),
        (lambda q: q.count(epsilon=1.0, delta=1e-6), "delta applies only with noise='gaussian'"),
        (lambda q: q.sum("x", bounds=(0, 1), epsilon=1.0, delta=1e-6), "delta applies only"),
        (lambda q: q.count(epsilon=1.0, delta=0.0, noise="gaussian"), "delta"),
        (lambda q: q.count(epsilon=1.0, delta=1e-6, noise="normal"), "noise must be one of"),
        (lambda q: q.groupby("g").count(epsilon=1.0, delta=1e-6, noise="gaussian"), "needs public keys"),
        (lambda q: q.mean("x", bounds=(0, 1), epsilon=0.0, delta=1e-6, noise="gaussian"), "epsilon"),
    ],
)
def test_bad_gaussian_parameters_are_refused_when_built(build, match):
    with pytest.raises(PrivregValueError, match=match):
        build(query())


def test_one_row_per_user_gaussian_count_has_sensitivity_one():
    log = EventLog()
    q = Query(FRAME, privacy_unit=ONE_ROW_PER_USER, session=log, rng=InsecureReproducibleRandom(seed=1))
    q.count(epsilon=EPS, delta=DELTA, noise="gaussian").release()
    (e,) = log.events
    assert e.sensitivity == 1 and e.rho == pytest.approx(rho_for(EPS, DELTA))
