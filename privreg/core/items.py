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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.cost import use_limits
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.params import REQUIRED, Param, params_of

__all__ = [
    "ItemKind",
    "Citation",
    "Param",
    "Example",
    "RegistryItem",
    "REQUIRED",
    "DEFAULT_BUDGET_PARAMS",
    "DEFAULT_MAX_EPSILON",
]


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


def _authors(x: object) -> str:
    return _nonempty("authors")(x)


def _title(x: object) -> str:
    return _nonempty("title")(x)


def _year(x: object) -> int:
    return v.check_int("year", x, minimum=1900)


def _item_name(x: object) -> str:
    return v.check_name("name", x)


def _relation(x: object) -> str:
    return v.check_relation("neighbouring", x)


@attrs.frozen(kw_only=True)
class Citation:
    """The publication an item implements."""

    authors: str = attrs.field(converter=_authors)
    title: str = attrs.field(converter=_title)
    year: int = attrs.field(converter=_year)
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


def _params(xs: Any) -> tuple[Param, ...] | None:
    if xs is None:
        return None
    out = tuple(xs)
    for p in out:
        if not isinstance(p, Param):
            raise PrivregTypeError(f"params must be Param instances; got {p!r}")
    names = [p.name for p in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise PrivregValueError(f"duplicate parameter names: {dupes}")
    return out


def _pair_of(x: Any) -> tuple[Any, Any] | None:
    if x is None:
        return None
    if not isinstance(x, (list, tuple)):
        raise PrivregTypeError(f"neighbours must be a tuple of two inputs; got {x!r}")
    return tuple(x)


def _param_values(x: Mapping[str, Any]) -> dict[str, Any]:
    return dict(x)


@attrs.frozen(kw_only=True)
class Example:
    """A small, valid configuration of an item, so that tools can exercise every item of
    the registry without knowing it: contract tests, ``privreg describe`` and the
    empirical privacy auditor.

    ``params`` are valid parameters. ``neighbours`` is, for a mechanism, two query answers
    on neighbouring datasets (at distance exactly the declared sensitivity, the worst
    case); for a randomizer, two single-user inputs. Other kinds leave it ``None``.
    """

    params: Mapping[str, Any] = attrs.field(factory=dict, converter=_param_values)
    neighbours: tuple[Any, Any] | None = attrs.field(default=None, converter=_pair_of)

    @neighbours.validator
    def _pair(self, attribute: Any, value: Any) -> None:
        if value is not None and len(value) != 2:
            raise PrivregValueError(f"neighbours must be a pair of inputs; got {len(value)} items")


#: The parameters an item's privacy budget is read from unless it declares ``budget_params``.
DEFAULT_BUDGET_PARAMS = ("epsilon", "delta")


#: The largest epsilon a workflow run spends without ``--allow-large-epsilon``: beyond it
#: the bound e^epsilon on the likelihood ratio is above 4.8e8, no protection in practice.
DEFAULT_MAX_EPSILON = 20.0


def _max_epsilon(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < float("inf"):
        raise PrivregValueError(f"max_epsilon must be a finite number > 0; got {x!r}")
    return float(x)


def _budget_params(x: Any) -> tuple[str, ...] | None:
    if x is None:
        return None
    if isinstance(x, str) or not isinstance(x, (list, tuple)):
        raise PrivregTypeError(
            f"budget_params must be a tuple of parameter names, (EPSILON,) or (EPSILON, DELTA); got {x!r}"
        )
    out = tuple(x)
    if len(out) > 2 or len(set(out)) != len(out) or not all(isinstance(n, str) and n for n in out):
        raise PrivregValueError(
            f"budget_params must name the epsilon parameter and, optionally, the delta parameter, each once: "
            f"(EPSILON,) or (EPSILON, DELTA); got {x!r}"
        )
    return out


def _kind(x: Any) -> ItemKind | None:
    if x is None:
        return None
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
    plugin that registered the item. ``kind`` is set by the registry from the hook that
    returned the item (``privreg_register_mechanisms`` -> mechanism, ...); plugins leave it
    out (an explicit kind that contradicts the hook fails the plugin). ``params`` are
    derived from the factory (:func:`privreg.core.params.params_of`) unless given, so
    each parameter is declared once, where the factory declares it. ``charges`` (workflows):
    ``False`` declares a workflow that releases no differentially private output -- a
    cryptographic protocol whose outputs are protected by what each party learns -- and so
    charges nothing; the contract tests hold a workflow to its declaration either way.
    ``neighbouring``: the neighbour relation the item's guarantee holds for
    (``"replace_one"`` for local and shuffled reports); ``privreg run`` opens the workflow's
    budget with it and ``privreg describe`` shows it. ``max_epsilon`` (workflows): the
    largest epsilon ``privreg run`` spends without ``--allow-large-epsilon`` (default
    :data:`DEFAULT_MAX_EPSILON`); above it the guarantee is too weak to be a default.
    """

    name: str = attrs.field(converter=_item_name)
    kind: ItemKind | None = attrs.field(default=None, converter=_kind)
    summary: str = attrs.field(converter=_summary)
    citation: Citation = attrs.field(validator=attrs.validators.instance_of(Citation))
    factory: Callable[..., Any] = attrs.field()
    example: Example = attrs.field(validator=attrs.validators.instance_of(Example))
    params: tuple[Param, ...] = attrs.field(default=None, converter=_params)
    plugin: str = ""
    charges: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    neighbouring: str = attrs.field(default="add_remove", converter=_relation)
    budget_params: tuple[str, ...] = attrs.field(default=None, converter=_budget_params)
    max_epsilon: float = attrs.field(default=DEFAULT_MAX_EPSILON, converter=_max_epsilon)

    def __attrs_post_init__(self) -> None:
        if self.params is None:  # derived once; attrs.evolve (the registry) passes them on
            object.__setattr__(self, "params", _params(params_of(self.factory)))
        self._check_budget_params()
        if self.kind is ItemKind.WORKFLOW and any(p.name == "context" for p in self.params):
            raise PrivregValueError(f"workflow {self.name!r}: 'context' is reserved, rename that parameter")
        self.bind(self.example.params)  # the example must be valid for the declared params
        needs_pair = self.kind in (ItemKind.MECHANISM, ItemKind.RANDOMIZER)
        if needs_pair and self.example.neighbours is None:
            raise PrivregValueError(
                f"{self.kind_name} {self.name!r}: example.neighbours must give two "
                f"neighbouring inputs, so the contract tests and the auditor can exercise it"
            )

    def _check_budget_params(self) -> None:
        names = {p.name for p in self.params}
        if self.budget_params is None:  # derived once, like params
            eps, delta = DEFAULT_BUDGET_PARAMS
            derived: tuple[str, ...] = ()
            if self.charges and eps in names:
                derived = (eps, delta) if delta in names else (eps,)
            object.__setattr__(self, "budget_params", derived)
            return
        unknown = [n for n in self.budget_params if n not in names]
        if unknown:
            raise PrivregValueError(
                f"{self.kind_name} {self.name!r}: budget_params names {unknown}, which are not among its "
                f"parameters {sorted(names)}; name its epsilon parameter (and its delta parameter) there"
            )
        if self.budget_params and not self.charges:
            raise PrivregValueError(
                f"{self.kind_name} {self.name!r} declares charges=False (no differentially private release), so it "
                f"has no privacy budget: drop budget_params={self.budget_params!r}"
            )

    @factory.validator
    def _callable(self, attribute: Any, value: Any) -> None:
        if not callable(value):
            raise PrivregTypeError(f"item {self.name!r}: factory must be callable; got {value!r}")

    @property
    def kind_name(self) -> str:
        """The kind's value, or ``"item"`` before the registry set the kind."""
        return "item" if self.kind is None else self.kind.value

    @property
    def description(self) -> str:
        """The factory's docstring (what it guarantees), for ``privreg describe``."""
        return inspect.cleandoc(self.factory.__doc__ or "")

    def budget_of(self, params: Mapping[str, Any]) -> tuple[float, float] | None:
        """``(epsilon, delta)`` the run with these (bound) ``params`` declares it may spend,
        read from :attr:`budget_params` (delta 0 when no delta parameter is named); None
        when the item names no budget parameter or the epsilon parameter is None."""
        if not self.budget_params:
            return None
        eps = params.get(self.budget_params[0])
        if eps is None:
            return None
        delta = params.get(self.budget_params[1]) if len(self.budget_params) > 1 else None
        return float(eps), float(delta or 0.0)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise PrivregValueError(
            f"{self.kind_name} {self.name!r} has no parameter {name!r}; "
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
                f"{self.kind_name} {self.name!r} got unknown parameter(s) {unknown}; its parameters are {sorted(known)}"
            )
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in given:
                out[p.name] = p.validate(given[p.name])
            elif p.required:
                raise PrivregValueError(f"{self.kind_name} {self.name!r} needs parameter {p.name!r} ({p.doc})")
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
            what = "not registered yet (no kind)" if self.kind is None else f"a {self.kind_name}"
            raise PrivregTypeError(
                f"{self.name!r} is {what}, not a workflow: register it through "
                f"privreg_register_workflows, or pass kind='workflow'"
            )
        params = self.bind(values, **kwargs)
        with use_limits(getattr(context, "limits", None)):  # caps decompressed input while it is read
            return self.factory(context=context, **params)


def params_from(specs: Sequence[Param]) -> tuple[Param, ...]:
    """Validate a parameter list (helper for plugin authors)."""
    return _params(specs) or ()
