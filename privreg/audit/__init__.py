"""Empirical privacy auditing of mechanisms and randomizers.

:func:`audit_mechanism`, :func:`audit_randomizer` and :func:`audit_item` draw outputs on
two neighbouring inputs and return an :class:`AuditResult` whose ``epsilon_lower_bound``
exceeds the true epsilon with probability at most ``alpha`` (Ding et al. 2018; Jagielski
et al. 2020; floating-point events after Mironov 2012). See :mod:`privreg.audit.empirical`.
The ledger audit (what was charged) is a different thing: :mod:`privreg.budget.verify`.
"""

from privreg.audit.empirical import (
    APPROX_AUDIT_DELTA,
    AuditResult,
    ExtremeAudit,
    audit_extreme_neighbours,
    audit_item,
    audit_mechanism,
    audit_randomizer,
    audit_samples,
)
from privreg.audit.extreme import EXTREME_FLOATS, EXTREME_INTS, extreme_neighbours

__all__ = [
    "APPROX_AUDIT_DELTA",
    "EXTREME_FLOATS",
    "EXTREME_INTS",
    "extreme_neighbours",
    "AuditResult",
    "ExtremeAudit",
    "audit_extreme_neighbours",
    "audit_item",
    "audit_mechanism",
    "audit_randomizer",
    "audit_samples",
]
