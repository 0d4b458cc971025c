"""Deprecated: moved to :mod:`privreg.budget.filters` after privreg 0.1.0; this alias goes in 0.2."""

from __future__ import annotations

import warnings

from privreg.accountant.blocks import block_pair, unsupported_reason  # noqa: F401
from privreg.budget.filters import *  # noqa: F403 -- the alias re-exports the moved module

warnings.warn(
    "privreg.accountant.filters moved to privreg.budget.filters; import it from there (the alias goes in 0.2)",
    DeprecationWarning,
    stacklevel=2,
)
