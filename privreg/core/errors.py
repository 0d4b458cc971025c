"""The one error hierarchy of privreg.

Every error privreg raises derives from :class:`PrivregError`. Errors about bad
arguments also derive from the matching builtin (``ValueError``/``TypeError``), so
callers that already catch those keep working.
"""

from __future__ import annotations


class PrivregError(Exception):
    """Base class of every error raised by privreg."""


class PrivregValueError(PrivregError, ValueError):
    """An argument has the right type but a value privreg cannot accept."""


class PrivregTypeError(PrivregError, TypeError):
    """An argument has the wrong type."""


class BudgetExceededError(PrivregError):
    """A release would exceed the privacy budget; nothing was released or charged."""


class UnsupportedEventError(PrivregError, ValueError):
    """An accountant was given a privacy event it does not know how to compose."""

    def __init__(self, event: object, accountant: str, reason: str = "") -> None:
        self.event = event
        self.accountant = accountant
        self.reason = reason
        kind = getattr(event, "kind", type(event).__name__)
        why = f": {reason}" if reason else ""
        super().__init__(
            f"accountant {accountant!r} does not support privacy event {kind!r} "
            f"({event!r}){why}; use an accountant whose supports(event) is True"
        )


class PluginError(PrivregError):
    """A plugin could not be loaded or registered something invalid."""


class DuplicateNameError(PluginError):
    """Two plugins registered an item (or event type) under the same name."""


class UnknownItemError(PluginError, LookupError):
    """A name was looked up in the registry and is not there."""


class ProtocolError(PrivregError):
    """A multi-party protocol was misused or a party broke the message schedule."""


class DeadlockError(ProtocolError):
    """Every live party of a protocol run waits for a message nobody can send."""


class SerializationError(PrivregError, ValueError):
    """A value cannot be encoded, or bytes cannot be decoded, by privreg's codecs."""
