"""Mechanism: a central differentially private release of a value or vector.

A mechanism is configured once (privacy parameters, a :class:`Sensitivity`) and then
releases query answers. ``release`` validates the input, charges the mechanism's privacy
event to a :class:`~privreg.core.charging.Charger` and only then samples noise, so nothing
leaves the mechanism unaccounted for and nothing is released when the charge is refused.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from privreg.core.charging import Charger, check_charger, field_parameters, memoised_parameters
from privreg.core.events import PrivacyEvent, SelfComposed
from privreg.core.randomness import RandomSource, resolve_random
from privreg.core.validation import check_count

if TYPE_CHECKING:  # laws load numpy; importing privreg stays light (the CLI's start-up)
    from privreg.core.laws import OutputLaw

__all__ = ["Mechanism", "Release"]


@attrs.frozen(kw_only=True)
class Release:
    """What a release returns: the noisy ``output`` and the ``event`` that was charged."""

    output: Any
    event: PrivacyEvent
    mechanism: str


#: The slots' setters, in field order: ``Mechanism.release`` fills a new Release through
#: them, which is what the generated frozen ``__init__`` does (no defaults, converters or
#: validators) in half the time; a field added to Release breaks this unpacking at import.
_SET_OUTPUT, _SET_EVENT, _SET_MECHANISM = (Release.__dict__[a.name].__set__ for a in attrs.fields(Release))


class Mechanism(ABC):
    """Base class of central mechanisms.

    Subclasses (usually keyword-only ``attrs`` classes that validate in their converters)
    implement:

    * :meth:`privacy_event` -- the event one release incurs. It must not depend on the
      data, so it can be charged before anything is computed from the data.
    * :meth:`validate_input` -- reject values outside the declared domain (NaN, inf, out
      of bounds) with a clear error, before anything is charged.
    * :meth:`_sample` -- the noisy output, drawn from ``rng`` only.
    """

    name: ClassVar[str] = ""
    #: True for classes whose instances never change after construction (frozen attrs
    #: values): their :meth:`parameters` are then computed once and reused per release.
    _immutable: ClassVar[bool] = False

    @abstractmethod
    def privacy_event(self) -> PrivacyEvent:
        """The privacy event of one release."""

    @abstractmethod
    def validate_input(self, value: Any) -> Any:
        """Return ``value`` in canonical form, or raise a PrivregError naming the problem."""

    @abstractmethod
    def _sample(self, value: Any, rng: RandomSource, data: Any) -> Any:
        """The noisy answer for a validated ``value``."""

    def _sample_many(self, value: Any, count: int, rng: RandomSource, data: Any) -> Any:
        """``count`` independent noisy answers (a list, or an array whose first axis is
        the repetition); override with a vectorised path."""
        return [self._sample(value, rng, data) for _ in range(count)]

    def output_law(self, value: Any) -> OutputLaw | None:
        """Optional: the exact law of ``release(value)``'s output, for a ``value`` in the
        canonical form :meth:`validate_input` returns (:mod:`privreg.core.laws`). None (the
        default) declares nothing. A declared law lets :mod:`privreg.testing` compute the
        exact privacy loss between neighbours (hockey-stick divergence) instead of
        sampling it, after testing that the law matches the outputs."""
        return None

    def stated_guarantee(self) -> PrivacyEvent | None:
        """The guarantee the caller asked for (``PureDP``, ``ApproxDP`` or ``ZCDP``) when
        :meth:`privacy_event` was calibrated from it -- a Gaussian asked for at (epsilon,
        delta) --, so that a budget can charge one release no more than that; None
        otherwise. It must be implied by the event (a budget checks it before using it)."""
        return None

    def parameters(self) -> dict[str, Any]:
        """The mechanism's configuration as JSON-safe values, for the ledger."""
        return memoised_parameters(self, self._parameters, immutable=self._immutable)

    def _parameters(self) -> dict[str, Any]:
        return field_parameters(self)

    def release(
        self,
        value: Any,
        *,
        charger: Charger,
        rng: RandomSource | None = None,
        data: Any = None,
        label: str = "",
    ) -> Release:
        """Charge, then release ``value`` with noise.

        ``data`` is the dataset, needed only by mechanisms with data-dependent (smooth)
        sensitivity. ``rng`` defaults to the OS CSPRNG. If ``charger.charge`` raises,
        the exception propagates and no noise is drawn.
        """
        # _charge inlined (the scalar releases' hot path): validate, charge, only then sample
        fields = self.__dict__.get("_release_fields") if self._immutable else None
        if fields is None:  # an immutable mechanism's event and charge fields never change: kept
            name, parameters, extra = self._charge_fields(True)
            fields = (self.privacy_event(), name, parameters, extra.get("stated"), self._scalar_path() or (None, None))
            if self._immutable:
                object.__setattr__(self, "_release_fields", fields)  # frozen: a cache, not state
        event, name, parameters, stated, (prepare, sample) = fields
        charger = check_charger(charger)
        ready = None if prepare is None else prepare(value)
        canonical = self.validate_input(value) if ready is None else None
        rng = resolve_random(rng)
        # parameters: a copy per charge (a charger may keep or change it); stated: passed
        # only when there is one (Charger), and not through **: a keyword splat costs more
        if stated is None:
            charger.charge(event, mechanism=name, parameters=dict(parameters), label=label, randomness=rng.describe())
        else:
            charger.charge(
                event,
                mechanism=name,
                parameters=dict(parameters),
                label=label,
                randomness=rng.describe(),
                stated=stated,
            )
        result = object.__new__(Release)
        _SET_OUTPUT(result, self._sample(canonical, rng, data) if ready is None else sample(ready, rng))  # type: ignore[misc]
        _SET_EVENT(result, event)
        _SET_MECHANISM(result, name)
        return result

    def _scalar_path(self) -> tuple[Callable[[Any], Any], Callable[[Any, RandomSource], Any]] | None:
        """Optional ``(prepare, sample)`` for the commonest inputs (one plain number):
        ``prepare(value)`` is None for any other input, else what ``sample(prepared, rng)``
        turns into exactly ``_sample(validate_input(value), rng, data)``, drawing the same
        values from ``rng``. ``prepare`` runs before the charge, so it may refuse nothing
        and may compute only from the value and public configuration. None (the default):
        every release validates and samples through the general path."""
        return None

    def release_many(
        self,
        value: Any,
        count: int,
        *,
        charger: Charger,
        rng: RandomSource | None = None,
        data: Any = None,
        label: str = "",
    ) -> Release:
        """``count`` independent releases of the same ``value`` (e.g. for an empirical
        privacy audit), charged once as ``SelfComposed(event, count)`` before any noise is
        drawn. The output holds ``count`` answers along its first axis."""
        event = SelfComposed(event=self.privacy_event(), count=check_count("count", count))
        canonical, rng = self._charge(value, event, charger, rng, label, stated=False)
        outputs = self._sample_many(canonical, event.count, rng, data)
        return Release(output=outputs, event=event, mechanism=self._label_name)

    @property
    def _label_name(self) -> str:
        return self.name or type(self).__name__

    def _charge(
        self,
        value: Any,
        event: PrivacyEvent,
        charger: Any,
        rng: RandomSource | None,
        label: str,
        *,
        stated: bool = True,
    ) -> tuple[Any, RandomSource]:
        """Validate, then charge ``event`` (with the stated guarantee of one release when
        ``stated``); returns the canonical value and the source. Raises (charging nothing)
        if the value is invalid."""
        charger = check_charger(charger)
        canonical = self.validate_input(value)
        rng = resolve_random(rng)
        name, parameters, extra = self._charge_fields(stated)
        charger.charge(
            event,
            mechanism=name,
            parameters=dict(parameters),  # a copy per charge: a charger may keep or change it
            label=label,
            randomness=rng.describe(),
            **extra,
        )
        return canonical, rng

    def _charge_fields(self, stated: bool) -> tuple[str, Mapping[str, Any], dict[str, PrivacyEvent]]:
        """``(name, parameters, {"stated": guarantee} or {})`` of a charge: computed once
        for an immutable mechanism (none depends on the value), per call otherwise."""
        if self._immutable:
            cache = self.__dict__.get("_charge_fields_cache")
            if cache is None:
                cache = {s: self._compute_charge_fields(s) for s in (False, True)}
                object.__setattr__(self, "_charge_fields_cache", cache)  # frozen: a cache, not state
            return cache[stated]  # type: ignore[no-any-return]
        return self._compute_charge_fields(stated)

    def _compute_charge_fields(self, stated: bool) -> tuple[str, Mapping[str, Any], dict[str, PrivacyEvent]]:
        guarantee = self.stated_guarantee() if stated else None
        return self._label_name, self.parameters(), ({} if guarantee is None else {"stated": guarantee})
