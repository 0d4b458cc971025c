"""privreg.mpc: the runtime of multi-party protocols.

The protocol interface (:class:`~privreg.core.protocol.Protocol`, ``Party``, ``Channel``)
lives in the core; this package runs protocols and carries their messages:

- :mod:`~privreg.mpc.runtime`: :func:`run_protocol` / :func:`arun_protocol` and
  :class:`ProtocolResult`.
- :mod:`~privreg.mpc.transport`: the :class:`Transport` interface and
  :class:`InMemoryTransport` (every party in one event loop, with deadlock detection).
- :mod:`~privreg.mpc.tcp`: :class:`TcpTransport`, parties in separate processes or machines,
  over mutual TLS (:mod:`~privreg.mpc.tls`: :class:`TlsConfig`; test certificates with
  :mod:`~privreg.mpc.certs`, which needs the ``cryptography`` package and is imported
  only when used).
- :mod:`~privreg.mpc.transcript`: :class:`Transcript` of messages, bytes and ciphertexts.
- :mod:`~privreg.mpc.wire`: the safe binary codec of messages and its type registry.

Importing :mod:`privreg` does not import this package (nor asyncio or socket).
"""

from privreg.mpc.runtime import ProtocolResult, TransportChannel, arun_protocol, run_protocol
from privreg.mpc.tcp import TcpTransport
from privreg.mpc.tls import TlsConfig
from privreg.mpc.transcript import Message, Traffic, Transcript, count_ciphertexts
from privreg.mpc.transport import InMemoryTransport, Transport
from privreg.mpc.wire import decode, encode, encoded_size, register_type

__all__ = [
    "InMemoryTransport",
    "Message",
    "ProtocolResult",
    "TcpTransport",
    "TlsConfig",
    "Traffic",
    "Transcript",
    "Transport",
    "TransportChannel",
    "arun_protocol",
    "count_ciphertexts",
    "decode",
    "encode",
    "encoded_size",
    "register_type",
    "run_protocol",
]
