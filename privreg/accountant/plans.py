"""Bounds of a sequence of events fixed in advance: the smallest epsilon any non-adaptive
accountant proves for it (a declared plan, one priced block, the audit's information
column). Valid only when no event depends on an earlier output; budgets that must hold
under adaptive use are :mod:`privreg.budget`'s filters."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from privreg.accountant import make_accountant
from privreg.core.errors import UnsupportedEventError
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
    events = tuple(events)
    try:
        hash(events)
    except TypeError:  # an event holding an unhashable value: price it uncached
        return _plan_bound(events, delta, neighbouring, event_delta)
    return _cached_plan_bound(events, delta, neighbouring, event_delta)


def _plan_bound(
    events: tuple[PrivacyEvent, ...], delta: float, neighbouring: str, event_delta: float | None
) -> tuple[float, str]:
    block = Composed(events=events)
    best = (math.inf, "none")
    for name in DEFAULT_ACCOUNTANTS:
        acc = make_accountant(name, **accountant_options(name, event_delta=event_delta, neighbouring=neighbouring))
        try:  # one planning pass: supports() then compose() would plan a PLD grid twice
            acc.compose(block)
        except UnsupportedEventError:
            continue
        best = min(best, (acc.epsilon(delta), name))
    return best


# Events are frozen values and pricing is deterministic, so a plan's bound is a function
# of its arguments: a plan session asks for it at opening and at every spent().
_cached_plan_bound = functools.lru_cache(maxsize=256)(_plan_bound)
