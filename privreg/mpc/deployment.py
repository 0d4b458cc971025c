"""Running the parties of a :class:`~privreg.core.deployment.Deployment`.

:func:`run_party` runs one party in this process over :class:`~privreg.mpc.tcp.TcpTransport`
(mutual TLS, or plaintext only when the configuration says ``insecure_plaintext``), from a
:class:`~privreg.mpc.party_config.PartyConfig`; :func:`simulate` runs every party of the
same configurations together in memory. Both build each party's protocol instance from
that party's own inputs and random source, and both open with the same options check, so
they give identical outputs on the same inputs and seeds, and every party's transcript
holds the same messages with the same sizes (the interleaving of different peers'
messages may differ).

Options check: before its role starts, every party sends every other party the SHA-256
digest of the run's public options (step ``"deployment.options"``) and compares the digests
it receives with its own; a party configured with other options stops the run with an
error naming it, before any protocol message is sent. The options hold the run's declared
sizes (record counts, filter bits, key size, feature space and message counts, by
deployment), so every party has committed to them before the protocol starts.

Message bounds: every message of the run is bounded by its kind's
:meth:`~privreg.core.protocol.Protocol.message_bound`, which each deployment's protocol
derives from those declared sizes (see each deployment's formulas); the options check's
own message is :data:`OPTIONS_MESSAGE_BYTES` (66) bytes. Over TCP a peer's frame above
the bound of its kind is refused from its header, before its payload is read
(:mod:`privreg.mpc.tcp`), so what a peer with a valid certificate can make a party
allocate is set by the run's legitimate sizes, not by the deployment's maxima.

Each party writes only its own outputs (the deployment's files), its transcript (every
message it sent or received: step, peer, bytes, ciphertexts) and ``run.json`` (options,
security, run id, peer identities, wall and CPU seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import attrs

from privreg.core.deployment import Deployment
from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.files import write_text
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource, SecureRandom
from privreg.mpc.party_config import PartyConfig, check_output_directory
from privreg.mpc.runtime import arun_protocol
from privreg.mpc.transcript import Traffic, Transcript
from privreg.mpc.transport import InMemoryTransport
from privreg.mpc.wire import encode

__all__ = ["PartyRun", "options_digest", "party_rng", "run_party", "simulate"]

OPTIONS_STEP = "deployment.options"
#: The encoded size of the options check's message: a 64-character hex digest.
OPTIONS_MESSAGE_BYTES = len(encode("0" * 64))


def party_rng(seed: int | None, party: str) -> RandomSource:
    """The random source of ``party``: the OS CSPRNG, or (tests only) a reproducible
    stream keyed by SHA-256 of ``seed`` and the party name, so that every party has its
    own stream in both modes."""
    if seed is None:
        return SecureRandom()
    digest = hashlib.sha256(f"privreg-party-seed:{seed}:{party}".encode()).digest()
    return InsecureReproducibleRandom(seed=int.from_bytes(digest[:8], "big"))


def options_digest(deployment: Deployment, options: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the deployment name and its canonical JSON options."""
    blob = json.dumps({"deployment": deployment.name, "options": options}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _is_digest(x: Any) -> bool:
    return isinstance(x, str) and len(x) == 64 and all(c in "0123456789abcdef" for c in x)


class _CheckedParty(Party):
    """Runs the options check, then the wrapped party's role."""

    def __init__(self, inner: Party, digest: str) -> None:
        self.name = inner.name
        self._inner = inner
        self._digest = digest

    async def run(self, channel: Channel) -> Any:
        others = [p for p in channel.parties if p != self.name]
        for p in others:
            await channel.send(p, self._digest, step=OPTIONS_STEP)
        for p in others:
            theirs = await channel.recv(p, step=OPTIONS_STEP)
            if theirs != self._digest:
                # quote the peer's value only if it is a digest (never other data it sent)
                shown = f"{theirs[:16]}..." if _is_digest(theirs) else "a malformed digest"
                raise ProtocolError(
                    f"party {p!r} runs with other public options than {self.name!r} (options digest {shown} "
                    f"against {self._digest[:16]}...); give every party the same [options]"
                )
        return await self._inner.run(channel)


class _Federation(Protocol):
    """The parties of several instances of one protocol, each taken from the instance
    built with that party's own inputs (the instance of ``names[0]`` answers for
    :meth:`learns`, ``caveats`` and the message bound)."""

    caveats = "The caveats of the protocol it runs (see that protocol)."

    def __init__(self, instances: Mapping[str, Protocol], digests: Mapping[str, str]) -> None:
        self._instances = dict(instances)
        self._first = next(iter(self._instances.values()))
        self.name = self._first.name  # type: ignore[misc]  # the run is named after the protocol it runs
        self.caveats = self._first.caveats  # type: ignore[misc]
        self._digests = dict(digests)

    def parties(self) -> Sequence[Party]:
        out: list[Party] = []
        for role in self._first.parties():
            own = self._instances.get(role.name)
            party = role if own is None else next(p for p in own.parties() if p.name == role.name)
            out.append(_CheckedParty(party, self._digests[party.name]))
        return out

    def learns(self) -> Mapping[str, str]:
        return self._first.learns()

    def max_message_bytes(self) -> int | None:
        inner = self._first.max_message_bytes()
        return None if inner is None else max(inner, OPTIONS_MESSAGE_BYTES)

    def message_bound(self, *, sender: str, receiver: str, step: str) -> int | None:
        if step == OPTIONS_STEP:
            return OPTIONS_MESSAGE_BYTES
        return self._first.message_bound(sender=sender, receiver=receiver, step=step)


@attrs.frozen(kw_only=True)
class PartyRun:
    """What one party of a deployment run produced: its output, the files it wrote, and
    its view of the run."""

    party: str
    output: Any = attrs.field(repr=False)
    files: Mapping[str, Path]
    transcript: Transcript = attrs.field(repr=False)
    security: str
    run_id: str | None
    seconds: Mapping[str, float]


def _options(deployment: Deployment, config: PartyConfig) -> dict[str, Any]:
    """The configuration's validated options; an error names the file."""
    try:
        return deployment.options(config.options)
    except PrivregError as exc:
        raise type(exc)(f"{config.path}: [options] {exc}") from None


def _instance(deployment: Deployment, config: PartyConfig, options: Mapping[str, Any]) -> Protocol:
    wanted = deployment.inputs(config.party, options)
    missing = sorted(set(wanted) - set(config.inputs))
    extra = sorted(set(config.inputs) - set(wanted))
    if missing or extra:
        need = ", ".join(f"{k} ({doc})" for k, doc in wanted.items()) or "none"
        raise PrivregValueError(
            f"{config.path}: party {config.party!r} of {deployment.name!r} takes the inputs: {need}; "
            f"missing {missing}, unknown {extra}. Fix the [inputs] table."
        )
    try:
        return deployment.protocol(
            party=config.party, inputs=config.inputs, options=options, rng=party_rng(config.seed, config.party)
        )
    except (PrivregValueError, PrivregTypeError) as exc:  # the party's inputs: name the file
        raise type(exc)(f"{config.path}: {exc}") from None


class _Clock:
    """Wall and CPU seconds (of this process) per phase; the runtime sits below
    :mod:`privreg.timing` in the layers, so it keeps its own two clocks."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[f"{name}_wall"] = time.perf_counter() - wall
            self.seconds[f"{name}_cpu"] = time.process_time() - cpu


def _check_party(deployment: Deployment, config: PartyConfig, options: Mapping[str, Any]) -> tuple[str, ...]:
    names = deployment.parties(options)
    if config.party not in names:
        raise PrivregValueError(
            f"{config.path}: party = {config.party!r} is not a party of {deployment.name!r} with these options; "
            f"parties: {list(names)}."
        )
    return names


def _write_record(
    deployment: Deployment,
    config: PartyConfig,
    options: Mapping[str, Any],
    output: Any,
    transcript: Transcript,
    security: str,
    run_id: str | None,
    peers: Mapping[str, Any],
    seconds: Mapping[str, float],
) -> dict[str, Path]:
    directory = config.output_directory
    directory.mkdir(parents=True, exist_ok=True)
    files = dict(deployment.write_outputs(party=config.party, output=output, directory=directory))
    mine = [m for m in transcript.messages if config.party in (m.sender, m.receiver)]
    traffic = transcript.per_party().get(config.party, {"sent": Traffic(), "received": Traffic()})
    view = {
        "party": config.party,
        "protocol": deployment.name,
        "security": security,
        "run_id": run_id,
        "messages": [
            {
                "step": m.step,
                "direction": "sent" if m.sender == config.party else "received",
                "peer": m.receiver if m.sender == config.party else m.sender,
                "size_bytes": m.size_bytes,
                "ciphertexts": m.ciphertexts,
            }
            for m in mine
        ],
        "sent": attrs.asdict(traffic["sent"]),
        "received": attrs.asdict(traffic["received"]),
    }
    path = directory / "transcript.json"
    write_text(path, json.dumps(view, indent=2) + "\n", "party transcript")
    files["transcript"] = path
    record = {
        "party": config.party,
        "protocol": deployment.name,
        "config": str(config.path),
        "options": options,
        "options_digest": options_digest(deployment, options),
        "security": security,
        "insecure_plaintext": security == "insecure-plaintext",
        "reproducible_seed": config.seed is not None,
        "run_id": run_id,
        "peer_identities": dict(peers),
        "seconds": dict(seconds),
        "files": {k: str(v) for k, v in sorted(files.items())},
    }
    run_path = directory / "run.json"
    write_text(run_path, json.dumps(record, indent=2, default=str) + "\n", "party run record")
    files["run"] = run_path
    return files


def _check_own_certificate(config: PartyConfig) -> None:
    """The party's own certificate names it (a SAN URI), checked before anything listens."""
    if config.tls is None:
        return
    from privreg.mpc.tls import san_fix

    own = config.tls.own_parties()
    if config.party not in own:
        named = ", ".join(repr(p) for p in sorted(own)) or "no party (no urn:privreg:party: SAN URI)"
        raise PrivregValueError(
            f"{config.path}: [tls] certificate {str(config.tls.certificate)!r} names {named}, not party "
            f"{config.party!r}; {san_fix([config.party])}."
        )


def run_party(deployment: Deployment, config: PartyConfig, *, echo: Callable[[str], None] | None = None) -> PartyRun:
    """Run ``config.party`` of ``deployment`` in this process, reaching the other parties
    at their configured addresses; writes the party's outputs, transcript and run record.

    Security: mutual TLS with the configured CA and certificates, unless the configuration
    opts into plaintext (``insecure_plaintext = true``, recorded in every output).
    ``echo`` is told once the party listens, and while it waits for a peer (naming it).
    """
    from privreg.mpc.tcp import TcpTransport

    options = _options(deployment, config)
    names = _check_party(deployment, config, options)
    unknown = sorted(set(config.peers) - set(names))
    missing = sorted(set(names) - set(config.peers) - {config.party})
    if unknown or missing:
        raise PrivregValueError(
            f"{config.path}: [peers] must give the address of every other party {sorted(set(names) - {config.party})}; "
            f"missing {missing}, not parties of this run {unknown}."
        )
    check_output_directory(config)  # before the inputs are read and anything listens
    _check_own_certificate(config)
    timer = _Clock()
    with timer.phase("inputs"):
        instance = _instance(deployment, config, options)
    proto = _Federation({config.party: instance}, dict.fromkeys(names, options_digest(deployment, options)))
    try:
        transport = TcpTransport(
            local=[config.party],
            peers=config.peers,
            host=config.listen[0],
            port=config.listen[1],
            tls=config.tls,
            insecure_plaintext=config.insecure_plaintext,
            **cast("dict[str, Any]", config.timeouts),  # only the *_timeout keywords (party_config.TIMEOUTS)
        )
    except OSError as exc:  # the address is taken, not on this host, or does not resolve
        raise PrivregValueError(
            f"{config.path}: cannot listen on {config.listen[0]}:{config.listen[1]} ({exc.strerror or exc}); "
            f"fix listen, or stop the process that holds the port."
        ) from None
    if echo is not None:
        echo(f"party {config.party} of {deployment.name}: listening on {transport.address[0]}:{transport.address[1]}")
        transport.on_wait = lambda line: echo(f"party {config.party}: {line}")
    with timer.phase("protocol"):
        result = asyncio.run(arun_protocol(proto, transport=transport))
    output = result.outputs[config.party]
    seconds = dict(timer.seconds)
    security = transport.security
    run_id = transport.run_id
    peers = dict(transport.peer_identities)
    files = _write_record(deployment, config, options, output, result.transcript, security, run_id, peers, seconds)
    return PartyRun(
        party=config.party,
        output=output,
        files=files,
        transcript=result.transcript,
        security=security,
        run_id=run_id,
        seconds=seconds,
    )


def simulate(deployment: Deployment, configs: Sequence[PartyConfig]) -> dict[str, PartyRun]:
    """Run every party of ``configs`` (one per party of the run) together in memory and
    write each party's outputs as :func:`run_party` would; security is recorded as
    ``"in-process"``."""
    if not configs:
        raise PrivregValueError("simulate needs the configuration of every party; got none.")
    by_party: dict[str, PartyConfig] = {}
    opts: dict[str, dict[str, Any]] = {}
    for config in configs:
        if config.party in by_party:
            raise PrivregValueError(
                f"two configurations for party {config.party!r}: {by_party[config.party].path} and {config.path}."
            )
        by_party[config.party] = config
        opts[config.party] = _options(deployment, config)
        _check_party(deployment, config, opts[config.party])
    names = deployment.parties(opts[configs[0].party])
    missing = sorted(set(names) - set(by_party))
    if missing:
        raise PrivregValueError(f"simulate needs a configuration for every party; missing {missing}.")
    for p in names:
        check_output_directory(by_party[p])
    timer = _Clock()
    with timer.phase("inputs"):
        instances = {p: _instance(deployment, by_party[p], opts[p]) for p in names}
    # each party checks its own options against the others', as over the network
    proto = _Federation(instances, {p: options_digest(deployment, opts[p]) for p in names})
    with timer.phase("protocol"):
        result = asyncio.run(arun_protocol(proto, transport=InMemoryTransport(keep_payloads=False)))
    seconds = dict(timer.seconds)
    out: dict[str, PartyRun] = {}
    for p in names:
        config = by_party[p]
        files = _write_record(
            deployment, config, opts[p], result.outputs[p], result.transcript, "in-process", None, {}, seconds
        )
        out[p] = PartyRun(
            party=p,
            output=result.outputs[p],
            files=files,
            transcript=result.transcript,
            security="in-process",
            run_id=None,
            seconds=seconds,
        )
    return out
