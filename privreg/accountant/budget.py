"""Deprecated: moved to :mod:`privreg.budget.session` after privreg 0.1.0; this alias goes in 0.2."""

from __future__ import annotations

import warnings

from privreg.accountant.plans import DEFAULT_ACCOUNTANTS, accountant_options, plan_bound  # noqa: F401
from privreg.budget.session import *  # noqa: F403 -- the alias re-exports the moved module

warnings.warn(
    "privreg.accountant.budget moved to privreg.budget.session; import it from there (the alias goes in 0.2)",
    DeprecationWarning,
    stacklevel=2,
)
