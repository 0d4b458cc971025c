"""The Adult example of issue #21 through privreg.analysis: a count, a mean age, an
education histogram and a median age under one budget (epsilon 1, delta 1e-6), on the
full UCI Adult data when ../shared/data/adult is present and always on a generated
Adult-like frame; and the coverage of the stated 95% intervals over repeated runs."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privreg.analysis import ONE_ROW_PER_USER, Query
from privreg.analysis.accuracy import discrete_laplace_coverage
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core.charging import EventLog
from privreg.core.errors import BudgetExceededError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.datasets import load_adult

ADULT = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "adult" / "adult.data"
EDUCATION = [
    "Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad",
    "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school", "Doctorate",
]  # fmt: skip
AGES = (17, 90)


def adult_like(n: int, seed: int) -> pd.DataFrame:
    """Ages 17..90 skewed like Adult's (median near 37) and Adult's education mix."""
    gen = np.random.default_rng(seed)
    ages = np.clip(np.round(17 + gen.gamma(shape=2.2, scale=9.5, size=n)), 17, 90)
    weights = np.array([1, 5, 10, 20, 16, 29, 36, 13, 322, 224, 42, 33, 164, 53, 18, 13], dtype=float)
    edu = gen.choice(EDUCATION, size=n, p=weights / weights.sum())
    return pd.DataFrame({"age": ages, "education": edu})


def _frames():
    yield pytest.param(lambda: adult_like(5000, seed=21), id="generated")
    yield pytest.param(
        lambda: pd.DataFrame(load_adult(ADULT)),
        id="adult",
        marks=pytest.mark.skipif(not ADULT.is_file(), reason="needs ../shared/data/adult/adult.data"),
    )


def four(q: Query):
    """The four planned statistics at a quarter of epsilon 1 each (pure DP: no delta)."""
    return {
        "count": q.count(epsilon=0.25),
        "mean": q.mean("age", bounds=AGES, epsilon=0.25),
        "histogram": q.histogram("education", categories=EDUCATION, epsilon=0.25),
        "median": q.median("age", bounds=AGES, grid=74, epsilon=0.25),
    }


@pytest.mark.parametrize("make", list(_frames()))
def test_four_statistics_under_one_budget(make):
    df = make()
    session = BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    q = Query(df, privacy_unit=ONE_ROW_PER_USER, session=session, rng=InsecureReproducibleRandom(seed=7))
    planned = four(q)
    before = {name: p.accuracy(0.95) for name, p in planned.items()}
    assert before["mean"].half_width is None  # the mean's denominator is private...
    assert planned["mean"].accuracy(0.95, rows=len(df)).half_width < 1.0  # ...unless a public size is given
    assert session.ledger.rows() == []  # accuracy is known before anything is charged
    out = {name: p.release() for name, p in planned.items()}
    for name, r in out.items():
        assert r.accuracy.half_width == before[name].half_width and r.level == 0.95 and r.noise_scale > 0
    assert out["count"].interval[0] <= out["count"].value <= out["count"].interval[1]
    assert abs(out["count"].value - len(df)) <= 40  # the +-12 half-width, 3x over
    assert abs(out["mean"].value - df.age.mean()) < 0.5
    lo, hi = out["mean"].interval
    assert lo <= out["mean"].value <= hi and hi - lo < 1.0
    assert set(out["histogram"].value) == set(EDUCATION)
    assert out["median"].mechanism == "exponential-quantile" and 17 <= out["median"].value <= 90
    assert abs(out["median"].value - df.age.median()) <= 3
    assert session.spent().by_filter["basic"] <= 1.0
    n_rows = len(session.ledger.rows())
    with pytest.raises(BudgetExceededError):
        q.count(epsilon=0.01).release()
    assert len(session.ledger.rows()) == n_rows  # a refused release charges nothing


def test_stated_intervals_cover_at_their_nominal_rate():
    """Over R = 200 seeded runs of the four releases on one generated frame, count how
    often each stated 95% interval misses the true value (of the bounded data).

    * count and histogram bins: the discrete Laplace interval's exact coverage p is
      computed from the noise law (p >= 0.95); misses ~ Binomial(R, 1 - p) for the count
      and Binomial(16 R, 1 - p) for the bins (independent noise). Both tails are checked,
      each at false-alarm rate 1e-4.
    * mean (union bound over two parts) and median (the tail bound of McSherry-Talwar,
      Theorem 8, on the rank error) are conservative: only too many misses fail, i.e.
      misses above the 1 - 1e-4 quantile of Binomial(R, 0.05).

    Total false-alarm rate of the test at most 6e-4 (union bound over the six checks);
    deterministic under the fixed seeds."""
    R, alpha = 200, 1e-4
    df = adult_like(4000, seed=5)
    truth_mean = float(np.clip(df.age, *AGES).mean())
    truth_hist = df.education.value_counts().reindex(EDUCATION).to_numpy()
    misses = dict.fromkeys(["count", "mean", "histogram", "median"], 0)
    for run in range(R):
        q = Query(df, privacy_unit=ONE_ROW_PER_USER, session=EventLog(), rng=InsecureReproducibleRandom(seed=run))
        planned = four(q)
        out = {name: p.release() for name, p in planned.items()}
        lo, hi = out["count"].interval
        misses["count"] += not lo <= len(df) <= hi
        lo, hi = out["mean"].interval
        misses["mean"] += not lo <= truth_mean <= hi
        misses["histogram"] += sum(
            not out["histogram"].interval[c][0] <= truth_hist[i] <= out["histogram"].interval[c][1]
            for i, c in enumerate(EDUCATION)
        )
        misses["median"] += planned["median"].rank_error(out["median"].value) > out["median"].accuracy.half_width
    scale = planned["count"].mech.noise_scale
    t = int(out["count"].accuracy.half_width)
    miss_rate = 1 - discrete_laplace_coverage(scale, t)
    assert 0.04 < miss_rate <= 0.05
    for name, trials in (("count", R), ("histogram", 16 * R)):
        low, high = stats.binom.ppf(alpha, trials, miss_rate), stats.binom.isf(alpha, trials, miss_rate)
        assert low <= misses[name] <= high, (name, misses[name], low, high)
    for name in ("mean", "median"):
        assert misses[name] <= stats.binom.isf(alpha, R, 0.05), (name, misses[name])
