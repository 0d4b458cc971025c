"""What a mechanism claims: the epsilon its privacy event is charged at, for one delta.

One release on its own is a sequence fixed in advance, so the smallest epsilon any
accountant proves for its event is a valid claim (each bound is valid; the best one is
the library's claim for that release). The auditor tests that same claim, so an
accountant that under-reports an event is caught as well as a mechanism that under-noises.
"""

from __future__ import annotations

import math

import attrs

from privreg.accountant import make_accountant
from privreg.accountant.plans import DEFAULT_ACCOUNTANTS, accountant_options
from privreg.core.errors import PrivregError, PrivregValueError
from privreg.core.events import PrivacyEvent

__all__ = ["Claim", "claim_for"]


@attrs.frozen(kw_only=True)
class Claim:
    """``epsilon`` at ``delta`` for one release, and the accountant that proves it."""

    epsilon: float
    delta: float
    accountant: str


def claim_for(event: PrivacyEvent, *, delta: float, neighbouring: str | None = None) -> Claim:
    """The smallest epsilon at ``delta`` that any default accountant gives ``event``
    (``inf`` when ``delta`` is 0 and the event has no pure-DP guarantee), for the
    ``neighbouring`` relation (default: the event's own, add/remove when it names none).

    Raises :class:`PrivregValueError` when no accountant supports the event at all."""
    if neighbouring is None:
        neighbouring = getattr(event, "neighbouring", None) or "add_remove"
    best = Claim(epsilon=math.inf, delta=delta, accountant="none")
    supported = []
    for name in DEFAULT_ACCOUNTANTS:
        options = accountant_options(name, event_delta=delta if delta > 0 else None, neighbouring=neighbouring)
        accountant = make_accountant(name, **options)
        if not accountant.supports(event):
            continue
        supported.append(name)
        try:
            epsilon = float(accountant.compose(event).epsilon(delta))
        except PrivregError:
            continue
        if epsilon < best.epsilon:
            best = Claim(epsilon=epsilon, delta=delta, accountant=name)
    if not supported:
        raise PrivregValueError(
            f"no accountant supports the privacy event {event!r}, so it claims nothing that "
            f"could be audited; register an accountant for it first"
        )
    return best
