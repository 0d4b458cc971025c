"""A plan of several statistics (``privreg.analysis.plan``): its cost is what is then
charged, as one block; its accuracy is known before any release, in the data's units;
budgets split evenly or by weight; a refusal reads, charges and releases nothing; the
intervals cover at their stated level; results come out in the plan's order."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privreg.accountant.zcdp import ZCDPAccountant
from privreg.analysis import ONE_ROW_PER_USER, Plan, Query
from privreg.analysis.noise import rho_for
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core.charging import EventLog
from privreg.core.errors import BudgetExceededError, PrivregValueError
from privreg.core.events import Composed
from privreg.core.randomness import InsecureReproducibleRandom

N = 2_000
FRAME = pd.DataFrame(
    {
        "age": (np.arange(N) * 7919 % 74 + 17).astype(float),
        "hours": (np.arange(N) * 104729 % 99 + 1).astype(float),
        "sex": np.where(np.arange(N) % 3 == 0, "Female", "Male"),
        "grade": np.array(["c", "a", "b", "d"])[np.arange(N) % 4],
    }
)
TRUE = {
    "count": N,
    "sum(hours)": float(FRAME["hours"].sum()),
    "mean(age)": float(FRAME["age"].mean()),
    "count by grade": FRAME["grade"].value_counts().to_dict(),
    "mean(hours) by sex": FRAME.groupby("sex")["hours"].mean().to_dict(),
}


def query(session, seed=1, frame=FRAME):
    return Query(frame, privacy_unit=ONE_ROW_PER_USER, session=session, rng=InsecureReproducibleRandom(seed=seed))


def five(plan: Plan, weights=(1, 1, 1, 1, 1)) -> Plan:
    """count, sum, mean, histogram and a group-by mean (the order matters)."""
    plan.count(weight=weights[0])
    plan.sum("hours", bounds=(0, 100), weight=weights[1])
    plan.mean("age", bounds=(17, 90), weight=weights[2])
    plan.histogram("grade", categories=["d", "b", "a", "c"], weight=weights[3])
    plan.groupby("sex", keys=["Male", "Female"]).mean("hours", bounds=(0, 100), weight=weights[4])
    return plan


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_cost_is_what_is_then_charged_as_one_block(noise):
    session = BudgetSession(budget=PrivacyBudget(epsilon=3.0, delta=1e-6))
    q = query(session)
    q.count(epsilon=0.5).release()  # an earlier release: the quote is against the state now
    plan = five(q.plan(epsilon=1.0, noise=noise))
    cost = plan.cost()
    assert cost.granted and 0 < cost.epsilon <= 1.0
    before = session.spent().epsilon
    plan.release()
    assert session.spent().epsilon - before == cost.epsilon  # the same float: the same pricing
    rows = session.ledger.rows()
    assert len(rows) == 2 and rows[1].charge.event == plan.block()  # one charge for five statistics
    assert rows[1].charge.mechanism == "plan"
    described = rows[1].charge.parameters["statistics"]
    assert [d["statistic"] for d in described] == list(plan.statistics)
    if noise == "laplace":
        assert cost.epsilon == pytest.approx(1.0, rel=1e-9)  # pure DP: basic composition, the whole epsilon
    else:  # priced at the delta the plan was calibrated to (a filter's share), at most its epsilon
        assert plan.delta == pytest.approx(1e-6 / 3)
        assert 0.9 < cost.epsilon <= 1.0


def test_an_event_log_cost_is_the_tightest_non_adaptive_bound():
    plan = five(query(EventLog()).plan(epsilon=1.0, delta=1e-7, noise="gaussian"))
    cost = plan.cost()
    assert cost.granted and cost.filter.startswith("plan:") and 0.9 < cost.epsilon <= 1.0


def test_accuracy_before_release_in_data_units_reads_nothing():
    q = query(EventLog())
    plan = five(q.plan(epsilon=1.0))
    table = plan.accuracy(0.95, rows=N - 100)
    assert q._bounded is None  # nothing was read: no contribution bounding drawn
    by = dict(table)
    assert by["count"].unit == "rows" and by["count"].half_width > 0
    assert by["sum(hours)"].unit == "data units" and by["sum(hours)"].half_width > 0
    assert by["mean(age)"].unit == "data units" and 0 < by["mean(age)"].half_width < 73  # a number, given rows
    assert plan.accuracy(0.95).accuracies[2].half_width is None  # without rows it is not one
    assert "count by grade" in str(table) and "+-" in str(table)
    # what the release states is what was stated before it
    results = plan.release(level=0.95)
    before = plan.accuracy(0.95).accuracies
    for r, acc in zip(results, before, strict=True):
        assert r.accuracy == acc


def test_quantile_accuracy_is_on_the_grid_in_value_units():
    plan = query(EventLog()).plan(epsilon=1.0)
    plan.median("age", bounds=(17, 90), grid=74)
    table = plan.accuracy(0.9, rows=1000)
    (acc,) = table.accuracies
    e = acc.half_width / 1000
    assert acc.unit == "ranks" and 0 < e < 0.5
    assert table.widths == (
        f"between the true {0.5 - e:.4g} and {0.5 + e:.4g} quantiles, if the grid (step 1) holds a true quantile",
    )
    assert "grid step 1" in plan.accuracy(0.9).widths[0]  # without rows: ranks and the grid's step


def test_even_and_weighted_splits():
    even = five(query(EventLog()).plan(epsilon=1.0))
    assert even.accuracy().shares == pytest.approx((0.2,) * 5)
    weighted = five(query(EventLog()).plan(epsilon=1.0), weights=(1, 1, 2, 1, 5))
    assert weighted.accuracy().shares == pytest.approx((0.1, 0.1, 0.2, 0.1, 0.5))
    # the block's pure epsilons add up to at most the plan's, as the session adds them
    total = 0.0
    for e in weighted.block().events:
        total += e.epsilon
    assert 0.999999 < total <= 1.0
    # the count's share is half of what the even split gave it: twice the noise scale
    a, b = even.accuracy().accuracies[0], weighted.accuracy().accuracies[0]
    assert b.noise_scale == pytest.approx(2 * a.noise_scale)
    # Gaussian: the shares are of zCDP rho, and the block's rho is within the plan's
    g = five(query(EventLog()).plan(epsilon=1.0, delta=1e-7, noise="gaussian"), weights=(1, 1, 2, 1, 5))
    rho = rho_for(1.0, 1e-7)
    assert g.accuracy().shares == pytest.approx(tuple(rho * w / 10 for w in (1, 1, 2, 1, 5)))
    block_rho = ZCDPAccountant().compose(g.block()).rho
    assert 0.99 * rho < block_rho <= rho


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda q: q.plan(epsilon=1.0).count(weight=0), "weight"),
        (lambda q: q.plan(epsilon=1.0).count(weight=float("nan")), "weight"),
        (lambda q: q.plan(epsilon=-1.0), "epsilon"),
        (lambda q: q.plan(epsilon=1.0, delta=1e-6), "delta applies only to a plan with noise='gaussian'"),
        (lambda q: q.plan(epsilon=1.0, noise="normal"), "noise must be one of"),
        (lambda q: q.plan(epsilon=1.0, noise="gaussian"), "delta is required"),  # an EventLog has no budget
        (lambda q: q.plan(epsilon=1.0).groupby("sex", keys=None), "needs public keys"),
        (lambda q: q.plan(epsilon=1.0).mean("nope", bounds=(0, 1)), "nope"),
        (lambda q: q.plan(epsilon=1.0).mean("age", bounds=(9, 1)), "bounds"),
        (lambda q: q.plan(epsilon=1.0).cost(), "no statistic"),
    ],
)
def test_bad_plans_are_refused_when_built(build, match):
    with pytest.raises(PrivregValueError, match=match):
        build(query(EventLog()))


def test_a_refusal_reads_charges_and_releases_nothing():
    # a NaN that the clip rule refuses: the budget is asked first, so that is not what is seen
    frame = FRAME.assign(age=FRAME["age"].where(np.arange(N) != 5))
    for make in (
        lambda s: five(query(s, frame=frame).plan(epsilon=1.0)),
        lambda s: five(query(s, frame=frame).plan(epsilon=1.0, noise="gaussian")),
    ):
        session = BudgetSession(budget=PrivacyBudget(epsilon=0.5, delta=1e-6))
        plan = make(session)
        assert not plan.cost().granted
        with pytest.raises(BudgetExceededError, match="nothing was read, released or charged"):
            plan.release()
        assert session.ledger.rows() == [] and session.spent().epsilon == 0.0
        assert plan._query._bounded is None


def test_data_breaking_a_curator_rule_fail_before_the_one_charge():
    """Only a curator query's rule='error' refuses data; in a plan it does so before the
    block's one charge (the other rules handle any value: see test_analysis_before_release)."""
    frame = FRAME.assign(age=FRAME["age"].where(np.arange(N) != 5, 200.0))
    session = BudgetSession(budget=PrivacyBudget(epsilon=5.0, delta=1e-6))
    q = Query(
        frame, privacy_unit=ONE_ROW_PER_USER, session=session, rng=InsecureReproducibleRandom(seed=1), curator=True
    )
    plan = q.plan(epsilon=1.0)
    plan.count().mean("hours", bounds=(0, 100)).mean("age", bounds=(17, 90), rule="error")  # the third refuses
    with pytest.raises(PrivregValueError, match="outside the declared bounds"):
        plan.release()
    assert session.ledger.rows() == []


def test_missing_values_under_clip_are_released_in_a_plan():
    frame = FRAME.assign(age=FRAME["age"].where(np.arange(N) != 5))
    session = BudgetSession(budget=PrivacyBudget(epsilon=5.0, delta=1e-6))
    plan = query(session, frame=frame).plan(epsilon=1.0)
    plan.count().mean("hours", bounds=(0, 100)).mean("age", bounds=(17, 90))  # the NaN row is left out
    assert len(plan.release()) == 3
    assert len(session.ledger.rows()) == 1


def _covered(stat, value, interval):
    if isinstance(value, dict):
        return [interval[k][0] <= TRUE[stat][k] <= interval[k][1] for k in value]
    return [interval[0] <= TRUE[stat] <= interval[1]]


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_intervals_cover_at_their_stated_level(noise):
    """200 seeded releases of the plan at level 0.9. Each interval covers with probability
    at least 0.9, so its misses are at most Binomial(200, 0.1); failing at more than 40
    misses has a false-alarm rate below 1e-5 per interval (scipy.stats.binom.sf), 1e-4
    over the 9 intervals of the plan. Deterministic: seeds 0..199."""
    runs, limit = 200, 40
    assert stats.binom.sf(limit, runs, 0.1) < 1e-5
    misses: dict[str, list[int]] = {}
    delta = 1e-7 if noise == "gaussian" else None
    for seed in range(runs):
        plan = five(query(EventLog(), seed=seed).plan(epsilon=0.5, delta=delta, noise=noise))
        for r in plan.release(level=0.9):
            for i, ok in enumerate(_covered(r.statistic, r.value, r.interval)):
                misses.setdefault(f"{r.statistic}[{i}]", []).append(0 if ok else 1)
    assert len(misses) == 9
    for name, m in misses.items():
        assert sum(m) <= limit, (name, sum(m))
    # and the noise is not zero: some interval misses now and then, or the half-width is loose
    assert sum(sum(m) for m in misses.values()) > 0


def test_results_come_out_in_the_plan_order_and_keys_in_canonical_order():
    plan = query(EventLog()).plan(epsilon=1.0)
    plan.histogram("grade", categories=["d", "b", "a", "c"]).mean("age", bounds=(17, 90)).count()
    results = plan.release()
    assert [r.statistic for r in results] == ["count by grade", "mean(age)", "count"] == list(plan.statistics)
    assert list(results[0].value) == ["a", "b", "c", "d"] == list(results[0].interval)


def test_same_seed_same_releases_and_a_plan_may_follow_an_earlier_release():
    session = BudgetSession(budget=PrivacyBudget(epsilon=3.0, delta=1e-6))
    first = five(query(session, seed=4).plan(epsilon=1.0)).release()
    again = five(query(EventLog(), seed=4).plan(epsilon=1.0)).release()
    assert [r.value for r in first] == [r.value for r in again]
    # the next plan chosen from the first's output (rows: the low end of its DP count); the
    # session's filters compose the two blocks (adaptive choice of the second is allowed)
    rows = int(first[0].interval[0])
    plan = query(session, seed=5).plan(epsilon=1.0)
    plan.mean("age", bounds=(17, 90))
    assert plan.accuracy(rows=rows).accuracies[0].half_width is not None
    plan.release()
    assert session.spent().epsilon == pytest.approx(2.0)
    assert isinstance(session.ledger.rows()[1].charge.event, Composed)
    assert math.isfinite(session.remaining().epsilon)
