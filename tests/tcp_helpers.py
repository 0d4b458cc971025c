"""Shared helpers of the TCP transport tests: a toy protocol, transports wired to each
other, and a scripted fake peer (blocking sockets in threads) that speaks the wire format
of privreg.mpc.tcp by hand, to misbehave in ways a real transport never would."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import socket
import struct
import threading
import time

from privreg.core.protocol import Party, Protocol
from privreg.mpc.runtime import arun_protocol
from privreg.mpc.tcp import MESSAGE_OVERHEAD, META_LIMIT, PREAUTH_FRAME_LIMIT, TcpTransport
from privreg.mpc.tls import TlsConfig
from privreg.mpc.wire import decode, encode

HEAD = struct.Struct(">IQ")  # the documented frame header: meta length, data length
RUN_TAG = b"privreg.mpc.tcp run id v1\x00"  # the documented run-id domain tag
TLS_BUFFER = 256 * 1024  # asyncio's TLS read buffer per connection (CPython 3.11)
PER_CONN = 32 * 1024


def documented_bound(*, pending, message_limit, queued, remote_processes, tls):
    """The memory bound of privreg.mpc.tcp's module docstring."""
    t = TLS_BUFFER if tls else 0
    return pending * (PREAUTH_FRAME_LIMIT + t + PER_CONN) + remote_processes * (
        queued + 3 * message_limit + 3 * META_LIMIT + MESSAGE_OVERHEAD + 2 * (t + PER_CONN)
    )


class FnParty(Party):
    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    async def run(self, ch):
        return await self.fn(ch)


class FnProtocol(Protocol):
    name = "fn"
    caveats = "Test protocol; no security claims."

    def __init__(self, **roles):
        self._parties = [FnParty(n, f) for n, f in roles.items()]

    def parties(self):
        return self._parties

    def learns(self):
        return {p.name: "whatever it receives" for p in self._parties}


def tls_for(pki, party, **kw):
    return TlsConfig(certificate=pki[party]["certificate"], key=pki[party]["key"], ca=pki["ca"]["certificate"], **kw)


def wire(transports):
    """Tell every transport where every other transport's parties are."""
    for t in transports:
        t.set_peers({p: o.address for o in transports if o is not t for p in o._local})


async def run_all(proto, transports, timeout=30.0):
    return await asyncio.wait_for(
        asyncio.gather(*(arun_protocol(proto, transport=t) for t in transports), return_exceptions=True), timeout
    )


def frame(meta, data=b""):
    body = encode(meta)
    return HEAD.pack(len(body), len(data)) + body + data


def read_frame(sock):
    head = recv_exactly(sock, HEAD.size)
    meta_len, data_len = HEAD.unpack(head)
    meta = decode(recv_exactly(sock, meta_len))
    data = recv_exactly(sock, data_len) if data_len else b""
    return meta, data


def recv_exactly(sock, n):
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def run_id_of(parties, processes):
    """processes: [(hosted parties, nonce)] of every process of the run."""
    entries = sorted((sorted(h), n) for h, n in processes)
    return hashlib.sha256(RUN_TAG + encode((sorted(parties), entries))).digest()


class FakePeer:
    """Plays party ``party`` against one honest transport by hand, with blocking sockets:
    it connects to the honest process (hello, reads the ack) and accepts the honest
    process's connection (reads its hello, acks it), then ``script(sock, run_id)`` writes
    whatever it likes on its own connection. ``tls``: a TlsConfig (or None: plaintext)."""

    def __init__(self, party, parties, tls=None):
        self.party, self.parties, self.tls = party, sorted(parties), tls
        self.nonce = secrets.token_bytes(32)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(15)
        self.address = self.listener.getsockname()[:2]
        self.errors = []
        self.answer = None
        self._socks = []

    def _wrap(self, sock, server_side):
        if self.tls is None:
            return sock
        ctx = self.tls.server_context() if server_side else self.tls.client_context()
        return ctx.wrap_socket(sock, server_side=server_side)

    def _accept(self, delay):
        try:
            time.sleep(delay)
            conn, _ = self.listener.accept()
            conn.settimeout(15)
            conn = self._wrap(conn, True)
            self._socks.append(conn)
            meta, _ = read_frame(conn)
            self.their_nonce = meta[2]
            conn.sendall(frame(("A", self.nonce, [self.party])))
        except Exception as exc:  # noqa: BLE001 -- reported to the test
            self.errors.append(exc)

    def run(self, target, script, *, accept_delay=0.0):
        """Start both threads; returns them (join them when the honest side is done)."""

        def connector():
            try:
                sock = socket.create_connection(target, timeout=15)
                sock = self._wrap(sock, False)
                self._socks.append(sock)
                sock.sendall(frame(("H", 1, self.nonce, [self.party], self.parties)))
                self.answer, _ = read_frame(sock)
                if self.answer[0] != "A":
                    return
                acceptor.join()
                others = [p for p in self.parties if p != self.party]
                run_id = run_id_of(self.parties, [([self.party], self.nonce), (others, self.answer[1])])
                script(sock, run_id)
            except Exception as exc:  # noqa: BLE001 -- reported to the test
                self.errors.append(exc)

        acceptor = threading.Thread(target=self._accept, args=(accept_delay,), daemon=True)
        conn_thread = threading.Thread(target=connector, daemon=True)
        acceptor.start()
        conn_thread.start()
        return acceptor, conn_thread

    def close(self):
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()
        self.listener.close()


def honest(party, **kw):
    """A TcpTransport for ``party`` with short test timeouts (overridable)."""
    opts = dict(recv_timeout=10.0, connect_timeout=10.0, handshake_timeout=1.0, linger_timeout=2.0)
    opts.update(kw)
    return TcpTransport(local=[party], **opts)


__all__ = [
    "HEAD",
    "FakePeer",
    "FnProtocol",
    "documented_bound",
    "frame",
    "honest",
    "read_frame",
    "recv_exactly",
    "run_all",
    "run_id_of",
    "tls_for",
    "wire",
]
