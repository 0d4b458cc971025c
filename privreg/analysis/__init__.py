"""DataFrame queries with accuracy before release: the analyst's layer.

A library layer above :mod:`privreg.mechanisms` and :mod:`privreg.accountant` (it never
imports a plugin)::

    from privreg.analysis import ONE_ROW_PER_USER, Query

    q = Query(frame, privacy_unit=ONE_ROW_PER_USER, session=session)
    mean_age = q.mean("age", bounds=(17, 90), epsilon=0.25)
    print(mean_age.accuracy(0.95, rows=30_000))   # before anything is charged
    print(mean_age.release())                     # value, 95% interval, noise scale

Several statistics at once: a plan states their cost and accuracy table before anything
is read, and charges them as one block (:mod:`privreg.analysis.plan`)::

    plan = q.plan(epsilon=1.0)                   # split evenly; weight= per statistic
    plan.count().mean("age", bounds=(17, 90)).median("age", bounds=(17, 90), grid=74)
    print(plan.cost())                           # what the session would charge now
    print(plan.accuracy(0.95, rows=30_000))      # data units; rows: a public lower bound
    count, mean_age, median_age = plan.release() # one charge, the plan's order

``noise="gaussian"`` (with ``delta``) draws the exact discrete Gaussian under zCDP for
counts, sums, means, histograms and group-bys (:mod:`privreg.analysis.noise`): many
statistics compose better than under pure DP.

Counts, sums, means, variances, quantiles (exponential mechanism), histograms over
declared categories and group-bys (public keys, or keys found by partition selection).
Sensitivities come from declared bounds and ``max_rows_per_user``; values outside the
bounds are clipped, dropped or replaced by a declared ``impute`` value, and missing ones
imputed or dropped, by a declared rule recorded in the ledger with the bounds (how many
were affected never is). Nothing an analyst sees before a release depends on the data:
the budget is asked for the whole statistic before the data are read, and no rule
refuses (``rule='error'`` exists only on a ``curator=True`` query). The frame is a pandas DataFrame, or a
Spark DataFrame whose exact aggregates Spark computes (:mod:`privreg.analysis.frames`;
pyspark is imported only then).
"""

from privreg.analysis.accuracy import Accuracy, discrete_laplace_half_width
from privreg.analysis.bounding import ONE_ROW_PER_USER, RULES, OneRowPerUser
from privreg.analysis.noise import NOISES
from privreg.analysis.plan import Plan, PlanAccuracy, PlanCost
from privreg.analysis.query import GroupBy, Planned, Query, Result

__all__ = [
    "Query",
    "GroupBy",
    "Planned",
    "Result",
    "Plan",
    "PlanAccuracy",
    "PlanCost",
    "NOISES",
    "Accuracy",
    "ONE_ROW_PER_USER",
    "OneRowPerUser",
    "RULES",
    "discrete_laplace_half_width",
]
