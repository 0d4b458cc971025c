"""Mutual TLS for :class:`~privreg.mpc.tcp.TcpTransport`: who may claim which party.

A :class:`TlsConfig` holds this process's certificate chain and key and what its peers
must present. Both ends of every connection present a certificate (mutual TLS 1.3) that
must chain to the run's CA (``ca``) and, for a party that has a pin, have that SHA-256
fingerprint. A certificate names the parties its holder may host as SAN URIs
``urn:privreg:party:<name>`` (:mod:`privreg.mpc.certs`); host names and IP addresses in
certificates are not used (``check_hostname`` is off): identity is the party name.

Without a CA, pins alone can anchor trust: pass ``peer_certificates={party: path}`` (the
certificate file of every remote party, obtained out of band). Each one is then a trust
anchor of its own (OpenSSL's partial-chain verification) and its fingerprint becomes the
party's pin, so a peer must present exactly that certificate.

This module uses only the standard library (:mod:`ssl`); creating certificates needs
:mod:`privreg.mpc.certs`.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import ssl
import types
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.files import MAX_SMALL_FILE, read_bytes

__all__ = ["PARTY_URI_PREFIX", "PeerIdentity", "TlsConfig", "party_names_of_peer_dict", "san_fix"]

#: A certificate names party ``p`` as the SubjectAlternativeName URI ``PARTY_URI_PREFIX + p``.
PARTY_URI_PREFIX = "urn:privreg:party:"


def san_fix(parties: Collection[str]) -> str:
    """How to issue a certificate that names ``parties``: the SubjectAlternativeName
    entries it needs and the OpenSSL flags that keep them (for error messages)."""
    san = ",".join(f"URI:{PARTY_URI_PREFIX}{p}" for p in sorted(parties))
    return (
        f"its certificate needs the subjectAltName {san}: put -addext 'subjectAltName={san}' in the request and "
        f"sign it with 'openssl x509 -req ... -copy_extensions copy' (x509 -req drops the request's extensions "
        f"without it), or with -extfile giving subjectAltName = {san} (docs/deploy.md)"
    )


def party_names_of_peer_dict(info: Mapping[str, Any]) -> frozenset[str]:
    """The party names in the ``subjectAltName`` URIs of a ``getpeercert()`` dict
    (URIs that are not valid party names are ignored)."""
    names = set()
    for entry in info.get("subjectAltName", ()) or ():
        if not (isinstance(entry, tuple) and len(entry) == 2 and entry[0] == "URI" and isinstance(entry[1], str)):
            continue
        uri = entry[1]
        if uri.startswith(PARTY_URI_PREFIX):
            name = uri[len(PARTY_URI_PREFIX) :]
            try:
                names.add(v.check_name("party name", name))
            except (PrivregTypeError, PrivregValueError):
                continue
    return frozenset(names)


@attrs.frozen(kw_only=True)
class PeerIdentity:
    """What the certificate on the other end of a connection proves: the parties it
    names and its SHA-256 fingerprint (hex)."""

    parties: frozenset[str]
    fingerprint: str


def _path(name: str) -> Callable[[Any], Path]:
    def convert(value: Any) -> Path:
        if not isinstance(value, (str, Path)):
            raise PrivregTypeError(f"{name} must be a path (str or Path); got {type(value).__name__}.")
        return Path(value)

    return convert


def _certificate_path(value: Any) -> Path:
    return _path("certificate")(value)


def _key_path(value: Any) -> Path:
    return _path("key")(value)


def _optional_path(value: Any) -> Path | None:
    return None if value is None else _path("ca")(value)


def _frozen_mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PrivregTypeError(f"expected a mapping party -> value; got {type(value).__name__}.")
    return types.MappingProxyType(dict(value))


def _check_file(name: str, path: Path) -> None:
    if not path.is_file():  # a FIFO or a device too: refused by type, never read
        raise PrivregValueError(f"{name} file {str(path)!r} does not exist (or is not a file); pass an existing path.")
    if path.stat().st_size > MAX_SMALL_FILE:  # OpenSSL reads it whole
        raise PrivregValueError(
            f"{name} file {str(path)!r} is larger than {MAX_SMALL_FILE} bytes, more than a PEM file holds; "
            f"check the path."
        )


def _der_of_pem_file(name: str, path: Path) -> bytes:
    """The DER bytes of the first certificate in a PEM file."""
    text = read_bytes(path, f"{name} file", max_bytes=MAX_SMALL_FILE).decode("ascii", errors="replace")
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        raise PrivregValueError(f"{name} file {str(path)!r} holds no PEM certificate; pass a PEM certificate file.")
    try:
        return ssl.PEM_cert_to_DER_cert(text[start : stop + len(end)])
    except ValueError:
        raise PrivregValueError(f"{name} file {str(path)!r} holds a malformed PEM certificate.") from None


def _check_private(key: Path) -> None:
    """Refuse a private key file that other users may read (POSIX permissions)."""
    if os.name != "posix":
        return
    mode = key.stat().st_mode & 0o777
    if mode & 0o077:
        raise PrivregValueError(
            f"the private key {str(key)!r} is readable by other users (mode {mode:o}); run: chmod 600 {key}"
        )


def _check_validity(certificate: Path) -> None:
    """Refuse this process's own certificate outside its validity period, so that the
    error is ours and clear instead of a peer's refusal seen as a failed connection."""
    from cryptography import x509  # loaded only for a TLS configuration

    try:
        cert = x509.load_pem_x509_certificate(read_bytes(certificate, "certificate file", max_bytes=MAX_SMALL_FILE))
    except ValueError:
        return  # not one PEM certificate: load_cert_chain below names the problem
    now = datetime.datetime.now(datetime.UTC)
    if now < cert.not_valid_before_utc or now > cert.not_valid_after_utc:
        raise PrivregValueError(
            f"the certificate {str(certificate)!r} is valid from {cert.not_valid_before_utc:%Y-%m-%d %H:%M} to "
            f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, not now; issue a new one (privreg party certs for tests)."
        )


@attrs.frozen(kw_only=True)
class TlsConfig:
    """This process's TLS identity and what it requires of its peers.

    Args:
        certificate: PEM file with this process's certificate (then any intermediates);
            it must name every party this process hosts.
        key: PEM file with the certificate's private key (unencrypted).
        ca: PEM bundle of the CA(s) of the run; every peer's certificate must chain to it.
        pins: ``{party: SHA-256 fingerprint (hex) of that party's certificate}``; a peer
            claiming a pinned party must present exactly that certificate (in addition
            to chaining to ``ca``).
        peer_certificates: without ``ca``: ``{party: PEM certificate file}`` for every
            remote party; each is a trust anchor and the party's pin.

    Every file is loaded at construction, so a wrong path or a key that does not match
    the certificate fails here with the file named.
    """

    certificate: Path = attrs.field(converter=_certificate_path)
    key: Path = attrs.field(converter=_key_path)
    ca: Path | None = attrs.field(default=None, converter=_optional_path)
    pins: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    peer_certificates: Mapping[str, Path] = attrs.field(factory=dict, converter=_frozen_mapping)
    _all_pins: Mapping[str, str] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        _check_file("certificate", self.certificate)
        _check_file("key", self.key)
        _check_private(self.key)
        _check_validity(self.certificate)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            ctx.load_cert_chain(self.certificate, self.key)
        except ssl.SSLError as exc:
            raise PrivregValueError(
                f"cannot load the certificate {str(self.certificate)!r} with the key {str(self.key)!r} "
                f"({exc.reason or exc}); pass a PEM certificate and its matching unencrypted PEM private key."
            ) from None
        pins: dict[str, str] = {}
        for party, pin in self.pins.items():
            v.check_name("pinned party name", party)
            if not isinstance(pin, str):
                raise PrivregTypeError(
                    f"the pin of {party!r} must be a str of 64 hex digits; got {type(pin).__name__}."
                )
            norm = pin.replace(":", "").lower()
            if len(norm) != 64 or any(c not in "0123456789abcdef" for c in norm):
                raise PrivregValueError(
                    f"the pin of {party!r} must be a SHA-256 fingerprint: 64 hex digits (colons allowed); "
                    f"got {pin!r}. Compute it with privreg.mpc.certs.fingerprint."
                )
            pins[party] = norm
        if self.ca is not None:
            _check_file("ca", self.ca)
            if self.peer_certificates:
                raise PrivregValueError(
                    "pass either ca (peers chain to a CA) or peer_certificates (each peer's certificate is "
                    "its own trust anchor), not both; with a CA, restrict parties further with pins."
                )
            try:
                ctx.load_verify_locations(cafile=self.ca)
            except ssl.SSLError as exc:
                raise PrivregValueError(
                    f"cannot load the CA bundle {str(self.ca)!r} ({exc.reason or exc}); pass a PEM file of CA "
                    f"certificates."
                ) from None
        else:
            if not self.peer_certificates:
                raise PrivregValueError(
                    "a TlsConfig needs something to trust: pass ca=<the run's CA bundle> or "
                    "peer_certificates={party: <that party's certificate file>} for every remote party."
                )
            for party, path in self.peer_certificates.items():
                v.check_name("peer certificate party name", party)
                p = _path(f"peer_certificates[{party!r}]")(path)
                _check_file(f"peer_certificates[{party!r}]", p)
                fp = hashlib.sha256(_der_of_pem_file(f"peer_certificates[{party!r}]", p)).hexdigest()
                if party in pins and pins[party] != fp:
                    raise PrivregValueError(
                        f"the pin of {party!r} does not match the fingerprint of peer_certificates[{party!r}] "
                        f"({fp}); drop the pin or pass the matching certificate."
                    )
                pins[party] = fp
                try:
                    ctx.load_verify_locations(cafile=p)
                except ssl.SSLError as exc:
                    raise PrivregValueError(
                        f"cannot load peer_certificates[{party!r}] ({exc.reason or exc}); pass a PEM certificate."
                    ) from None
        object.__setattr__(self, "_all_pins", types.MappingProxyType(pins))

    # ------------------------------------------------------------------ contexts

    def _context(self, purpose: int) -> ssl.SSLContext:
        ctx = ssl.SSLContext(purpose)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False  # identity is the party name in the certificate, checked by the transport
        ctx.verify_mode = ssl.CERT_REQUIRED  # mutual: both ends present a certificate
        ctx.load_cert_chain(self.certificate, self.key)
        if self.ca is not None:
            ctx.load_verify_locations(cafile=self.ca)
        else:
            for path in self.peer_certificates.values():
                ctx.load_verify_locations(cafile=Path(path))
            ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # a pinned leaf is its own trust anchor
        return ctx

    def server_context(self) -> ssl.SSLContext:
        """An SSL context for accepting connections: TLS 1.3, client certificate required."""
        return self._context(ssl.PROTOCOL_TLS_SERVER)

    def client_context(self) -> ssl.SSLContext:
        """An SSL context for opening connections: TLS 1.3, server certificate required,
        no host name check (the transport checks the party name instead)."""
        return self._context(ssl.PROTOCOL_TLS_CLIENT)

    # ------------------------------------------------------------------ identities

    @property
    def effective_pins(self) -> Mapping[str, str]:
        """``pins`` plus, without a CA, the fingerprint of each of ``peer_certificates``."""
        return self._all_pins

    def own_parties(self) -> frozenset[str]:
        """The parties this process's certificate names (reads it with ``cryptography``)."""
        from privreg.mpc.certs import party_names  # the cryptography package, only when asked

        return party_names(_der_of_pem_file("certificate", self.certificate))

    def check_remote_parties(self, remote: Collection[str]) -> None:
        """Without a CA, every remote party needs a pin (a certificate to trust)."""
        if self.ca is None:
            missing = sorted(p for p in remote if p not in self._all_pins)
            if missing:
                raise PrivregValueError(
                    f"without a ca, every remote party needs its certificate in peer_certificates; "
                    f"missing: {missing}. Add peer_certificates={{party: path}} for them or pass ca=."
                )

    def peer_identity(self, ssl_object: Any) -> PeerIdentity:
        """The parties and fingerprint of the verified certificate on the other end of
        ``ssl_object`` (an ``ssl.SSLObject`` or ``ssl.SSLSocket`` after the handshake)."""
        der = ssl_object.getpeercert(binary_form=True)
        info = ssl_object.getpeercert()
        if not der or not isinstance(info, dict):
            raise ProtocolError("the peer presented no verified certificate; mutual TLS requires one")
        return PeerIdentity(parties=party_names_of_peer_dict(info), fingerprint=hashlib.sha256(der).hexdigest())

    def check_peer(self, ssl_object: Any, parties: Collection[str], *, where: str) -> PeerIdentity:
        """The peer's identity, checked: its certificate names every one of ``parties``
        and matches the pin of each pinned one; ``where`` describes the peer in errors."""
        ident = self.peer_identity(ssl_object)
        expected = sorted(parties)
        if not set(expected) <= ident.parties:
            got = ", ".join(repr(p) for p in sorted(ident.parties)) or "no party"
            want = ", ".join(repr(p) for p in expected)
            missing = sorted(set(expected) - ident.parties)
            raise ProtocolError(f"{where} presented a certificate for {got}, expected {want}; {san_fix(missing)}")
        for party in expected:
            pin = self._all_pins.get(party)
            if pin is not None and pin != ident.fingerprint:
                raise ProtocolError(
                    f"{where} presented a certificate for {party!r} with fingerprint {ident.fingerprint}, "
                    f"but {party!r} is pinned to {pin}"
                )
        return ident
