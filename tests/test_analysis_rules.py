"""privreg.analysis: declared bounds and rules, contribution bounding, and the errors for
queries built without a privacy unit or bounds."""

import numpy as np
import pandas as pd
import pytest

from privreg.analysis import ONE_ROW_PER_USER, Query
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom

AGES = np.array([20.0, 30.0, 40.0, 60.0, 75.0, 90.0] * 500)


def session():
    return BudgetSession(budget=PrivacyBudget(epsilon=100.0, delta=1e-6))


def query(frame=None, **kw):
    frame = pd.DataFrame({"age": AGES}) if frame is None else frame
    kw.setdefault("privacy_unit", ONE_ROW_PER_USER)
    kw.setdefault("session", session())
    return Query(frame, rng=InsecureReproducibleRandom(seed=3), **kw)


def test_a_wrong_bound_is_clipped_and_recorded_in_the_ledger():
    q = query()
    r = q.mean("age", bounds=(18, 50), epsilon=40.0).release()  # 50 is wrong: ages reach 90
    clipped = np.clip(AGES, 18, 50).mean()
    assert abs(r.value - clipped) < 0.05 and abs(r.value - AGES.mean()) > 5
    assert r.interval[0] <= clipped <= r.interval[1]
    rows = q.session.ledger.rows()
    assert [row.charge.parameters["analysis"]["part"] for row in rows] == ["count", "centred_sum"]
    for row in rows:
        analysis = row.charge.parameters["analysis"]
        assert analysis["bounds"] == [18.0, 50.0] and analysis["rule"] == "clip" and analysis["column"] == "age"
        assert analysis["privacy_unit"] == "one_row_per_user" and analysis["max_rows_per_user"] == 1
        # how many values were clipped is data: it appears nowhere in the ledger entry
        n_clipped = int((AGES > 50).sum())
        assert str(n_clipped) not in str(row.charge.to_dict())


def test_drop_rule_leaves_rows_out_and_error_rule_needs_a_curator_query():
    q = query()
    r = q.mean("age", bounds=(18, 50), epsilon=40.0, rule="drop").release()
    assert abs(r.value - AGES[AGES <= 50].mean()) < 0.05
    assert q.session.ledger.rows()[-1].charge.parameters["analysis"]["rule"] == "drop"
    # the data-dependent refusal is not on offer to an analyst: refused when built, from its arguments
    with pytest.raises(PrivregValueError, match=r"rule='error'.*needs Query\(\.\.\., curator=True\)"):
        q.sum("age", bounds=(18, 50), epsilon=1.0, rule="error")
    q = query(curator=True)
    with pytest.raises(PrivregValueError, match=r"outside the declared bounds and rule='error' \(curator") as err:
        q.sum("age", bounds=(18, 50), epsilon=1.0, rule="error").release()
    assert "90" not in str(err.value) and "1000" not in str(err.value)  # no value, no count
    assert q.session.ledger.rows() == []
    q.sum("age", bounds=(18, 90), epsilon=1.0, rule="error").release()
    assert q.session.ledger.rows()[-1].charge.parameters["analysis"]["curator"] is True
    with pytest.raises(PrivregValueError, match="rule must be one of"):
        q.mean("age", bounds=(18, 50), epsilon=1.0, rule="winsorize")
    with pytest.raises(PrivregTypeError, match="curator must be True or False"):
        query(curator="yes")


def test_missing_values_are_dropped_or_imputed_as_declared_never_refused():
    q = query(pd.DataFrame({"age": [20.0, np.nan, 40.0] * 10}))
    r = q.mean("age", bounds=(18, 90), epsilon=15.0).release()  # clip: a missing value's row is left out
    assert abs(r.value - 30.0) < 1.0
    r = q.mean("age", bounds=(18, 90), epsilon=15.0, rule="drop").release()
    assert abs(r.value - 30.0) < 1.0
    r = q.mean("age", bounds=(18, 90), epsilon=15.0, impute=90).release()  # declared: (20 + 90 + 40) / 3
    assert abs(r.value - 50.0) < 1.0
    assert q.session.ledger.rows()[-1].charge.parameters["analysis"]["impute"] == 90.0
    q = query(pd.DataFrame({"age": [20.0, np.nan, 40.0, 200.0, -np.inf] * 10}))
    r = q.mean("age", bounds=(18, 90), epsilon=15.0, rule="impute", impute=30).release()
    assert abs(r.value - 30.0) < 1.0  # (20 + 30 + 40 + 30 + 30) / 5
    r = q.mean("age", bounds=(18, 90), epsilon=15.0, rule="clip").release()
    assert abs(r.value - (20 + 40 + 90 + 18) / 4) < 1.0  # +-inf clipped like any value outside
    with pytest.raises(PrivregValueError, match=r"rule='impute' needs impute="):
        q.mean("age", bounds=(18, 90), epsilon=1.0, rule="impute")
    for bad in (100.0, float("nan"), float("inf")):
        with pytest.raises(PrivregValueError, match="impute must be a finite value inside the bounds"):
            q.median("age", bounds=(18, 90), epsilon=1.0, impute=bad)
    with pytest.raises(PrivregTypeError, match="impute"):
        q.groupby("age", keys=[20.0]).sum("age", bounds=(18, 90), epsilon=1.0, impute="30")


def test_no_query_without_a_privacy_unit_or_bounds():
    df = pd.DataFrame({"age": AGES, "uid": np.arange(AGES.size) // 4})
    with pytest.raises(PrivregValueError, match=r"privacy_unit is required.*ONE_ROW_PER_USER"):
        Query(df, session=EventLog())
    with pytest.raises(PrivregValueError, match="privacy_unit='nope' is not a column"):
        Query(df, privacy_unit="nope", session=EventLog())
    with pytest.raises(PrivregValueError, match="max_rows_per_user must be 1"):
        Query(df, privacy_unit=ONE_ROW_PER_USER, max_rows_per_user=3, session=EventLog())
    with pytest.raises(PrivregValueError, match="session is required"):
        Query(df, privacy_unit="uid")
    with pytest.raises(PrivregTypeError, match="pandas DataFrame"):
        Query(df.to_dict(), privacy_unit="uid", session=EventLog())
    q = Query(df, privacy_unit="uid", max_rows_per_user=2, session=EventLog())
    for build in (q.sum, q.mean, q.variance, q.median):
        with pytest.raises(PrivregValueError, match=r"bounds is required for column 'age'.*bounds=\(lower, upper\)"):
            build("age", epsilon=1.0)
    with pytest.raises(PrivregValueError, match="bounds must be finite with lower < upper"):
        q.mean("age", bounds=(90, 17), epsilon=1.0)
    with pytest.raises(PrivregValueError, match="delta is required"):
        q.groupby("age").count(epsilon=1.0)
    with pytest.raises(PrivregValueError, match="parameter epsilon"):
        q.count(epsilon=-1.0)
    with pytest.raises(PrivregError, match="grid"):
        q.quantile("age", 0.5, bounds=(17, 90), epsilon=1.0, grid=2.5)


def test_contributions_are_bounded_per_user_and_sensitivities_derived():
    # user 0 has 10 rows, users 1..20 one row each; k = 2
    df = pd.DataFrame({"uid": [0] * 10 + list(range(1, 21)), "x": [5.0] * 10 + [1.0] * 20})
    q = Query(df, privacy_unit="uid", max_rows_per_user=2, session=session(), rng=InsecureReproducibleRandom(seed=1))
    assert len(q.bounded) == 22 and (q.bounded.uid == 0).sum() == 2
    q.count(epsilon=1.0).release()
    q.sum("x", bounds=(-3, 10), epsilon=1.0).release()
    q.mean("x", bounds=(0, 10), epsilon=1.0).release()
    events = [row.charge.event for row in q.session.ledger.rows()]
    # count: k = 2; sum: k max(|lo|, |hi|) = 20 as L1 sensitivity (grid units: 20 / step)
    assert events[0].sensitivity == 2
    assert q.sum("x", bounds=(-3, 10), epsilon=1.0).mech.sensitivity.value == 20.0
    assert q.mean("x", bounds=(0, 10), epsilon=1.0).sum.sensitivity.value == 10.0  # k (hi - lo) / 2


def test_groupby_public_and_selected_keys():
    gen = np.random.default_rng(0)
    df = pd.DataFrame({"g": gen.choice(["a", "b", "c"], size=3000), "x": gen.uniform(0, 10, size=3000)})
    df.loc[0, "g"] = "rare"  # one person: partition selection must not release it
    q = query(df, session=session())
    sel = q.groupby("g").count(epsilon=2.0, delta=1e-7).release()
    assert set(sel.value) == {"a", "b", "c"}
    for key, (lo, hi) in sel.interval.items():
        assert lo <= (df.g == key).sum() <= hi
    means = q.groupby("g", keys=["a", "b"]).mean("x", bounds=(0, 10), epsilon=2.0).release()
    for key in ("a", "b"):
        lo, hi = means.interval[key]
        assert lo <= df.x[df.g == key].mean() <= hi
    hist = q.histogram("g", categories=["a", "b", "zzz"], epsilon=2.0).release()
    assert hist.value["zzz"] <= hist.interval["zzz"][1] and hist.interval["zzz"][0] == 0


def test_exponential_quantile_samples_its_exact_law():
    """release_many frequencies against the exponential mechanism's probabilities
    (chi-square, false-alarm rate 1e-4; seeded, so deterministic)."""
    from scipy import stats

    from privreg.mechanisms.quantile import ExponentialQuantile, quantile_rank_errors

    data = np.array([0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 4.0])
    mech = ExponentialQuantile(epsilon=1.0, quantile=0.5, lower=0.0, upper=4.0, points=5)
    out = mech.release_many(data, 4000, charger=EventLog(), rng=InsecureReproducibleRandom(seed=2)).output
    d = np.array([float(e) for e in quantile_rank_errors(data, mech.grid, 0.5)])
    p = np.exp(-0.5 * (d - d.min()))
    p /= p.sum()
    observed = np.array([np.sum(np.asarray(out) == g) for g in mech.grid])
    assert stats.chisquare(observed, 4000 * p).pvalue > 1e-4
    assert mech.rank_error_bound(0.05) == pytest.approx(2 * np.log(5 / 0.05))


def test_keyed_results_come_out_in_canonical_order_whatever_the_callers():
    gen = np.random.default_rng(1)
    df = pd.DataFrame({"g": gen.choice(["b", "c", "a"], size=3000)})
    q = query(df, session=session())
    hist = q.histogram("g", categories=["c", "a", "b"], epsilon=2.0).release()
    assert list(hist.value) == ["a", "b", "c"] and list(hist.interval) == ["a", "b", "c"]
    sel = q.groupby("g").count(epsilon=2.0, delta=1e-7).release()
    assert list(sel.value) == sorted(sel.value)


def test_pandas_bounding_keeps_k_rows_per_person_chosen_uniformly():
    """3000 persons with rows at positions 0, 1, 2 and k = 1: the kept position is
    uniform (chi-square, false-alarm rate 1e-4; seeded, so deterministic); the bounding
    draws one 32-byte key from the query's source, whatever the number of rows."""
    from scipy import stats

    n = 3000
    df = pd.DataFrame({"p": np.repeat(np.arange(n), 3), "pos": np.tile([0, 1, 2], n)})
    rng = InsecureReproducibleRandom(seed=5)
    q = Query(df, privacy_unit="p", max_rows_per_user=1, session=EventLog(), rng=rng)
    kept = q.bounded
    assert len(kept) == n and kept.p.is_unique
    assert stats.chisquare(np.bincount(kept.pos, minlength=3), [n / 3] * 3).pvalue > 1e-4
    after = InsecureReproducibleRandom(seed=5)
    after.random_bytes(32)
    assert rng.random_bytes(16) == after.random_bytes(16)


def test_quantile_releases_from_grid_ranks_as_from_the_data():
    from privreg.mechanisms.quantile import ExponentialQuantile, GridRanks, grid_ranks

    data = np.array([0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 4.0, 0.5])
    mech = ExponentialQuantile(epsilon=1.0, quantile=0.3, lower=0.0, upper=4.0, points=9)
    ranks = grid_ranks(data, mech.grid)
    assert ranks.below.tolist() == [int((data < g).sum()) for g in mech.grid]
    assert ranks.at_most.tolist() == [int((data <= g).sum()) for g in mech.grid]
    for seed in range(20):
        a = mech.release(data, charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed)).output
        b = mech.release(ranks, charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed)).output
        assert a == b
    bad = GridRanks(below=ranks.at_most, at_most=ranks.below, size=ranks.size)
    log = EventLog()
    with pytest.raises(PrivregValueError, match="not the ranks of a data set"):
        mech.release(bad, charger=log)
    with pytest.raises(PrivregValueError, match="9 integers, one per grid point"):
        mech.release(GridRanks(below=ranks.below[:3], at_most=ranks.at_most[:3], size=9), charger=log)
    assert log.charges == ()


def test_a_pandas_query_never_imports_pyspark():
    import subprocess
    import sys

    code = (
        "import sys, pandas as pd\n"
        "from privreg.analysis import ONE_ROW_PER_USER, Query\n"
        "from privreg.core.charging import EventLog\n"
        "q = Query(pd.DataFrame({'a': [1.0, 2.0]}), privacy_unit=ONE_ROW_PER_USER, session=EventLog())\n"
        "q.mean('a', bounds=(0, 3), epsilon=1.0).release()\n"
        "assert not any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules), 'pyspark imported'\n"
        "try:\n"
        "    Query([1, 2], privacy_unit=ONE_ROW_PER_USER, session=EventLog())\n"
        "except TypeError as e:\n"
        "    assert 'pandas DataFrame or a pyspark.sql.DataFrame; got list' in str(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_quantile_is_epsilon_dp_for_a_person_with_k_rows():
    """The exact output law of the planned median on neighbouring data sets (one person
    with k rows added, at the bottom, middle or top) moves by a factor <= exp(epsilon);
    the charge records the utility's sensitivity k."""
    from privreg.mechanisms.quantile import quantile_rank_errors

    k, eps = 10, 1.0
    users = pd.DataFrame({"u": np.repeat(np.arange(10), k), "x": np.zeros(10 * k)})
    log = EventLog()
    planned = Query(users, privacy_unit="u", max_rows_per_user=k, session=log).median(
        "x", bounds=(0, 100), grid=101, epsilon=eps
    )
    mech = planned.mech
    planned.release()
    assert log.charges[0].parameters["sensitivity"] == k
    assert log.charges[0].event.epsilon == eps

    def law(x):
        d = np.array([float(e) for e in quantile_rank_errors(np.asarray(x, float), mech.grid, 0.5)])
        w = np.exp(-float(mech.weight_exponent) * (d - d.min()))
        return w / w.sum()

    worst = 0.0
    for low in range(0, 61, 5):
        base = np.r_[np.zeros(low), np.full(60 - low, 100.0)]
        for at in (0.0, 50.0, 100.0):
            worst = max(worst, float(np.max(np.abs(np.log(law(base) / law(np.r_[base, np.full(k, at)]))))))
    assert 0.2 * eps < worst <= eps * (1 + 1e-9)
    assert planned.accuracy(0.95).half_width == pytest.approx(2 * k * np.log(101 / 0.05) / eps)


@pytest.mark.parametrize("statistic", ["mean", "variance", "groupby_mean", "selected_mean"])
def test_multi_part_statistics_fit_a_budget_equal_to_their_epsilon(statistic):
    """The parts of a split epsilon, as charged, fit a budget of exactly that epsilon, for
    every epsilon scanned (before the fix one part was priced an ulp above its share and
    refused after the others were charged)."""
    df = pd.DataFrame({"age": np.arange(17.0, 91.0)})
    plans = {
        "mean": lambda q, e: q.mean("age", bounds=(17, 90), epsilon=e),
        "variance": lambda q, e: q.variance("age", bounds=(17, 90), epsilon=e),
        "groupby_mean": lambda q, e: q.groupby("age", keys=[17.0, 18.0]).mean("age", bounds=(17, 90), epsilon=e),
        "selected_mean": lambda q, e: q.groupby("age").mean("age", bounds=(17, 90), epsilon=e, delta=1e-7),
    }
    for eps in [float(x) for x in range(1, 120)] + [x / 10 for x in range(1, 100)] + [1 / 3, 2 / 3, 1e-3, 1e5]:
        s = BudgetSession(budget=PrivacyBudget(epsilon=eps, delta=1e-6), filters=("basic",))
        q = Query(df, privacy_unit=ONE_ROW_PER_USER, session=s, rng=InsecureReproducibleRandom(seed=1))
        released = plans[statistic](q, eps).release()  # raised BudgetExceededError before the fix
        parts = {"variance": 3}.get(statistic, 2) + (statistic == "selected_mean")
        if statistic == "selected_mean" and not released.value:
            parts = 1  # no key passed the threshold: only the selection ran
        assert len(s.ledger.rows()) == parts, eps


@pytest.mark.parametrize(
    "plan",
    [
        lambda q: q.mean("age", bounds=(17, 90), epsilon=1.5),
        lambda q: q.variance("age", bounds=(17, 90), epsilon=1.5),
        lambda q: q.groupby("age", keys=[20.0, 30.0]).mean("age", bounds=(17, 90), epsilon=1.5),
        lambda q: q.groupby("age").mean("age", bounds=(17, 90), epsilon=1.5, delta=1e-7),
    ],
)
def test_a_statistic_the_budget_cannot_afford_whole_charges_nothing(plan):
    from privreg.core.errors import BudgetExceededError

    q = query(session=BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6)))
    with pytest.raises(BudgetExceededError, match="nothing was released or charged"):
        plan(q).release()
    assert q.session.ledger.rows() == []


@pytest.mark.parametrize(
    "frame, plan",
    [
        (pd.DataFrame({"x": [1.7e308] * 3}), lambda q: q.mean("x", bounds=(0, 1.7e308), epsilon=1.0)),
        (pd.DataFrame({"x": [1.7e308] * 3}), lambda q: q.sum("x", bounds=(0, 1.7e308), epsilon=1.0)),
        (
            pd.DataFrame({"x": [1.7e308] * 3, "g": ["a"] * 3}),
            lambda q: q.groupby("g", keys=["a"]).mean("x", bounds=(0, 1.7e308), epsilon=1.0),
        ),
        (
            pd.DataFrame({"x": [1.7e308] * 3}),
            lambda q: q.groupby("x", keys=[1.7e308]).sum("x", bounds=(0, 1.7e308), epsilon=1.0),
        ),
        (pd.DataFrame({"x": [6e153] * 3}), lambda q: q.variance("x", bounds=(-6.7e153, 6.7e153), epsilon=1.0)),
    ],
)
def test_sums_beyond_the_float_range_release_instead_of_failing_after_a_charge(frame, plan):
    """The exact sums are clamped to the finite range (1-Lipschitz): every part releases."""
    q = query(frame)
    plan(q).release()
    assert len(q.session.ledger.rows()) >= 1


@pytest.mark.parametrize("bounds", [(-1e200, 1e200), (-1.2e154, 1.2e154), (0, 2.5e154)])
def test_variance_refuses_bounds_whose_squares_overflow_when_planned(bounds):
    q = query(pd.DataFrame({"x": [1.0, 2.0]}))
    with pytest.raises(PrivregValueError, match=r"bounds for a variance must satisfy \(upper - lower\) / 2 <= 6.70"):
        q.variance("x", bounds=bounds, epsilon=1.0)


@pytest.mark.parametrize(
    "epsilon, error",
    [(float("nan"), PrivregValueError), (float("inf"), PrivregValueError), ("1", PrivregTypeError),
     (True, PrivregTypeError), (0.0, PrivregValueError)],
)  # fmt: skip
@pytest.mark.parametrize("statistic", ["mean", "variance", "groupby_mean"])
def test_split_epsilons_are_validated_like_a_count_s(epsilon, error, statistic):
    q = query()
    plans = {
        "mean": lambda: q.mean("age", bounds=(17, 90), epsilon=epsilon),
        "variance": lambda: q.variance("age", bounds=(17, 90), epsilon=epsilon),
        "groupby_mean": lambda: q.groupby("age").mean("age", bounds=(17, 90), epsilon=epsilon, delta=1e-7),
    }
    with pytest.raises(error, match="epsilon"):
        plans[statistic]()
    with pytest.raises(error, match="epsilon"):
        q.count(epsilon=epsilon)
