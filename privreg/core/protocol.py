"""Protocol: a cryptographic multi-party protocol between named parties.

Parties are objects with an ``async run(channel)`` method; they talk only through a
:class:`Channel`, which sends and receives through a :class:`Transport`. Every message is
encoded with :mod:`privreg.core.wire` (so sizes are real and no party ever holds another
party's objects) and recorded in a :class:`Transcript` -- the evidence for what each
party received, and so for what it can have learned.

Every concrete protocol states, per party, what that party learns
(:meth:`Protocol.learns`) and its ``caveats`` (assumptions and known limits, in the manner
of python-paillier's documentation); running a protocol whose ``learns`` does not cover
every party is an error.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from privreg.core import validation as v
from privreg.core.errors import DeadlockError, ProtocolError
from privreg.core.wire import decode, encode

__all__ = [
    "Message",
    "Transcript",
    "Transport",
    "InMemoryTransport",
    "Channel",
    "Party",
    "Protocol",
    "ProtocolResult",
]


@attrs.frozen(kw_only=True)
class Message:
    """One message as delivered: who sent it to whom, at which protocol step, its size."""

    seq: int
    step: str
    sender: str
    receiver: str
    size_bytes: int
    payload: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class Traffic:
    """Message and byte counts."""

    messages: int = 0
    bytes: int = 0

    def add(self, msg: Message) -> Traffic:
        return Traffic(messages=self.messages + 1, bytes=self.bytes + msg.size_bytes)


class Transcript:
    """Every message of a run, in order. ``keep_payloads=False`` keeps only metadata."""

    def __init__(self, *, keep_payloads: bool = True, parties: Sequence[str] = ()) -> None:
        self.keep_payloads = keep_payloads
        self.parties = tuple(parties)
        self._messages: list[Message] = []

    def record(self, msg: Message) -> None:
        if not self.keep_payloads:
            msg = attrs.evolve(msg, payload=None)
        self._messages.append(msg)

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def sent_by(self, party: str) -> tuple[Message, ...]:
        return tuple(m for m in self._messages if m.sender == party)

    def received_by(self, party: str) -> tuple[Message, ...]:
        return tuple(m for m in self._messages if m.receiver == party)

    def per_party(self) -> dict[str, dict[str, Traffic]]:
        """``{party: {"sent": Traffic, "received": Traffic}}``, silent parties included."""
        out: dict[str, dict[str, Traffic]] = defaultdict(
            lambda: {"sent": Traffic(), "received": Traffic()}
        )
        for party in self.parties:
            out[party]  # noqa: B018 -- creates the zero entry
        for m in self._messages:
            out[m.sender]["sent"] = out[m.sender]["sent"].add(m)
            out[m.receiver]["received"] = out[m.receiver]["received"].add(m)
        return dict(out)

    def per_step(self) -> dict[str, Traffic]:
        out: dict[str, Traffic] = defaultdict(Traffic)
        for m in self._messages:
            out[m.step] = out[m.step].add(m)
        return dict(out)

    def table(self) -> str:
        """A plain-text table of traffic per party."""
        rows = [("party", "sent msgs", "sent bytes", "recv msgs", "recv bytes")]
        for party, t in sorted(self.per_party().items()):
            s, r = t["sent"], t["received"]
            rows.append((party, str(s.messages), str(s.bytes), str(r.messages), str(r.bytes)))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": [
                {"seq": m.seq, "step": m.step, "sender": m.sender, "receiver": m.receiver,
                 "size_bytes": m.size_bytes}
                for m in self._messages
            ]
        }


class Transport(ABC):
    """Carries encoded messages between parties and records them in ``transcript``."""

    transcript: Transcript

    @abstractmethod
    def open(self, parties: Sequence[str]) -> None:
        """Prepare for a run between ``parties``."""

    @abstractmethod
    async def send(self, *, sender: str, receiver: str, step: str, payload: Any) -> None:
        """Deliver ``payload`` from ``sender`` to ``receiver``."""

    @abstractmethod
    async def recv(self, *, receiver: str, sender: str, step: str | None) -> Any:
        """The next message from ``sender`` to ``receiver`` (FIFO per pair)."""

    @abstractmethod
    def finished(self, party: str) -> None:
        """``party`` returned or failed; it will neither send nor receive again."""


class InMemoryTransport(Transport):
    """All parties in one event loop. Detects deadlock: if every live party is waiting
    for a message that nobody can send, each waiting party gets a ProtocolError saying
    who waits for whom."""

    def __init__(self, *, keep_payloads: bool = True) -> None:
        self.keep_payloads = keep_payloads
        self.open(())

    def open(self, parties: Sequence[str]) -> None:
        """Start a fresh run: empty queues, a new transcript."""
        self.transcript = Transcript(keep_payloads=self.keep_payloads, parties=parties)
        self._queues: dict[tuple[str, str], deque[tuple[Message, Any]]] = defaultdict(deque)
        self._waiting: dict[str, tuple[str, asyncio.Future[None]]] = {}
        self._parties = set(parties)
        self._active = set(parties)
        self._seq = 0

    def _known(self, who: str, role: str) -> None:
        if who not in self._parties:
            raise ProtocolError(f"{role} {who!r} is not a party of this run; parties: {sorted(self._parties)}")

    async def send(self, *, sender: str, receiver: str, step: str, payload: Any) -> None:
        self._known(sender, "sender")
        self._known(receiver, "receiver")
        if sender == receiver:
            raise ProtocolError(f"party {sender!r} sent a message to itself at step {step!r}")
        data = encode(payload)
        self._seq += 1
        msg = Message(seq=self._seq, step=step, sender=sender, receiver=receiver,
                      size_bytes=len(data), payload=decode(data))
        self.transcript.record(msg)
        # the receiver gets its own copy: what it does with it cannot alter the record
        self._queues[(sender, receiver)].append((msg, decode(data)))
        waiter = self._waiting.get(receiver)
        if waiter is not None and waiter[0] == sender and not waiter[1].done():
            del self._waiting[receiver]
            waiter[1].set_result(None)
        await asyncio.sleep(0)  # let the receiver run: keeps interleavings fair

    async def recv(self, *, receiver: str, sender: str, step: str | None) -> Any:
        self._known(sender, "sender")
        if sender == receiver:
            raise ProtocolError(f"party {receiver!r} tried to receive from itself")
        queue = self._queues[(sender, receiver)]
        while not queue:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting[receiver] = (sender, fut)
            self._check_deadlock()
            await fut
        msg, payload = queue.popleft()
        if step is not None and msg.step != step:
            raise ProtocolError(
                f"party {receiver!r} expected step {step!r} from {sender!r} but got step {msg.step!r}"
            )
        return payload

    def finished(self, party: str) -> None:
        self._active.discard(party)
        self._check_deadlock()

    def _check_deadlock(self) -> None:
        blocked = {r: w for r, w in self._waiting.items() if r in self._active and not w[1].done()}
        if self._active and len(blocked) == len(self._active):
            desc = "; ".join(f"{r} waits for {s}" for r, (s, _) in sorted(blocked.items()))
            for r, (_, fut) in blocked.items():
                del self._waiting[r]
                fut.set_exception(DeadlockError(f"deadlock: {desc}"))


class Channel:
    """One party's view of the transport: it can only send as itself."""

    def __init__(self, party: str, transport: Transport, parties: Sequence[str]) -> None:
        self.party = party
        self.parties = tuple(parties)
        self._transport = transport

    async def send(self, to: str, payload: Any, *, step: str) -> None:
        await self._transport.send(sender=self.party, receiver=to, step=step, payload=payload)

    async def recv(self, frm: str, *, step: str | None = None) -> Any:
        return await self._transport.recv(receiver=self.party, sender=frm, step=step)


class Party(ABC):
    """A protocol participant. ``name`` must be unique within a run."""

    name: str

    @abstractmethod
    async def run(self, channel: Channel) -> Any:
        """Play this party's role; the return value is the party's output."""


@attrs.frozen(kw_only=True)
class ProtocolResult:
    """Each party's output and the transcript of the run."""

    outputs: Mapping[str, Any]
    transcript: Transcript


class Protocol(ABC):
    """Base class of multi-party protocols.

    Subclasses set ``name`` and ``caveats`` and implement :meth:`parties` and
    :meth:`learns` (party name -> what it learns, in plain words).
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

    def run(self, *, transport: Transport | None = None) -> ProtocolResult:
        """Run all parties to completion in this process (see :meth:`arun`)."""
        return asyncio.run(self.arun(transport=transport))

    async def arun(self, *, transport: Transport | None = None) -> ProtocolResult:
        parties = list(self.parties())
        names = [v.check_name("party name", p.name) for p in parties]
        if len(set(names)) != len(names):
            raise ProtocolError(f"party names must be unique; got {names}")
        documented = set(self.learns())
        if documented != set(names):
            raise ProtocolError(
                f"protocol {self.name or type(self).__name__!r} must document what every party "
                f"learns: learns() covers {sorted(documented)}, parties are {sorted(names)}"
            )
        transport = transport or InMemoryTransport()
        transport.open(names)

        async def drive(party: Party) -> Any:
            try:
                return await party.run(Channel(party.name, transport, names))
            finally:
                transport.finished(party.name)

        results = await asyncio.gather(*(drive(p) for p in parties), return_exceptions=True)
        failed = [(n, r) for n, r in zip(names, results) if isinstance(r, BaseException)]
        if failed:
            # a deadlock is usually the echo of another party's failure: report the cause
            root = next(((n, r) for n, r in failed if not isinstance(r, DeadlockError)), failed[0])
            raise ProtocolError(f"party {root[0]!r} failed: {type(root[1]).__name__}: {root[1]}") from root[1]
        return ProtocolResult(outputs=dict(zip(names, results)), transcript=transport.transcript)
