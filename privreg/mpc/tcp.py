"""TCP transport: parties of one protocol run in separate processes (or machines).

:class:`TcpTransport` hosts some parties of a run in this process and reaches the others
over TCP, authenticated and encrypted with mutual TLS 1.3 (``tls=TlsConfig(...)``, see
:mod:`privreg.mpc.tls` and :mod:`privreg.mpc.certs`) or, for tests on loopback only, in
plaintext (``insecure_plaintext=True``); one of the two must be chosen. Each process that
hosts parties creates one transport, which binds its listening socket at construction
(``port=0`` picks a free port, read back from :attr:`TcpTransport.address`); the
processes exchange addresses out of band (:meth:`TcpTransport.set_peers`) and each calls
``privreg.mpc.arun_protocol(protocol, transport=...)`` (or ``run_protocol``). Messages
between two parties hosted in the same process stay in memory, exactly as with
:class:`~privreg.mpc.transport.InMemoryTransport`.

Handshake and identity: each process opens one connection to every other process. With
TLS both ends present a certificate chaining to the run's CA (and matching a pin, if
any); the connecting side checks that the process at peer P's address presents a
certificate naming P, and sends a hello ``("H", version, nonce, hosted parties, parties
of the run)``; the accepting side checks that the certificate names every party the
hello claims, that no other connection claimed them, and answers ``("A", nonce, hosted
parties)`` or ``("R", reason)`` (the connecting side then raises ProtocolError with the
reason). In plaintext mode the first connection to claim a party gets it.

Run id and replay protection: every process draws a fresh 32-byte nonce per run
(:func:`secrets.token_bytes`). :meth:`TcpTransport.start` returns only when every remote
process completed the handshake in both directions (within ``connect_timeout``); then
every process computes the same :attr:`TcpTransport.run_id` = SHA-256 of a domain tag,
the sorted party names and the sorted (hosted parties, nonce) of every process. Every
later frame carries the run id and a per-connection sequence number starting at 1: a
frame from another run, a duplicate or an out-of-order frame is refused, and breaks
that connection. Under TLS these travel inside the authenticated records, so a frame can
neither be replayed from an earlier run nor moved to another connection.

Wire format: a frame is a 12-byte header (4-byte big-endian length of ``meta``, 8-byte
length of ``data``), then ``meta``, a :mod:`privreg.mpc.wire` encoding of a tuple, then
``data`` (raw bytes). Run frames are messages ``("M", run_id, seq, step, sender,
receiver)`` with the encoded payload as ``data``, and one ``("F", run_id, seq, party,
failure)`` when a hosted party finishes (``failure`` is None, or the error as text).
Each connection is written by the process that opened it only, so the messages from
one sender to one receiver travel on one stream and arrive in order.

Resource bounds (every length is checked before anything is allocated for it):

- ``H`` = 4096 (:data:`PREAUTH_FRAME_LIMIT`): the largest frame before authentication
  (hello, ack); a larger length prefix closes the connection unread.
- ``L`` = the run's message limit: ``max_message_bytes`` if given, else the protocol's
  :meth:`~privreg.core.protocol.Protocol.max_message_bytes`, else 64 MiB
  (:data:`DEFAULT_MESSAGE_LIMIT`); in every case at most ``max_frame_bytes`` (default
  1 GiB, :data:`MAX_FRAME_LIMIT`), whatever the protocol says. ``M`` = 8 KiB
  (:data:`META_LIMIT`), the largest ``meta`` of a run frame. A larger message is refused
  by the sender; a larger length prefix from a peer breaks that connection before its
  payload is read. Per message kind the bound is tighter: once a frame's ``meta`` (at
  most ``M`` bytes) names its step, sender and receiver, a payload length above the
  protocol's :meth:`~privreg.core.protocol.Protocol.message_bound` for that kind (at
  most ``L``; the deployments derive both from the sizes declared in the run's options,
  see :mod:`privreg.mpc.deployment`) breaks the connection, with one error naming the
  peer party, the step, the declared length and the bound, before the payload is read.
  A payload above 1 MiB is read in chunks of 1 MiB, each allocated
  when the previous one is full: a peer that announces ``L`` bytes and sends fewer makes
  this process hold what it sent (plus one chunk), not ``L``.
- Steps: the step of a message is a name of at most 128 ASCII letters, digits, '-',
  '_', '.', '[' or ']' (:func:`~privreg.mpc.transport.check_step`); the sender refuses
  another, and a frame with another breaks the connection. ``meta`` is decoded without
  registered types (cheap whatever it holds), payloads within the caps of
  :mod:`privreg.mpc.wire` (values per message, keys per message).
- ``Q`` = ``max_queued_bytes`` (default ``4 * L``): received, unread messages per
  connection, each counted as its payload plus its ``meta`` plus ``O`` = 256 bytes
  (:data:`MESSAGE_OVERHEAD`, more than the Python objects that hold a queued message
  take: about 170 bytes), and at most ``K`` = ``max_queued_messages`` of them (default
  4096, :data:`DEFAULT_MAX_QUEUED_MESSAGES`). At either cap the transport stops reading
  that connection until a local party reads (TCP flow control then holds the sender);
  if none does within ``recv_timeout``, the connection fails. Messages are queued
  encoded and decoded once, when a local party reads them (then recorded in the
  transcript).
- ``P`` = ``max_pending_connections`` (default 32): connections that have not finished
  the TLS handshake and hello. When full, the oldest is closed to admit the newcomer, so
  idle or slow connections cannot lock a genuine peer out; at most ``P`` of them hold TLS
  state at once, each for at most ``handshake_timeout`` seconds. Once every remote party
  is in, the transport stops listening.

The memory the transport itself holds for its connections is at most::

    P * (H + T + C)  +  N * (Q + 3 * L + 3 * M + O + 2 * (T + C))

where ``N`` is the number of remote processes (each has one connection in, one out),
``T`` the TLS read buffer asyncio allocates per TLS connection (256 KiB on CPython 3.11;
0 in plaintext) and ``C`` = 32 KiB a generous per-connection allowance for the objects
of the connection. (``Q + L + M + O``: the queue, which one last message may overshoot;
``2 * L + 2 * M``: the frame being read and its copy, bounded by the bytes the peer
actually sent.) With the defaults and TLS, the pre-authentication term is about 9.1
MiB. Not counted: payloads once a local party has read them (they are the protocol's,
and decoding one builds at most the objects :mod:`privreg.mpc.wire` documents), what
the local parties send (in flight in the outgoing buffers until the peer reads), the
kernel's socket buffers and OpenSSL's own buffers (up to about 0.5 MiB per TLS
connection, outside the Python heap). Measured during a burst of 300 idle TLS
connections with the defaults: at most 9.35 MiB over 100 runs on a loaded machine,
within the 10.15 MiB this formula gives. A handshake is never started on a connection
that has already closed: asyncio would keep its TLS buffer until the handshake timeout,
so a burst of evictions used to hold more than ``P`` of them at once.

Transcripts: each process records the messages its local parties send, and those they
read; ``size_bytes`` is the length of the encoded payload (the framing is not counted),
the same as in memory, so the sender's and the receiver's transcript agree on every
message read. After :meth:`~TcpTransport.start`, :attr:`~TcpTransport.security`
(``"mtls"`` or ``"insecure-plaintext"``), :attr:`~TcpTransport.run_id` and
:attr:`~TcpTransport.peer_identities` (remote party -> SHA-256 fingerprint of the
certificate it presented, None in plaintext) describe the run's security for a
transcript file.

Failure handling: a party that waits for a message from a remote party that has finished
(or failed, or whose connection closed or broke the transport protocol) gets a
:class:`~privreg.core.errors.DeadlockError` that names the remote party and the cause; a
wait longer than ``recv_timeout`` raises :class:`~privreg.core.errors.ProtocolError`. A
cycle of waits across processes is only caught by that timeout.

Caveats:
    - With TLS, a network attacker still learns the size and timing of every message,
      which processes talk to each other, and the party names of the run (they are in
      the certificates); it can delay or cut connections (the run then fails).
    - ``insecure_plaintext=True`` gives no security at all: anyone who can reach the
      ports can read, forge, replay (within a run) and impersonate parties. For tests on
      loopback only.
    - A malicious peer with a valid certificate can send malformed messages or messages
      up to the bound of their kind (at most ``L``, so the memory bound above is
      reached; with a deployment ``L`` follows from the run's declared sizes), make a receiving
      party spend the decoding time :mod:`privreg.mpc.wire` documents (about 2 s of CPU
      per message at worst, blocking the event loop meanwhile), stall until
      ``recv_timeout``, and deviate from the protocol in any way: the protocols are
      secure against semi-honest parties only. The certificates decide who may take
      part; they do not make the parties honest.
    - One run per transport: create a new transport (and exchange addresses again) for
      every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import socket
import ssl
import struct
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from privreg.core import validation as v
from privreg.core.errors import DeadlockError, PrivregTypeError, PrivregValueError, ProtocolError
from privreg.mpc.tls import TlsConfig, san_fix
from privreg.mpc.transcript import Message, count_ciphertexts
from privreg.mpc.transport import (
    STEP_MAX_CHARS,
    InMemoryTransport,
    MessageBound,
    QueuedMessage,
    check_step,
    is_step,
    shown_step,
)
from privreg.mpc.wire import decode, encode, encode_buffer

__all__ = [
    "DEFAULT_MAX_QUEUED_MESSAGES",
    "DEFAULT_MESSAGE_LIMIT",
    "MAX_FRAME_LIMIT",
    "MESSAGE_OVERHEAD",
    "META_LIMIT",
    "PREAUTH_FRAME_LIMIT",
    "TcpTransport",
]

#: Largest frame accepted before a connection is authenticated (hello, ack).
PREAUTH_FRAME_LIMIT = 4096
#: Largest ``meta`` part (the encoded frame tuple, without payload) of a run frame: its
#: step is a short name and its party names fit in a hello (:data:`PREAUTH_FRAME_LIMIT`).
META_LIMIT = 8 * 1024
#: Message limit when neither the transport nor the protocol gives one.
DEFAULT_MESSAGE_LIMIT = 64 * 1024 * 1024
#: Default absolute cap on a message (``max_frame_bytes``), whatever the protocol says.
MAX_FRAME_LIMIT = 1024 * 1024 * 1024
#: Bytes a queued message counts against ``max_queued_bytes`` besides its payload and
#: ``meta`` (the Python objects that hold it: about 170 bytes measured).
MESSAGE_OVERHEAD = 256
#: Default cap on the received, unread messages per connection (``max_queued_messages``).
DEFAULT_MAX_QUEUED_MESSAGES = 4096
#: Seconds between two "waiting for party ..." notes (:attr:`TcpTransport.on_wait`).
WAIT_NOTE_SECONDS = 30.0

_HEAD = struct.Struct(">IQ")
_VERSION = 1
_RUN_TAG = b"privreg.mpc.tcp run id v1\x00"
_SPILL = 1024
_CHUNK = 1024 * 1024  # a large frame is read in chunks of this size, as its bytes arrive
_MAX_ERRORS = 16


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


def _clean(text: Any, limit: int = 300) -> str:
    """A peer-supplied reason, made printable and short."""
    s = text if isinstance(text, str) else "(no reason given)"
    s = "".join(c if c.isprintable() else "?" for c in s)
    return s if len(s) <= limit else s[:limit] + "..."


def _names(value: Any) -> list[str] | None:
    """``value`` as a sorted list of distinct valid party names, or None."""
    if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
        return None
    try:
        names = [v.check_name("party name", p) for p in value]
    except (PrivregTypeError, PrivregValueError):
        return None
    return sorted(names) if len(set(names)) == len(names) else None


def _forget_frames(exc: BaseException) -> None:
    """Clear the locals of the finished frames in ``exc``'s tracebacks: a failed TLS
    handshake leaves a reference cycle (future, exception, frame) that would keep
    asyncio's per-connection TLS buffer alive until the next garbage collection."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        with contextlib.suppress(RuntimeError):  # a frame still running cannot be cleared
            traceback.clear_frames(e.__traceback__)
        todo += [e.__cause__, e.__context__]


class _Refused(ProtocolError):
    """A connection that does not get in; the text is sent to the peer when possible."""


class _Retry(Exception):
    """A connection attempt that may succeed later (nothing listens yet, reset, timeout)."""


class _Conn(asyncio.BufferedProtocol):
    """One accepted connection, read into exact-size buffers; reading is paused whenever
    no frame is being read, so a peer can only make this process hold what it asked for."""

    def __init__(self, owner: TcpTransport) -> None:
        self._owner = owner
        self.transport: asyncio.BaseTransport | None = None
        self.peer = "an unknown address"
        self.task: asyncio.Task[None] | None = None
        self.hosted: list[str] = []
        self.queued = 0  # bytes counted against max_queued_bytes
        self.count = 0  # messages counted against max_queued_messages
        self.room = asyncio.Event()
        self.room.set()
        self._target: bytearray | None = None
        self._filled = 0
        self._spill = bytearray()
        self._scratch: bytearray | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self.securing = False  # during start_tls, self.transport is the raw one: do not pause it
        self.lost = False

    # -- asyncio protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._pause()
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = f"{peer[0]}:{peer[1]}"
        self._owner._accepted(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._target is None:  # data although nobody reads: keep a little, then pause
            self._scratch = bytearray(_SPILL)
            return memoryview(self._scratch)
        return memoryview(self._target)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._target is None:
            if self._scratch is not None:
                self._spill += self._scratch[:nbytes]
                self._scratch = None
            self._pause()
            if len(self._spill) > 16 * _SPILL:
                self.abort()
            return
        self._filled += nbytes
        if self._filled >= len(self._target):
            self._pause()
            self._wake()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self.lost = True
        self._wake()

    async def gone(self, rounds: int = 50) -> None:
        """Wait (a few loop iterations at most) until asyncio has closed this connection
        and released what it held for it (a TLS handshake's buffer included)."""
        for _ in range(rounds):
            t = self.transport
            if t is None or self.lost or (self.securing and t.get_protocol() is None):
                return
            await asyncio.sleep(0)

    # -- reading
    def _pause(self) -> None:
        t = self.transport
        if not self.securing and isinstance(t, asyncio.ReadTransport) and not t.is_closing():
            t.pause_reading()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def abort(self) -> None:
        t = self.transport
        if isinstance(t, asyncio.Transport):
            t.abort()
        elif t is not None:
            t.close()
        self._eof = True
        self._wake()

    async def read_exactly(self, n: int) -> bytes | None:
        """``n`` bytes; None at end of stream before the first byte. More than
        :data:`_CHUNK` bytes are read into chunks of that size, each allocated once the
        previous one is full: a peer that announces ``n`` bytes makes this process hold
        what it actually sent (plus one chunk), not ``n``."""
        if n <= _CHUNK:
            buf = await self._fill(bytearray(n), first=True)
            return None if buf is None else bytes(buf)
        chunks: list[bytearray] = []
        left = n
        while left:
            chunk = await self._fill(bytearray(min(_CHUNK, left)), first=not chunks)
            if chunk is None:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        chunks.clear()
        return data

    async def _fill(self, buf: bytearray, *, first: bool) -> bytearray | None:
        """``buf`` filled from the stream; None at end of stream before its first byte
        when ``first`` (the start of a read)."""
        n = len(buf)
        k = min(n, len(self._spill))
        buf[:k] = self._spill[:k]
        del self._spill[:k]
        self._target, self._filled = buf, k
        try:
            while self._filled < n:
                if self._eof:
                    if self._filled == 0 and first:
                        return None
                    raise ProtocolError("the connection closed in the middle of a frame")
                t = self.transport
                if isinstance(t, asyncio.ReadTransport):
                    t.resume_reading()
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
        finally:
            self._target, self._waiter = None, None
            self._pause()
        return buf

    def write(self, data: bytes) -> None:
        t = self.transport
        if isinstance(t, asyncio.WriteTransport) and not t.is_closing():
            t.write(data)


def _frame(meta: tuple[Any, ...], data_len: int = 0) -> bytes:
    """The header and ``meta`` of a frame whose ``data`` (``data_len`` bytes) follows."""
    body = encode(meta)
    return _HEAD.pack(len(body), data_len) + body


class _Out:
    """The connection this process opened to one peer process (write-only after the ack)."""

    def __init__(self, addr: tuple[str, int], writer: asyncio.StreamWriter, nonce: bytes, hosted: list[str]) -> None:
        self.addr = addr
        self.writer = writer
        self.nonce = nonce
        self.hosted = hosted
        self.fingerprint: str | None = None
        self.lock = asyncio.Lock()
        self.seq = 0


class TcpTransport(InMemoryTransport):
    """Hosts ``local`` parties here; reaches every other party at its ``peers`` address.

    Args:
        local: names of the parties that run in this process (at least one).
        peers: ``{party: (host, port)}`` for every party hosted elsewhere; may be given
            later with :meth:`set_peers` (before the run starts).
        host, port: where to listen; ``port=0`` picks a free port (see :attr:`address`).
        tls: mutual-TLS configuration (certificates); required unless
            ``insecure_plaintext=True``.
        insecure_plaintext: run without any security (loopback tests only; see the
            module caveats). Exactly one of ``tls`` and this must be given.
        keep_payloads: keep decoded payloads in the transcript (costs a second decode).
        recv_timeout: seconds a party may wait for one message before the run fails
            (also bounds a peer's stalled write and a full receive queue).
        connect_timeout: seconds for every process of the run to connect, both ways.
        handshake_timeout: seconds an incoming connection gets for its TLS handshake and
            hello, and an outgoing one for the handshake and the peer's answer.
        linger_timeout: seconds to wait, at the end, for remote parties to finish.
        max_message_bytes: the run's largest message (encoded payload), overriding the
            protocol's :meth:`~privreg.core.protocol.Protocol.max_message_bytes`
            (default: that, else 64 MiB); at most ``max_frame_bytes``.
        max_frame_bytes: absolute cap on the run's message limit, whatever the protocol
            says (default 1 GiB, :data:`MAX_FRAME_LIMIT`).
        max_queued_bytes: received, unread bytes buffered per peer connection before
            reading pauses (default: 4 x the message limit); a message counts its
            payload, its ``meta`` and :data:`MESSAGE_OVERHEAD` (256) bytes.
        max_queued_messages: received, unread messages per peer connection before
            reading pauses (default 4096, :data:`DEFAULT_MAX_QUEUED_MESSAGES`).
        max_pending_connections: connections allowed to be in their handshake at once;
            the oldest is dropped for a newcomer.

    Attributes (after :meth:`start`): ``security`` (``"mtls"`` or
    ``"insecure-plaintext"``, set at construction), ``run_id`` (hex str, equal at every
    process of the run), ``peer_identities`` (``{remote party: certificate fingerprint
    (SHA-256 hex) or None in plaintext}``), ``message_limit`` (bytes), ``address``.
    """

    #: Told (one line) while this process waits to reach a peer: at the first failed
    #: attempt, then every :data:`WAIT_NOTE_SECONDS`; the line names the party and address.
    on_wait: Callable[[str], None] | None = None

    def __init__(
        self,
        *,
        local: Sequence[str],
        peers: Mapping[str, tuple[str, int]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: TlsConfig | None = None,
        insecure_plaintext: bool = False,
        keep_payloads: bool = False,
        recv_timeout: float = 300.0,
        connect_timeout: float = 30.0,
        handshake_timeout: float = 10.0,
        linger_timeout: float = 30.0,
        max_message_bytes: int | None = None,
        max_queued_bytes: int | None = None,
        max_pending_connections: int = 32,
        max_frame_bytes: int = MAX_FRAME_LIMIT,
        max_queued_messages: int = DEFAULT_MAX_QUEUED_MESSAGES,
    ) -> None:
        if isinstance(local, str) or not isinstance(local, Sequence):
            raise PrivregTypeError(
                f"local must be a sequence of party names; got {local!r}. Pass e.g. local=['alice']."
            )
        names = [v.check_name("local party name", n) for n in local]
        if not names or len(set(names)) != len(names):
            raise PrivregValueError(f"local must name at least one party, each once; got {list(local)!r}.")
        if tls is not None and not isinstance(tls, TlsConfig):
            raise PrivregTypeError(
                f"tls must be a privreg.mpc.tls.TlsConfig; got {type(tls).__name__}. "
                f"Pass tls=TlsConfig(certificate=..., key=..., ca=...)."
            )
        if not isinstance(insecure_plaintext, bool):
            raise PrivregTypeError(f"insecure_plaintext must be a bool; got {insecure_plaintext!r}.")
        if tls is None and not insecure_plaintext:
            raise PrivregValueError(
                "TcpTransport needs a security choice: pass tls=TlsConfig(certificate=..., key=..., ca=...) "
                "(mutual TLS between the parties' processes), or insecure_plaintext=True for loopback tests only."
            )
        if tls is not None and insecure_plaintext:
            raise PrivregValueError(
                "TcpTransport got both tls=... and insecure_plaintext=True; pass only one "
                "(tls for real runs, insecure_plaintext=True for loopback tests)."
            )
        v.check_int("port", port, minimum=0)
        self._local = frozenset(names)
        self._tls = tls
        self.security = "mtls" if tls is not None else "insecure-plaintext"
        self.recv_timeout = _positive_seconds("recv_timeout", recv_timeout)
        self.connect_timeout = _positive_seconds("connect_timeout", connect_timeout)
        self.handshake_timeout = _positive_seconds("handshake_timeout", handshake_timeout)
        self.linger_timeout = _positive_seconds("linger_timeout", linger_timeout)
        self.max_message_bytes = (
            None if max_message_bytes is None else v.check_int("max_message_bytes", max_message_bytes, minimum=1)
        )
        self.max_frame_bytes = v.check_int("max_frame_bytes", max_frame_bytes, minimum=1)
        if self.max_message_bytes is not None and self.max_message_bytes > self.max_frame_bytes:
            raise PrivregValueError(
                f"max_message_bytes={self.max_message_bytes} is above max_frame_bytes={self.max_frame_bytes}, the "
                f"transport's absolute cap on a message; raise max_frame_bytes too, or pass a smaller limit."
            )
        self.max_queued_bytes = (
            None if max_queued_bytes is None else v.check_int("max_queued_bytes", max_queued_bytes, minimum=1)
        )
        self.max_queued_messages = v.check_int("max_queued_messages", max_queued_messages, minimum=1)
        self.max_pending_connections = v.check_int("max_pending_connections", max_pending_connections, minimum=1)
        self.run_id: str | None = None
        self.peer_identities: dict[str, str | None] = {}
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

    async def start(
        self,
        parties: Sequence[str],
        *,
        max_message_bytes: int | None = None,
        message_bound: MessageBound | None = None,
    ) -> None:
        if self._used:
            raise ProtocolError("a TcpTransport serves one run; create a new transport for the next run")
        self._used = True
        try:
            await self._start(parties, max_message_bytes, message_bound)
        except BaseException:
            await self.stop()
            raise

    def _check_own_certificate(self) -> None:
        if self._tls is None:
            return
        own = self._tls.own_parties()
        missing = sorted(self._local - own)
        if missing:
            named = ", ".join(repr(p) for p in sorted(own)) or "no party (no urn:privreg:party: SAN URI)"
            raise ProtocolError(
                f"this process hosts {missing}, but its certificate {str(self._tls.certificate)!r} names "
                f"{named}; {san_fix(missing)}"
            )

    async def _start(self, parties: Sequence[str], protocol_limit: int | None, bound: MessageBound | None) -> None:
        await super().start(parties, max_message_bytes=protocol_limit, message_bound=bound)
        limit = min(self.max_message_bytes or self.message_limit or DEFAULT_MESSAGE_LIMIT, self.max_frame_bytes)
        self.message_limit = limit
        self._frame_limit = limit
        self._queue_limit = self.max_queued_bytes or 4 * limit
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
        if self._tls is not None:
            self._tls.check_remote_parties(self._remote)
            self._check_own_certificate()
        self._nonce = secrets.token_bytes(32)
        self._run_bytes = b""
        self._remote_done: dict[str, str | None] = {}
        self._all_remote_done = asyncio.Event()
        self._ready = asyncio.Event()
        self._all_claimed = asyncio.Event()
        self._claims: dict[str, tuple[_Conn, bytes, str | None]] = {}  # party -> (conn, nonce, fingerprint)
        self._pending: dict[_Conn, None] = {}  # insertion-ordered: the oldest first
        self._slots = asyncio.Semaphore(self.max_pending_connections)
        self._conns: set[_Conn] = set()
        self._refusals: list[str] = []
        self._connection_errors: list[str] = []
        self._fin_tasks: list[asyncio.Task[None]] = []
        self._outs: dict[tuple[str, int], _Out] = {}
        if not self._remote:
            self._all_remote_done.set()
            self._all_claimed.set()
        loop = asyncio.get_running_loop()
        self._server: asyncio.AbstractServer | None = await loop.create_server(lambda: _Conn(self), sock=self._sock)
        self._server_ctx = self._tls.server_context() if self._tls is not None else None
        self._client_ctx = self._tls.client_context() if self._tls is not None else None
        deadline = time.monotonic() + self.connect_timeout
        by_addr: dict[tuple[str, int], list[str]] = {}
        for p in sorted(self._remote):
            by_addr.setdefault(self._peers[p], []).append(p)
        tasks = [asyncio.ensure_future(self._connect(addr, ps, deadline)) for addr, ps in sorted(by_addr.items())]
        try:
            for fut in asyncio.as_completed(tasks):
                out = await fut
                self._outs[out.addr] = out
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await asyncio.wait_for(self._all_claimed.wait(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            missing = sorted(self._remote - set(self._claims))
            refused = f"; refused connections: {self._refusals[-3:]}" if self._refusals else ""
            raise ProtocolError(
                f"remote parties {missing} did not connect to this process within connect_timeout="
                f"{self.connect_timeout}s{refused}"
            ) from None
        self._finish_barrier()

    def _finish_barrier(self) -> None:
        """Every remote process is in, both ways: check they agree, compute the run id."""
        processes = [(sorted(self._local), self._nonce)]
        for out in self._outs.values():
            for p in out.hosted:
                conn, nonce, fp = self._claims[p]
                if nonce != out.nonce:
                    raise ProtocolError(
                        f"two different processes answer for party {p!r}: the one at {out.addr[0]}:{out.addr[1]} "
                        f"and the one that connected from {conn.peer}; a process may be impersonating {p!r}"
                    )
                if fp is not None and out.fingerprint is not None and fp != out.fingerprint:
                    raise ProtocolError(
                        f"party {p!r} presented two different certificates ({out.fingerprint} at "
                        f"{out.addr[0]}:{out.addr[1]}, {fp} from {conn.peer})"
                    )
            processes.append((list(out.hosted), out.nonce))
        self._run_bytes = hashlib.sha256(_RUN_TAG + encode((sorted(self._parties), sorted(processes)))).digest()
        self.run_id = self._run_bytes.hex()
        self.peer_identities = {p: self._claims[p][2] for p in sorted(self._remote)}
        self._running = True
        self._ready.set()
        if self._server is not None:  # everyone is in: nobody else needs to connect
            self._server.close()
        for conn in list(self._pending):
            conn.abort()

    # ------------------------------------------------------------------ connecting out

    async def _connect(self, addr: tuple[str, int], parties: list[str], deadline: float) -> _Out:
        last: BaseException | None = None
        who = f"{'party' if len(parties) == 1 else 'parties'} {', '.join(map(repr, parties))} at {addr[0]}:{addr[1]}"
        note_due = 0.0
        while True:
            try:
                return await self._try_connect(addr, parties)
            except _Retry as exc:
                last = exc.__cause__ or exc
            now = time.monotonic()
            if self.on_wait is not None and now >= note_due:  # the first failure is always told
                note_due = now + WAIT_NOTE_SECONDS
                left = f"{max(0.0, deadline - now):.0f} s left of connect_timeout={self.connect_timeout:g}s"
                self.on_wait(f"waiting for {who} ({left})")
            if now >= deadline:
                why = f"{type(last).__name__}: {last}" if last is not None else "no answer"
                raise ProtocolError(
                    f"cannot connect to {who} within connect_timeout={self.connect_timeout}s ({why}); start that "
                    f"party's process, or check its address in [peers] and the firewall"
                ) from last
            await asyncio.sleep(0.05)

    async def _try_connect(self, addr: tuple[str, int], parties: list[str]) -> _Out:
        where = f"the peer at {addr[0]}:{addr[1]}"
        ctx = self._client_ctx
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    addr[0],
                    addr[1],
                    ssl=ctx,
                    ssl_handshake_timeout=self.handshake_timeout if ctx is not None else None,
                ),
                self.handshake_timeout + 1.0,
            )
        except ssl.SSLCertVerificationError as exc:
            raise ProtocolError(
                f"{where} presented a certificate this process does not trust ({exc.verify_message}); "
                f"check that both processes use the run's CA (or pins)"
            ) from None
        except ssl.SSLError as exc:
            if isinstance(exc, ssl.SSLEOFError):
                raise _Retry from exc
            raise ProtocolError(f"TLS with {where} failed ({exc.reason or exc})") from None
        except (TimeoutError, OSError) as exc:
            raise _Retry from exc
        try:
            fingerprint = None
            if self._tls is not None:
                fingerprint = self._tls.check_peer(
                    writer.get_extra_info("ssl_object"), parties, where=where
                ).fingerprint
            hello = ("H", _VERSION, self._nonce, sorted(self._local), sorted(self._parties))
            writer.write(_frame(hello))
            answer = await asyncio.wait_for(self._read_answer(reader, where), self.handshake_timeout)
        except ssl.SSLError as exc:
            writer.close()
            if isinstance(exc, ssl.SSLEOFError):
                raise _Retry from exc
            raise ProtocolError(f"{where} refused this process's TLS certificate ({exc.reason or exc})") from None
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            writer.close()
            raise _Retry from exc
        except BaseException:
            writer.close()
            raise
        if answer[0] == "R":
            writer.close()
            raise ProtocolError(f"{where} refused this process: {_clean(answer[1] if len(answer) > 1 else None)}")
        nonce, hosted = answer[1], _names(answer[2])
        if hosted != sorted(parties):
            writer.close()
            raise ProtocolError(f"{where} hosts {hosted}, but set_peers maps {sorted(parties)} to it")
        out = _Out(addr, writer, nonce, hosted)
        out.fingerprint = fingerprint
        return out

    async def _read_answer(self, reader: asyncio.StreamReader, where: str) -> tuple[Any, ...]:
        meta_len, data_len = _HEAD.unpack(await reader.readexactly(_HEAD.size))
        if meta_len > PREAUTH_FRAME_LIMIT or data_len:
            raise ProtocolError(f"{where} answered the hello with a malformed frame")
        ans = decode(await reader.readexactly(meta_len), registered_types=False)
        ok = (
            isinstance(ans, tuple)
            and ans
            and (
                (ans[0] == "A" and len(ans) == 3 and isinstance(ans[1], bytes) and len(ans[1]) == 32)
                or (ans[0] == "R" and len(ans) == 2)
            )
        )
        if not ok:
            raise ProtocolError(f"{where} answered the hello with something other than an ack or a refusal")
        return tuple(ans)

    # ------------------------------------------------------------------ accepting

    def _accepted(self, conn: _Conn) -> None:
        if self._ready.is_set():
            conn.abort()
            return
        while len(self._pending) >= self.max_pending_connections:
            oldest = next(iter(self._pending))
            del self._pending[oldest]
            self._refuse_note(f"{oldest.peer}: dropped for a newer connection (max_pending_connections)")
            oldest.abort()
            if oldest.task is not None:
                oldest.task.cancel()
        self._pending[conn] = None
        self._conns.add(conn)
        conn.task = asyncio.ensure_future(self._serve(conn))

    def _refuse_note(self, text: str) -> None:
        self._refusals.append(text)
        del self._refusals[:-_MAX_ERRORS]

    async def _read_frame(
        self,
        conn: _Conn,
        *,
        meta_limit: int,
        data_limit: int,
        check: Callable[[tuple[Any, ...], int], None] | None = None,
    ) -> tuple[tuple[Any, ...], bytes, int] | None:
        """The next frame (``meta``, ``data``, the length of the encoded ``meta``), or None
        at end of stream. ``meta`` is decoded without registered types: cheap, whatever
        the peer put in it; ``check(meta, data length)`` then runs before the payload is
        read (and may refuse it)."""
        head = await conn.read_exactly(_HEAD.size)
        if head is None:
            return None
        meta_len, data_len = _HEAD.unpack(head)
        if meta_len > meta_limit or data_len > data_limit:
            who = f"party {', '.join(map(repr, conn.hosted))}" if conn.hosted else f"the peer at {conn.peer}"
            raise ProtocolError(
                f"{who} declared a frame of {meta_len} + {data_len} bytes, above the limit of {meta_limit} + "
                f"{data_limit} (frame header and payload; the payload limit is the largest message of any kind "
                f"this run's declared sizes allow); refused unread"
            )
        body = await conn.read_exactly(meta_len)
        if body is None:
            raise ProtocolError("the connection closed in the middle of a frame")
        meta = decode(body, registered_types=False)
        del body
        if not isinstance(meta, tuple) or not meta or not isinstance(meta[0], str):
            raise ProtocolError("malformed frame: its header is not a tuple starting with a kind")
        if check is not None:
            check(meta, data_len)
        data = b""
        if data_len:
            got = await conn.read_exactly(data_len)
            if got is None:
                raise ProtocolError("the connection closed in the middle of a frame")
            data = got
        return meta, data, meta_len

    async def _serve(self, conn: _Conn) -> None:
        """Authenticate one incoming connection, then read its run frames."""
        try:
            await self._slots.acquire()  # at most P connections hold TLS state before authentication
        except asyncio.CancelledError:
            self._pending.pop(conn, None)
            self._conns.discard(conn)
            conn.abort()
            return
        ok = False
        try:
            ok = await self._admit(conn)
        finally:
            if not ok:
                self._conns.discard(conn)  # forget it: a flood of connections must not accumulate
                conn.abort()
                with contextlib.suppress(asyncio.CancelledError):
                    await conn.gone()  # the slot is free once asyncio has dropped the TLS state
            self._slots.release()
        if ok:
            await self._read_run(conn)

    async def _admit(self, conn: _Conn) -> bool:
        """Whether ``conn`` completed the TLS handshake and an accepted hello in time."""
        try:
            await asyncio.wait_for(self._authenticate(conn), self.handshake_timeout)
            return True
        except TimeoutError as exc:
            _forget_frames(exc)
            self._pending.pop(conn, None)
            self._refuse_note(f"{conn.peer}: no TLS handshake and hello within {self.handshake_timeout}s")
        except asyncio.CancelledError as exc:  # evicted for a newer connection, or the transport stops
            _forget_frames(exc)
            self._pending.pop(conn, None)
        except Exception as exc:  # noqa: BLE001 -- an unauthenticated peer must not fail the run
            _forget_frames(exc)
            self._pending.pop(conn, None)
            self._refuse_note(f"{conn.peer}: {type(exc).__name__}: {exc}")
            if isinstance(exc, ProtocolError) and conn.transport is not None:
                with contextlib.suppress(Exception):
                    conn.write(_frame(("R", str(exc))))
        return False

    async def _authenticate(self, conn: _Conn) -> None:
        fingerprint: str | None = None
        ssl_object = None
        if self._server_ctx is not None:
            loop = asyncio.get_running_loop()
            t = conn.transport
            if not isinstance(t, asyncio.Transport):
                raise ProtocolError("the connection has no transport to secure")
            if conn.lost or t.is_closing():
                # start_tls on a closed transport would start a handshake nobody can
                # finish: its TLS buffer would live until ssl_handshake_timeout
                raise ProtocolError("the connection closed before its TLS handshake")
            conn.securing = True  # data right after the handshake spills (bounded) until we can pause
            new = await loop.start_tls(
                t, conn, self._server_ctx, server_side=True, ssl_handshake_timeout=self.handshake_timeout
            )
            if new is None:
                raise ProtocolError("the TLS handshake did not complete")
            conn.transport = new
            conn.securing = False
            conn._pause()
            ssl_object = new.get_extra_info("ssl_object")
        got = await self._read_frame(conn, meta_limit=PREAUTH_FRAME_LIMIT, data_limit=0)
        if got is None:
            raise ProtocolError("the connection closed before its hello")
        hello = got[0]
        if not (len(hello) == 5 and hello[0] == "H"):
            raise _Refused("the first frame must be a hello")
        if hello[1] != _VERSION:
            version = hello[1] if isinstance(hello[1], int) and abs(hello[1]) < 10**6 else "(not shown)"
            raise _Refused(f"hello of protocol version {version}; this process speaks {_VERSION}")
        nonce, hosted, theirs = hello[2], _names(hello[3]), _names(hello[4])
        if not (isinstance(nonce, bytes) and len(nonce) == 32) or hosted is None or theirs is None:
            raise _Refused("malformed hello")
        if theirs != sorted(self._parties):
            raise _Refused(f"the connecting process runs parties {theirs}, this process {sorted(self._parties)}")
        if self._tls is not None:
            fingerprint = self._tls.check_peer(ssl_object, hosted, where="the connecting process").fingerprint
        if not set(hosted) <= self._remote:
            raise _Refused(
                f"the connecting process claims {hosted}; the remote parties of this process are {sorted(self._remote)}"
            )
        taken = sorted(p for p in hosted if p in self._claims)
        if taken:
            raise _Refused(f"parties {taken} are already connected; a party can be claimed once")
        # authenticated
        self._pending.pop(conn, None)
        conn.hosted = hosted
        for p in hosted:
            self._claims[p] = (conn, nonce, fingerprint)
        conn.write(_frame(("A", self._nonce, sorted(self._local))))
        if self._remote <= set(self._claims):
            self._all_claimed.set()

    async def _read_run(self, conn: _Conn) -> None:
        reason = "whose connection closed before it finished"
        try:
            await self._ready.wait()
            expected = 1
            while True:
                if self._queue_full(conn):  # backpressure: no reading until a local party reads
                    conn.room.clear()
                    try:
                        await asyncio.wait_for(conn.room.wait(), self.recv_timeout)
                    except TimeoutError:
                        raise ProtocolError(
                            f"its unread messages stayed at max_queued_bytes={self._queue_limit} or "
                            f"max_queued_messages={self.max_queued_messages} for recv_timeout={self.recv_timeout}s"
                        ) from None
                frame = await self._read_frame(
                    conn,
                    meta_limit=META_LIMIT,
                    data_limit=self._frame_limit,
                    check=lambda meta, size: self._check_header(conn, meta, size),
                )
                if frame is None:
                    break
                meta, data, meta_len = frame
                if len(meta) < 3 or not isinstance(meta[1], bytes):
                    raise ProtocolError("malformed run frame")
                if meta[1] != self._run_bytes:
                    raise ProtocolError("frame from another run (its run id differs: a replay or a stale peer)")
                seq = meta[2]
                if not isinstance(seq, int) or isinstance(seq, bool) or not 0 < seq < 2**63:
                    raise ProtocolError("malformed run frame: no sequence number")
                if seq < expected:
                    raise ProtocolError(f"duplicate frame seq {seq}")
                if seq > expected:
                    raise ProtocolError(f"out-of-order frame: expected seq {expected}, got {seq}")
                expected += 1
                self._handle(conn, meta, data, meta_len)
        except asyncio.CancelledError:  # stop() gave up waiting for this peer's end of stream
            reason = "whose connection was still open when this process stopped"
        except ProtocolError as exc:
            reason = f"whose connection broke the transport protocol ({type(exc).__name__}: {exc})"
            self._note_error(conn, exc)
        except (ConnectionError, OSError) as exc:
            reason = f"whose connection was lost ({type(exc).__name__}: {exc})"
        except Exception as exc:  # noqa: BLE001 -- a decoder bug or a hostile frame: report it as the cause
            reason = f"whose connection broke the transport protocol ({type(exc).__name__}: {exc})"
            self._note_error(conn, exc)
        finally:
            for party in conn.hosted:
                self._mark_remote_done(party, reason)
            conn.abort()

    def _note_error(self, conn: _Conn, exc: BaseException) -> None:
        self._connection_errors.append(f"{conn.hosted}: {type(exc).__name__}: {exc}")
        del self._connection_errors[:-_MAX_ERRORS]

    def _queue_full(self, conn: _Conn) -> bool:
        return conn.queued >= self._queue_limit or conn.count >= self.max_queued_messages

    def _check_header(self, conn: _Conn, meta: tuple[Any, ...], size: int) -> None:
        """Refuse a run frame whose payload (``size`` bytes, not read yet) is above the
        bound of its message kind (:meth:`bound_for`), or that carries a payload although
        its kind has none."""
        if meta[0] != "M" or len(meta) != 6:
            if size:
                raise ProtocolError(f"a frame of kind {_clean(meta[0], 8)!r} declared a payload; refused unread")
            return
        step, sender, receiver = meta[3:]
        if not is_step(step) or sender not in conn.hosted or receiver not in self._local:
            return  # refused by _handle, with its own message, before the payload is used
        bound = self.bound_for(sender, receiver, step)
        if bound is not None and size > bound:
            raise ProtocolError(
                f"party {sender!r} declared a {size}-byte message to {receiver!r} at step {step!r}, above this run's "
                f"bound of {bound} bytes for that message kind (the protocol's message_bound(), from the sizes "
                f"declared in the run's options); refused unread"
            )

    def _handle(self, conn: _Conn, meta: tuple[Any, ...], data: bytes, meta_len: int) -> None:
        kind = meta[0]
        if kind == "M" and len(meta) == 6:
            _, _, _, step, sender, receiver = meta
            if not is_step(step):
                raise ProtocolError(
                    f"a message frame's step must be a name of 1 to {STEP_MAX_CHARS} ASCII letters, digits, '-', "
                    f"'_', '.', '[' or ']'; got {shown_step(step)}"
                )
            if sender not in conn.hosted or sender in self._remote_done:
                raise ProtocolError("message from a party this connection does not (or no longer) host")
            if receiver not in self._local:
                raise ProtocolError("message for a party that is not hosted here")
            if receiver not in self._active:
                return  # the receiver has finished: nobody will read it
            cost = len(data) + meta_len + MESSAGE_OVERHEAD
            conn.queued += cost
            conn.count += 1
            self._enqueue(sender, receiver, QueuedMessage(step, data=data, source=conn, cost=cost))
        elif kind == "F" and len(meta) == 5 and not data:
            _, _, _, party, failure = meta
            if party not in conn.hosted or not (failure is None or isinstance(failure, str)):
                raise ProtocolError("finish notice for a party this connection does not host")
            self._mark_remote_done(party, "that finished" if failure is None else f"that failed: {_clean(failure)}")
        else:
            raise ProtocolError("unknown frame kind")

    def _dequeued(self, item: QueuedMessage) -> None:
        conn = item.source
        if isinstance(conn, _Conn) and item.cost:
            conn.queued -= item.cost
            conn.count -= 1
            item.cost = 0
            if not self._queue_full(conn):
                conn.room.set()

    def _unpack(self, sender: str, receiver: str, item: QueuedMessage) -> Any:
        data = item.data
        if data is None:  # from a party hosted here
            return item.payload
        item.data = None
        try:
            payload = decode(data)
        except Exception as exc:
            raise ProtocolError(
                f"the message from {sender!r} to {receiver!r} at step {shown_step(item.step)} cannot be decoded "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        self._seq += 1
        self.transcript.record(
            Message(
                seq=self._seq,
                step=item.step,
                sender=sender,
                receiver=receiver,
                size_bytes=len(data),
                ciphertexts=count_ciphertexts(payload),
                payload=decode(data) if self.keep_payloads else None,
            )
        )
        return payload

    def _mark_remote_done(self, party: str, reason: str) -> None:
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
        # Not a deadlock of the protocol: the peer stopped, and its reason is the cause.
        return f"{receiver} waits for {sender}, a remote party {self._remote_done[sender]} without sending it"

    # ------------------------------------------------------------------ writing

    async def _send_frame(self, out: _Out, kind: str, fields: tuple[Any, ...], data: bytes | bytearray = b"") -> None:
        """Number the next frame of ``out`` and write it (tests override this to misbehave)."""
        async with out.lock:
            out.seq += 1
            await self._write_raw(out, (kind, self._run_bytes, out.seq, *fields), data)

    async def _write_raw(self, out: _Out, meta: tuple[Any, ...], data: bytes | bytearray) -> None:
        writer = out.writer
        try:
            writer.write(_frame(meta, len(data)))
            if data:
                writer.write(memoryview(data))  # asyncio slices what the socket did not take: a view, not a copy
            await asyncio.wait_for(writer.drain(), self.recv_timeout)
        except TimeoutError:
            raise ProtocolError(
                f"peer {out.addr[0]}:{out.addr[1]} accepted no data for recv_timeout={self.recv_timeout}s"
            ) from None
        except (ConnectionError, OSError) as exc:
            raise ProtocolError(f"lost the connection to peer {out.addr[0]}:{out.addr[1]}: {exc}") from exc

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
        check_step(step)
        data = encode_buffer(payload)
        self._check_size(sender, receiver, step, len(data))
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
        await self._send_frame(self._outs[self._peers[receiver]], "M", (step, sender, receiver), data)

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
        except TimeoutError:
            self._waiting.pop(receiver, None)
            extra = f"; connection errors: {self._connection_errors}" if self._connection_errors else ""
            raise ProtocolError(
                f"party {receiver!r} waited more than recv_timeout={self.recv_timeout}s for a message from "
                f"{sender!r}{extra}"
            ) from None

    def finished(self, party: str, error: BaseException | None = None) -> None:
        super().finished(party, error)
        if party not in self._local or not getattr(self, "_running", False):
            return
        for (_sender, receiver), queue in self._queues.items():  # nobody will read these: free them
            if receiver == party:
                while queue:
                    self._dequeued(queue.popleft())
        # the notice must fit in META_LIMIT; the receiver shows 300 characters of it
        failure = None if error is None else _clean(f"{type(error).__name__}: {error}", 1000)
        for out in self._outs.values():
            self._fin_tasks.append(asyncio.ensure_future(self._send_frame(out, "F", (party, failure))))

    def close(self) -> None:
        """Release the listening socket of a transport that will not run."""
        if not self._used:
            self._sock.close()

    async def stop(self) -> None:
        if getattr(self, "_server", None) is None:  # start failed before listening
            self._sock.close()
            return
        await asyncio.gather(*self._fin_tasks, return_exceptions=True)
        for out in self._outs.values():
            out.writer.close()
        for out in self._outs.values():
            with contextlib.suppress(ConnectionError, OSError, asyncio.TimeoutError, ssl.SSLError):
                await asyncio.wait_for(out.writer.wait_closed(), self.handshake_timeout)
        # keep reading until every remote party finished, so late messages to us do not fail their senders
        if getattr(self, "_running", False):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._all_remote_done.wait(), self.linger_timeout)
        server = self._server
        if server is not None:
            server.close()
        tasks = [c.task for c in self._conns if c.task is not None]
        for conn in self._conns:
            conn.abort()  # the readers see end of stream and return
        if not self._ready.is_set():  # the run never started: readers still wait for it
            for task in tasks:
                task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if server is not None:
            with contextlib.suppress(ConnectionError, OSError):
                await server.wait_closed()
