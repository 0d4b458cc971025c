"""A party's configuration file (TOML) for ``privreg party run``.

::

    protocol = "mp-spprl"          # a registered deployment (privreg party list)
    party = "P1"                    # the party this process plays
    listen = "127.0.0.1:7101"       # where it accepts its peers' connections
    # seed = 7                      # TESTS ONLY: reproducible randomness (keys marked insecure)
    # insecure_plaintext = true     # TESTS ONLY: no TLS (loopback); recorded in every output

    [tls]                           # mutual TLS (required unless insecure_plaintext)
    ca = "certs/ca.pem"             # the run's CA: every peer's certificate must chain to it
    certificate = "certs/P1.pem"    # this party's certificate (names the party)
    key = "certs/P1.key"            # and its private key
    # [tls.pins]                    # optional: SHA-256 fingerprints a peer's certificate must match
    # P2 = "5f0c..."
    # [tls.peer_certificates]       # instead of ca: each peer's own (self-signed) certificate
    # P2 = "certs/P2.pem"

    [peers]                         # every other party: host:port
    linkage_unit = "127.0.0.1:7100"
    P2 = "127.0.0.1:7102"

    [inputs]                        # this party's own files (privreg party inputs PROTOCOL)
    records = "P1.csv"

    [outputs]
    directory = "out/P1"            # outputs, transcript.json, run.json

    [options]                       # the run's public options: the same at every party
    parties = ["P1", "P2", "P3"]

    [timeouts]                      # optional, seconds
    connect = 120.0                 # how long to wait for the peers to come up

Relative paths are relative to the configuration file's folder.
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.deployment import MAX_TIMEOUT
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.files import MAX_SMALL_FILE, file_error, make_dir, read_text

__all__ = ["PartyConfig", "load_party_config", "parse_address", "check_output_directory", "TIMEOUTS", "MAX_TIMEOUT"]

#: ``[timeouts]`` keys and the transport arguments they set.
TIMEOUTS = {
    "connect": "connect_timeout",
    "handshake": "handshake_timeout",
    "recv": "recv_timeout",
    "linger": "linger_timeout",
}

_TOP = {
    "protocol",
    "party",
    "listen",
    "seed",
    "insecure_plaintext",
    "tls",
    "peers",
    "inputs",
    "outputs",
    "options",
    "timeouts",
}


def parse_address(name: str, value: Any, *, lowest: int = 0) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) as ``(host, port)``, the port in
    ``lowest..65535`` (a peer's port 0 could never be reached: pass ``lowest=1``)."""
    if not isinstance(value, str):
        raise PrivregTypeError(f"{name} must be a 'host:port' string; got {value!r}.")
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if (
        not sep
        or not host
        or not (port.isascii() and port.isdigit() and len(port) <= 5)
        or not lowest <= int(port) < 65536
    ):
        raise PrivregValueError(
            f"{name} must be 'host:port' with a port in {lowest}..65535; got {value!r}, e.g. '127.0.0.1:7101'."
        )
    return host, int(port)


def _table(path: Path, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise PrivregTypeError(f"{path}: [{key}] must be a table; got {value!r}.")
    return value


def _file(path: Path, where: str, value: Any) -> Path:
    if not isinstance(value, str) or not value:
        raise PrivregTypeError(f"{path}: {where} must be a path string; got {value!r}.")
    return (path.parent / value).resolve()


def _input_file(path: Path, where: str, value: Any) -> Path:
    out = _file(path, where, value)
    if out.is_dir():
        raise PrivregValueError(f"{path}: {where} = {value!r} is a folder; give the path of a file.")
    return out


@attrs.frozen(kw_only=True)
class PartyConfig:
    """One party's configuration (see the module docstring for the file format)."""

    path: Path
    protocol: str
    party: str
    listen: tuple[str, int]
    peers: Mapping[str, tuple[str, int]]
    inputs: Mapping[str, Path]
    output_directory: Path
    options: Mapping[str, Any]
    tls: Any = None  # privreg.mpc.tls.TlsConfig, or None with insecure_plaintext
    insecure_plaintext: bool = False
    seed: int | None = None
    timeouts: Mapping[str, float] = attrs.field(factory=dict)


def load_party_config(path: str | Path) -> PartyConfig:
    """Read and check a party's TOML configuration; every error names the file and key."""
    path = Path(path).resolve()
    if not (path.exists() or path.is_symlink()):
        raise PrivregValueError(f"no party configuration at {path}; create one (privreg party init) first.")
    text = read_text(path, "party configuration", max_bytes=MAX_SMALL_FILE)  # a regular file, bounded, UTF-8
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PrivregValueError(f"{path} is not valid TOML: {exc}.") from None
    except RecursionError:  # arrays or tables nested past the parser's stack
        raise PrivregValueError(f"{path} nests arrays or tables too deeply to be a party configuration.") from None
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise PrivregValueError(f"{path}: unknown keys {unknown}; allowed: {sorted(_TOP)}.")
    for key in ("protocol", "party", "listen"):
        if key not in data:
            raise PrivregValueError(f"{path}: the key {key!r} is required.")
    protocol = v.check_name(f"{path}: protocol", data["protocol"])
    party = v.check_name(f"{path}: party", data["party"])
    listen = parse_address(f"{path}: listen", data["listen"])
    peers = {
        v.check_name(f"{path}: [peers] name", k): parse_address(f"{path}: [peers] {k}", a, lowest=1)
        for k, a in _table(path, data, "peers").items()
    }
    if party in peers:
        raise PrivregValueError(f"{path}: [peers] lists {party!r}, the party this file configures; remove it.")
    inputs = {str(k): _input_file(path, f"[inputs] {k}", x) for k, x in _table(path, data, "inputs").items()}
    outputs = _table(path, data, "outputs")
    if set(outputs) != {"directory"}:
        raise PrivregValueError(f"{path}: [outputs] takes exactly one key, directory; got {sorted(outputs)}.")
    out_dir = _file(path, "[outputs] directory", outputs["directory"])
    insecure = data.get("insecure_plaintext", False)
    if not isinstance(insecure, bool):
        raise PrivregTypeError(f"{path}: insecure_plaintext must be true or false; got {insecure!r}.")
    tls_table = _table(path, data, "tls")
    tls = None
    if tls_table:
        from privreg.mpc.tls import TlsConfig  # loads ssl only for TLS configurations

        if insecure:
            raise PrivregValueError(f"{path}: give either [tls] or insecure_plaintext = true, not both.")
        keys = set(tls_table) - {"ca", "certificate", "key", "pins", "peer_certificates"}
        if keys or not {"certificate", "key"} <= set(tls_table):
            raise PrivregValueError(
                f"{path}: [tls] takes certificate, key, ca and optionally [tls.pins] and [tls.peer_certificates]; "
                f"got {sorted(tls_table)}."
            )
        pins = tls_table.get("pins", {})
        if not isinstance(pins, Mapping):
            raise PrivregTypeError(f"{path}: [tls.pins] must be a table party = fingerprint; got {pins!r}.")
        anchors = tls_table.get("peer_certificates", {})
        if not isinstance(anchors, Mapping):
            raise PrivregTypeError(f"{path}: [tls.peer_certificates] must be a table party = file; got {anchors!r}.")
        tls = TlsConfig(
            certificate=_file(path, "[tls] certificate", tls_table["certificate"]),
            key=_file(path, "[tls] key", tls_table["key"]),
            ca=_file(path, "[tls] ca", tls_table["ca"]) if "ca" in tls_table else None,
            pins=dict(pins),
            peer_certificates={str(k): _file(path, f"[tls.peer_certificates] {k}", f) for k, f in anchors.items()},
        )
    elif not insecure:
        raise PrivregValueError(
            f"{path}: no [tls] table. Give ca, certificate and key (privreg party certs makes test ones), or set "
            f"insecure_plaintext = true for a loopback test."
        )
    seed = data.get("seed")
    if seed is not None:
        seed = v.check_int(f"{path}: seed", seed, minimum=0)
    timeouts: dict[str, float] = {}
    for k, x in _table(path, data, "timeouts").items():
        if k not in TIMEOUTS:
            raise PrivregValueError(f"{path}: unknown [timeouts] key {k!r}; allowed: {sorted(TIMEOUTS)}.")
        seconds = v.check_real(f"{path}: [timeouts] {k}", x)
        if not 0 < seconds <= MAX_TIMEOUT:
            raise PrivregValueError(
                f"{path}: [timeouts] {k} must be a number of seconds > 0 and <= {MAX_TIMEOUT:g} (a day); got {x!r}."
            )
        timeouts[TIMEOUTS[k]] = seconds
    return PartyConfig(
        path=path,
        protocol=protocol,
        party=party,
        listen=listen,
        peers=peers,
        inputs=inputs,
        output_directory=out_dir,
        options=dict(_table(path, data, "options")),
        tls=tls,
        insecure_plaintext=insecure,
        seed=seed,
        timeouts=timeouts,
    )


def check_output_directory(config: PartyConfig) -> Path:
    """Create ``config``'s output folder (if missing) and prove it writable by creating
    and removing a file in it, so that a folder that is a file, read-only or on a full
    disk is refused before the party listens, not after the protocol ran."""
    where = f"{config.path}: [outputs] directory"
    folder = make_dir(config.output_directory, where)
    probe = folder / f".privreg-write-probe.{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"probe")
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(probe)
    except OSError as exc:
        raise file_error(exc, folder, where, doing="written") from None
    return folder
