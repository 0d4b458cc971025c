"""Privacy budgets and the session (privacy filter) every release goes through.

:class:`BudgetSession` is a :class:`~privreg.core.charging.Charger`. For each charge it
takes the ledger's write lock, catches up with charges other threads or processes made,
composes the new event into a trial copy of each accountant, and appends the charge to
the ledger only if the best valid bound -- the smallest epsilon at the budget's delta
over the accountants that support every event so far -- stays within the budget. The
mechanism draws its noise only after that transaction committed, so a refused release
releases nothing and charges nothing, and a crash can never leave a release without its
charge (at worst a charge without its release).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from privreg.accountant import make_accountant
from privreg.accountant.base import Accountant
from privreg.accountant.ledger import Ledger
from privreg.core import validation as v
from privreg.core.charging import Charge
from privreg.core.errors import (
    BudgetExceededError,
    PrivregTypeError,
    PrivregValueError,
    UnsupportedEventError,
)
from privreg.core.events import PrivacyEvent

__all__ = ["PrivacyBudget", "BudgetSession", "DEFAULT_ACCOUNTANTS", "accountant_options"]

#: Accountants a session consults; each gives a valid bound, the session uses the best.
DEFAULT_ACCOUNTANTS = ("basic", "advanced", "optimal", "rdp", "zcdp", "gdp", "pld")
_PAIR_ACCOUNTANTS = ("basic", "advanced", "optimal")


@attrs.frozen(kw_only=True)
class PrivacyBudget:
    """A total (epsilon, delta) that all releases together may not exceed."""

    epsilon: float = attrs.field(converter=lambda x: v.check_epsilon("epsilon", x))
    delta: float = attrs.field(default=0.0, converter=lambda x: v.check_delta("delta", x))


def accountant_options(name: str, *, event_delta: float | None, neighbouring: str) -> dict[str, Any]:
    """Constructor options of accountant ``name`` in a session so configured."""
    opts: dict[str, Any] = {"neighbouring": neighbouring}
    if name in _PAIR_ACCOUNTANTS and event_delta is not None:
        opts["event_delta"] = event_delta
    return opts


class BudgetSession:
    """A privacy filter over a persistent ledger; thread-safe and process-safe.

    ``ledger`` is a SQLite path (``":memory:"``: private to this session). Opening an
    existing ledger requires the same budget and configuration it was created with.
    ``event_delta`` lets the (eps, delta) accountants charge curve events such as a
    Gaussian at that delta.
    """

    def __init__(
        self,
        *,
        budget: PrivacyBudget,
        ledger: str | Path = ":memory:",
        accountants: Iterable[str] = DEFAULT_ACCOUNTANTS,
        event_delta: float | None = None,
        neighbouring: str = "add_remove",
    ) -> None:
        if not isinstance(budget, PrivacyBudget):
            raise PrivregTypeError(f"budget must be a PrivacyBudget; got {budget!r}")
        self.budget = budget
        names = tuple(accountants)
        if not names:
            raise PrivregValueError("accountants must name at least one accountant")
        self._options = {n: accountant_options(n, event_delta=event_delta, neighbouring=neighbouring) for n in names}
        self._accountants: dict[str, Accountant | None] = {n: make_accountant(n, **o) for n, o in self._options.items()}
        meta = {
            "format": 1,
            "budget": {"epsilon": budget.epsilon, "delta": budget.delta},
            "accountants": list(names),
            "event_delta": event_delta,
            "neighbouring": neighbouring,
        }
        self._ledger = Ledger(ledger, meta=meta)
        for key in ("budget", "accountants", "event_delta", "neighbouring"):
            if self._ledger.meta.get(key) != meta[key]:
                raise PrivregValueError(
                    f"ledger {str(ledger)!r} was created with {key} = {self._ledger.meta.get(key)!r}, "
                    f"not {meta[key]!r}; open it with BudgetSession.open(path) or the same settings"
                )
        self._lock = threading.RLock()
        self._seen = 0
        with self._lock:
            self._catch_up()

    @classmethod
    def open(cls, path: str | Path) -> BudgetSession:
        """Re-open an existing ledger with the settings stored in it."""
        meta = Ledger(path, create=False).meta
        return cls(
            budget=PrivacyBudget(**meta["budget"]), ledger=path, accountants=meta["accountants"],
            event_delta=meta["event_delta"], neighbouring=meta["neighbouring"],
        )

    def close(self) -> None:
        self._ledger.close()

    def __enter__(self) -> BudgetSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    # -- accounting ---------------------------------------------------------------------

    @staticmethod
    def _with(accountants: Mapping[str, Accountant | None], event: PrivacyEvent) -> dict[str, Accountant | None]:
        """Copies with ``event`` composed; None for accountants that cannot take it."""
        out: dict[str, Accountant | None] = {}
        for name, acc in accountants.items():
            out[name] = acc.copy().compose(event) if acc is not None and acc.supports(event) else None
        return out

    def _best(self, accountants: Mapping[str, Accountant | None]) -> tuple[float, str]:
        bounds = [(acc.epsilon(self.budget.delta), name) for name, acc in accountants.items() if acc is not None]
        return min(bounds) if bounds else (math.inf, "none")

    def _catch_up(self) -> None:
        """Compose charges appended by other sessions since we last looked."""
        for row in self._ledger.rows(after=self._seen):
            self._accountants = self._with(self._accountants, row.charge.event)
            self._seen = row.seq

    def spent(self) -> dict[str, float]:
        """Epsilon at the budget's delta under each accountant still able to account."""
        with self._lock:
            self._catch_up()
            return {n: a.epsilon(self.budget.delta) for n, a in self._accountants.items() if a is not None}

    def remaining(self) -> float:
        """Budget epsilon minus the best bound on what has been spent."""
        with self._lock:
            self._catch_up()
            return self.budget.epsilon - self._best(self._accountants)[0]

    def can_afford(self, event: PrivacyEvent) -> bool:
        """Whether ``event`` would fit now (a dry run: nothing is charged)."""
        with self._lock:
            self._catch_up()
            return self._best(self._with(self._accountants, event))[0] <= self.budget.epsilon

    def charge(
        self,
        event: PrivacyEvent,
        *,
        mechanism: str,
        parameters: Mapping[str, Any],
        label: str = "",
        randomness: Mapping[str, Any] | None = None,
    ) -> None:
        """Charge ``event`` if it fits, atomically; raise BudgetExceededError otherwise."""
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"event must be a PrivacyEvent; got {event!r}")
        with self._lock:
            with self._ledger.transaction():
                self._catch_up()
                trial = self._with(self._accountants, event)
                if all(a is None for a in trial.values()):
                    raise UnsupportedEventError(event, "+".join(self._accountants))
                spent, best = self._best(trial)
                if spent > self.budget.epsilon:
                    before = self._best(self._accountants)[0]
                    raise BudgetExceededError(
                        f"{label or mechanism}: charging {event.to_json()} would bring epsilon to "
                        f"{spent:.6g} at delta={self.budget.delta:g} (best bound: {best}), over the "
                        f"budget of {self.budget.epsilon:g}; {self.budget.epsilon - before:.6g} "
                        f"remains. Nothing was released or charged."
                    )
                row = self._ledger.append(Charge(
                    timestamp=time.time(), mechanism=mechanism, parameters=dict(parameters),
                    event=event, label=label, randomness=dict(randomness or {}),
                ))
            self._accountants = trial  # only after the commit succeeded
            self._seen = row.seq
