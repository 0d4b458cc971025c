"""Registry parameters, declared once where the factory declares its argument.

A :class:`Param` is a typed, documented, validated parameter of a registry item. Plugins
do not write Params by hand: they are derived from the factory (:func:`params_of`):

* an attrs class declares each parameter as a field made by :func:`param_field` (the
  documentation and limits, held in the field's metadata) and is built with
  ``field_transformer=param_fields``, which installs the limits as the field's converter.
  The class and the registry then run the very same :meth:`Param.validate`::

      @attrs.frozen(kw_only=True, field_transformer=param_fields)
      class Noise:
          epsilon: float = param_field(doc="privacy parameter epsilon", minimum=0,
                                       exclusive_minimum=True)

* a function (a workflow, or a factory that is not a class) annotates each keyword
  argument with ``Annotated[type, Spec(doc=..., minimum=...)]`` and gives defaults in
  its signature.

A limit is thus written exactly once and holds for Python callers and the CLI alike.
Every integer parameter is also held within 64 bits (:data:`INT_LIMIT`), whatever its
stated maximum, and the CLI reads numbers in ASCII only (:mod:`privreg.core.numtext`).
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import numbers
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.numtext import parse_float, parse_int

__all__ = [
    "REQUIRED",
    "INT_LIMIT",
    "POSITIVE",
    "OPEN_UNIT",
    "Param",
    "Spec",
    "param_field",
    "param_fields",
    "params_of",
    "check_params",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of a parameter that has no default.
REQUIRED: Any = _Required()

#: Limits shared by many parameters, e.g. ``param_field(doc="...", **POSITIVE)``:
#: > 0 (epsilon, sensitivities, scales) and the open interval (0, 1) (delta).
POSITIVE: Mapping[str, Any] = MappingProxyType({"minimum": 0, "exclusive_minimum": True})
OPEN_UNIT: Mapping[str, Any] = MappingProxyType(
    {"minimum": 0, "exclusive_minimum": True, "maximum": 1, "exclusive_maximum": True}
)

#: The largest magnitude of any integer parameter: 2**63 - 1.
INT_LIMIT = (1 << 63) - 1

_TYPES: dict[type, str] = {int: "int", float: "float", str: "str", bool: "bool", Path: "path"}
# string annotations (``from __future__ import annotations``) of the parameter types
_TYPE_NAMES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "Path": Path}

_SPEC_KEY = "privreg.spec"
_PARAM_KEY = "privreg.param"


def _doc(x: Any) -> str:
    if not isinstance(x, str):
        raise PrivregTypeError(f"doc must be a str; got {x!r} of type {type(x).__name__}")
    if not x.strip():
        raise PrivregValueError(f"doc must be a non-empty str; got {x!r}")
    return x.strip()


def _choices(x: Any) -> tuple[Any, ...] | None:
    return None if x is None else tuple(x)


def _param_name(x: object) -> str:
    return v.check_name("name", x)


@attrs.frozen(kw_only=True)
class Param:
    """A typed parameter with a default, documentation and validation.

    ``check`` (optional) receives the converted value and raises a ValueError (ideally a
    :class:`PrivregValueError`) for values out of range; ``minimum``/``maximum``/``choices``
    cover the common cases declaratively and show in ``privreg describe``.
    """

    name: str = attrs.field(converter=_param_name)
    type: type = attrs.field()
    doc: str = attrs.field(converter=_doc)
    default: Any = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[Any, ...] | None = attrs.field(default=None, converter=_choices)
    check: Callable[[Any], Any] | None = None

    @type.validator
    def _known_type(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, type) or value not in _TYPES:
            raise PrivregTypeError(f"Param {self.name!r}: type must be one of {list(_TYPES.values())}; got {value!r}")

    def __attrs_post_init__(self) -> None:
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise PrivregValueError(f"Param {self.name!r}: minimum {self.minimum} exceeds maximum {self.maximum}")
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
            bits.append(f"{'<' if self.exclusive_maximum else '<='} {self.maximum:g}")
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
                raise PrivregValueError(f"parameter {self.name} must be finite; got {value!r}. Pass a finite number.")
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
        if type(x) is int and not -INT_LIMIT <= x <= INT_LIMIT:  # a count past any real size
            raise PrivregValueError(
                f"parameter {self.name} must be between -{INT_LIMIT} and {INT_LIMIT} (64-bit); got {value!r}"
            )
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            too_low = self.minimum is not None and (x <= self.minimum if self.exclusive_minimum else x < self.minimum)
            too_high = self.maximum is not None and (x >= self.maximum if self.exclusive_maximum else x > self.maximum)
            if too_low or too_high:
                raise PrivregValueError(f"parameter {self.name} must be {self.constraint_text()}; got {value!r}")
        if self.choices is not None and x not in self.choices:
            raise PrivregValueError(f"parameter {self.name} must be one of {list(self.choices)}; got {value!r}")
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
            what = f"parameter {self.name}"
            num = parse_int(what, text) if self.type is int else parse_float(what, text)
            return self.validate(num)
        return self.validate(text)


@attrs.frozen(kw_only=True)
class Spec:
    """A parameter's documentation and limits, written once: in an attrs field's metadata
    (through :func:`param_field`) or in a function's ``Annotated`` argument type.

    ``type`` is the parameter's type where the annotation names a richer object that the
    field converts to (e.g. a float sensitivity stored as a ``GlobalSensitivity``)."""

    doc: str = attrs.field(converter=_doc)
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[Any, ...] | None = attrs.field(default=None, converter=_choices)
    check: Callable[[Any], Any] | None = None
    type: type | None = None

    def param(self, name: str, type_: builtins.type, default: Any) -> Param:
        """The :class:`Param` these limits make for argument ``name``."""
        limits = attrs.asdict(self, recurse=False, filter=lambda a, _: a.name != "type")
        return Param(name=name, type=self.type or type_, default=default, **limits)


def param_field(
    *,
    doc: str,
    default: Any = attrs.NOTHING,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    choices: Any = None,
    check: Callable[[Any], Any] | None = None,
    type: type | None = None,
    converter: Callable[[Any], Any] | None = None,
    **field_kwargs: Any,
) -> Any:
    """An attrs field that is a registry parameter. The class must be built with
    ``field_transformer=param_fields``, which checks every value against these limits
    (with :meth:`Param.validate`) before ``converter`` (optional) turns it into the stored
    object; values that are not plain numbers or strings (e.g. an already built
    ``GlobalSensitivity``) go to ``converter`` directly."""
    spec = Spec(
        doc=doc,
        minimum=minimum,
        maximum=maximum,
        exclusive_minimum=exclusive_minimum,
        exclusive_maximum=exclusive_maximum,
        choices=choices,
        check=check,
        type=type,
    )
    metadata = {**field_kwargs.pop("metadata", {}), _SPEC_KEY: spec}
    return attrs.field(default=default, converter=converter, metadata=metadata, **field_kwargs)


def _plain_type(annotation: Any, where: str) -> type:
    """int, float, str, bool or Path from an annotation, ``X | None`` and strings included."""
    if isinstance(annotation, str):
        names = [p.strip() for p in annotation.split("|") if p.strip() != "None"]
        if len(names) == 1 and names[0] in _TYPE_NAMES:
            return _TYPE_NAMES[names[0]]
    else:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType) and len(args) == 1:
            annotation = args[0]
        if annotation in _TYPES:
            return annotation  # type: ignore[no-any-return]
    raise PrivregTypeError(
        f"{where}: cannot tell the parameter type from the annotation {annotation!r}; annotate "
        f"it as one of {sorted(_TYPE_NAMES)} (or None-able), or pass param_field(type=...)"
    )


def _field_converter(param: Param, then: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    def convert(x: Any) -> Any:
        if then is not None and not isinstance(x, (numbers.Real, str, Path)):
            return then(x)  # an already built object: the field's own converter judges it
        x = param.validate(x)
        return x if then is None or x is None else then(x)

    return convert


def param_fields(cls: type, fields: list[attrs.Attribute]) -> list[attrs.Attribute]:  # type: ignore[type-arg]
    """attrs ``field_transformer`` that makes every :func:`param_field` enforce its
    limits: pass ``@attrs.frozen(..., field_transformer=param_fields)``."""
    out = []
    for a in fields:
        spec = a.metadata.get(_SPEC_KEY)
        if spec is None or _PARAM_KEY in a.metadata:  # inherited fields are already done
            out.append(a)
            continue
        if isinstance(a.default, attrs.Factory):  # type: ignore[arg-type]
            raise PrivregTypeError(f"{cls.__name__}.{a.name}: a parameter needs a plain default, not a factory")
        default = REQUIRED if a.default is attrs.NOTHING else a.default
        param = spec.param(a.name, spec.type or _plain_type(a.type, f"{cls.__name__}.{a.name}"), default)
        out.append(a.evolve(converter=_field_converter(param, a.converter), metadata={**a.metadata, _PARAM_KEY: param}))
    return out


def _class_params(cls: type) -> tuple[Param, ...]:
    out = []
    for a in attrs.fields(cls):
        if _SPEC_KEY not in a.metadata:
            continue
        if _PARAM_KEY not in a.metadata:
            raise PrivregTypeError(
                f"{cls.__name__}.{a.name} is a param_field, but {cls.__name__} does not enforce it: "
                f"build the class with @attrs.frozen(..., field_transformer=param_fields)"
            )
        out.append(a.metadata[_PARAM_KEY])
    return tuple(out)


def _function_params(func: Callable[..., Any]) -> tuple[Param, ...]:
    where = getattr(func, "__qualname__", repr(func))
    out = []
    for p in inspect.signature(func, eval_str=True).parameters.values():
        if p.name in ("context", "self") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue  # the workflow context is not a parameter
        meta = getattr(p.annotation, "__metadata__", ())
        specs = [m for m in meta if isinstance(m, (Spec, Param))]
        if not specs and p.default is not p.empty:
            continue  # an optional argument for Python callers only (e.g. rng)
        if len(specs) != 1:
            raise PrivregTypeError(
                f"{where}: argument {p.name!r} needs its documentation and limits in its annotation, "
                f"e.g. {p.name}: Annotated[float, Spec(doc='...', minimum=0)]"
            )
        spec = specs[0]
        default = REQUIRED if p.default is p.empty else p.default
        if isinstance(spec, Param):  # reuse another factory's declaration, under this name
            out.append(attrs.evolve(spec, name=p.name, default=default))
        else:
            type_ = spec.type or _plain_type(p.annotation.__origin__, f"{where}({p.name})")
            out.append(spec.param(p.name, type_, default))
    return tuple(out)


def params_of(factory: Any, name: str | None = None) -> Any:
    """The parameters of ``factory``, derived from its declaration: the
    :func:`param_field` fields of an attrs class, or the ``Annotated`` keyword arguments of
    a function (``context`` excepted). With ``name``: that one :class:`Param`, e.g. to
    reuse a class's declaration in a function's annotation."""
    is_class = isinstance(factory, type) and attrs.has(factory)
    params = _class_params(factory) if is_class else _function_params(factory)
    if name is None:
        return params
    for p in params:
        if p.name == name:
            return p
    raise PrivregValueError(
        f"{getattr(factory, '__name__', factory)!r} has no parameter {name!r}; "
        f"its parameters are {[p.name for p in params]}"
    )


def check_params(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: check a function's ``Annotated`` arguments on every call with the
    Params the registry derives from them, so a plain function or ``__init__`` enforces
    the limits it documents (values other than numbers, strings and paths go through
    unchecked, e.g. a list of party names)."""
    signature = inspect.signature(func)
    params: dict[str, Param] = {}

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if not params:  # annotations resolve once the defining module is complete
            params.update((p.name, p) for p in _function_params(func))
        bound = signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            if name in params and (value is None or isinstance(value, (numbers.Real, str, Path))):
                bound.arguments[name] = params[name].validate(value)
        return func(*bound.args, **bound.kwargs)

    return checked
