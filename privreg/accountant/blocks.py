"""One (epsilon, delta) pair for a single charged block of events, taken as one mechanism
whose parameters are all fixed when it is charged: the tightest point any non-adaptive
accountant proves for the whole block (what the ``basic`` and ``advanced`` filters of
:mod:`privreg.budget.filters` charge for it)."""

from __future__ import annotations

import math
from typing import Any

from privreg.accountant.advanced import KOVAccountant
from privreg.accountant.base import leaves
from privreg.accountant.basic import BasicAccountant
from privreg.accountant.gdp import GDPAccountant
from privreg.accountant.pld import PLDAccountant
from privreg.accountant.rdp import RDPAccountant
from privreg.accountant.relations import relate
from privreg.accountant.zcdp import ZCDPAccountant
from privreg.core.errors import UnsupportedEventError
from privreg.core.events import ApproxDP, Composed, PrivacyEvent, SelfComposed

__all__ = ["block_pair", "block_delta", "leaf_pair_at", "unsupported_reason"]

# Non-adaptive accountants that may price one block (its parameters are fixed at charge time).
_BLOCK_ACCOUNTANTS = (PLDAccountant, RDPAccountant, GDPAccountant, ZCDPAccountant, KOVAccountant)


def _explicit_delta(event: PrivacyEvent, neighbouring: str) -> float:
    """Sum of the deltas the block's (eps, delta) leaves declare (after relating them)."""
    total = 0.0
    for leaf, n in leaves(event):
        related, _ = relate(leaf, neighbouring)
        if isinstance(related, ApproxDP):
            total += n * related.delta
    return total


def block_delta(event: PrivacyEvent, *, event_delta: float, neighbouring: str) -> float:
    """The delta :func:`block_pair` prices a curve event or block at (before capping it
    at ``left``): ``event_delta`` plus the deltas its (eps, delta) leaves declare. A
    ``left`` outside (0, this) does not change the pair."""
    return min(event_delta + _explicit_delta(event, neighbouring), 1.0 - 1e-12)


def _basic_pair(event: PrivacyEvent, *, event_delta: float | None, neighbouring: str) -> tuple[float, float] | None:
    """Basic composition's (eps, delta) for ``event``, None if it cannot price it (composed
    once: an accountant plans the block in compose, so no supports() call before it)."""
    try:
        total: tuple[float, float] = (
            BasicAccountant(event_delta=event_delta, neighbouring=neighbouring).compose(event).total
        )
    except UnsupportedEventError:
        return None
    return total


def block_pair(
    event: PrivacyEvent, *, event_delta: float | None, neighbouring: str, left: float | None = None
) -> tuple[float, float] | None:
    """One (eps, delta) pair for a single charged event taken as one mechanism: pure
    blocks by basic composition; a single leaf by its own pair (a curve leaf read off at
    ``event_delta``); otherwise the smallest epsilon any non-adaptive accountant proves
    for the whole block at ``event_delta`` plus the deltas its
    (eps, delta) leaves declare, but at no more than ``left`` (the delta its filter has
    left), so that a block calibrated to the whole remaining delta -- as a workflow's
    plan under its own budget is -- still fits. Valid: the block's parameters, and so
    the point it is priced at, are fixed when it is charged, from earlier outputs only
    (RRUV 2016 filters allow each step's (eps_i, delta_i) to be chosen adaptively).
    RDP is consulted only where PLD (tight, pessimistically discretised) cannot vouch, so
    no block of a few releases costs seconds. None if nothing vouches."""
    best = _basic_pair(event, event_delta=event_delta, neighbouring=neighbouring)
    if best is not None and (best[1] == 0.0 or not isinstance(event, (Composed, SelfComposed))):
        return best
    if event_delta is None or not isinstance(event, (Composed, SelfComposed)):
        return best
    at = block_delta(event, event_delta=event_delta, neighbouring=neighbouring)
    if left is not None and 0.0 < left < at:
        at = left
    pld_vouched = False
    for cls in _BLOCK_ACCOUNTANTS:
        if cls is RDPAccountant and pld_vouched:
            continue  # PLD is tight where it vouches; RDP's curve of a subsampled event costs ~0.6 s a kind
        opts: dict[str, Any] = {"neighbouring": neighbouring}
        if cls is KOVAccountant:
            opts["event_delta"] = event_delta
        try:
            eps = cls(**opts).compose(event).epsilon(at)
        except UnsupportedEventError:
            continue
        pld_vouched = pld_vouched or (cls is PLDAccountant and math.isfinite(eps))
        if math.isfinite(eps) and (best is None or eps < best[0]):
            best = (eps, at)
    return best


def unsupported_reason(exc: UnsupportedEventError, event: PrivacyEvent) -> str:
    """Why an accountant or filter cannot price ``event`` (the reason shown next to the
    word "unsupported" in audits and refusals), from the error it raised."""
    bad = getattr(exc.event, "kind", event.kind)
    return f"cannot account for {bad!r}" + (f": {exc.reason}" if exc.reason else "")


# Accountants for one curve leaf, cheapest first; PLD only when these miss a stated target.
_LEAF_ACCOUNTANTS = (GDPAccountant, ZCDPAccountant, RDPAccountant)


def leaf_pair_at(
    event: PrivacyEvent, *, delta: float, neighbouring: str, target: float | None = None
) -> tuple[float, float] | None:
    """(eps, ``delta``) for one release of ``event``: the smallest epsilon at ``delta``
    that GDP, zCDP or RDP proves, and PLD's when those stay above ``target`` (the epsilon
    the release was calibrated to, e.g. a Gaussian verified by PLD). Blocks go to
    :func:`block_pair`. None if nothing vouches."""
    if isinstance(event, (Composed, SelfComposed)):
        return block_pair(event, event_delta=delta, neighbouring=neighbouring, left=delta)
    best = math.inf
    for cls in _LEAF_ACCOUNTANTS:
        acc = cls(neighbouring=neighbouring)
        if acc.supports(event):
            best = min(best, acc.compose(event).epsilon(delta))
    if target is not None and not best <= target:
        pld = PLDAccountant(neighbouring=neighbouring)
        if pld.supports(event):
            best = min(best, pld.compose(event).epsilon(delta))
    return (best, delta) if math.isfinite(best) else None
