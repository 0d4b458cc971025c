"""A plan of five Adult statistics (issue #29): its cost and its accuracy table in the
data's units before anything is released, then the releases as one charge.
Reads ../shared/data/adult/adult.data when present, else the bundled 2,000-row slice."""

from pathlib import Path

import pandas as pd

from privreg.analysis import ONE_ROW_PER_USER, Query
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.datasets import ADULT_EDUCATION, load_adult

full = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.data"
print("data:", full if full.is_file() else "bundled 2,000-row slice (../shared/data/adult absent)")
df = pd.DataFrame(load_adult(full if full.is_file() else None))
session = BudgetSession(budget=PrivacyBudget(epsilon=1.1, delta=1e-6))
q = Query(df, privacy_unit=ONE_ROW_PER_USER, session=session)

# A DP count first: the low end of its interval is a public lower bound on the rows,
# which turns the means' accuracy into data units (and the median's into quantile levels).
rows = q.count(epsilon=0.1).release()
print(rows)


def five(noise: str):
    plan = q.plan(epsilon=1.0, noise=noise)
    plan.mean("age", bounds=(17, 90))
    plan.median("age", bounds=(17, 90), grid=74)  # integer ages: one grid point per year
    plan.histogram("education", categories=ADULT_EDUCATION)  # public categories
    plan.groupby("sex", keys=["Female", "Male"]).count()
    plan.sum("hours-per-week", bounds=(1, 99))
    return plan


for noise in ("laplace", "gaussian"):  # nothing is read or charged here
    plan = five(noise)
    print(f"\n{noise} plan: cost {plan.cost()}")
    print(plan.accuracy(0.95, rows=rows.interval[0]))

plan = five("laplace")  # five statistics: pure DP is the tighter here (zCDP wins from about 20)
print()
for result in plan.release():
    print(result)
print("\nspent:", session.spent())
