"""Privacy events: frozen values that describe what a release did, never what it costs.

An event records the mechanism family and its parameters (a Gaussian with this sigma on a
query of that L2 sensitivity, an eps0-LDP randomizer whose n reports were shuffled, ...).
How events add up is the accountants' business (:mod:`privreg.accountant`): one event
can be composed under basic composition, RDP, zCDP, GDP or PLD, each giving a different
(but valid) total. The design follows Google's ``dp_accounting.dp_event``.

Every event is JSON round-trippable: ``event_from_json(e.to_json()) == e``. Plugins that
need a new event type decorate an ``attrs`` class with :func:`event_type`; an accountant
that meets an event it does not know raises :class:`~privreg.core.errors.UnsupportedEventError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

import attrs

from privreg.core import validation as v
from privreg.core.errors import DuplicateNameError, PrivregTypeError, PrivregValueError

__all__ = [
    "PrivacyEvent",
    "NoPrivacyLoss",
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "Laplace",
    "Gaussian",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "Exponential",
    "LocalDP",
    "Composed",
    "SelfComposed",
    "PoissonSampled",
    "SampledWithoutReplacement",
    "Shuffled",
    "SHUFFLE_BOUNDS",
    "EVENT_TYPES",
    "event_type",
    "event_from_dict",
    "event_from_json",
    "iter_events",
]

#: Every known event type, by its ``kind`` tag (the ``"kind"`` key of its JSON form).
EVENT_TYPES: dict[str, type[PrivacyEvent]] = {}

_E = TypeVar("_E", bound="type[PrivacyEvent]")

# Field metadata key marking fields that hold nested events: "one" or "many".
_NESTED = "privreg_nested_event"
# Field metadata key marking optional fields left out of the JSON form when None.
_OMIT_NONE = "privreg_omit_none"


class PrivacyEvent:
    """Base of all privacy events. Subclasses are frozen ``attrs`` classes.

    ``neighbouring`` is the neighbour relation the event's guarantee holds for:
    ``"add_remove"`` (add or remove one user's data), ``"replace_one"`` (replace one
    user's data), or None, which means add/remove (the library's default; a replace-one
    budget converts it by group privacy, :mod:`privreg.accountant.relations`). Central
    events take it as an optional field; local reports, shuffles and samplers fix it by
    their theorems.
    """

    kind: ClassVar[str] = ""
    neighbouring: str | None = None
    # Declared (not set) so that attrs.fields(type(self)) type-checks: event_type admits
    # attrs classes only, and attrs sets this on each of them.
    __attrs_attrs__: ClassVar[tuple[attrs.Attribute[Any], ...]]

    def lower(self) -> PrivacyEvent | None:
        """The best guarantee of this event stated as a core event, or None.

        A plugin event type overrides this (e.g. returning ``PureDP`` or ``ZCDP``) so
        that every accountant without a handler for it can still account for it; the
        lowered bound must never be tighter than the event's exact one (a contract test
        checks this against every handler registered for the event).
        """
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"kind": ..., field: value, ...}`` with nested events as dicts."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in attrs.fields(type(self)):
            value = getattr(self, f.name)
            nested = f.metadata.get(_NESTED)
            if nested == "one":
                value = value.to_dict()
            elif nested == "many":
                value = [e.to_dict() for e in value]
            elif value is None and f.metadata.get(_OMIT_NONE):
                continue  # optional and unset: absent from the JSON form
            out[f.name] = value
        return out

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no NaN): equal events give equal strings."""
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False, separators=(",", ":"))

    def children(self) -> tuple[PrivacyEvent, ...]:
        """The events nested directly inside this one (empty for leaf events)."""
        kids: list[PrivacyEvent] = []
        for f in attrs.fields(type(self)):
            nested = f.metadata.get(_NESTED)
            if nested == "one":
                kids.append(getattr(self, f.name))
            elif nested == "many":
                kids.extend(getattr(self, f.name))
        return tuple(kids)


def event_type(kind: str) -> Callable[[_E], _E]:
    """Class decorator registering a privacy event type under the JSON tag ``kind``.

    Raises :class:`DuplicateNameError` if another class already uses ``kind``. The same
    class defined again (its module re-imported or reloaded) replaces the old definition.
    """
    v.check_name("kind", kind)

    def register(cls: _E) -> _E:
        # Out of the condition: attrs.has is a TypeGuard, it would narrow cls to type[AttrsInstance].
        is_attrs = attrs.has(cls)
        if not (isinstance(cls, type) and issubclass(cls, PrivacyEvent) and is_attrs):
            raise PrivregTypeError(
                f"event_type({kind!r}) must decorate an attrs class deriving from PrivacyEvent; got {cls!r}"
            )
        existing = EVENT_TYPES.get(kind)
        redefined = existing is not None and (existing.__module__, existing.__qualname__) == (
            cls.__module__,
            cls.__qualname__,
        )
        if existing is not None and existing is not cls and not redefined:
            raise DuplicateNameError(
                f"event kind {kind!r} is defined twice: by {existing.__module__}.{existing.__qualname__} "
                f"and by {cls.__module__}.{cls.__qualname__}; rename one of them"
            )
        cls.kind = kind
        EVENT_TYPES[kind] = cls
        return cls

    return register


def event_from_dict(data: Mapping[str, Any]) -> PrivacyEvent:
    """Rebuild an event from :meth:`PrivacyEvent.to_dict` output, validating every field."""
    if not isinstance(data, Mapping):
        raise PrivregTypeError(f"event data must be a mapping; got {type(data).__name__}")
    kind = data.get("kind")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise PrivregValueError(
            f"unknown privacy event kind {kind!r}; known kinds: {sorted(EVENT_TYPES)}. If a plugin "
            f"defines it, install that plugin and load the registry before decoding."
        )
    names = {f.name: f for f in attrs.fields(cls)}
    unknown = set(data) - set(names) - {"kind"}
    if unknown:
        raise PrivregValueError(f"event {kind!r} has unknown fields {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, f in names.items():
        if name not in data:
            continue
        value = data[name]
        nested = f.metadata.get(_NESTED)
        if nested == "one":
            value = event_from_dict(value)
        elif nested == "many":
            if not isinstance(value, list):
                raise PrivregValueError(f"event {kind!r}: field {name!r} must be a list of events")
            value = [event_from_dict(x) for x in value]
        kwargs[name] = value
    missing = [n for n, f in names.items() if n not in kwargs and f.default is attrs.NOTHING]
    if missing:
        raise PrivregValueError(f"event {kind!r} is missing field(s) {missing}")
    return cls(**kwargs)


def event_from_json(text: str) -> PrivacyEvent:
    """Inverse of :meth:`PrivacyEvent.to_json`."""
    return event_from_dict(json.loads(text))


def iter_events(event: PrivacyEvent) -> Iterator[PrivacyEvent]:
    """Depth-first traversal: ``event`` first, then everything nested in it."""
    yield event
    for child in event.children():
        yield from iter_events(child)


# --- field helpers -------------------------------------------------------------------


def _event(name: str) -> Callable[[Any], PrivacyEvent]:
    def convert(x: Any) -> PrivacyEvent:
        if not isinstance(x, PrivacyEvent):
            raise PrivregTypeError(f"{name} must be a PrivacyEvent; got {x!r}")
        return x

    return convert


def _events(name: str) -> Callable[[Any], tuple[PrivacyEvent, ...]]:
    def convert(xs: Any) -> tuple[PrivacyEvent, ...]:
        if not isinstance(xs, (list, tuple)):  # sets and dicts have no defined order
            raise PrivregTypeError(f"{name} must be a list or tuple of PrivacyEvent; got {xs!r}")
        return tuple(_event(f"{name}[{i}]")(x) for i, x in enumerate(xs))

    return convert


def _nested(kind: str, name: str) -> Any:
    conv = _event(name) if kind == "one" else _events(name)
    return attrs.field(converter=conv, metadata={_NESTED: kind})


def _relation() -> Any:
    """The optional ``neighbouring`` field of central events (None: the budget's relation)."""
    return attrs.field(
        default=None,
        kw_only=True,
        converter=lambda x: None if x is None else v.check_relation("neighbouring", x),
        metadata={_OMIT_NONE: True},
    )


def _text(name: str) -> Callable[[Any], str]:
    def convert(x: Any) -> str:
        if not isinstance(x, str):
            raise PrivregTypeError(f"{name} must be a str; got {x!r}")
        return x

    return convert


# Named converters, one per field: mypy's attrs plugin types __init__ from a named function's
# parameter, but not from a lambda or from a call such as _text("reason").


def _reason(x: object) -> str:
    return _text("reason")(x)


def _epsilon(x: object) -> float:
    return v.check_epsilon("epsilon", x, allow_zero=True)


def _positive_epsilon(x: object) -> float:
    return v.check_epsilon("epsilon", x, allow_zero=False)


def _epsilon0(x: object) -> float:
    return v.check_epsilon("epsilon0", x, allow_zero=True)


def _rho(x: object) -> float:
    return v.check_epsilon("rho", x, allow_zero=True)


def _delta(x: object) -> float:
    return v.check_delta("delta", x)


def _scale(x: object) -> float:
    return v.check_sensitivity("scale", x)


def _sigma(x: object) -> float:
    return v.check_sensitivity("sigma", x)


def _sensitivity(x: object) -> float:
    return v.check_sensitivity("sensitivity", x)


def _int_sensitivity(x: object) -> int:
    return v.check_count("sensitivity", x)


def _dimension(x: object) -> int:
    return v.check_count("dimension", x)


def _randomizer(x: object) -> str:
    return _text("randomizer")(x)


def _count(x: object) -> int:
    return v.check_count("count", x)


def _sampling_probability(x: object) -> float:
    return v.check_probability("sampling_probability", x)


def _source_size(x: object) -> int:
    return v.check_count("source_size", x)


def _sample_size(x: object) -> int:
    return v.check_count("sample_size", x)


def _num_reports(x: object) -> int:
    return v.check_count("num_reports", x)


def _shuffled_event(x: object) -> PrivacyEvent:
    return _event("event")(x)


# --- leaf events -----------------------------------------------------------------------


@event_type("no_privacy_loss")
@attrs.frozen(kw_only=True)
class NoPrivacyLoss(PrivacyEvent):
    """A step that releases nothing about individuals (e.g. an encrypted intermediate that
    no party can decrypt). ``reason`` says why, for the audit trail."""

    reason: str = attrs.field(default="", converter=_reason)


@event_type("pure_dp")
@attrs.frozen(kw_only=True)
class PureDP(PrivacyEvent):
    """Any mechanism known to be ``epsilon``-DP (pure)."""

    epsilon: float = attrs.field(converter=_epsilon)
    neighbouring: str | None = _relation()


@event_type("approx_dp")
@attrs.frozen(kw_only=True)
class ApproxDP(PrivacyEvent):
    """Any mechanism known to be ``(epsilon, delta)``-DP."""

    epsilon: float = attrs.field(converter=_epsilon)
    delta: float = attrs.field(converter=_delta)
    neighbouring: str | None = _relation()


@event_type("zcdp")
@attrs.frozen(kw_only=True)
class ZCDP(PrivacyEvent):
    """Any mechanism known to be ``rho``-zCDP (Bun-Steinke 2016)."""

    rho: float = attrs.field(converter=_rho)
    neighbouring: str | None = _relation()


@event_type("laplace")
@attrs.frozen(kw_only=True)
class Laplace(PrivacyEvent):
    """Laplace (or discrete Laplace) noise of ``scale`` added to a query of L1 ``sensitivity``.

    Pure DP with epsilon = sensitivity / scale (Dwork-McSherry-Nissim-Smith 2006).
    """

    scale: float = attrs.field(converter=_scale)
    sensitivity: float = attrs.field(default=1.0, converter=_sensitivity)
    neighbouring: str | None = _relation()

    @property
    def noise_multiplier(self) -> float:
        """scale / sensitivity: the only quantity the privacy loss depends on."""
        return self.scale / self.sensitivity


@event_type("discrete_laplace")
@attrs.frozen(kw_only=True)
class DiscreteLaplace(PrivacyEvent):
    """Two-sided geometric noise, P(z) proportional to exp(-|z| / scale) on the integers,
    added to an integer-valued query of integer L1 ``sensitivity``.

    Pure DP with epsilon = sensitivity / scale (Ghosh-Roughgarden-Sundararajan 2009). Its
    privacy loss distribution differs from the continuous Laplace's (more mass at the
    extremes), so PLD and RDP accounting must not treat it as :class:`Laplace`.
    """

    scale: float = attrs.field(converter=_scale)
    sensitivity: int = attrs.field(converter=_int_sensitivity)
    neighbouring: str | None = _relation()

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@event_type("discrete_gaussian")
@attrs.frozen(kw_only=True)
class DiscreteGaussian(PrivacyEvent):
    """Discrete Gaussian noise, P(z) proportional to exp(-z^2 / (2 sigma^2)) on the integers,
    added to each of ``dimension`` coordinates of an integer-valued query of integer L2
    ``sensitivity``.

    It is exactly ``sensitivity^2 / (2 sigma^2)``-zCDP (Canonne-Kamath-Steinke 2020,
    Proposition 5 and Theorem 14); its (eps, delta) curve is close to, but not the same as,
    the continuous Gaussian's, so accountants must not treat it as :class:`Gaussian`; and
    unlike the continuous case a d-dimensional release is not a 1-dimensional one with the
    same L2 shift, so the exact 1-dimensional PLD applies only when ``dimension == 1``.
    """

    sigma: float = attrs.field(converter=_sigma)
    sensitivity: int = attrs.field(converter=_int_sensitivity)
    dimension: int = attrs.field(default=1, converter=_dimension)
    neighbouring: str | None = _relation()

    @property
    def rho(self) -> float:
        return self.sensitivity**2 / (2 * self.sigma**2)


@event_type("gaussian")
@attrs.frozen(kw_only=True)
class Gaussian(PrivacyEvent):
    """Gaussian noise of std ``sigma`` added to a query of L2 ``sensitivity``."""

    sigma: float = attrs.field(converter=_sigma)
    sensitivity: float = attrs.field(default=1.0, converter=_sensitivity)
    neighbouring: str | None = _relation()

    @property
    def noise_multiplier(self) -> float:
        """sigma / sensitivity: the only quantity the privacy loss depends on."""
        return self.sigma / self.sensitivity


EXPONENTIAL_VARIANTS = (
    "exponential",
    "report_noisy_max_gumbel",
    "report_noisy_max_exponential",
    "permute_and_flip",
)


def _variant(x: object) -> str:
    if x not in EXPONENTIAL_VARIANTS:
        raise PrivregValueError(f"variant must be one of {EXPONENTIAL_VARIANTS}; got {x!r}")
    return x


@event_type("exponential")
@attrs.frozen(kw_only=True)
class Exponential(PrivacyEvent):
    """One selection by the exponential mechanism or a report-noisy-max variant.

    ``epsilon`` is the pure-DP guarantee actually achieved by the sampling weights (for
    weights ``exp(eps' u)`` with utility sensitivity ``D`` that is ``2 eps' D``; McSherry-
    Talwar 2007). The ``exponential`` and ``report_noisy_max_gumbel`` variants are also
    ``epsilon``-bounded-range, which gives ``epsilon**2 / 8``-zCDP (Cesar-Rogers 2021).
    """

    epsilon: float = attrs.field(converter=_positive_epsilon)
    variant: str = attrs.field(default="exponential", converter=_variant)
    neighbouring: str | None = _relation()

    @property
    def bounded_range(self) -> bool:
        return self.variant in ("exponential", "report_noisy_max_gumbel")


@event_type("local_dp")
@attrs.frozen(kw_only=True)
class LocalDP(PrivacyEvent):
    """One report of an ``epsilon0``-LDP local randomizer (e.g. Subset Selection).

    ``randomizer`` names the randomizer, so that amplification bounds proven only for a
    class of randomizers can check membership.
    """

    #: An eps0-LDP guarantee bounds replacing one user's input, not adding one.
    neighbouring = "replace_one"

    epsilon0: float = attrs.field(converter=_epsilon0)
    randomizer: str = attrs.field(default="", converter=_randomizer)


# --- combinators ----------------------------------------------------------------------


@event_type("composed")
@attrs.frozen(kw_only=True)
class Composed(PrivacyEvent):
    """Adaptive composition of ``events``, in order."""

    events: tuple[PrivacyEvent, ...] = _nested("many", "events")


@event_type("self_composed")
@attrs.frozen(kw_only=True)
class SelfComposed(PrivacyEvent):
    """``count`` adaptive repetitions of ``event``."""

    event: PrivacyEvent = _nested("one", "event")
    count: int = attrs.field(converter=_count)


@event_type("poisson_sampled")
@attrs.frozen(kw_only=True)
class PoissonSampled(PrivacyEvent):
    """``event`` run on a Poisson subsample: each record kept independently with
    probability ``sampling_probability``."""

    #: Balle-Barthe-Gaboardi 2018, Theorem 8 and dp-accounting: add/remove neighbours.
    neighbouring = "add_remove"

    sampling_probability: float = attrs.field(converter=_sampling_probability)
    event: PrivacyEvent = _nested("one", "event")


def _check_sample_size(instance: Any, attribute: Any, value: int) -> None:
    if value > instance.source_size:
        raise PrivregValueError(f"sample_size ({value}) must not exceed source_size ({instance.source_size})")


@event_type("sampled_without_replacement")
@attrs.frozen(kw_only=True)
class SampledWithoutReplacement(PrivacyEvent):
    """``event`` run on ``sample_size`` records drawn uniformly without replacement from
    ``source_size`` (replace-one neighbours)."""

    #: Balle-Barthe-Gaboardi 2018, Theorem 10: substitution neighbours.
    neighbouring = "replace_one"

    source_size: int = attrs.field(converter=_source_size)
    sample_size: int = attrs.field(converter=_sample_size, validator=_check_sample_size)
    event: PrivacyEvent = _nested("one", "event")


def _check_local(instance: Any, attribute: Any, value: PrivacyEvent) -> None:
    if not isinstance(value, LocalDP):
        raise PrivregTypeError(f"Shuffled.event must be a LocalDP event (the randomizer each user ran); got {value!r}")


#: Amplification-by-shuffling bounds an accountant may apply (see privreg.accountant.shuffle).
#: The 2023 bound holds only for a restricted class of randomizers (its erratum).
SHUFFLE_BOUNDS = ("fmt21-closed-form", "fmt21-numerical", "fmt23-numerical")


def _bound(x: object) -> str:
    if x not in SHUFFLE_BOUNDS:
        raise PrivregValueError(f"bound must be one of {SHUFFLE_BOUNDS}; got {x!r}")
    return x


@event_type("shuffled")
@attrs.frozen(kw_only=True)
class Shuffled(PrivacyEvent):
    """``num_reports`` reports, each from the local randomizer of ``event``, released
    after a uniformly random shuffle (Erlingsson et al. 2019; Feldman-McMillan-Talwar 2021).

    ``bound`` names the amplification bound accountants must apply, so the ledger says
    which one was used. The default, ``fmt21-numerical``, holds for every eps0-LDP
    randomizer; ``fmt23-numerical`` is the caller's declaration that the randomizer is in
    the restricted class for which FMT 2023's Theorem 3.2 holds after its erratum.
    """

    #: FMT 2021/2023 bound replacing one user's report among ``num_reports``.
    neighbouring = "replace_one"

    event: PrivacyEvent = attrs.field(converter=_shuffled_event, validator=_check_local, metadata={_NESTED: "one"})
    num_reports: int = attrs.field(converter=_num_reports)
    bound: str = attrs.field(default="fmt21-numerical", converter=_bound)
