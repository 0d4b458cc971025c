"""Deprecated: moved to :mod:`privreg.budget.verify` after privreg 0.1.0; this alias goes in 0.2."""

from __future__ import annotations

import warnings

from privreg.budget.verify import *  # noqa: F403 -- the alias re-exports the moved module

warnings.warn(
    "privreg.accountant.audit moved to privreg.budget.verify; import it from there (the alias goes in 0.2)",
    DeprecationWarning,
    stacklevel=2,
)
