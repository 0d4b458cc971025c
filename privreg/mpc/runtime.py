"""Running a :class:`~privreg.core.protocol.Protocol`: its hosted parties in one event loop.

:func:`run_protocol` (or :func:`arun_protocol` inside a running event loop) checks that
the protocol documents what every party learns, starts the transport (passing it the
protocol's bound on one message, :meth:`~privreg.core.protocol.Protocol.max_message_bytes`, and per
message kind, :meth:`~privreg.core.protocol.Protocol.message_bound`), runs every party
the transport hosts in this process, each with a :class:`TransportChannel`, and returns
their outputs with the transcript. A party's failure fails the run with the root cause
(a deadlock is usually the echo of another party's failure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from privreg.core.errors import DeadlockError, PrivregTypeError, ProtocolError
from privreg.core.protocol import Channel, Party, Protocol
from privreg.mpc.transcript import Transcript
from privreg.mpc.transport import InMemoryTransport, Transport

__all__ = ["TransportChannel", "ProtocolResult", "run_protocol", "arun_protocol"]


class TransportChannel(Channel):
    """One party's view of a transport: it can only send as itself."""

    def __init__(self, party: str, transport: Transport, parties: Sequence[str]) -> None:
        self.party = party
        self.parties = tuple(parties)
        self._transport = transport

    async def send(self, to: str, payload: Any, *, step: str) -> None:
        await self._transport.send(sender=self.party, receiver=to, step=step, payload=payload)

    async def recv(self, frm: str, *, step: str | None = None) -> Any:
        return await self._transport.recv(receiver=self.party, sender=frm, step=step)


@attrs.frozen(kw_only=True)
class ProtocolResult:
    """Each hosted party's output and the transcript of the run (as seen here)."""

    outputs: Mapping[str, Any]
    transcript: Transcript


def run_protocol(protocol: Protocol, *, transport: Transport | None = None) -> ProtocolResult:
    """Run the parties of ``protocol`` hosted in this process to completion, in a new
    event loop (see :func:`arun_protocol`)."""
    return asyncio.run(arun_protocol(protocol, transport=transport))


async def arun_protocol(protocol: Protocol, *, transport: Transport | None = None) -> ProtocolResult:
    """Run every party of ``protocol`` that ``transport`` hosts here (default: all of
    them, in memory); the outputs are those of the hosted parties."""
    if not isinstance(protocol, Protocol):
        raise PrivregTypeError(
            f"protocol must be a privreg.core.Protocol; got {type(protocol).__name__}. "
            f"Subclass Protocol and pass an instance."
        )
    parties = list(protocol.parties())
    names = protocol.checked_party_names(parties)
    transport = transport or InMemoryTransport()
    await transport.start(names, max_message_bytes=protocol.max_message_bytes(), message_bound=protocol.message_bound)
    try:
        hosted = set(transport.hosted(names))
        local = [p for p in parties if p.name in hosted]

        async def drive(party: Party) -> Any:
            try:
                out = await party.run(TransportChannel(party.name, transport, names))
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
