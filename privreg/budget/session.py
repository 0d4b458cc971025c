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
release without its charge (at worst a charge without its release).

**Priced once.** Each row stores what every filter charged for it, priced when it was
decided from the state then (:mod:`privreg.budget.filters`), and every
:data:`CHECKPOINT_EVERY` rows the ledger stores every filter's state, chained like the
rows. Reopening reads the last checkpoint and replays the stored prices of the rows after
it -- never re-pricing with hindsight --, so a live session, the same ledger reopened and
a second process hold the same state bit for bit and take the same decisions, and
reopening costs the same at row 1,000 and at row 1,000,000. ``privreg ledger verify``
re-derives every price from the rows before it and flags any difference. A store whose
checkpoints any writer could forge (PostgreSQL: every analyst appends them) is replayed
from row 1 instead (``trusts_checkpoints``): about 60 us a row.
"""

from __future__ import annotations

import math
import operator
import threading
import time
from array import array
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import attrs

from privreg.accountant.plans import DEFAULT_ACCOUNTANTS, accountant_options, plan_bound
from privreg.budget.filters import FILTERS, Filter, Price, make_filter, price_from_json, price_to_json
from privreg.budget.ledger import EncodedPrices, Ledger, LedgerIntegrityError, LedgerRow, LedgerRowsLostError
from privreg.budget.ledger import stored_prices as _stored_text
from privreg.budget.memory_store import MEMORY, MemoryLedger
from privreg.budget.store import LedgerStore, is_postgres_url, open_readonly
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
    "Spending",
    "Quote",
    "CHECKPOINT_EVERY",
    "rule_text",
    "filter_citations",
    "settings_of",
    "DEFAULT_FILTERS",
    "DEFAULT_ACCOUNTANTS",
    "accountant_options",
    "plan_bound",
]

#: Filters a session consults unless told otherwise (each gets delta / 3).
DEFAULT_FILTERS = ("basic", "rdp", "gdp")
LEDGER_FORMAT = 3
#: A checkpoint of every filter's state is stored with every this many rows.
CHECKPOINT_EVERY = 512


# Converters of PrivacyBudget's fields (named: the attrs plugin cannot type a lambda's).
def _check_text(name: str, value: Any) -> None:
    """``value`` is text every store keeps as it is: a str with no NUL (PostgreSQL's text
    refuses it) and no lone surrogate (not UTF-8). Errors never quote the text."""
    if not isinstance(value, str):
        raise PrivregTypeError(f"{name} must be a str; got {type(value).__name__!r}: pass its text")
    if "\x00" in value:
        raise PrivregValueError(f"{name} contains a NUL character, which a ledger cannot store; remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PrivregValueError(
            f"{name} contains a lone surrogate, which is not Unicode text; decode its bytes properly first"
        ) from None


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


@attrs.frozen(kw_only=True)
class Spending:
    """Epsilon in the user's terms: the headline ``epsilon`` at the budget's ``delta``
    under the filter that vouches best (``filter``; "" when none can), with each filter's
    own figure beside it (``by_filter``: None where the filter cannot price some release,
    ``unsupported`` says why). ``float(x)`` is the headline."""

    epsilon: float
    delta: float
    filter: str
    by_filter: Mapping[str, float | None]
    unsupported: Mapping[str, str] = attrs.field(factory=dict)

    def __float__(self) -> float:
        return self.epsilon

    def __str__(self) -> str:
        detail = ", ".join(f"{k} {'unsupported' if x is None else f'{x:.6g}'}" for k, x in self.by_filter.items())
        best = f" ({self.filter})" if self.filter else ""
        return f"epsilon {self.epsilon:.6g} at delta {self.delta:g}{best}" + (f"; {detail}" if detail else "")


@attrs.frozen(kw_only=True)
class Quote:
    """What a release would cost now (:meth:`BudgetSession.price`; nothing is charged).

    ``granted``: whether a charge would be granted. ``epsilon``: how much the headline
    spent epsilon would rise (inf if refused); ``filter``: the filter that would vouch
    best after it. ``by_filter``: each filter's rise in epsilon at its share of delta
    (None: it cannot price the release). ``reason``: why it would be refused, one line."""

    granted: bool
    epsilon: float
    filter: str
    by_filter: Mapping[str, float | None]
    reason: str = ""

    def __str__(self) -> str:
        detail = ", ".join(f"{k} {'unsupported' if x is None else f'{x:.6g}'}" for k, x in self.by_filter.items())
        if not self.granted:
            return f"refused: {self.reason}"
        return f"epsilon {self.epsilon:.6g}, vouched for by {self.filter}" + (f" ({detail})" if detail else "")


class BudgetSession:
    """A budget over a persistent ledger; thread-safe and process-safe.

    ``ledger`` is a SQLite path, ``":memory:"`` (the default: a ledger private to this
    session, kept in Python lists by :class:`~privreg.budget.memory_store.MemoryLedger`
    with the same rows, hashes and verification) or any
    :class:`~privreg.budget.store.LedgerStore` (``Ledger(":memory:", meta=...)`` for an
    SQLite one in memory). ``filters`` names the filters to consult
    (:data:`DEFAULT_FILTERS`); ``event_delta`` lets the ``basic`` and ``advanced`` filters
    price curve events (a Gaussian, shuffled reports) at that delta -- a release that
    states its own (epsilon, delta) is priced at that point without it. ``plan`` instead
    declares every event in advance (see the module docstring). Opening an existing ledger
    requires the budget and rule it was created with; :meth:`open` reads them from it.
    """

    def __init__(
        self,
        *,
        budget: PrivacyBudget,
        ledger: str | Path | LedgerStore = ":memory:",
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
        if is_postgres_url(ledger):  # an existing budget on a server ('privreg ledger init URL#NAME')
            from privreg.budget.store_postgres import PostgresLedger

            self._ledger: LedgerStore = PostgresLedger(str(ledger), key=key, busy_timeout=self._busy_timeout)
        elif isinstance(ledger, str) and ledger == MEMORY:  # private: lists in memory, no SQL per charge
            self._ledger = MemoryLedger(meta=meta, key=key, busy_timeout=self._busy_timeout)
        elif isinstance(ledger, (str, Path)):
            self._ledger = Ledger(ledger, meta=meta, key=key, busy_timeout=self._busy_timeout)
        elif isinstance(ledger, LedgerStore):
            self._ledger = ledger
        else:
            raise PrivregTypeError(
                f"ledger must be a path (str or Path; ':memory:' for a private one) or a LedgerStore; "
                f"got {type(ledger).__name__}"
            )
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
                self._mismatch(self._ledger.path, "settings", got, legacy)
        else:
            for part in ("budget", "rule"):  # not `key`: that is the ledger's key argument
                if stored.get(part) != meta[part]:
                    self._mismatch(self._ledger.path, part, stored.get(part), meta[part])
        self._filters = self._fresh_filters()
        self._encoded_memo: dict[tuple[Any, ...], EncodedPrices] = {}
        #: the prices of the last charge and their encoding (compared by identity first)
        self._last_encoded: tuple[tuple[Price, ...], EncodedPrices] | None = None
        #: each filter's price, by the stored text of a row's prices (catching up on rows
        #: that repeat a release decodes its text once)
        self._prices_memo: dict[str, list[Price]] = {}
        #: indices of the filters, cheapest spent() first (the order the granted check asks them)
        self._cheap_first = sorted(range(len(self._filters)), key=lambda i: self._filters[i].spent_cost)
        self._lock = threading.RLock()
        self._seen = 0
        self._started = False
        #: the store returns the rows a conflicting append missed (PostgreSQL): a charge
        #: skips the read before it, and its append's head check stands for that read
        # optional store flags, declared on Ledger (a third-party LedgerStore may omit them)
        self._optimistic = bool(getattr(self._ledger, "catches_up_on_append", False))
        #: the store may lose rows it gave (PostgreSQL: see may_lose_rows there): appends
        #: name the hash of row _seen, and a catch-up checks that row is still there
        self._chained = bool(getattr(self._ledger, "may_lose_rows", False))
        self._seen_hash: str | None = None  # hash of row _seen, when read from the ledger
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
        probe = open_readonly(path, key=key)
        meta = probe.meta
        probe.close()
        budget, kwargs = settings_of(meta)
        return cls(budget=budget, ledger=path, key=key, **kwargs)

    def close(self) -> None:
        self._ledger.close()

    def __enter__(self) -> BudgetSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ledger(self) -> LedgerStore:
        return self._ledger

    @property
    def filters(self) -> tuple[Filter, ...]:
        """Copies of the filters as they stand (their totals, for inspection)."""
        with self._lock:
            return tuple(f.copy() for f in self._filters)

    @property
    def rule(self) -> str:
        """Which rule keeps this session, in words (also printed by ``privreg ledger verify``)."""
        if self._plan is not None:
            return (
                f"declared plan of {len(self._plan)} release(s), non-adaptive bound epsilon "
                f"{self.plan_epsilon:.6g} by {self.plan_accountant}"
            )
        return rule_text(self.filter_names, self.budget.delta)

    # -- accounting ---------------------------------------------------------------------

    def _catch_up(self) -> None:
        """Fold in charges appended (by anyone) since we last looked, by their stored
        prices; a fresh session starts from the ledger's last checkpoint."""
        if not self._started:
            self._started = True
            # a store shared with writers who could forge a state says so (PostgreSQL)
            if self._plan is None and getattr(self._ledger, "trusts_checkpoints", True):
                cp = self._ledger.last_checkpoint()
                if cp is not None:
                    self._load_checkpoint(cp.state, cp.seq)
        else:
            head = self._ledger.head()
            if head[0] == self._seen and (not self._chained or head[1] == self._head()[1]):
                return  # nothing new (one indexed read): the usual case
        try:
            self._fold()
        except LedgerRowsLostError:  # a crash took rows our filters hold: start again from row 1
            self._filters = self._fresh_filters()
            self._prices_memo.clear()
            self._seen, self._seen_hash = 0, None
            self._fold()

    def _head(self) -> tuple[int, str]:
        """The row this session's filters hold last, as ``(seq, hash)``."""
        if self._seen_hash is None:
            return (self._seen, str(self._ledger.genesis()) if self._seen == 0 else "")  # type: ignore[attr-defined]
        return (self._seen, self._seen_hash)

    def _fold(self) -> None:
        """Apply the rows after ``_seen``; on a store that may lose rows, only if row
        ``_seen`` is still the one the filters hold (else LedgerRowsLostError)."""
        expect = self._head()[1] if self._chained and (self._seen == 0 or self._seen_hash is not None) else None
        # the stored prices alone, checked as rows() checks them (no charge built): a
        # writer in a turn catches up on every other writer's charge, one by one
        fast = getattr(self._ledger, "prices_after", None) if self._plan is None else None
        texts = fast(self._seen, expect=expect) if fast is not None else None
        if texts is not None:
            for seq, _, text in texts:
                for f, price in zip(self._filters, self._text_prices(text, seq)):
                    f.apply(price)
            if texts:
                self._seen, self._seen_hash = texts[-1][0], texts[-1][1]
            return
        if expect is not None:  # rows() does not say whether row _seen is still ours: ask first
            self._ledger.prices_after(self._seen, expect=expect)  # type: ignore[attr-defined]
        rows = self._ledger.rows(after=self._seen)
        if self._plan is not None:
            for row in rows:
                i = row.seq - 1
                if i >= len(self._plan) or row.charge.event != self._plan[i]:
                    raise PrivregError(
                        f"ledger {self._ledger.path!r}: row {row.seq} is not release {row.seq} of "
                        f"the declared plan; verify it with 'privreg ledger verify'"
                    )
        else:
            for row in rows:
                for f, price in zip(self._filters, self._stored_prices(row, self._filters)):
                    f.apply(price)
        if rows:
            self._seen, self._seen_hash = rows[-1].seq, rows[-1].hash

    def _load_checkpoint(self, state: Mapping[str, Any], seq: int) -> None:
        try:
            for f in self._filters:
                f.load_state(state[f.name])
        except (KeyError, TypeError, ValueError) as exc:
            raise LedgerIntegrityError(
                f"ledger {self._ledger.path!r}: the checkpoint at row {seq} does not hold this rule's filters "
                f"({type(exc).__name__}); verify it with 'privreg ledger verify'"
            ) from None
        self._seen = seq

    def _stored_prices(self, row: LedgerRow, filters: Sequence[Filter]) -> list[Price]:
        """The prices stored with ``row``; a row without any (a ledger written before
        prices were stored, or a bare :meth:`Ledger.append`) is priced now, in order, from
        the state before it, as a live session would have priced it."""
        if not row.prices:  # written before prices were stored, or by a writer that stores none
            return [f.price(row.charge.event, row.charge.stated) for f in filters]
        text = row.prices.text if isinstance(row.prices, EncodedPrices) else None
        if text is not None and filters is self._filters:
            return self._text_prices(text, row.seq, row.prices)
        return self._decoded_prices(row.prices, row.seq, filters)

    def _text_prices(self, text: str, seq: int, stored: Mapping[str, Any] | None = None) -> list[Price]:
        """Each of the session's filters' price in row ``seq``'s stored prices ``text``
        (``stored``: the text decoded, if at hand), decoded once per distinct text."""
        memo = self._prices_memo.get(text)
        if memo is not None:  # these filters read this exact text before: the same prices
            return memo
        if stored is None:
            try:
                stored = _stored_text(text)
            except ValueError:
                stored = {}  # not a mapping: refused below, as a missing price
        prices = self._decoded_prices(stored, seq, self._filters)
        if len(self._prices_memo) >= _ENCODED_MEMO:
            self._prices_memo.clear()
        self._prices_memo[text] = prices
        return prices

    def _decoded_prices(self, stored: Mapping[str, Any], seq: int, filters: Sequence[Filter]) -> list[Price]:
        try:
            prices = [price_from_json(stored[f.name]) for f in filters]
            for f, p in zip(filters, prices):
                if not isinstance(p, str) and (len(p) != f.width or any(not x >= 0 for x in p)):
                    raise ValueError(f"a {f.name} price must be {f.width} non-negative number(s)")
            return prices
        except (KeyError, ValueError) as exc:
            raise LedgerIntegrityError(
                f"ledger {self._ledger.path!r}: row {seq} does not store a price for every filter of its rule "
                f"({type(exc).__name__}); verify it with 'privreg ledger verify'"
            ) from None

    def _priced(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> tuple[list[Filter], list[Price]]:
        """The filters with ``event`` added, and each filter's price of it."""
        prices = [f.price(event, stated) for f in self._filters]
        trial = [f.copy() for f in self._filters]
        for f, p in zip(trial, prices):
            f.apply(p)
        return trial, prices

    def _quote(
        self, event: PrivacyEvent, stated: PrivacyEvent | None, priced: tuple[list[Filter], list[Price]] | None = None
    ) -> tuple[Quote, list[Filter], list[Price]]:
        """What ``event`` would cost now, the filters after it and the prices."""
        before = [f.spent() for f in self._filters]
        trial, prices = priced if priced is not None else self._priced(event, stated)
        after = [f.spent() for f in trial]
        by_filter: dict[str, float | None] = {
            f.name: (None if f.dead else a - b if math.isfinite(a) else math.inf)
            for f, a, b in zip(trial, after, before)
        }
        alive = [(a, f.name) for f, a in zip(trial, after) if f.vouches()]
        if alive:
            best_after, name = min(alive)
            return (
                Quote(granted=True, epsilon=best_after - self._best(), filter=name, by_filter=by_filter),
                trial,
                prices,
            )
        reason = self._why(trial, before) + self._relation_clause(event)
        return (
            Quote(granted=False, epsilon=math.inf, filter="", by_filter=by_filter, reason=reason),
            trial,
            prices,
        )

    def _relation_clause(self, event: PrivacyEvent) -> str:
        """Why a refused release may cost more than it states: an add/remove guarantee
        under a replace-one budget is charged by group privacy."""
        if (
            self.budget.neighbouring == "replace_one"
            and getattr(event, "neighbouring", None) in (None, "add_remove")
            and event.kind != "local_dp"
        ):
            return (
                "; the release's guarantee is for add_remove neighbours, charged under this replace_one budget "
                "by group privacy (twice its epsilon, more delta)"
            )
        return ""

    def _why(self, trial: Sequence[Filter], before: Sequence[float]) -> str:
        """Why no filter can grant a release, one clause per filter, in epsilon."""
        parts = []
        for f, b in zip(trial, before):
            if f.dead:
                parts.append(f"{f.name}: unsupported ({f.dead})")
                continue
            a = f.spent()
            left = max(0.0, f.epsilon - b) if math.isfinite(b) else 0.0
            if math.isfinite(a):
                parts.append(f"{f.name}: costs epsilon {a - b:.6g} with {left:.6g} left")
            elif f.name in ("basic", "advanced") and f.sums[1] > (f.delta if f.name == "basic" else f.delta / 2):
                parts.append(f"{f.name}: its delta ({f.delta:g}) would be exhausted")
            else:
                parts.append(f"{f.name}: no finite epsilon at its delta {f.delta:g}")
        return "; ".join(parts)

    def _best(self) -> float:
        alive = [f.spent() for f in self._filters if not f.dead]
        return min(alive, default=math.inf if self._seen else 0.0)

    def _trial(self, event: PrivacyEvent, stated: PrivacyEvent | None, what: str) -> tuple[list[Filter], list[Price]]:
        """The filters with ``event`` added and the prices, if some filter still vouches;
        else refuse, in one line."""
        if self._plan is not None:
            i = self._seen
            if i >= len(self._plan) or event != self._plan[i]:
                expected = (
                    f"is not release #{i + 1} ({self._plan[i].kind})"
                    if i < len(self._plan)
                    else f"comes after the plan is complete ({len(self._plan)} release(s))"
                )
                raise BudgetExceededError(
                    f"{what} refused: a plan session grants only its declared releases in order, and this "
                    f"{event.kind} release {expected}. Nothing was released or charged."
                )
            return self._filters, []
        trial, prices = self._priced(event, stated)
        # granted iff some filter vouches after it: ask the cheap ones first, and leave
        # the others' epsilon to be computed (once per state) when someone asks for it
        if any(trial[i].vouches() for i in self._cheap_first):
            return trial, prices
        raise self._refusal(event, stated, what, (trial, prices))

    def _refusal(
        self, event: PrivacyEvent, stated: PrivacyEvent | None, what: str, priced: tuple[list[Filter], list[Price]]
    ) -> BudgetExceededError:
        """The one-line refusal of a release no filter vouches for, the filters as they stand."""
        quote = self._quote(event, stated, priced)[0]
        remaining = max(0.0, self.budget.epsilon - self._best())
        return BudgetExceededError(
            f"{what} refused by every filter of the budget (epsilon {self.budget.epsilon:g}, delta "
            f"{self.budget.delta:g}, {remaining:.6g} left): {quote.reason}. Nothing was released or charged."
        )

    def _charge_once(
        self, charge: Charge, event: PrivacyEvent, stated: PrivacyEvent | None, what: str
    ) -> LedgerRow | None:
        """Decide ``event`` on the filters as they stand and, if granted, append it and
        then set the filters to hold it. Return None (another writer appended first) or
        raise (refused, or the append failed) with the filters' totals as they were.

        Every charge takes this path, so the release is decided on each filter's totals
        after it (:meth:`~Filter.after`: the same prices, added as :meth:`_priced` adds
        them) instead of on copies of the filters; the totals are set only once the row
        is stored."""
        if self._plan is not None:
            trial, prices = self._trial(event, stated, what)
            return self._append(charge, trial, prices)
        filters = self._filters
        prices = [f.price(event, stated) for f in filters]  # all from the state before
        after = [f.after(p) for f, p in zip(filters, prices)]
        # granted iff some filter vouches after it: ask the cheap ones first, and leave
        # the others' epsilon to be computed (once per state) when someone asks for it
        for i in self._cheap_first:
            if filters[i].vouches_at(*after[i]):
                break
        else:
            raise self._refusal(event, stated, what, self._priced(event, stated))
        row = self._append(charge, filters, prices, after)
        if row is not None:  # stored: only now do the filters hold it
            for f, (sums, dead) in zip(filters, after):
                f.sums, f.dead = sums, dead
        return row

    def _charge_within(self, charge: Charge, event: PrivacyEvent, stated: PrivacyEvent | None) -> LedgerRow | None:
        """Charge ``event`` on rows this session has not read (PostgreSQL, others charging):
        decided on the filters as they stand, with the room a vouching filter leaves for
        the rows appended since (:meth:`Filter.room`), which the server checks as it
        appends (``try_append_within``: admitted only where a session that read every row
        admits it too); then fold those rows and its own, by their stored prices, as a
        session opened afresh does. None (nothing written, the filters as they were): decide
        in a turn."""
        filters = self._filters
        if any(f.price_reads is None for f in filters if not f.dead):
            return None
        prices = [f.price(event, stated) for f in filters]
        room = None
        for i in self._cheap_first:
            f = filters[i]
            sums, dead = f.after(prices[i])
            if f.vouches_at(sums, dead):
                room = f.room(sums, dead)
                if room is not None:
                    break
        if room is None:
            return None  # refused, or close to it, on what we know: decide on every row
        fixed = {g.name: list(g.price_reads or ()) for g in filters if not g.dead}  # alive: must stay so
        append_within = self._ledger.try_append_within  # type: ignore[attr-defined]
        got = append_within(
            charge,
            head=self._head(),
            prices=self._encoded(filters, prices),
            filter_name=f.name,
            room=room,
            fixed=fixed,
            every=CHECKPOINT_EVERY,
        )
        if got is None:
            return None
        row, rows = got
        states = [(g.sums, g.dead) for g in filters]
        for seq, _, text in rows:  # the rows since and its own, as a fresh session folds them
            states = [g.after_state(st, price) for g, st, price in zip(filters, states, self._text_prices(text, seq))]
        for g, (sums, dead) in zip(filters, states):  # all or nothing: a row it cannot read raises above
            g.sums, g.dead = sums, dead
        return cast(LedgerRow, row)

    def _spending(self, filters: Sequence[Filter], total: float) -> tuple[dict[str, float | None], str, float]:
        by: dict[str, float | None] = {f.name: (None if f.dead else f.spent()) for f in filters}
        alive = [(x, n) for n, x in by.items() if x is not None]
        if not alive:
            return by, "", (math.inf if self._seen else 0.0)
        best, name = min(alive)
        return by, name, best

    def spent(self) -> Spending:
        """Epsilon spent, at the budget's delta, under the filter that vouches best, with
        each filter's figure (a plan session: the plan's accountant on the releases so far)."""
        with self._lock:
            self._catch_up()
            if self._plan is not None:
                eps, name = plan_bound(
                    self._plan[: self._seen],
                    delta=self.budget.delta,
                    neighbouring=self.budget.neighbouring,
                    event_delta=self.event_delta,
                )
                return Spending(epsilon=eps, delta=self.budget.delta, filter=f"plan:{name}", by_filter={name: eps})
            by, name, best = self._spending(self._filters, 0.0)
            return Spending(
                epsilon=best,
                delta=self.budget.delta,
                filter=name,
                by_filter=by,
                unsupported={f.name: f.dead for f in self._filters if f.dead},
            )

    def remaining(self) -> Spending:
        """Budget epsilon minus :meth:`spent`, headline and per filter."""
        spent = self.spent()
        return Spending(
            epsilon=self.budget.epsilon - spent.epsilon,
            delta=spent.delta,
            filter=spent.filter,
            by_filter={k: (None if x is None else self.budget.epsilon - x) for k, x in spent.by_filter.items()},
            unsupported=spent.unsupported,
        )

    def price(self, event: PrivacyEvent, *, stated: PrivacyEvent | None = None) -> Quote:
        """What a release of ``event`` would cost now and which filter would vouch for it
        (nothing is charged). ``stated``: the guarantee the release states (see charge)."""
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"event must be a PrivacyEvent; got {event!r}")
        stated = self._storable(stated)
        with self._lock:
            self._catch_up()
            if self._plan is not None:
                try:
                    self._trial(event, stated, "this release")
                except BudgetExceededError as exc:
                    return Quote(granted=False, epsilon=math.inf, filter="", by_filter={}, reason=str(exc))
                return Quote(granted=True, epsilon=0.0, filter=f"plan:{self.plan_accountant}", by_filter={})
            return self._quote(event, stated)[0]

    def _storable(self, stated: PrivacyEvent | None) -> PrivacyEvent | None:
        """``stated``, or None where the ledger cannot store it (a ledger written before
        prices were stored: its readers price each row without it, so the live session
        must too, or they would hold different states and decide differently)."""
        return stated if getattr(self._ledger, "priced", True) else None

    def can_afford(self, event: PrivacyEvent, *, stated: PrivacyEvent | None = None) -> bool:
        """Whether ``event`` would be granted now (a dry run: nothing is charged)."""
        return self.price(event, stated=stated).granted

    def charge(
        self,
        event: PrivacyEvent,
        *,
        mechanism: str,
        parameters: Mapping[str, Any],
        label: str = "",
        randomness: Mapping[str, Any] | None = None,
        stated: PrivacyEvent | None = None,
    ) -> None:
        """Charge ``event`` if it is granted, atomically; raise BudgetExceededError (one
        line, nothing charged) otherwise. ``stated``: the guarantee the caller asked for
        (``ApproxDP(eps, delta)`` of a Gaussian calibrated to it): a pair filter may price
        the release at that point of its curve, after checking the event implies it."""
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"event must be a PrivacyEvent; got {event!r}")
        if stated is not None and not isinstance(stated, PrivacyEvent):
            raise PrivregTypeError(f"stated must be a PrivacyEvent (e.g. ApproxDP) or None; got {stated!r}")
        _check_text("mechanism", mechanism)
        _check_text("label", label)
        charge = Charge(
            timestamp=time.time(),
            mechanism=mechanism,
            parameters=dict(parameters),
            event=event,
            label=label,
            randomness=dict(randomness or {}),
            stated=stated,
        )
        what = label or mechanism
        stated = self._storable(stated)
        with self._lock:
            # each _charge_once leaves the filters as they were unless its row is stored
            row = None
            if not self._optimistic:
                self._catch_up()
                row = self._charge_once(charge, event, stated, what)  # decided outside the write lock
            elif not getattr(self._ledger, "contended", False):  # else straight to the turn
                try:  # the append reports what we missed: price on what we know
                    row = self._charge_once(charge, event, stated, what)
                except BudgetExceededError:  # decide a refusal on the ledger as it is now
                    self._catch_up()
                    row = self._charge_once(charge, event, stated, what)
            elif self._plan is None and getattr(self._ledger, "admits_within", False):
                row = self._charge_within(charge, event, stated)  # others charge too: let the server admit it
            if row is None:  # another writer charged first: keep our place in line, decide again
                with self._ledger.turn():
                    self._catch_up()
                    row = self._charge_once(charge, event, stated, what)
                    while row is None:  # only a writer bypassing the queue gets here
                        self._catch_up()
                        row = self._charge_once(charge, event, stated, what)
            self._seen, self._seen_hash = row.seq, row.hash

    def _append(
        self,
        charge: Charge,
        filters: Sequence[Filter],
        prices: Sequence[Price],
        after: Sequence[tuple[tuple[float, ...], str]] | None = None,
    ) -> LedgerRow | None:
        """Append ``charge`` with its ``prices`` after row ``_seen``, and a checkpoint of the
        ``filters`` holding it (their totals ``after`` it, else their own) when one is due."""
        stored = self._encoded(filters, prices)
        seq = self._seen + 1
        checkpoint = None
        if self._plan is None and seq % CHECKPOINT_EVERY == 0:
            states = after if after is not None else [(f.sums, f.dead) for f in filters]
            checkpoint = {f.name: f.state_at(*st) for f, st in zip(filters, states)}
        if self._chained and (self._seen == 0 or self._seen_hash is not None):  # on the very row our state holds
            append_after = self._ledger.try_append_after  # type: ignore[attr-defined]
            row: LedgerRow | None = append_after(charge, head=self._head(), prices=stored, checkpoint=checkpoint)
            return row
        return self._ledger.try_append(charge, expected_seq=self._seen, prices=stored, checkpoint=checkpoint)

    def _encoded(self, filters: Sequence[Filter], prices: Sequence[Price]) -> EncodedPrices:
        """The prices as a row stores them, encoded once per distinct prices (a session
        repeats a few kinds of release, and state-free filters price each kind once)."""
        last = self._last_encoded
        if last is not None and len(last[0]) == len(prices) and all(map(operator.is_, last[0], prices)):
            return last[1]  # the very price objects of the last charge (a filter's memo): same bits
        key: tuple[Any, ...] = tuple(prices)
        # 0.0 == -0.0 but their texts differ: a price holding a zero also keys by its bits
        zeros = [array("d", p).tobytes() for p in key if type(p) is tuple and 0.0 in p]
        if zeros:
            key = (*key, *zeros)
        try:
            encoded = self._encoded_memo[key]
        except KeyError:
            encoded = None
        if encoded is None:
            encoded = EncodedPrices({f.name: price_to_json(p) for f, p in zip(filters, prices)})
            if len(self._encoded_memo) >= _ENCODED_MEMO:
                self._encoded_memo.clear()
            self._encoded_memo[key] = encoded
        self._last_encoded = (tuple(prices), encoded)  # holds the prices: their ids stay theirs
        return encoded


#: Distinct encoded prices a session keeps (cleared when full).
_ENCODED_MEMO = 1024


def rule_text(filters: Sequence[str], delta: float) -> str:
    """A filters rule in one short line (each filter's proof: :func:`filter_citations`)."""
    return f"fully adaptive filters {', '.join(filters)}, delta split evenly ({delta / len(filters):g} each)"


def filter_citations(filters: Sequence[str]) -> list[str]:
    """``name: proof`` for each filter, as ``privreg ledger verify`` lists them."""
    return [f"{n}: {FILTERS[n].citation}" for n in filters if n in FILTERS]


def settings_of(meta: Mapping[str, Any]) -> tuple[PrivacyBudget, dict[str, Any]]:
    """The budget and the session keywords (filters or plan, event_delta) a ledger's
    metadata records."""
    b = meta["budget"]
    budget = PrivacyBudget(
        epsilon=b["epsilon"],
        delta=b["delta"],
        neighbouring=b.get("neighbouring", meta.get("neighbouring", "add_remove")),
    )
    if meta.get("format", 1) == 1:
        return budget, {"event_delta": meta.get("event_delta")}
    rule = meta["rule"]
    if rule["kind"] == "plan":
        return budget, {"event_delta": rule.get("event_delta"), "plan": [event_from_dict(d) for d in rule["plan"]]}
    return budget, {"filters": rule["filters"], "event_delta": rule.get("event_delta")}
