"""Budgets that refuse overspending, and the ledger that remembers them.

:mod:`privreg.accountant` says how privacy events add up; this package enforces a total:

==================  ====================================================================
``session``         :class:`PrivacyBudget` and :class:`BudgetSession`, the charger every
                    release goes through (fully adaptive filters, or a declared plan)
``filters``         privacy filters: budgets proven for fully adaptive composition
``ledger``          the append-only, hash-chained SQLite ledger a session writes
``store``           what a session needs of a ledger's storage (:class:`LedgerStore`)
``store_postgres``  the same ledger on PostgreSQL: one budget for a team, roles enforced
                    by the server (needs ``privreg[postgres]``)
``writer_queue``    first come, first served turns among a ledger's writers
``verify``          re-deriving a ledger's decisions from its rows (``privreg ledger verify``)
``runs``            :func:`run_workflow`: a workflow run under a budget (its own ledger or
                    a shared one), the one path of ``privreg run``, the demo and Python
``run_log``         how a run's end is recorded, so that partial runs can be told
==================  ====================================================================
"""

from __future__ import annotations

from privreg.budget.filters import FILTERS, Filter, make_filter
from privreg.budget.ledger import Ledger, LedgerRow, format_head, parse_head
from privreg.budget.runs import PartialRunError, RunResult, run_workflow
from privreg.budget.session import DEFAULT_FILTERS, BudgetSession, PrivacyBudget
from privreg.budget.verify import RUN_KEY, verify_ledger

__all__ = [
    "PrivacyBudget",
    "BudgetSession",
    "DEFAULT_FILTERS",
    "Filter",
    "FILTERS",
    "make_filter",
    "Ledger",
    "LedgerRow",
    "format_head",
    "parse_head",
    "RUN_KEY",
    "verify_ledger",
    "run_workflow",
    "RunResult",
    "PartialRunError",
]
