"""Transports: how encoded messages travel between the parties of a run.

A :class:`Transport` carries messages between parties, encodes each with
:mod:`privreg.mpc.wire` (so sizes are real and no party ever holds another party's
objects) and records it in a :class:`~privreg.mpc.transcript.Transcript`. A transport
decides which parties run in this process (:meth:`Transport.hosted`).
:class:`InMemoryTransport` runs every party in one event loop and detects deadlock;
:class:`privreg.mpc.tcp.TcpTransport` reaches parties in other processes over TCP.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any

from privreg.core.errors import DeadlockError, PrivregValueError, ProtocolError
from privreg.mpc.transcript import Message, Transcript, count_ciphertexts
from privreg.mpc.wire import decode, encode_buffer

__all__ = [
    "STEP_MAX_CHARS",
    "InMemoryTransport",
    "MessageBound",
    "QueuedMessage",
    "Transport",
    "check_step",
    "is_step",
    "shown_step",
]

#: A protocol's bound per message kind: ``bound(sender=..., receiver=..., step=...)`` in
#: bytes, or None (:meth:`privreg.core.protocol.Protocol.message_bound`).
MessageBound = Callable[..., "int | None"]

#: The longest step name a message may carry.
STEP_MAX_CHARS = 128
# what a step name is made of: check_name's characters (ASCII letters, digits, '-', '_',
# '.') and the brackets of steps such as "1.E[w]"
_STEP_FORM = re.compile(rf"[A-Za-z0-9_.\[\]-]{{1,{STEP_MAX_CHARS}}}")
_SHOWN_STEP_CHARS = 64


def is_step(step: Any) -> bool:
    """Whether ``step`` is a valid step name (see :func:`check_step`)."""
    return isinstance(step, str) and _STEP_FORM.fullmatch(step) is not None


def shown_step(step: Any) -> str:
    """A step (perhaps a peer's) for an error message: quoted when it is a valid step
    name of at most 64 characters, else cut to its first 64 printable characters."""
    if not isinstance(step, str):
        return f"(a {type(step).__name__}, not a str)"
    if len(step) <= _SHOWN_STEP_CHARS and is_step(step):
        return repr(step)
    head = "".join(c if c.isascii() and c.isprintable() else "?" for c in step[:_SHOWN_STEP_CHARS])
    return f"{head!r}... ({len(step)} characters)" if len(step) > _SHOWN_STEP_CHARS else repr(head)


def check_step(step: Any) -> str:
    """``step`` if it is a step name: 1 to :data:`STEP_MAX_CHARS` ASCII letters, digits,
    '-', '_', '.', '[' or ']'; else PrivregValueError naming the rule (and the step, cut)."""
    if not isinstance(step, str) or not is_step(step):
        raise PrivregValueError(
            f"a message step must be a name of 1 to {STEP_MAX_CHARS} ASCII letters, digits, '-', '_', '.', '[' "
            f"or ']'; got {shown_step(step)}. Use a short name such as 'keys' or '1.E[w]'."
        )
    return step


class Transport(ABC):
    """Carries encoded messages between parties and records them in ``transcript``."""

    transcript: Transcript

    @abstractmethod
    def open(self, parties: Sequence[str]) -> None:
        """Prepare for a run between ``parties``."""

    async def start(
        self,
        parties: Sequence[str],
        *,
        max_message_bytes: int | None = None,
        message_bound: MessageBound | None = None,
    ) -> None:
        """Prepare for a run inside the event loop that will run it (default: :meth:`open`).

        ``max_message_bytes`` is the protocol's bound on one encoded message
        (:meth:`privreg.core.protocol.Protocol.max_message_bytes`), or None;
        ``message_bound`` its bound per message kind
        (:meth:`~privreg.core.protocol.Protocol.message_bound`), or None."""
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


class QueuedMessage:
    """A delivered message waiting for its receiver: its step and either the receiver's
    decoded copy (``payload``) or, for messages decoded only when read, the encoded bytes
    (``data``), where they came from (``source``) and the bytes they count against its
    limits (``cost``)."""

    __slots__ = ("cost", "data", "payload", "source", "step")

    def __init__(
        self,
        step: str,
        *,
        payload: Any = None,
        data: bytes | bytearray | None = None,
        source: Any = None,
        cost: int = 0,
    ) -> None:
        self.step = step
        self.payload = payload
        self.data = data
        self.source = source
        self.cost = cost  # what the message counts against its source's queue limit


def _checked_limit(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PrivregValueError(
            f"max_message_bytes must be None or a positive int (bytes); got {value!r}. "
            f"A protocol's max_message_bytes() must return one of these."
        )
    return value


def _checked_bound(value: Any, step: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError(
            f"the protocol's message_bound() gave {value!r} for step {shown_step(step)}; it must return None or an "
            f"int >= 0 (bytes)"
        )
    return value


class InMemoryTransport(Transport):
    """All parties in one event loop. Detects deadlock: if every live party is waiting
    for a message that nobody can send, each waiting party gets a ProtocolError saying
    who waits for whom.

    A message is encoded once and decoded once (the receiver's copy); with
    ``keep_payloads=True`` it is decoded a second time for the transcript, so that what
    the receiver does with its copy cannot alter the record. When the run's protocol
    bounds its messages (:meth:`~privreg.core.protocol.Protocol.max_message_bytes`, and per
    kind :meth:`~privreg.core.protocol.Protocol.message_bound`), a larger message fails
    its sender, as it would on a network transport. A step must be
    a short name (:func:`check_step`), as a network transport requires on the wire.
    """

    def __init__(self, *, keep_payloads: bool = True) -> None:
        self.keep_payloads = keep_payloads
        self.message_limit: int | None = None
        self.message_bound: MessageBound | None = None
        self.open(())

    async def start(
        self,
        parties: Sequence[str],
        *,
        max_message_bytes: int | None = None,
        message_bound: MessageBound | None = None,
    ) -> None:
        limit = _checked_limit(max_message_bytes)
        self.open(parties)
        self.message_limit = limit
        self.message_bound = message_bound

    def open(self, parties: Sequence[str]) -> None:
        """Start a fresh run: empty queues, a new transcript."""
        self.transcript = Transcript(keep_payloads=self.keep_payloads, parties=parties)
        self._queues: dict[tuple[str, str], deque[QueuedMessage]] = defaultdict(deque)
        self._waiting: dict[str, tuple[str, asyncio.Future[None]]] = {}
        self._parties = set(parties)
        self._active = set(parties)
        self._seq = 0

    def _known(self, who: str, role: str) -> None:
        if who not in self._parties:
            raise ProtocolError(f"{role} {who!r} is not a party of this run; parties: {sorted(self._parties)}")

    def _deliver(self, *, sender: str, receiver: str, step: str, data: bytes | bytearray) -> None:
        """Record a message and queue the receiver's own decoded copy of ``data``."""
        payload = decode(data)
        self._seq += 1
        msg = Message(
            seq=self._seq,
            step=step,
            sender=sender,
            receiver=receiver,
            size_bytes=len(data),
            ciphertexts=count_ciphertexts(payload),
            payload=decode(data) if self.keep_payloads else None,
        )
        self.transcript.record(msg)
        # the receiver gets its own copy: what it does with it cannot alter the record
        self._enqueue(sender, receiver, QueuedMessage(step, payload=payload))

    def _enqueue(self, sender: str, receiver: str, item: QueuedMessage) -> None:
        self._queues[(sender, receiver)].append(item)
        waiter = self._waiting.get(receiver)
        if waiter is not None and waiter[0] == sender and not waiter[1].done():
            del self._waiting[receiver]
            waiter[1].set_result(None)

    def _dequeued(self, item: QueuedMessage) -> None:
        """Called when ``item`` leaves its queue (hook: flow control)."""

    def _unpack(self, sender: str, receiver: str, item: QueuedMessage) -> Any:
        """The payload the receiver gets for ``item`` (hook: decode when read)."""
        return item.payload

    def bound_for(self, sender: str, receiver: str, step: str) -> int | None:
        """The largest message of ``step`` from ``sender`` to ``receiver`` this run
        accepts: the protocol's :meth:`~privreg.core.protocol.Protocol.message_bound`
        for it, at most the run's message limit (None: no bound)."""
        limit = self.message_limit
        if self.message_bound is None:
            return limit
        bound = _checked_bound(self.message_bound(sender=sender, receiver=receiver, step=step), step)
        if bound is None:
            return limit
        return bound if limit is None else min(bound, limit)

    def _check_size(self, sender: str, receiver: str, step: str, size: int) -> None:
        limit = self.bound_for(sender, receiver, step)
        if limit is not None and size > limit:
            raise ProtocolError(
                f"party {sender!r} sent a {size}-byte message to {receiver!r} at step {step!r}, above the run's "
                f"bound of {limit} bytes for that message (the protocol's message_bound(), from the run's declared "
                f"sizes, or the transport's max_message_bytes); declare the run's true sizes or send smaller messages"
            )

    async def send(self, *, sender: str, receiver: str, step: str, payload: Any) -> None:
        self._known(sender, "sender")
        self._known(receiver, "receiver")
        check_step(step)
        if sender == receiver:
            raise ProtocolError(f"party {sender!r} sent a message to itself at step {step!r}")
        data = encode_buffer(payload)
        self._check_size(sender, receiver, step, len(data))
        self._deliver(sender=sender, receiver=receiver, step=step, data=data)
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
        item = queue.popleft()
        self._dequeued(item)
        if step is not None and item.step != step:
            raise ProtocolError(
                f"party {receiver!r} expected step {shown_step(step)} from {sender!r} but got step "
                f"{shown_step(item.step)}"
            )
        return self._unpack(sender, receiver, item)

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
