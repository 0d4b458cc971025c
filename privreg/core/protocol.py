"""Protocol: the interface of a cryptographic multi-party protocol between named parties.

A protocol names its parties (:meth:`Protocol.parties`), says per party what that party
learns (:meth:`Protocol.learns`) and states its ``caveats`` (assumptions and known limits,
in the manner of python-paillier's documentation). A :class:`Party` plays one role: its
``async run(channel)`` talks to the other parties only through a :class:`Channel`.

Running a protocol (transports, transcripts, the wire codec, deadlock detection) is the
job of :mod:`privreg.mpc`; this module holds only what plugin authors subclass, so
importing the core loads no networking code.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from privreg.core import validation as v
from privreg.core.errors import ProtocolError

__all__ = ["Channel", "Party", "Protocol"]


class Channel(ABC):
    """One party's view of a run: it can only send as itself (``party``) to the other
    ``parties``. :mod:`privreg.mpc` supplies the implementation."""

    party: str
    parties: tuple[str, ...]

    @abstractmethod
    async def send(self, to: str, payload: Any, *, step: str) -> None:
        """Send ``payload`` to party ``to`` as part of protocol step ``step``."""

    @abstractmethod
    async def recv(self, frm: str, *, step: str | None = None) -> Any:
        """The next message from party ``frm`` (checked to be of ``step`` when given)."""


class Party(ABC):
    """A protocol participant. ``name`` must be unique within a run."""

    name: str

    @abstractmethod
    async def run(self, channel: Channel) -> Any:
        """Play this party's role; the return value is the party's output."""


class Protocol(ABC):
    """Base class of multi-party protocols.

    Subclasses set ``name`` and ``caveats`` and implement :meth:`parties` and
    :meth:`learns` (party name -> what it learns, in plain words). Run one with
    :func:`privreg.mpc.run_protocol`.
    """

    name: ClassVar[str] = ""
    caveats: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not inspect.isabstract(cls) and not cls.caveats.strip():
            raise TypeError(f"protocol {cls.__name__} must document its caveats")

    @abstractmethod
    def parties(self) -> Sequence[Party]:
        """The parties of one run."""

    @abstractmethod
    def learns(self) -> Mapping[str, str]:
        """For each party name, what that party learns from a run."""

    def max_message_bytes(self) -> int | None:
        """An upper bound, in bytes of the :mod:`privreg.mpc.wire` encoding, on any one
        message of a run, derived from the protocol's public parameters; ``None`` (the
        default) leaves the transport's own limit. A transport refuses a larger message
        from a peer before reading it, which bounds what a hostile peer can make an
        honest party hold."""
        return None

    def message_bound(self, *, sender: str, receiver: str, step: str) -> int | None:
        """An upper bound, in bytes of the :mod:`privreg.mpc.wire` encoding, on one
        message of ``step`` from ``sender`` to ``receiver``, derived from the run's
        declared public sizes (records, filter bits, key size, ...); at most
        :meth:`max_message_bytes`. A network transport checks a peer's frame against it
        as soon as the frame names its step, before reading the payload. ``step`` is
        chosen by the peer: a step the protocol does not name gets
        :meth:`max_message_bytes` (the default for every step)."""
        return self.max_message_bytes()

    def checked_party_names(self, parties: Sequence[Party]) -> list[str]:
        """The names of ``parties``, checked: valid, unique, and each covered by
        :meth:`learns` (a run of a protocol that hides what a party learns is an error)."""
        names = [v.check_name("party name", p.name) for p in parties]
        if len(set(names)) != len(names):
            raise ProtocolError(f"party names must be unique; got {names}")
        documented = set(self.learns())
        if documented != set(names):
            raise ProtocolError(
                f"protocol {self.name or type(self).__name__!r} must document what every party "
                f"learns: learns() covers {sorted(documented)}, parties are {sorted(names)}"
            )
        return names
