"""Deprecated: moved to :mod:`privreg.budget.ledger` after privreg 0.1.0; this alias goes in 0.2."""

from __future__ import annotations

import warnings

from privreg.budget.ledger import *  # noqa: F403 -- the alias re-exports the moved module

warnings.warn(
    "privreg.accountant.ledger moved to privreg.budget.ledger; import it from there (the alias goes in 0.2)",
    DeprecationWarning,
    stacklevel=2,
)
