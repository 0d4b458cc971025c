"""Bounds of a sequence of events fixed in advance: the smallest epsilon any non-adaptive
accountant proves for it (a declared plan, one priced block, the audit's information
column). Valid only when no event depends on an earlier output; budgets that must hold
under adaptive use are :mod:`privreg.budget`'s filters."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from privreg.accountant import make_accountant
from privreg.core.events import Composed, PrivacyEvent

__all__ = ["DEFAULT_ACCOUNTANTS", "accountant_options", "plan_bound"]

#: Non-adaptive accountants: valid for a sequence fixed in advance (a plan, one event).
DEFAULT_ACCOUNTANTS = ("basic", "advanced", "optimal", "rdp", "zcdp", "gdp", "pld")
_PAIR_ACCOUNTANTS = ("basic", "advanced", "optimal")


def accountant_options(name: str, *, event_delta: float | None, neighbouring: str) -> dict[str, Any]:
    """Constructor options of accountant ``name`` so configured."""
    opts: dict[str, Any] = {"neighbouring": neighbouring}
    if name in _PAIR_ACCOUNTANTS and event_delta is not None:
        opts["event_delta"] = event_delta
    return opts


def plan_bound(
    events: Sequence[PrivacyEvent], *, delta: float, neighbouring: str, event_delta: float | None = None
) -> tuple[float, str]:
    """``(epsilon, accountant)``: the smallest epsilon at ``delta`` any non-adaptive
    accountant proves for ``events`` composed in order (inf, "none" if none can)."""
    if not events:
        return 0.0, "none"
    block = Composed(events=tuple(events))
    best = (math.inf, "none")
    for name in DEFAULT_ACCOUNTANTS:
        acc = make_accountant(name, **accountant_options(name, event_delta=event_delta, neighbouring=neighbouring))
        if acc.supports(block):
            best = min(best, (acc.compose(block).epsilon(delta), name))
    return best
