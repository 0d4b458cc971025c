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
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from collections.abc import Sequence
from typing import Any

from privreg.core.errors import DeadlockError, ProtocolError
from privreg.mpc.transcript import Message, Transcript, count_ciphertexts
from privreg.mpc.wire import decode, encode

__all__ = ["Transport", "InMemoryTransport"]


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
            raise ProtocolError(f"party {receiver!r} expected step {step!r} from {sender!r} but got step {msg.step!r}")
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
