"""The accountant interface: one traversal of the event tree, for dry run and compose.

An accountant holds a table from event class to a *handler* returning the cost of one
release in the accountant's own currency (an ``(epsilon, delta)`` pair, ``rho``, an RDP
curve, ``mu``, a privacy loss distribution). The base class alone walks the tree: it
flattens :class:`Composed` and :class:`SelfComposed`, drops :class:`NoPrivacyLoss` (and
Poisson samples of probability 0, which touch no record), groups identical leaves and
hands each distinct leaf to :meth:`Accountant._add` once with its total count. The same
walk answers :meth:`supports` (a dry run) and :meth:`compose`, so compose never adds part
of an event and then fails. The structure follows Google's ``dp_accounting``.

A leaf is priced by, in order: the accountant's built-in handler for its class (nearest
base class first), a handler a plugin registered (``privreg_register_accountants``), or
its :meth:`~privreg.core.events.PrivacyEvent.lower` guarantee. Before that, its neighbour
relation is matched to the accountant's (:mod:`privreg.accountant.relations`). A handler
that fails, returns None or a cost that is not finite or not of the accountant's kind
means the accountant cannot vouch for the event: it is refused
(:class:`UnsupportedEventError`), never composed as NaN. A plugin's handler that raises
anything at all is refused so; a built-in one only on the arithmetic errors below.
"""

from __future__ import annotations

import copy
import math
import numbers
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from privreg.accountant.relations import relate
from privreg.core import accounting
from privreg.core import validation as v
from privreg.core.errors import PrivregError, PrivregTypeError, UnsupportedEventError
from privreg.core.events import (
    Composed,
    NoPrivacyLoss,
    PoissonSampled,
    PrivacyEvent,
    SelfComposed,
)

__all__ = ["Accountant", "Handler", "MAX_TOTAL_COUNT", "handles", "leaves", "finite_number", "finite_pair"]

#: ``handler(accountant, event)`` -> the cost of one release of ``event``, or None.
Handler = Callable[[Any, PrivacyEvent], Any]

_E = TypeVar("_E", bound=PrivacyEvent)
_A = TypeVar("_A", bound="Accountant")


def handles(event_type: type[_E], handler: Callable[[Any, _E], Any]) -> tuple[type[PrivacyEvent], Handler]:
    """One entry of a handler table: ``handler`` typed for ``event_type``. Dispatch is by
    class, so it only ever receives ``event_type`` events; a plain dict literal cannot
    tell the type checker that, hence the cast."""
    return event_type, cast(Handler, handler)


# Errors a handler may raise on extreme but valid parameters (overflow in a closed form,
# a third-party library refusing, an allocation that cannot be served): each means
# "cannot vouch", never a crash of the caller.
_HANDLER_ERRORS = (ArithmeticError, ValueError, MemoryError, RecursionError, PrivregError)
_MAX_LOWERING = 16
#: The largest total repetition count of one leaf an accountant folds in: counts multiply
#: through nested SelfComposed events, and every state is kept in float64.
MAX_TOTAL_COUNT = 2**1000


def finite_number(cost: Any) -> bool:
    """A real number, finite and >= 0 (the cost the zcdp and gdp accountants add up)."""
    return (
        isinstance(cost, numbers.Real) and not isinstance(cost, bool) and math.isfinite(cost) and not cost < 0
    )  # numbers.Real declares only < and <=


def finite_pair(cost: Any) -> bool:
    """An ``(epsilon, delta)`` pair: finite epsilon >= 0 and 0 <= delta <= 1 (the cost of
    the basic, advanced and optimal accountants)."""
    return isinstance(cost, (tuple, list)) and len(cost) == 2 and all(map(finite_number, cost)) and cost[1] <= 1


def _key(event: PrivacyEvent) -> Any:
    try:
        hash(event)
        return event
    except TypeError:  # a plugin event with an unhashable field
        return event.to_json()


def leaves(event: PrivacyEvent, count: int = 1) -> list[tuple[PrivacyEvent, int]]:
    """The distinct leaf events of ``event`` with their total repetition counts, in
    first-seen order. Composed and SelfComposed are flattened; NoPrivacyLoss and Poisson
    samples with probability 0 (no record is ever used) are dropped; a Poisson sample
    with probability 1 is its inner event."""
    found: dict[Any, list[Any]] = {}
    stack: list[tuple[PrivacyEvent, int]] = [(event, count)]
    while stack:
        e, n = stack.pop()
        if isinstance(e, NoPrivacyLoss):
            continue
        if isinstance(e, Composed):
            stack.extend((c, n) for c in reversed(e.events))
        elif isinstance(e, SelfComposed):
            stack.append((e.event, n * e.count))
        elif isinstance(e, PoissonSampled) and e.sampling_probability == 0.0:
            continue
        elif isinstance(e, PoissonSampled) and e.sampling_probability == 1.0:
            stack.append((e.event, n))
        else:
            slot = found.setdefault(_key(e), [e, 0])
            slot[1] += n
    return [(e, n) for e, n in found.values()]


class Accountant(ABC):
    """Base class of privacy accountants.

    Subclasses set :attr:`handlers` (event class -> handler), implement :meth:`_add`
    (fold ``count`` releases of one cost into the state), :meth:`_epsilon` and
    :meth:`_delta`, and may override :meth:`_valid` (is a handler's cost usable).
    """

    name: ClassVar[str] = ""
    #: Built-in handlers: event class -> ``handler(accountant, event)``.
    handlers: ClassVar[Mapping[type[PrivacyEvent], Handler]] = {}

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        self.neighbouring = v.check_relation("neighbouring", neighbouring)
        self.compositions = 0

    # -- pricing one leaf ---------------------------------------------------------------

    @classmethod
    def handler(cls, event_type: type[PrivacyEvent]) -> Handler | None:
        """The handler for ``event_type``: built-in first, then a plugin's, nearest class first."""
        return cls._find(event_type)[0]

    @classmethod
    def _find(cls, event_type: type[PrivacyEvent]) -> tuple[Handler | None, bool]:
        """``(handler, whether a plugin registered it)`` for ``event_type``."""
        for klass in event_type.__mro__:
            fn = cls.handlers.get(klass)
            if fn is not None:
                return fn, False
            fn = accounting.handler_for(cls.name, klass)
            if fn is not None:
                return fn, True
        return None, False

    def _valid(self, cost: Any) -> bool:
        """Whether a handler's cost can be composed (finite, non-negative numbers)."""
        try:
            arr = np.asarray(cost, dtype=np.float64)
        except (TypeError, ValueError):
            return True  # an opaque cost (a PLD); its handler is responsible for it
        return bool(np.all(np.isfinite(arr)) and np.all(arr >= 0))

    def cost(self, event: PrivacyEvent) -> tuple[Any, str]:
        """``(cost of one release of event, "")``, or ``(None, why it cannot vouch)``."""
        current = event
        for _ in range(_MAX_LOWERING):
            related, why = relate(current, self.neighbouring)
            if related is None:
                return None, why
            fn, from_plugin = self._find(type(related))
            if fn is not None:
                # a plugin's handler may fail in any way (its bug: the accountant cannot vouch);
                # a built-in one only with the errors of a price it cannot compute
                caught: type[Exception] | tuple[type[Exception], ...] = Exception if from_plugin else _HANDLER_ERRORS
                try:
                    c = fn(self, related)
                except caught as exc:
                    what = "its plugin handler failed" if from_plugin else "cannot price it"
                    return None, f"{what} ({type(exc).__name__}: {exc})"
                if c is None:
                    return None, "no bound for these parameters"
                if not self._valid(c):
                    return (
                        None,
                        f"its bound is not finite, or not a cost of the {self.name or type(self).__name__} kind",
                    )
                return c, ""
            lowered = related.lower()
            if lowered is None or lowered == related:
                return None, "no handler and no lower() guarantee"
            current = lowered
        return None, "lower() does not reach a supported event"

    # -- traversal ----------------------------------------------------------------------

    def _plan(self, event: PrivacyEvent, count: int) -> tuple[list[tuple[Any, int]], PrivacyEvent | None, str]:
        """One walk: ``(costs with counts, None, "")`` or ``([], first bad leaf, why)``."""
        plan: list[tuple[Any, int]] = []
        for leaf, n in leaves(event, count):
            if n > MAX_TOTAL_COUNT:
                return [], leaf, "it is repeated more than 2**1000 times (nested counts multiply)"
            c, why = self.cost(leaf)
            if c is None:
                return [], leaf, why
            plan.append((c, n))
        return plan, None, ""

    def supports(self, event: PrivacyEvent) -> bool:
        """True if :meth:`compose` would accept ``event`` (no state is changed)."""
        return self.unsupported(event) is None

    def unsupported(self, event: PrivacyEvent) -> PrivacyEvent | None:
        """The first leaf of ``event`` this accountant cannot vouch for, or None."""
        if not isinstance(event, PrivacyEvent):
            return event
        return self._plan(event, 1)[1]

    def compose(self: _A, event: PrivacyEvent, count: int = 1) -> _A:
        """Add ``count`` adaptive repetitions of ``event`` (parameters fixed in advance);
        returns ``self``. Raises :class:`UnsupportedEventError` naming the leaf it
        cannot vouch for and why, before changing anything."""
        count = v.check_count("count", count)
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"event must be a PrivacyEvent; got {event!r}")
        plan, bad, why = self._plan(event, count)
        if bad is not None:
            raise UnsupportedEventError(bad, self.name or type(self).__name__, why)
        staged = self.copy()  # all leaves or none: a failing fold leaves self unchanged
        try:
            for c, n in plan:
                staged._add(c, n)
        except _HANDLER_ERRORS as exc:
            raise UnsupportedEventError(
                event, self.name or type(self).__name__, f"cannot compose it ({type(exc).__name__}: {exc})"
            ) from None
        vars(self).update(vars(staged))
        self.compositions += 1
        return self

    @abstractmethod
    def _add(self, cost: Any, count: int) -> None:
        """Fold ``count`` releases of one leaf of this ``cost`` into the state."""

    def copy(self: _A) -> _A:
        """An independent copy whose size does not grow with the number of releases."""
        new = copy.copy(self)
        for key, value in vars(self).items():
            if isinstance(value, (np.ndarray, list, dict, Counter)):
                setattr(new, key, value.copy())
        return new

    # -- answers ------------------------------------------------------------------------

    def epsilon(self, delta: float) -> float:
        """The smallest epsilon this accountant can prove at ``delta`` (inf if none)."""
        delta = v.check_delta("delta", delta)
        try:
            eps = float(self._epsilon(delta))
        except _HANDLER_ERRORS:
            return math.inf
        return math.inf if math.isnan(eps) else max(0.0, eps)

    def delta(self, epsilon: float) -> float:
        """The smallest delta this accountant can prove at ``epsilon`` (1 if none)."""
        epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
        try:
            d = float(self._delta(epsilon))
        except _HANDLER_ERRORS:
            return 1.0
        return 1.0 if math.isnan(d) else min(1.0, max(0.0, d))

    @abstractmethod
    def _epsilon(self, delta: float) -> float:
        """epsilon(delta) for a validated ``delta``."""

    @abstractmethod
    def _delta(self, epsilon: float) -> float:
        """delta(epsilon) for a validated ``epsilon``."""

    def describe(self) -> dict[str, Any]:
        return {"accountant": self.name, "neighbouring": self.neighbouring}
