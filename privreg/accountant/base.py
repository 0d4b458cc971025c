"""The accountant interface: one traversal of the event tree, for dry run and compose.

An accountant walks an event tree once with ``compose=False`` to check that it supports
every node (:meth:`Accountant.supports`), and once more with ``compose=True`` to add it
up; :meth:`Accountant.compose` never composes part of an event and then fails. Totals are
answered as ``epsilon(delta)`` and ``delta(epsilon)``. The structure follows Google's
``dp_accounting.PrivacyAccountant``.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, UnsupportedEventError
from privreg.core.events import Composed, NoPrivacyLoss, PrivacyEvent, SelfComposed

__all__ = ["Accountant", "NEIGHBOURING"]

#: Neighbouring relations: add/remove one record, or substitute one record.
NEIGHBOURING = ("add_remove", "substitution")


class Accountant(ABC):
    """Base class of privacy accountants.

    Subclasses implement :meth:`_leaf` for the leaf events they understand (returning
    False for the others), :meth:`epsilon` and :meth:`delta`. Composition, self-composition
    and no-loss events are handled here, identically for every accountant.
    """

    name: ClassVar[str] = ""

    def __init__(self, *, neighbouring: str = "add_remove") -> None:
        if neighbouring not in NEIGHBOURING:
            raise PrivregValueError(f"neighbouring must be one of {NEIGHBOURING}; got {neighbouring!r}")
        self.neighbouring = neighbouring
        self._history: list[tuple[PrivacyEvent, int]] = []

    # -- traversal ----------------------------------------------------------------------

    def _walk(self, event: PrivacyEvent, count: int, compose: bool) -> PrivacyEvent | None:
        """Visit ``event`` ``count`` times; return the first unsupported sub-event."""
        if isinstance(event, NoPrivacyLoss):
            return None
        if isinstance(event, Composed):
            for e in event.events:
                bad = self._walk(e, count, compose)
                if bad is not None:
                    return bad
            return None
        if isinstance(event, SelfComposed):
            return self._walk(event.event, count * event.count, compose)
        if not isinstance(event, PrivacyEvent):
            return event  # type: ignore[return-value]
        return None if self._leaf(event, count, compose) else event

    @abstractmethod
    def _leaf(self, event: PrivacyEvent, count: int, compose: bool) -> bool:
        """If ``event`` is supported, compose it ``count`` times when ``compose`` is
        True, and return True; otherwise return False without changing state."""

    def supports(self, event: PrivacyEvent) -> bool:
        """True if :meth:`compose` would accept ``event`` (no state is changed)."""
        return self._walk(event, 1, compose=False) is None

    def unsupported(self, event: PrivacyEvent) -> PrivacyEvent | None:
        """The first sub-event of ``event`` this accountant cannot compose, or None."""
        return self._walk(event, 1, compose=False)

    def compose(self, event: PrivacyEvent, count: int = 1) -> Accountant:
        """Add ``count`` adaptive repetitions of ``event``; returns ``self``.

        Raises :class:`UnsupportedEventError` naming the unsupported sub-event, before
        changing anything.
        """
        count = v.check_count("count", count)
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"event must be a PrivacyEvent; got {event!r}")
        bad = self._walk(event, count, compose=False)
        if bad is not None:
            raise UnsupportedEventError(bad, self.name or type(self).__name__)
        self._walk(event, count, compose=True)
        self._history.append((event, count))
        return self

    def copy(self) -> Accountant:
        """An independent copy (for "what if" questions before a charge)."""
        return copy.deepcopy(self)

    @property
    def history(self) -> tuple[tuple[PrivacyEvent, int], ...]:
        """Every ``(event, count)`` composed so far, in order."""
        return tuple(self._history)

    # -- answers ------------------------------------------------------------------------

    @abstractmethod
    def epsilon(self, delta: float) -> float:
        """The smallest epsilon this accountant can prove at ``delta`` (inf if none)."""

    @abstractmethod
    def delta(self, epsilon: float) -> float:
        """The smallest delta this accountant can prove at ``epsilon``."""

    def describe(self) -> dict[str, Any]:
        return {"accountant": self.name, "neighbouring": self.neighbouring}
