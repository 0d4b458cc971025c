"""Privacy budgets and the session every release goes through.

:class:`BudgetSession` is a :class:`~privreg.core.charging.Charger` kept by one of two
rules, chosen when the ledger is created and recorded in it:

* **Filters** (the default): the analyst may choose each next mechanism and its
  parameters from all earlier outputs, and stop at any time. A release is granted only
  if some privacy filter of :mod:`privreg.budget.filters` -- each proven valid for
  fully adaptive composition, with the budget fixed up front -- still vouches for the
  whole interaction including it; the budget's delta is split evenly over the filters
  (the union argument in that module's docstring).
* **A declared plan**: the full list of events, fixed before any release. The session
  then charges against the plan's tightest non-adaptive bound (PLD, RDP, KOV, ...; valid
  because nothing in the plan depends on an output) and refuses every release that is
  not the next one of the plan.

For each charge the session catches up with charges other threads or processes made,
computes the decision *outside* the ledger's write lock, then appends the charge in one
short transaction that first checks no other charge landed meanwhile (and recomputes
if one did). The mechanism draws its noise only after that transaction committed, so a
refused release releases nothing and charges nothing, and a crash can never leave a
release without its charge (at worst a charge without its release). The session's state
is running totals, so a charge costs the same at row 10 and at row 100,000.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from privreg.accountant.plans import DEFAULT_ACCOUNTANTS, accountant_options, plan_bound
from privreg.budget.filters import FILTERS, Filter, make_filter
from privreg.budget.ledger import Ledger
from privreg.core import validation as v
from privreg.core.charging import Charge
from privreg.core.errors import (
    BudgetExceededError,
    PrivregError,
    PrivregTypeError,
    PrivregValueError,
)
from privreg.core.events import PrivacyEvent, event_from_dict

__all__ = [
    "PrivacyBudget",
    "BudgetSession",
    "DEFAULT_FILTERS",
    "DEFAULT_ACCOUNTANTS",
    "accountant_options",
    "plan_bound",
]

#: Filters a session consults unless told otherwise (each gets delta / 3).
DEFAULT_FILTERS = ("basic", "rdp", "gdp")
LEDGER_FORMAT = 2


# Converters of PrivacyBudget's fields (named: the attrs plugin cannot type a lambda's).
def _epsilon(x: Any) -> float:
    return v.check_epsilon("epsilon", x)


def _delta(x: Any) -> float:
    return v.check_delta("delta", x)


def _relation(x: Any) -> str:
    return v.check_relation("neighbouring", x)


@attrs.frozen(kw_only=True)
class PrivacyBudget:
    """A total (epsilon, delta) that all releases together may not exceed, for one
    neighbour relation: ``"add_remove"`` (add or remove one user's data, the default) or
    ``"replace_one"`` (replace one user's data; local and shuffled reports need it)."""

    epsilon: float = attrs.field(converter=_epsilon)
    delta: float = attrs.field(default=0.0, converter=_delta)
    neighbouring: str = attrs.field(default="add_remove", converter=_relation)

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "neighbouring": self.neighbouring}


def _filter_meta(filters: Sequence[str], event_delta: float | None) -> dict[str, Any]:
    return {"kind": "filters", "filters": list(filters), "event_delta": event_delta}


class BudgetSession:
    """A budget over a persistent ledger; thread-safe and process-safe.

    ``ledger`` is a SQLite path (``":memory:"``: private to this session). ``filters``
    names the filters to consult (:data:`DEFAULT_FILTERS`); ``event_delta`` lets the
    ``basic`` and ``advanced`` filters price curve events (a Gaussian, shuffled reports)
    at that delta. ``plan`` instead declares every event in advance (see the module
    docstring). Opening an existing ledger requires the budget and rule it was created
    with; :meth:`open` reads them from the ledger.
    """

    def __init__(
        self,
        *,
        budget: PrivacyBudget,
        ledger: str | Path = ":memory:",
        filters: Iterable[str] | None = None,
        event_delta: float | None = None,
        plan: Sequence[PrivacyEvent] | None = None,
        key: bytes | None = None,
        busy_timeout: float = 30.0,
    ) -> None:
        if not isinstance(budget, PrivacyBudget):
            raise PrivregTypeError(f"budget must be a PrivacyBudget; got {budget!r}")
        self.budget = budget
        self.event_delta = None if event_delta is None else v.check_delta("event_delta", event_delta, allow_zero=False)
        self._busy_timeout = v.check_sensitivity("busy_timeout", busy_timeout)
        self._plan: tuple[PrivacyEvent, ...] | None = None
        if plan is not None:
            if filters is not None:
                raise PrivregValueError("pass either plan (a declared sequence) or filters, not both")
            self._plan = self._check_plan(plan)
            self.plan_epsilon, self.plan_accountant = plan_bound(
                self._plan, delta=budget.delta, neighbouring=budget.neighbouring, event_delta=self.event_delta
            )
            if not self.plan_epsilon <= budget.epsilon:
                raise BudgetExceededError(
                    f"the declared plan of {len(self._plan)} release(s) costs epsilon "
                    f"{self.plan_epsilon:.6g} at delta={budget.delta:g} (best bound: {self.plan_accountant}), "
                    f"over the budget of {budget.epsilon:g}; shorten the plan or add noise. Nothing was charged."
                )
            rule = {
                "kind": "plan",
                "plan": [e.to_dict() for e in self._plan],
                "event_delta": self.event_delta,
                "bound": {"epsilon": self.plan_epsilon, "accountant": self.plan_accountant},
            }
            self.filter_names: tuple[str, ...] = ()
        else:
            names = tuple(DEFAULT_FILTERS if filters is None else filters)
            if not names or len(set(names)) != len(names):
                raise PrivregValueError(f"filters must name at least one filter, each once; got {names!r}")
            for n in names:
                if n not in FILTERS:
                    raise PrivregValueError(f"unknown filter {n!r}; choose among {sorted(FILTERS)}")
            self.filter_names = names
            rule = _filter_meta(names, self.event_delta)
        meta = {"format": LEDGER_FORMAT, "budget": budget.to_dict(), "rule": rule}
        self._ledger = Ledger(ledger, meta=meta, key=key, busy_timeout=self._busy_timeout)
        stored = self._ledger.meta
        if stored.get("format", 1) == 1:  # kept by the old hindsight rule: re-checked by the filters
            legacy = {
                "budget": {"epsilon": budget.epsilon, "delta": budget.delta},
                "event_delta": self.event_delta,
                "neighbouring": budget.neighbouring,
            }
            got = {
                "budget": stored.get("budget"),
                "event_delta": stored.get("event_delta"),
                "neighbouring": v.check_relation("neighbouring", stored.get("neighbouring", "add_remove")),
            }
            if self._plan is not None or got != legacy:
                self._mismatch(ledger, "settings", got, legacy)
        else:
            for part in ("budget", "rule"):  # not `key`: that is the ledger's key argument
                if stored.get(part) != meta[part]:
                    self._mismatch(ledger, part, stored.get(part), meta[part])
        self._filters = self._fresh_filters()
        self._lock = threading.RLock()
        self._seen = 0
        with self._lock:
            self._catch_up()

    @staticmethod
    def _mismatch(ledger: str | Path, key: str, stored: Any, wanted: Any) -> None:
        raise PrivregValueError(
            f"ledger {str(ledger)!r} was created with {key} = {stored!r}, not {wanted!r}; open it with "
            f"BudgetSession.open(path) or the same settings"
        )

    @staticmethod
    def _check_plan(plan: Sequence[PrivacyEvent]) -> tuple[PrivacyEvent, ...]:
        if isinstance(plan, (str, bytes)) or not isinstance(plan, Sequence):
            raise PrivregTypeError(f"plan must be a list of PrivacyEvent in release order; got {plan!r}")
        for i, e in enumerate(plan):
            if not isinstance(e, PrivacyEvent):
                raise PrivregTypeError(f"plan[{i}] must be a PrivacyEvent; got {e!r}")
        if not plan:
            raise PrivregValueError("plan must declare at least one release")
        return tuple(plan)

    def _fresh_filters(self) -> list[Filter]:
        share = self.budget.delta / max(1, len(self.filter_names))
        return [
            make_filter(
                n,
                epsilon=self.budget.epsilon,
                delta=share,
                neighbouring=self.budget.neighbouring,
                event_delta=self.event_delta,
            )
            for n in self.filter_names
        ]

    @classmethod
    def open(cls, path: str | Path, *, key: bytes | None = None) -> BudgetSession:
        """Re-open an existing ledger with the budget and rule stored in it (``key``: a
        keyed ledger's key)."""
        probe = Ledger.open_readonly(path, key=key)
        meta = probe.meta
        probe.close()
        b = meta["budget"]
        budget = PrivacyBudget(
            epsilon=b["epsilon"],
            delta=b["delta"],
            neighbouring=b.get("neighbouring", meta.get("neighbouring", "add_remove")),
        )
        if meta.get("format", 1) == 1:
            return cls(budget=budget, ledger=path, event_delta=meta.get("event_delta"), key=key)
        rule = meta["rule"]
        if rule["kind"] == "plan":
            return cls(
                budget=budget,
                ledger=path,
                event_delta=rule.get("event_delta"),
                plan=[event_from_dict(d) for d in rule["plan"]],
                key=key,
            )
        return cls(budget=budget, ledger=path, filters=rule["filters"], event_delta=rule.get("event_delta"), key=key)

    def close(self) -> None:
        self._ledger.close()

    def __enter__(self) -> BudgetSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    @property
    def rule(self) -> str:
        """Which rule keeps this session, in words (also printed by ``privreg audit``)."""
        if self._plan is not None:
            return (
                f"declared plan of {len(self._plan)} release(s), non-adaptive bound epsilon "
                f"{self.plan_epsilon:.6g} by {self.plan_accountant}"
            )
        parts = ", ".join(f.describe() for f in self._filters)
        return f"fully adaptive filters, delta split evenly ({self.budget.delta / len(self._filters):g} each): {parts}"

    # -- accounting ---------------------------------------------------------------------

    def _catch_up(self) -> None:
        """Fold in charges appended (by anyone) since we last looked: O(new rows), runs of
        identical events folded at once (a reopened ledger of 100,000 rows takes seconds)."""
        rows = self._ledger.rows(after=self._seen)
        if self._plan is not None:
            for row in rows:
                i = row.seq - 1
                if i >= len(self._plan) or row.charge.event != self._plan[i]:
                    raise PrivregError(
                        f"ledger {self._ledger.path!r}: row {row.seq} is not release {row.seq} of "
                        f"the declared plan; audit it with 'privreg audit'"
                    )
        else:
            i = 0
            while i < len(rows):
                event, j = rows[i].charge.event, i + 1
                while j < len(rows) and rows[j].charge.event == event:
                    j += 1
                for f in self._filters:
                    f.add(event, j - i)
                i = j
        if rows:
            self._seen = rows[-1].seq

    def _trial(self, event: PrivacyEvent, what: str) -> list[Filter]:
        """The filters with ``event`` added, if some filter still vouches; else refuse."""
        if self._plan is not None:
            i = self._seen
            if i >= len(self._plan) or event != self._plan[i]:
                expected = self._plan[i].to_json() if i < len(self._plan) else "nothing (the plan is complete)"
                raise BudgetExceededError(
                    f"{what}: {event.to_json()} is not release #{i + 1} of the declared plan, which is "
                    f"{expected}; a plan session refuses every release outside its plan. Nothing was "
                    f"released or charged."
                )
            return self._filters
        trial = [f.copy() for f in self._filters]
        for f in trial:
            f.add(event)
        if any(f.vouches() for f in trial):
            return trial
        detail = "; ".join(
            f"{f.name}: unsupported ({f.dead})" if f.dead else f"{f.name}: epsilon {f.spent():.6g} at delta {f.delta:g}"
            for f in trial
        )
        remaining = self.budget.epsilon - self._best(self._filters)
        raise BudgetExceededError(
            f"{what}: no fully adaptive filter can grant {event.to_json()} within the budget of epsilon "
            f"{self.budget.epsilon:g}, delta {self.budget.delta:g} ({detail}); {max(0.0, remaining):.6g} of "
            f"epsilon remains for releases some filter can still grant. Nothing was released or charged."
        )

    @staticmethod
    def _best(filters: Sequence[Filter]) -> float:
        return min((f.spent() for f in filters), default=math.inf)

    def spent(self) -> dict[str, float]:
        """Epsilon spent under each filter still able to vouch (a plan session: the
        plan's accountant on the releases charged so far)."""
        with self._lock:
            self._catch_up()
            if self._plan is not None:
                done = self._plan[: self._seen]
                eps, name = plan_bound(
                    done, delta=self.budget.delta, neighbouring=self.budget.neighbouring, event_delta=self.event_delta
                )
                return {f"plan:{name}": eps}
            return {f.name: f.spent() for f in self._filters if not f.dead}

    def remaining(self) -> float:
        """Budget epsilon minus the best bound on what has been spent."""
        spent = self.spent()
        return self.budget.epsilon - min(spent.values(), default=math.inf if self._seen else 0.0)

    def can_afford(self, event: PrivacyEvent) -> bool:
        """Whether ``event`` would be granted now (a dry run: nothing is charged)."""
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"event must be a PrivacyEvent; got {event!r}")
        with self._lock:
            self._catch_up()
            try:
                self._trial(event, "dry run")
            except BudgetExceededError:
                return False
            return True

    def charge(
        self,
        event: PrivacyEvent,
        *,
        mechanism: str,
        parameters: Mapping[str, Any],
        label: str = "",
        randomness: Mapping[str, Any] | None = None,
    ) -> None:
        """Charge ``event`` if it is granted, atomically; raise BudgetExceededError otherwise."""
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"event must be a PrivacyEvent; got {event!r}")
        charge = Charge(
            timestamp=time.time(),
            mechanism=mechanism,
            parameters=dict(parameters),
            event=event,
            label=label,
            randomness=dict(randomness or {}),
        )
        what = label or mechanism
        with self._lock:
            self._catch_up()
            trial = self._trial(event, what)  # decided outside the write lock
            row = self._ledger.try_append(charge, expected_seq=self._seen)
            if row is None:  # another writer charged first: keep our place in line, decide again
                with self._ledger.turn():
                    self._catch_up()
                    trial = self._trial(event, what)
                    row = self._ledger.try_append(charge, expected_seq=self._seen)
                    while row is None:  # only a writer bypassing the queue gets here
                        self._catch_up()
                        trial = self._trial(event, what)
                        row = self._ledger.try_append(charge, expected_seq=self._seen)
            self._filters = trial  # only after the commit succeeded
            self._seen = row.seq
