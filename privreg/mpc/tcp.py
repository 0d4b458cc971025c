"""TCP transport: parties of one protocol run in separate processes (or machines).

:class:`TcpTransport` hosts some parties of a run in this process and reaches the others
over TCP (asyncio streams). Each process that hosts parties creates one transport, which
binds its listening socket at construction (``port=0`` picks a free port, read back from
:attr:`TcpTransport.address`); the processes then exchange addresses out of band
(:meth:`TcpTransport.set_peers`) and each calls
``privreg.mpc.arun_protocol(protocol, transport=...)`` (or ``run_protocol``). Messages
between two parties hosted in the same process stay in memory, exactly as with
:class:`~privreg.mpc.transport.InMemoryTransport`.

Wire format: every frame is an 8-byte big-endian length followed by a
:mod:`privreg.mpc.wire` encoding of a tuple. A connection opens with
``("H", session, [parties hosted by the connecting process])``; then come messages
``("M", step, sender, receiver, payload_bytes)`` and one ``("F", party, failure)`` when a
hosted party finishes (``failure`` is None, or the error as text). Each process opens one
connection to every other process and only writes on it, so messages from one sender to
one receiver travel on one stream and arrive in order.

Transcripts: each process records the messages its local parties send or receive;
``size_bytes`` is the length of the encoded payload (the framing is not counted), the same
as in memory, so the sender's and the receiver's transcript agree on every message.

Failure handling: a party that waits for a message from a remote party that has finished
(or failed, or whose connection closed) gets a :class:`~privreg.core.errors.DeadlockError`
that names the remote party and its failure; a wait longer than ``recv_timeout`` raises
:class:`~privreg.core.errors.ProtocolError`. A cycle of waits across processes is only
caught by that timeout.

Caveats:
    - No transport security: frames are neither encrypted nor authenticated. The
      ``session`` string only guards against connecting two different runs by mistake;
      it is not a secret. Run over loopback, a private network, or a TLS/SSH tunnel; the
      protocols' guarantees are stated for semi-honest parties that are the only ones
      able to reach these ports.
    - One run per transport: create a new transport (and exchange addresses again) for
      every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from privreg.core import validation as v
from privreg.core.errors import DeadlockError, PrivregError, PrivregTypeError, PrivregValueError, ProtocolError
from privreg.mpc.transcript import Message, count_ciphertexts
from privreg.mpc.transport import InMemoryTransport
from privreg.mpc.wire import decode, encode

__all__ = ["TcpTransport"]

_LEN = struct.Struct(">Q")


def _check_address(name: str, addr: Any) -> tuple[str, int]:
    if (
        not isinstance(addr, (tuple, list))
        or len(addr) != 2
        or not isinstance(addr[0], str)
        or isinstance(addr[1], bool)
        or not isinstance(addr[1], int)
        or not 0 < addr[1] < 65536
    ):
        raise PrivregValueError(
            f"the address of {name} must be (host, port) with a port in 1..65535; got {addr!r}. "
            f"Pass the value of the peer transport's .address, e.g. ('127.0.0.1', 50123)."
        )
    return (addr[0], int(addr[1]))


def _positive_seconds(name: str, value: Any) -> float:
    x = v.check_real(name, value)
    if not x > 0 or x == float("inf"):
        raise PrivregValueError(f"{name} must be a positive number of seconds; got {value!r}. Pass e.g. {name}=30.0.")
    return x


class TcpTransport(InMemoryTransport):
    """Hosts ``local`` parties here; reaches every other party at its ``peers`` address.

    Args:
        local: names of the parties that run in this process (at least one).
        peers: ``{party: (host, port)}`` for every party hosted elsewhere; may be given
            later with :meth:`set_peers` (before the run starts).
        host, port: where to listen; ``port=0`` picks a free port (see :attr:`address`).
        session: a label both sides must agree on (not a secret; see the module caveats).
        recv_timeout: seconds a party may wait for one message before the run fails.
        connect_timeout: seconds to keep retrying the connection to a peer.
        linger_timeout: seconds to wait, at the end, for remote parties to finish.
        max_message_bytes: largest frame accepted from a peer.
    """

    def __init__(
        self,
        *,
        local: Sequence[str],
        peers: Mapping[str, tuple[str, int]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        session: str = "privreg",
        keep_payloads: bool = True,
        recv_timeout: float = 300.0,
        connect_timeout: float = 30.0,
        linger_timeout: float = 30.0,
        max_message_bytes: int = 1 << 31,
    ) -> None:
        if isinstance(local, str) or not isinstance(local, Sequence):
            raise PrivregTypeError(
                f"local must be a sequence of party names; got {local!r}. Pass e.g. local=['alice']."
            )
        names = [v.check_name("local party name", n) for n in local]
        if not names or len(set(names)) != len(names):
            raise PrivregValueError(f"local must name at least one party, each once; got {list(local)!r}.")
        if not isinstance(session, str) or not session:
            raise PrivregValueError(f"session must be a non-empty str; got {session!r}.")
        v.check_int("port", port, minimum=0)
        self._local = frozenset(names)
        self.session = session
        self.recv_timeout = _positive_seconds("recv_timeout", recv_timeout)
        self.connect_timeout = _positive_seconds("connect_timeout", connect_timeout)
        self.linger_timeout = _positive_seconds("linger_timeout", linger_timeout)
        self.max_message_bytes = v.check_int("max_message_bytes", max_message_bytes, minimum=1)
        self._peers: dict[str, tuple[str, int]] = {}
        self._sock = socket.create_server((host, port))  # bound now: peers may connect early
        self.address: tuple[str, int] = tuple(self._sock.getsockname()[:2])
        self._used = False
        super().__init__(keep_payloads=keep_payloads)
        if peers:
            self.set_peers(peers)

    # ------------------------------------------------------------------ setup

    def set_peers(self, peers: Mapping[str, tuple[str, int]]) -> None:
        """Add ``{party: (host, port)}`` for parties hosted by other processes."""
        if not isinstance(peers, Mapping):
            raise PrivregTypeError(f"peers must be a mapping party -> (host, port); got {peers!r}.")
        for name, addr in peers.items():
            v.check_name("peer party name", name)
            if name in self._local:
                raise PrivregValueError(f"party {name!r} is hosted here (local); it cannot also be a peer.")
            self._peers[name] = _check_address(f"peer {name!r}", addr)

    def hosted(self, parties: Sequence[str]) -> tuple[str, ...]:
        return tuple(p for p in parties if p in self._local)

    async def start(self, parties: Sequence[str]) -> None:
        if self._used:
            raise ProtocolError("a TcpTransport serves one run; create a new transport for the next run")
        self._used = True
        try:
            await self._start(parties)
        except BaseException:
            await self.stop()
            raise

    async def _start(self, parties: Sequence[str]) -> None:
        self.open(parties)
        missing_local = sorted(self._local - set(parties))
        if missing_local:
            raise ProtocolError(f"local parties {missing_local} are not parties of this run; parties: {list(parties)}")
        self._remote = frozenset(p for p in parties if p not in self._local)
        self._active = set(self._local)  # deadlock detection looks at the parties run here
        unknown = sorted(p for p in self._remote if p not in self._peers)
        if unknown:
            raise ProtocolError(
                f"no address for remote parties {unknown}: call set_peers({{name: (host, port)}}) "
                f"with the .address of the transport that hosts each of them"
            )
        self._remote_done: dict[str, str | None] = {}
        self._all_remote_done = asyncio.Event()
        if not self._remote:
            self._all_remote_done.set()
        self._claimed: set[str] = set()
        self._connection_errors: list[str] = []
        self._conn_writers: list[asyncio.StreamWriter] = []
        self._reader_tasks: set[asyncio.Task[None]] = set()
        self._fin_tasks: list[asyncio.Task[None]] = []
        self._writers: dict[tuple[str, int], tuple[asyncio.Lock, asyncio.StreamWriter]] = {}
        self._server = await asyncio.start_server(self._on_connect, sock=self._sock)
        for addr in sorted({self._peers[p] for p in self._remote}):
            writer = await self._connect(addr)
            self._writers[addr] = (asyncio.Lock(), writer)
            await self._write(addr, ("H", self.session, sorted(self._local)))
        self._running = True

    async def _connect(self, addr: tuple[str, int]) -> asyncio.StreamWriter:
        deadline = time.monotonic() + self.connect_timeout
        while True:
            try:
                _, writer = await asyncio.open_connection(*addr)
                return writer
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise ProtocolError(
                        f"cannot connect to peer at {addr[0]}:{addr[1]} within {self.connect_timeout}s: {exc}"
                    ) from exc
                await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ frames

    async def _write(self, addr: tuple[str, int], frame: Any) -> None:
        body = encode(frame)
        lock, writer = self._writers[addr]
        async with lock:
            try:
                writer.write(_LEN.pack(len(body)))
                writer.write(body)
                await writer.drain()
            except (ConnectionError, OSError) as exc:
                raise ProtocolError(f"lost the connection to peer {addr[0]}:{addr[1]}: {exc}") from exc

    async def _read_frame(self, reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
        try:
            head = await reader.readexactly(_LEN.size)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise ProtocolError("connection closed in the middle of a frame header") from None
            return None
        (length,) = _LEN.unpack(head)
        if length > self.max_message_bytes:
            raise ProtocolError(f"peer sent a {length}-byte frame; max_message_bytes is {self.max_message_bytes}")
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError:
            raise ProtocolError("connection closed in the middle of a frame") from None
        frame = decode(body)
        if not isinstance(frame, tuple) or not frame or not isinstance(frame[0], str):
            raise ProtocolError(f"malformed frame from peer: {type(frame).__name__}")
        return frame

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._reader_tasks.add(task)
        self._conn_writers.append(writer)
        hosted: list[str] = []
        reason = "closed its connection before it finished"
        try:
            hello = await self._read_frame(reader)
            if hello is None:
                return
            if (
                len(hello) != 3
                or hello[0] != "H"
                or not isinstance(hello[2], list)
                or not all(isinstance(p, str) for p in hello[2])
            ):
                raise ProtocolError(f"the first frame must be a hello; got {hello[0]!r}")
            if hello[1] != self.session:
                raise ProtocolError(f"peer is in session {hello[1]!r}, this transport in {self.session!r}")
            bad = [p for p in hello[2] if p not in self._remote or p in self._claimed]
            if bad or not hello[2]:
                raise ProtocolError(
                    f"peer claims parties {hello[2]}; expected remote parties of "
                    f"{sorted(self._remote)} not yet connected"
                )
            hosted = list(hello[2])
            self._claimed.update(hosted)
            while True:
                frame = await self._read_frame(reader)
                if frame is None:
                    break
                self._handle(frame, hosted)
        except PrivregError as exc:  # malformed frames or payloads (SerializationError, ProtocolError, ...)
            reason = f"broke the transport protocol ({exc})"
            self._connection_errors.append(str(exc))
        except (ConnectionError, OSError) as exc:
            reason = f"lost its connection ({exc})"
        except asyncio.CancelledError:  # stop() gave up waiting for this peer's end of stream
            reason = "was still connected when this process stopped"
        finally:
            for party in hosted:
                self._mark_remote_done(party, reason)
            writer.close()
            if task is not None:
                self._reader_tasks.discard(task)

    def _handle(self, frame: tuple[Any, ...], hosted: list[str]) -> None:
        kind = frame[0]
        if kind == "M" and len(frame) == 5:
            _, step, sender, receiver, data = frame
            if not (isinstance(step, str) and isinstance(data, bytes)):
                raise ProtocolError("malformed message frame")
            if sender not in hosted or sender in self._remote_done:
                raise ProtocolError(f"message from {sender!r}, which this connection does not (or no longer) host")
            if receiver not in self._local:
                raise ProtocolError(f"message for {receiver!r}, which is not hosted here")
            self._deliver(sender=sender, receiver=receiver, step=step, data=data)
        elif kind == "F" and len(frame) == 3:
            _, party, failure = frame
            if party not in hosted or not (failure is None or isinstance(failure, str)):
                raise ProtocolError(f"finish notice for {party!r}, which this connection does not host")
            self._mark_remote_done(party, failure if failure is None else f"failed: {failure}")
        else:
            raise ProtocolError(f"unknown frame kind {kind!r}")

    def _mark_remote_done(self, party: str, reason: str | None) -> None:
        if party in self._remote_done:
            return
        self._remote_done[party] = reason
        for receiver, (sender, fut) in list(self._waiting.items()):
            if sender == party and not self._queues[(sender, receiver)] and not fut.done():
                del self._waiting[receiver]
                fut.set_exception(DeadlockError(self._gone(receiver, party)))
        if self._remote <= set(self._remote_done):
            self._all_remote_done.set()
        self._check_deadlock()

    def _gone(self, receiver: str, sender: str) -> str:
        reason = self._remote_done[sender]
        how = "finished" if reason is None else reason
        return f"deadlock: {receiver} waits for {sender}, a remote party that {how} without sending it"

    # ------------------------------------------------------------------ transport API

    def _may_still_send(self, party: str) -> bool:
        return party in self._remote and party not in self._remote_done

    async def send(self, *, sender: str, receiver: str, step: str, payload: Any) -> None:
        self._known(sender, "sender")
        self._known(receiver, "receiver")
        if sender not in self._local:
            raise ProtocolError(f"party {sender!r} is not hosted by this transport; it cannot send from here")
        if receiver in self._local:
            await super().send(sender=sender, receiver=receiver, step=step, payload=payload)
            return
        data = encode(payload)
        if len(data) > self.max_message_bytes:
            raise ProtocolError(f"message of {len(data)} bytes at step {step!r} exceeds max_message_bytes")
        self._seq += 1
        self.transcript.record(
            Message(
                seq=self._seq,
                step=step,
                sender=sender,
                receiver=receiver,
                size_bytes=len(data),
                ciphertexts=count_ciphertexts(payload),
                payload=decode(data) if self.keep_payloads else None,
            )
        )
        await self._write(self._peers[receiver], ("M", step, sender, receiver, data))

    async def recv(self, *, receiver: str, sender: str, step: str | None) -> Any:
        if receiver not in self._local:
            raise ProtocolError(f"party {receiver!r} is not hosted by this transport; it cannot receive here")
        return await super().recv(receiver=receiver, sender=sender, step=step)

    async def _wait(self, receiver: str, sender: str, fut: asyncio.Future[None]) -> None:
        if sender in self._remote_done and not fut.done():
            self._waiting.pop(receiver, None)
            raise DeadlockError(self._gone(receiver, sender))
        try:
            await asyncio.wait_for(fut, self.recv_timeout)
        except asyncio.TimeoutError:
            self._waiting.pop(receiver, None)
            extra = f"; connection errors: {self._connection_errors}" if self._connection_errors else ""
            raise ProtocolError(
                f"party {receiver!r} waited more than recv_timeout={self.recv_timeout}s for a message from "
                f"{sender!r}{extra}"
            ) from None

    def finished(self, party: str, error: BaseException | None = None) -> None:
        super().finished(party, error)
        if party in self._local and getattr(self, "_writers", None):
            failure = None if error is None else f"{type(error).__name__}: {error}"
            for addr in self._writers:
                self._fin_tasks.append(asyncio.ensure_future(self._write(addr, ("F", party, failure))))

    def close(self) -> None:
        """Release the listening socket of a transport that will not run."""
        if not self._used:
            self._sock.close()

    async def stop(self) -> None:
        if not hasattr(self, "_server"):  # start failed before listening
            self._sock.close()
            return
        await asyncio.gather(*self._fin_tasks, return_exceptions=True)
        for _, writer in self._writers.values():
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
        # keep reading until every remote party finished, so late messages to us do not fail their senders
        if getattr(self, "_running", False):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._all_remote_done.wait(), self.linger_timeout)
        self._server.close()
        for writer in self._conn_writers:
            writer.close()  # the readers see end of stream and return
        if self._reader_tasks:
            await asyncio.wait(list(self._reader_tasks), timeout=5.0)
        for task in list(self._reader_tasks):
            task.cancel()
        await asyncio.gather(*self._reader_tasks, return_exceptions=True)
        with contextlib.suppress(ConnectionError, OSError):
            await self._server.wait_closed()
