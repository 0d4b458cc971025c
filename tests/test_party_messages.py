"""Issue #31, item 6: a party certificate without the party's SAN, and a missing peer,
are reported by party name, with the fix."""

from __future__ import annotations

import asyncio
import datetime
import re
import socket
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from party_helpers import free_base_port

from privreg.cli.main import main
from privreg.core.errors import ProtocolError
from privreg.mpc.certs import create_test_pki
from privreg.mpc.party_config import load_party_config
from privreg.mpc.tcp import TcpTransport
from privreg.mpc.tls import TlsConfig


def _one_error(err: str) -> str:
    assert "Traceback" not in err, err
    errors = [line for line in err.strip().splitlines() if line.startswith("privreg:")]
    assert len(errors) == 1 and errors[0].startswith("privreg: error: "), err
    return errors[0]


def _init(tmp_path: Path, *extra: str) -> Path:
    run = tmp_path / "run"
    base = free_base_port(4)
    argv = ["party", "init", "mp-spprl", str(run), "--base-port", str(base), "--option", "max_records=20", *extra]
    assert main(argv) == 0
    return run


def _reissue(run: Path, party: str, san: list[str] | None, *, certs: Path | None = None) -> None:
    """Replace ``party``'s certificate by one from the same CA and key, with ``san`` as
    its SAN URIs (None: no SAN at all, as ``openssl x509 -req`` without
    ``-copy_extensions copy`` issues it)."""
    certs = certs or run / "certs"
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((certs / "ca.key").read_bytes(), None)
    key = serialization.load_pem_private_key((certs / f"{party}.key").read_bytes(), None)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if san is not None:
        names = [x509.UniformResourceIdentifier(u) for u in san]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    (certs / f"{party}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@pytest.mark.parametrize(
    ("san", "named"),
    [(None, "no party (no urn:privreg:party: SAN URI)"), (["urn:privreg:party:P2"], "'P2'")],
    ids=["no-san", "wrong-san"],
)
def test_a_certificate_without_the_party_san_is_refused_before_listening_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], san: list[str] | None, named: str
) -> None:
    run = _init(tmp_path)
    _reissue(run, "P1", san)
    capsys.readouterr()
    assert main(["party", "run", str(run / "P1.toml")]) == 2
    line = _one_error(capsys.readouterr().err)
    assert f"names {named}, not party 'P1'" in line
    assert "subjectAltName URI:urn:privreg:party:P1" in line
    assert "-copy_extensions copy" in line and "docs/deploy.md" in line
    assert not (run / "out" / "P1").exists() or not any((run / "out" / "P1").iterdir())


class _FakeSsl:
    """What a verified TLS connection reports of the peer's certificate."""

    def __init__(self, pem: bytes) -> None:
        self._der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
        cert = x509.load_pem_x509_certificate(pem)
        try:
            uris = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            self._san = tuple(("URI", u) for u in uris.get_values_for_type(x509.UniformResourceIdentifier))
        except x509.ExtensionNotFound:
            self._san = ()

    def getpeercert(self, binary_form: bool = False) -> object:
        return self._der if binary_form else ({"subjectAltName": self._san} if self._san else {"subject": ()})


def test_a_peer_without_the_expected_san_is_refused_naming_it_and_the_fix(tmp_path: Path) -> None:
    run = _init(tmp_path)
    _reissue(run, "P2", None)
    tls = TlsConfig(certificate=run / "certs" / "P1.pem", key=run / "certs" / "P1.key", ca=run / "certs" / "ca.pem")
    peer = _FakeSsl((run / "certs" / "P2.pem").read_bytes())
    with pytest.raises(ProtocolError) as info:
        tls.check_peer(peer, ["P2"], where="the peer at 127.0.0.1:1")
    msg = str(info.value)
    assert "presented a certificate for no party, expected 'P2'" in msg
    assert "subjectAltName URI:urn:privreg:party:P2" in msg and "-copy_extensions copy" in msg


def test_a_transport_whose_own_certificate_lacks_the_san_names_it_and_the_fix(tmp_path: Path) -> None:
    run = _init(tmp_path)
    _reissue(run, "P1", None)
    tls = TlsConfig(certificate=run / "certs" / "P1.pem", key=run / "certs" / "P1.key", ca=run / "certs" / "ca.pem")
    transport = TcpTransport(local=["P1"], peers={"P2": ("127.0.0.1", 1)}, tls=tls)
    with pytest.raises(ProtocolError) as info:
        asyncio.run(transport.start(["P1", "P2"]))
    msg = str(info.value)
    assert "this process hosts ['P1'], but its certificate" in msg
    assert "names no party (no urn:privreg:party: SAN URI)" in msg
    assert "subjectAltName URI:urn:privreg:party:P1" in msg and "-copy_extensions copy" in msg


def test_a_party_waiting_for_a_missing_peer_names_it_and_so_does_its_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # P1 alone: nobody else is started, so every peer is missing until connect times out.
    # The peers' ports are held bound (not listening) meanwhile: a free port could be taken
    # by another test's server (a plaintext one answered TLS with UNEXPECTED_MESSAGE)
    for attempt in range(20):
        run = _init(tmp_path / str(attempt), "--connect-timeout", "2")
        ports = {
            m.group(1): m.group(2)
            for m in re.finditer(r'^(\w+) = "127\.0\.0\.1:(\d+)"$', (run / "P1.toml").read_text(), re.M)
        }
        held: list[socket.socket] = []
        try:
            for name, port in ports.items():
                if name != "listen":  # P1 listens there; the rest are its peers
                    held.append(socket.socket())
                    held[-1].bind(("127.0.0.1", int(port)))
            break
        except OSError:
            for sock in held:
                sock.close()
    else:
        pytest.fail("no free ports to hold")
    capsys.readouterr()
    try:
        assert main(["party", "run", str(run / "P1.toml")]) == 4
    finally:
        for sock in held:
            sock.close()
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    # every note names a peer and its own address; the one that timed out was noted first
    notes = re.findall(r"^party P1: waiting for party '(\w+)' at 127\.0\.0\.1:(\d+) \(\d+ s left", err, re.M)
    assert notes and all(ports[name] == port for name, port in notes), err
    failed = [line for line in err.splitlines() if line.startswith("privreg: party P1 failed:")]
    assert len(failed) == 1, err
    m = re.search(r"cannot connect to party '(\w+)' at 127\.0\.0\.1:(\d+) within connect_timeout=2\.0s", failed[0])
    assert m is not None and ports[m.group(1)] == m.group(2), failed[0]
    assert (m.group(1), m.group(2)) in notes
    assert "start that party's process" in failed[0]


@pytest.mark.parametrize(
    "case", ["ca-alone", "certs-alone", "no-ca-file", "missing-cert", "no-san", "open-key", "plaintext"]
)
def test_party_init_with_own_certificates_refuses_bad_ones_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    org = tmp_path / "org"
    create_test_pki(org, ["linkage_unit", "P1", "P2", "P3"])
    run = tmp_path / "run"
    flags = ["--ca", str(org / "ca.pem"), "--certs", str(org)]
    expected = {
        "ca-alone": "--ca and --certs go together",
        "certs-alone": "--ca and --certs go together",
        "no-ca-file": "--ca: no file at",
        "missing-cert": "--certs: no file",
        "no-san": "does not name party 'P1'; its certificate needs the subjectAltName URI:urn:privreg:party:P1",
        "open-key": "P2.key",
        "plaintext": "--insecure-plaintext runs without certificates",
    }[case]
    if case == "ca-alone":
        flags = flags[:2]
    elif case == "certs-alone":
        flags = flags[2:]
    elif case == "no-ca-file":
        flags[1] = str(org / "nothing.pem")
    elif case == "missing-cert":
        (org / "P3.pem").unlink()
    elif case == "no-san":
        _reissue(tmp_path, "P1", None, certs=org)
    elif case == "open-key":
        (org / "P2.key").chmod(0o644)
    elif case == "plaintext":
        flags.append("--insecure-plaintext")
    capsys.readouterr()
    assert main(["party", "init", "mp-spprl", str(run), "--option", "max_records=20", *flags]) == 2
    line = _one_error(capsys.readouterr().err)
    assert expected in line, line
    assert not run.exists()


def test_party_init_with_own_certificates_writes_them_into_every_config(tmp_path: Path) -> None:
    org = tmp_path / "org"
    create_test_pki(org, ["linkage_unit", "P1", "P2", "P3"])
    run = tmp_path / "run"
    assert main(["party", "init", "mp-spprl", str(run), "--ca", str(org / "ca.pem"), "--certs", str(org)]) == 0
    assert not (run / "certs").exists()  # no test CA of its own
    for p in ("linkage_unit", "P1", "P2", "P3"):
        config = load_party_config(run / f"{p}.toml")
        assert config.tls.ca == (org / "ca.pem").resolve()
        assert config.tls.certificate == (org / f"{p}.pem").resolve()
        assert config.tls.key == (org / f"{p}.key").resolve()
