"""What plugins teach the accountants: handlers for their event types, and new accountants.

A plugin returns these values from ``privreg_register_accountants`` (see
:mod:`privreg.core.hookspecs`); the registry installs them here once the plugin loaded
cleanly, and :mod:`privreg.accountant` consults them. The core only holds the tables: it
never computes a privacy cost.

* :class:`AccountingHandler` -- for accountant ``accountant`` (by name), the cost of one
  release of ``event_type``: ``handler(accountant, event)`` returns what that accountant
  adds up (an ``(epsilon, delta)`` pair for ``basic``/``advanced``/``optimal``, ``rho`` for
  ``zcdp``, an RDP curve on ``accountant.orders`` for ``rdp``, ``mu`` for ``gdp``, a
  dp-accounting ``PrivacyLossDistribution`` for ``pld``) or None when it cannot vouch.
* :class:`AccountantType` -- a whole accountant class (a subclass of
  ``privreg.accountant.base.Accountant``) under a new name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.errors import DuplicateNameError, PrivregTypeError
from privreg.core.events import PrivacyEvent

__all__ = ["AccountingHandler", "AccountantType", "BUILTIN_ACCOUNTANTS", "handler_for", "accountant_types", "install"]

#: The names of the built-in accountants (``privreg.accountant.ACCOUNTANTS``, which this
#: module does not import; a test keeps the two equal): no plugin accountant may take one.
BUILTIN_ACCOUNTANTS = frozenset({"basic", "advanced", "optimal", "rdp", "zcdp", "gdp", "pld"})


def _event_class(x: Any) -> type[PrivacyEvent]:
    if not (isinstance(x, type) and issubclass(x, PrivacyEvent)):
        raise PrivregTypeError(f"event_type must be a PrivacyEvent subclass; got {x!r}")
    return x


def _callable(x: object) -> Callable[[Any, PrivacyEvent], Any]:
    if not callable(x):
        raise PrivregTypeError(f"handler must be callable(accountant, event); got {x!r}")
    return x


# Named converters: mypy's attrs plugin cannot type __init__ from a lambda converter.
def _accountant_name(x: object) -> str:
    return v.check_name("accountant", x)


def _name(x: object) -> str:
    return v.check_name("name", x)


@attrs.frozen(kw_only=True)
class AccountingHandler:
    """How accountant ``accountant`` prices one release of ``event_type``."""

    accountant: str = attrs.field(converter=_accountant_name)
    event_type: type[PrivacyEvent] = attrs.field(converter=_event_class)
    handler: Callable[[Any, PrivacyEvent], Any] = attrs.field(converter=_callable)


@attrs.frozen(kw_only=True)
class AccountantType:
    """A new accountant class, made by ``privreg.accountant.make_accountant(name)``."""

    name: str = attrs.field(converter=_name)
    factory: type = attrs.field(validator=attrs.validators.instance_of(type))


_lock = threading.Lock()
_HANDLERS: dict[tuple[str, type[PrivacyEvent]], Callable[[Any, PrivacyEvent], Any]] = {}
_ACCOUNTANTS: dict[str, type] = {}


def handler_for(accountant: str, event_type: type[PrivacyEvent]) -> Callable[[Any, PrivacyEvent], Any] | None:
    """The plugin handler for ``event_type`` (or its nearest base class) under ``accountant``."""
    for cls in event_type.__mro__:
        fn = _HANDLERS.get((accountant, cls))
        if fn is not None:
            return fn
    return None


def accountant_types() -> dict[str, type]:
    """Accountant classes registered by plugins, by name."""
    with _lock:
        return dict(_ACCOUNTANTS)


def install(extensions: Iterable[AccountingHandler | AccountantType], *, plugin: str) -> None:
    """Install ``extensions`` (all or nothing). Registering the same object twice is a
    no-op (registries are rebuilt in tests); a different one under the same key is a
    :class:`DuplicateNameError` naming ``plugin``."""
    extensions = list(extensions)
    with _lock:
        for ext in extensions:
            if isinstance(ext, AccountingHandler):
                prior = _HANDLERS.get((ext.accountant, ext.event_type))
                if prior is not None and prior is not ext.handler:
                    raise DuplicateNameError(
                        f"plugin {plugin!r}: accountant {ext.accountant!r} already has a handler for "
                        f"{ext.event_type.__qualname__}; register each (accountant, event type) once"
                    )
            elif isinstance(ext, AccountantType):
                prior_cls = _ACCOUNTANTS.get(ext.name)
                if ext.name in BUILTIN_ACCOUNTANTS or (prior_cls is not None and prior_cls is not ext.factory):
                    raise DuplicateNameError(
                        f"plugin {plugin!r}: an accountant named {ext.name!r} exists already; rename it"
                    )
            else:
                raise PrivregTypeError(
                    f"plugin {plugin!r}: privreg_register_accountants returned {ext!r}; return "
                    f"AccountingHandler or AccountantType values"
                )
        for ext in extensions:
            if isinstance(ext, AccountingHandler):
                _HANDLERS[(ext.accountant, ext.event_type)] = ext.handler
            else:
                _ACCOUNTANTS[ext.name] = ext.factory
