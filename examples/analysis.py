"""Four Adult statistics under one budget, each with its 95% interval (issue #21).
Reads ../shared/data/adult/adult.data when present, else the bundled 2,000-row slice."""

from pathlib import Path

import pandas as pd

from privreg.analysis import ONE_ROW_PER_USER, Query
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.datasets import ADULT_EDUCATION, load_adult

full = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.data"
print("data:", full if full.is_file() else "bundled 2,000-row slice (../shared/data/adult absent)")
df = pd.DataFrame(load_adult(full if full.is_file() else None))
q = Query(df, privacy_unit=ONE_ROW_PER_USER, session=BudgetSession(budget=PrivacyBudget(epsilon=1, delta=1e-6)))
print(q.count(epsilon=0.25).release())
print(q.mean("age", bounds=(17, 90), epsilon=0.25).release())
print(q.histogram("education", categories=ADULT_EDUCATION, epsilon=0.25).release())  # public categories
print(q.median("age", bounds=(17, 90), grid=74, epsilon=0.25).release())
