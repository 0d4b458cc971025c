"""What plugins register: items with typed, validated parameters and a citation.

Every registered thing (mechanism, randomizer, sensitivity, protocol, workflow) is a
:class:`RegistryItem`: a unique name, its kind, a one-line summary, its parameters
(:class:`Param`), the paper it implements (:class:`Citation`) and a factory. Parameters are
validated before the factory is called, so bad input fails early with an error naming the
parameter, the value and the fix -- the same check for Python callers and the CLI.
"""

from __future__ import annotations

import enum
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = ["ItemKind", "Citation", "Param", "Example", "RegistryItem", "REQUIRED"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of a parameter that has no default.
REQUIRED: Any = _Required()


class ItemKind(str, enum.Enum):
    MECHANISM = "mechanism"
    RANDOMIZER = "randomizer"
    SENSITIVITY = "sensitivity"
    PROTOCOL = "protocol"
    WORKFLOW = "workflow"


def _nonempty(name: str) -> Callable[[Any], str]:
    def convert(x: Any) -> str:
        if not isinstance(x, str):
            raise PrivregTypeError(f"{name} must be a str; got {x!r} of type {type(x).__name__}")
        if not x.strip():
            raise PrivregValueError(f"{name} must be a non-empty str; got {x!r}")
        return x.strip()

    return convert


@attrs.frozen(kw_only=True)
class Citation:
    """The publication an item implements."""

    authors: str = attrs.field(converter=_nonempty("authors"))
    title: str = attrs.field(converter=_nonempty("title"))
    year: int = attrs.field(converter=lambda x: v.check_int("year", x, minimum=1900))
    venue: str = ""
    where: str = ""  # e.g. "Algorithm 1", "Theorem 2.1"
    url: str = ""

    def __str__(self) -> str:
        parts = [f"{self.authors} ({self.year}). {self.title}."]
        if self.venue:
            parts.append(f"{self.venue}.")
        if self.where:
            parts.append(f"[{self.where}]")
        if self.url:
            parts.append(self.url)
        return " ".join(parts)


_TYPES: dict[type, str] = {int: "int", float: "float", str: "str", bool: "bool", Path: "path"}


@attrs.frozen(kw_only=True)
class Param:
    """A typed parameter with a default, documentation and validation.

    ``check`` (optional) receives the converted value and raises a ValueError (ideally a
    :class:`PrivregValueError`) for values out of range; ``minimum``/``maximum``/``choices``
    cover the common cases declaratively and show in ``privreg describe``.
    """

    name: str = attrs.field(converter=lambda x: v.check_name("name", x))
    type: type = attrs.field()
    doc: str = attrs.field(converter=_nonempty("doc"))
    default: Any = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    choices: tuple[Any, ...] | None = attrs.field(
        default=None, converter=lambda x: None if x is None else tuple(x)
    )
    check: Callable[[Any], Any] | None = None

    @type.validator
    def _known_type(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, type) or value not in _TYPES:
            raise PrivregTypeError(
                f"Param {self.name!r}: type must be one of {list(_TYPES.values())}; got {value!r}"
            )

    def __attrs_post_init__(self) -> None:
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise PrivregValueError(
                f"Param {self.name!r}: minimum {self.minimum} exceeds maximum {self.maximum}")
        for choice in self.choices or ():
            self._coerce(choice)
        if self.default is not REQUIRED and self.default is not None:
            self.validate(self.default)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def type_name(self) -> str:
        return _TYPES[self.type]

    def constraint_text(self) -> str:
        """Human-readable constraints, e.g. ``> 0``, ``one of ['a', 'b']``."""
        bits = []
        if self.minimum is not None:
            bits.append(f"{'>' if self.exclusive_minimum else '>='} {self.minimum:g}")
        if self.maximum is not None:
            bits.append(f"<= {self.maximum:g}")
        if self.choices is not None:
            bits.append(f"one of {list(self.choices)}")
        return ", ".join(bits)

    def _coerce(self, value: Any) -> Any:
        t = self.type
        if t is bool:
            if not isinstance(value, bool):
                raise PrivregTypeError(f"parameter {self.name} must be true or false; got {value!r}")
            return value
        if t is int:
            return v.check_int(f"parameter {self.name}", value)
        if t is float:
            x = v.check_real(f"parameter {self.name}", value)
            if math.isnan(x) or math.isinf(x):
                raise PrivregValueError(
                    f"parameter {self.name} must be finite; got {value!r}. Pass a finite number."
                )
            return x
        if t is Path:
            if not isinstance(value, (str, Path)):
                raise PrivregTypeError(f"parameter {self.name} must be a path; got {value!r}")
            return Path(value)
        if not isinstance(value, str):
            raise PrivregTypeError(f"parameter {self.name} must be a str; got {value!r}")
        return value

    def validate(self, value: Any) -> Any:
        """Convert and check ``value``; raise an error naming this parameter if it is invalid.
        ``None`` is accepted only by parameters whose default is ``None`` (optional)."""
        if value is None and self.default is None:
            return None
        x = self._coerce(value)
        if isinstance(x, numbers.Real) and not isinstance(x, bool):
            too_low = self.minimum is not None and (
                x <= self.minimum if self.exclusive_minimum else x < self.minimum
            )
            too_high = self.maximum is not None and x > self.maximum
            if too_low or too_high:
                raise PrivregValueError(
                    f"parameter {self.name} must be {self.constraint_text()}; got {value!r}"
                )
        if self.choices is not None and x not in self.choices:
            raise PrivregValueError(
                f"parameter {self.name} must be one of {list(self.choices)}; got {value!r}"
            )
        if self.check is not None:
            try:
                self.check(x)
            except PrivregValueError:
                raise
            except ValueError as exc:  # name the parameter even if the check did not
                raise PrivregValueError(f"parameter {self.name}: {exc}") from exc
        return x

    def parse(self, text: str) -> Any:
        """Parse a command-line string, then :meth:`validate` it."""
        if self.type is bool:
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return self.validate(True)
            if low in ("0", "false", "no", "off"):
                return self.validate(False)
            raise PrivregValueError(f"parameter {self.name} must be true or false; got {text!r}")
        if self.type in (int, float):
            try:
                num = int(text) if self.type is int else float(text)
            except ValueError:
                raise PrivregValueError(
                    f"parameter {self.name} must be {'an integer' if self.type is int else 'a number'}; "
                    f"got {text!r}"
                ) from None
            return self.validate(num)
        return self.validate(text)


def _params(xs: Any) -> tuple[Param, ...]:
    out = tuple(xs)
    for p in out:
        if not isinstance(p, Param):
            raise PrivregTypeError(f"params must be Param instances; got {p!r}")
    names = [p.name for p in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise PrivregValueError(f"duplicate parameter names: {dupes}")
    return out


@attrs.frozen(kw_only=True)
class Example:
    """A small, valid configuration of an item, so that tools can exercise every item of
    the registry without knowing it: contract tests, ``privreg describe`` and the
    empirical privacy auditor.

    ``params`` are valid parameters. ``neighbours`` is, for a mechanism, two query answers
    on neighbouring datasets (at distance exactly the declared sensitivity, the worst
    case); for a randomizer, two single-user inputs. Other kinds leave it ``None``.
    """

    params: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    neighbours: tuple[Any, Any] | None = attrs.field(default=None, converter=lambda x: _pair_of(x))

    @neighbours.validator
    def _pair(self, attribute: Any, value: Any) -> None:
        if value is not None and len(value) != 2:
            raise PrivregValueError(f"neighbours must be a pair of inputs; got {len(value)} items")


def _pair_of(x: Any) -> tuple[Any, Any] | None:
    if x is None:
        return None
    if not isinstance(x, (list, tuple)):
        raise PrivregTypeError(f"neighbours must be a tuple of two inputs; got {x!r}")
    return tuple(x)  # type: ignore[return-value]


def _kind(x: Any) -> ItemKind:
    try:
        return ItemKind(x)
    except ValueError:
        raise PrivregValueError(f"kind must be one of {[k.value for k in ItemKind]}; got {x!r}") from None


def _summary(x: Any) -> str:
    s = _nonempty("summary")(x)
    if len(x.splitlines()) != 1 or x.splitlines()[0] != x or len(s) > 120:
        raise PrivregValueError(f"summary must be one line of at most 120 characters; got {s!r}")
    return s


@attrs.frozen(kw_only=True)
class RegistryItem:
    """One registered mechanism, randomizer, sensitivity, protocol or workflow.

    ``factory(**params)`` builds the object (for workflows: runs it, with an extra
    ``context`` keyword). ``example`` is a small valid configuration (see
    :class:`Example`). ``plugin`` is filled in by the registry with the name of the
    plugin that registered the item. ``charges`` (workflows): ``False`` declares a workflow
    that releases no differentially private output -- a cryptographic protocol whose
    outputs are protected by what each party learns -- and so charges nothing; the
    contract tests hold a workflow to its declaration either way. ``neighbouring``: the
    neighbour relation the item's guarantee holds for (``"replace_one"`` for local and
    shuffled reports); ``privreg run`` opens the workflow's budget with it and
    ``privreg describe`` shows it.
    """

    name: str = attrs.field(converter=lambda x: v.check_name("name", x))
    kind: ItemKind = attrs.field(converter=_kind)
    summary: str = attrs.field(converter=_summary)
    citation: Citation = attrs.field(validator=attrs.validators.instance_of(Citation))
    factory: Callable[..., Any] = attrs.field()
    example: Example = attrs.field(validator=attrs.validators.instance_of(Example))
    params: tuple[Param, ...] = attrs.field(default=(), converter=_params)
    plugin: str = ""
    charges: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    neighbouring: str = attrs.field(default="add_remove", converter=lambda x: v.check_relation("neighbouring", x))

    def __attrs_post_init__(self) -> None:
        if self.kind is ItemKind.WORKFLOW and any(p.name == "context" for p in self.params):
            raise PrivregValueError(f"workflow {self.name!r}: 'context' is reserved, rename that parameter")
        self.bind(self.example.params)  # the example must be valid for the declared params
        needs_pair = self.kind in (ItemKind.MECHANISM, ItemKind.RANDOMIZER)
        if needs_pair and self.example.neighbours is None:
            raise PrivregValueError(
                f"{self.kind.value} {self.name!r}: example.neighbours must give two "
                f"neighbouring inputs, so the contract tests and the auditor can exercise it"
            )

    @factory.validator
    def _callable(self, attribute: Any, value: Any) -> None:
        if not callable(value):
            raise PrivregTypeError(f"item {self.name!r}: factory must be callable; got {value!r}")

    @property
    def description(self) -> str:
        """The factory's docstring (what it guarantees), for ``privreg describe``."""
        return inspect.cleandoc(self.factory.__doc__ or "")

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise PrivregValueError(
            f"{self.kind.value} {self.name!r} has no parameter {name!r}; "
            f"its parameters are {[p.name for p in self.params]}"
        )

    def bind(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> dict[str, Any]:
        """Validated keyword arguments for the factory: defaults filled in, unknown names,
        missing required parameters and invalid values rejected."""
        given = {**(values or {}), **kwargs}
        known = {p.name for p in self.params}
        unknown = sorted(set(given) - known)
        if unknown:
            raise PrivregValueError(
                f"{self.kind.value} {self.name!r} got unknown parameter(s) {unknown}; "
                f"its parameters are {sorted(known)}"
            )
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in given:
                out[p.name] = p.validate(given[p.name])
            elif p.required:
                raise PrivregValueError(
                    f"{self.kind.value} {self.name!r} needs parameter {p.name!r} ({p.doc})"
                )
            else:
                out[p.name] = p.validate(p.default)  # converted, e.g. str -> Path
        return out

    def create(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Build the item (not for workflows: use :meth:`run`)."""
        if self.kind is ItemKind.WORKFLOW:
            raise PrivregTypeError(f"{self.name!r} is a workflow: call run(context, ...) instead")
        return self.factory(**self.bind(values, **kwargs))

    def run(self, context: Any, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Run a workflow with validated parameters."""
        if self.kind is not ItemKind.WORKFLOW:
            raise PrivregTypeError(f"{self.name!r} is a {self.kind.value}, not a workflow")
        return self.factory(context=context, **self.bind(values, **kwargs))


def params_from(specs: Sequence[Param]) -> tuple[Param, ...]:
    """Validate a parameter list (helper for plugin authors)."""
    return _params(specs)
