"""Protocol: a cryptographic multi-party protocol between named parties.

Parties are objects with an ``async run(channel)`` method; they talk only through a
:class:`Channel`, which sends and receives through a :class:`Transport`. Every message is
encoded with :mod:`privreg.core.wire` (so sizes are real and no party ever holds another
party's objects) and recorded in a :class:`Transcript` -- the evidence for what each
party received, and so for what it can have learned. Transcripts count messages, bytes
and ciphertexts (any sent object with an integer ``ciphertext_count`` attribute, such as
:class:`privreg.crypto.EncryptedVector`) per party and per protocol step.

Two transports exist: :class:`InMemoryTransport` runs every party in one event loop;
:class:`privreg.core.transport_tcp.TcpTransport` runs some parties here and reaches the
others over TCP, so that parties can live in separate processes or machines. A transport
decides which parties run locally (:meth:`Transport.hosted`); :meth:`Protocol.arun` runs
only those and returns their outputs.

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
    "Traffic",
    "Transcript",
    "Transport",
    "InMemoryTransport",
    "Channel",
    "Party",
    "Protocol",
    "ProtocolResult",
    "count_ciphertexts",
]


def count_ciphertexts(payload: Any) -> int:
    """Ciphertexts carried by ``payload``: the sum of ``ciphertext_count`` over every
    object in it that has one (lists, tuples and dict values are searched)."""
    if isinstance(payload, (list, tuple)):
        return sum(count_ciphertexts(x) for x in payload)
    if isinstance(payload, dict):
        return sum(count_ciphertexts(x) for x in payload.values())
    count = getattr(payload, "ciphertext_count", None)
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    return 0


@attrs.frozen(kw_only=True)
class Message:
    """One message as delivered: who sent it to whom, at which protocol step, its size
    in bytes (the encoded payload) and how many ciphertexts it carries."""

    seq: int
    step: str
    sender: str
    receiver: str
    size_bytes: int
    ciphertexts: int = 0
    payload: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class Traffic:
    """Message, byte and ciphertext counts."""

    messages: int = 0
    bytes: int = 0
    ciphertexts: int = 0

    def add(self, msg: Message) -> Traffic:
        return Traffic(messages=self.messages + 1, bytes=self.bytes + msg.size_bytes,
                       ciphertexts=self.ciphertexts + msg.ciphertexts)


def _render(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


class Transcript:
    """Every message of a run, in order. ``keep_payloads=False`` keeps only metadata.

    Under a transport that spans processes, each process's transcript holds the
    messages its local parties sent or received.
    """

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
        """``{step: Traffic}`` in order of first appearance."""
        out: dict[str, Traffic] = defaultdict(Traffic)
        for m in self._messages:
            out[m.step] = out[m.step].add(m)
        return dict(out)

    def per_party_step(self) -> dict[str, dict[str, dict[str, Traffic]]]:
        """``{party: {step: {"sent": Traffic, "received": Traffic}}}``: what each party
        sent and received at each step (steps in order of first appearance)."""
        out: dict[str, dict[str, dict[str, Traffic]]] = {p: {} for p in self.parties}
        zero = {"sent": Traffic(), "received": Traffic()}
        for m in self._messages:
            for party, side in ((m.sender, "sent"), (m.receiver, "received")):
                steps = out.setdefault(party, {})
                cell = steps.setdefault(m.step, dict(zero))
                cell[side] = cell[side].add(m)
        return out

    def total(self) -> Traffic:
        """All messages of the transcript together."""
        t = Traffic()
        for m in self._messages:
            t = t.add(m)
        return t

    def table(self, *, ciphertexts: bool = False) -> str:
        """A plain-text table of traffic per party (with ciphertext columns if asked)."""
        head = ["party", "sent msgs", "sent bytes", "recv msgs", "recv bytes"]
        if ciphertexts:
            head[3:3] = ["sent cts"]
            head.append("recv cts")
        rows = [tuple(head)]
        for party, t in sorted(self.per_party().items()):
            s, r = t["sent"], t["received"]
            cells = [party, str(s.messages), str(s.bytes), str(r.messages), str(r.bytes)]
            if ciphertexts:
                cells[3:3] = [str(s.ciphertexts)]
                cells.append(str(r.ciphertexts))
            rows.append(tuple(cells))
        return _render(rows)

    def step_table(self) -> str:
        """A plain-text table with one row per (step, sender, receiver), in protocol order:
        messages, ciphertexts and bytes."""
        cells: dict[tuple[str, str, str], Traffic] = defaultdict(Traffic)
        for m in self._messages:
            cells[(m.step, m.sender, m.receiver)] = cells[(m.step, m.sender, m.receiver)].add(m)
        rows = [("step", "from", "to", "msgs", "ciphertexts", "bytes")]
        for (step, frm, to), t in cells.items():
            rows.append((step, frm, to, str(t.messages), str(t.ciphertexts), str(t.bytes)))
        total = self.total()
        rows.append(("total", "", "", str(total.messages), str(total.ciphertexts), str(total.bytes)))
        return _render(rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": [
                {"seq": m.seq, "step": m.step, "sender": m.sender, "receiver": m.receiver,
                 "size_bytes": m.size_bytes, "ciphertexts": m.ciphertexts}
                for m in self._messages
            ]
        }


class Transport(ABC):
    """Carries encoded messages between parties and records them in ``transcript``."""

    transcript: Transcript

    @abstractmethod
    def open(self, parties: Sequence[str]) -> None:
        """Prepare for a run between ``parties``."""

    async def start(self, parties: Sequence[str]) -> None:
        """Prepare for a run inside the event loop that will run it (default: :meth:`open`)."""
        self.open(parties)

    def hosted(self, parties: Sequence[str]) -> tuple[str, ...]:
        """The parties of ``parties`` that run in this process (default: all)."""
        return tuple(parties)

    async def stop(self) -> None:
        """Release what :meth:`start` acquired; called once every hosted party finished."""

    @abstractmethod
    async def send(self, *, sender: str, receiver: str, step: str, payload: Any) -> None:
        """Deliver ``payload`` from ``sender`` to ``receiver``."""

    @abstractmethod
    async def recv(self, *, receiver: str, sender: str, step: str | None) -> Any:
        """The next message from ``sender`` to ``receiver`` (FIFO per pair)."""

    @abstractmethod
    def finished(self, party: str, error: BaseException | None = None) -> None:
        """``party`` returned (``error`` None) or failed; it will neither send nor receive again."""


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

    def _deliver(self, *, sender: str, receiver: str, step: str, data: bytes) -> None:
        """Record a message and queue the receiver's own decoded copy of ``data``."""
        payload = decode(data)
        self._seq += 1
        msg = Message(seq=self._seq, step=step, sender=sender, receiver=receiver,
                      size_bytes=len(data), ciphertexts=count_ciphertexts(payload),
                      payload=decode(data) if self.keep_payloads else None)
        self.transcript.record(msg)
        # the receiver gets its own copy: what it does with it cannot alter the record
        self._queues[(sender, receiver)].append((msg, payload))
        waiter = self._waiting.get(receiver)
        if waiter is not None and waiter[0] == sender and not waiter[1].done():
            del self._waiting[receiver]
            waiter[1].set_result(None)

    async def send(self, *, sender: str, receiver: str, step: str, payload: Any) -> None:
        self._known(sender, "sender")
        self._known(receiver, "receiver")
        if sender == receiver:
            raise ProtocolError(f"party {sender!r} sent a message to itself at step {step!r}")
        self._deliver(sender=sender, receiver=receiver, step=step, data=encode(payload))
        await asyncio.sleep(0)  # let the receiver run: keeps interleavings fair

    async def _wait(self, receiver: str, sender: str, fut: asyncio.Future[None]) -> None:
        await fut

    async def recv(self, *, receiver: str, sender: str, step: str | None) -> Any:
        self._known(sender, "sender")
        if sender == receiver:
            raise ProtocolError(f"party {receiver!r} tried to receive from itself")
        queue = self._queues[(sender, receiver)]
        while not queue:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting[receiver] = (sender, fut)
            self._check_deadlock()
            await self._wait(receiver, sender, fut)
        msg, payload = queue.popleft()
        if step is not None and msg.step != step:
            raise ProtocolError(
                f"party {receiver!r} expected step {step!r} from {sender!r} but got step {msg.step!r}"
            )
        return payload

    def finished(self, party: str, error: BaseException | None = None) -> None:
        self._active.discard(party)
        self._check_deadlock()

    def _may_still_send(self, party: str) -> bool:
        """Whether ``party`` may send although every local party is blocked (remote parties)."""
        return False

    def _check_deadlock(self) -> None:
        blocked = {r: w for r, w in self._waiting.items() if r in self._active and not w[1].done()}
        if not self._active or len(blocked) != len(self._active):
            return
        if any(self._may_still_send(s) for s, _ in blocked.values()):
            return
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
    """Each hosted party's output and the transcript of the run (as seen here)."""

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
        """Run the hosted parties to completion in this process (see :meth:`arun`)."""
        return asyncio.run(self.arun(transport=transport))

    async def arun(self, *, transport: Transport | None = None) -> ProtocolResult:
        """Run every party the transport hosts here (all of them in memory); the outputs
        are those of the hosted parties."""
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
        await transport.start(names)
        try:
            local = [p for p in parties if p.name in set(transport.hosted(names))]

            async def drive(party: Party) -> Any:
                try:
                    out = await party.run(Channel(party.name, transport, names))
                except BaseException as exc:
                    transport.finished(party.name, exc)
                    raise
                transport.finished(party.name)
                return out

            results = await asyncio.gather(*(drive(p) for p in local), return_exceptions=True)
        finally:
            await transport.stop()
        local_names = [p.name for p in local]
        failed = [(n, r) for n, r in zip(local_names, results) if isinstance(r, BaseException)]
        if failed:
            # a deadlock is usually the echo of another party's failure: report the cause
            root = next(((n, r) for n, r in failed if not isinstance(r, DeadlockError)), failed[0])
            raise ProtocolError(f"party {root[0]!r} failed: {type(root[1]).__name__}: {root[1]}") from root[1]
        return ProtocolResult(outputs=dict(zip(local_names, results)), transcript=transport.transcript)
