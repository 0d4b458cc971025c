"""Party certificates for :class:`~privreg.mpc.tcp.TcpTransport` over mutual TLS.

A party certificate names each party its holder may host as a SubjectAlternativeName
URI ``urn:privreg:party:<name>`` (:data:`PARTY_URI_PREFIX`); its common name is the first
of them. A process that presents it may claim exactly those parties in a run; the
transport checks the names on both ends of every connection
(:mod:`privreg.mpc.tls`).

:func:`create_test_pki` writes a throw-away certificate authority and one certificate
per party, for tests and demonstrations on one machine: the CA's private key lies next
to its certificate, so anyone who can read the directory can mint certificates for any
party. A real deployment uses its own CA (or pins each party's certificate, see
:class:`~privreg.mpc.tls.TlsConfig`); :func:`issue_party_certificate` shows which
extensions a party certificate needs.

This module needs the ``cryptography`` package; importing :mod:`privreg.mpc` does not
import it.
"""

from __future__ import annotations

import datetime
import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.mpc.tls import PARTY_URI_PREFIX, party_names_of_peer_dict

__all__ = [
    "PARTY_URI_PREFIX",
    "TEST_CA_NAME",
    "create_test_pki",
    "fingerprint",
    "issue_party_certificate",
    "party_names",
]

#: The common name of the CA that :func:`create_test_pki` writes.
TEST_CA_NAME = "privreg TEST CA - not for production"


def fingerprint(cert_der: bytes) -> str:
    """The SHA-256 fingerprint of a DER-encoded certificate, as lowercase hex (64 digits)."""
    if not isinstance(cert_der, (bytes, bytearray)):
        raise PrivregTypeError(
            f"cert_der must be the DER bytes of a certificate; got {type(cert_der).__name__}. "
            f"Pass ssl_object.getpeercert(binary_form=True) or cert.public_bytes(Encoding.DER)."
        )
    return hashlib.sha256(bytes(cert_der)).hexdigest()


def party_names(cert: bytes | Mapping[str, Any] | x509.Certificate) -> frozenset[str]:
    """The parties a certificate names (its ``urn:privreg:party:`` SAN URIs).

    ``cert`` is the DER bytes of a certificate, a loaded ``cryptography`` certificate, or
    the dict ``ssl.SSLSocket.getpeercert()`` returns. URIs that are not valid party names
    are ignored (they can never be claimed).
    """
    if isinstance(cert, Mapping):
        return party_names_of_peer_dict(cert)
    if isinstance(cert, (bytes, bytearray)):
        try:
            cert = x509.load_der_x509_certificate(bytes(cert))
        except ValueError:
            raise PrivregValueError(
                "cert is not a DER-encoded X.509 certificate; pass the DER bytes "
                "(e.g. ssl_object.getpeercert(binary_form=True))"
            ) from None
    if not isinstance(cert, x509.Certificate):
        raise PrivregTypeError(
            f"cert must be DER bytes, a cryptography Certificate or a getpeercert() dict; got {type(cert).__name__}."
        )
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    uris = san.get_values_for_type(x509.UniformResourceIdentifier)
    return frozenset(n for n in map(_name_from_uri, uris) if n is not None)


def _name_from_uri(uri: str) -> str | None:
    if not uri.startswith(PARTY_URI_PREFIX):
        return None
    name = uri[len(PARTY_URI_PREFIX) :]
    try:
        return v.check_name("party name", name)
    except (PrivregTypeError, PrivregValueError):
        return None


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _check_days(days: Any) -> int:
    return v.check_int("days", days, minimum=1)


def issue_party_certificate(
    *,
    ca_certificate: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    parties: Sequence[str],
    days: int = 7,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A new ECDSA P-256 key and a certificate for it, signed by ``ca_key``, naming
    ``parties`` (SAN URIs; CN = the first), valid for ``days`` days, usable as a TLS
    client and server (a process both accepts and opens connections)."""
    names = _check_parties(parties)
    days = _check_days(days)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(PARTY_URI_PREFIX + n) for n in names]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _check_parties(parties: Any) -> list[str]:
    if isinstance(parties, str) or not isinstance(parties, Sequence):
        raise PrivregTypeError(f"parties must be a sequence of party names; got {parties!r}. Pass e.g. ['alice'].")
    names = [v.check_name("party name", p) for p in parties]
    if not names or len(set(names)) != len(names):
        raise PrivregValueError(f"parties must name at least one party, each once; got {names!r}.")
    return names


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)  # the umask may have narrowed it; never widened beyond mode


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def create_test_pki(directory: str | Path, parties: Sequence[str], *, days: int = 7) -> dict[str, dict[str, Path]]:
    """Write a THROW-AWAY test CA and one certificate per party into ``directory``.

    Files: ``ca.pem`` (the CA certificate, CN "privreg TEST CA - not for production"),
    ``ca.key`` (its private key, mode 0600), and per party ``<party>.pem`` /
    ``<party>.key`` (mode 0600), ECDSA P-256, valid for ``days`` days. Existing files are
    never overwritten. Returns ``{"ca": {"certificate": path}, party: {"certificate":
    path, "key": path}}``.

    For tests and demonstrations only: whoever reads ``ca.key`` can impersonate any party.
    """
    names = _check_parties(parties)
    if "ca" in names:
        raise PrivregValueError("a party named 'ca' would collide with the CA's files ca.pem/ca.key; rename the party.")
    days = _check_days(days)
    if not isinstance(directory, (str, Path)):
        raise PrivregTypeError(f"directory must be a str or Path; got {type(directory).__name__}.")
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    targets = [root / "ca.pem", root / "ca.key"]
    for n in names:
        targets += [root / f"{n}.pem", root / f"{n}.key"]
    existing = [str(t) for t in targets if t.exists()]
    if existing:
        raise PrivregValueError(
            f"create_test_pki refuses to overwrite existing files {existing}; pass an empty directory "
            f"or remove them first."
        )
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TEST_CA_NAME)])
    now = _now()
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    out: dict[str, dict[str, Path]] = {"ca": {"certificate": root / "ca.pem"}}
    _write_new(root / "ca.key", _key_pem(ca_key), 0o600)
    _write_new(root / "ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    for n in names:
        cert, key = issue_party_certificate(ca_certificate=ca_cert, ca_key=ca_key, parties=[n], days=days)
        _write_new(root / f"{n}.key", _key_pem(key), 0o600)
        _write_new(root / f"{n}.pem", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        out[n] = {"certificate": root / f"{n}.pem", "key": root / f"{n}.key"}
    return out
