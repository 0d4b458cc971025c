"""TcpTransport over mutual TLS (issue #18): certificates from a throw-away test CA,
identity by party name, run ids, and the refusals an attacker meets: no security chosen,
a certificate from another CA, a valid certificate for another party, frames replayed
from an earlier run, duplicated or reordered frames. Everything runs on 127.0.0.1 in one
event loop (or threads), with short timeouts."""

from __future__ import annotations

import asyncio

import pytest
from tcp_helpers import FakePeer, FnProtocol, honest, run_all, tls_for, wire

from privreg.core.errors import PrivregValueError, ProtocolError
from privreg.mpc.certs import PARTY_URI_PREFIX, create_test_pki, fingerprint, party_names
from privreg.mpc.runtime import run_protocol
from privreg.mpc.tcp import TcpTransport
from privreg.mpc.tls import TlsConfig
from privreg.mpc.transport import InMemoryTransport

PARTIES = ["alice", "bob", "carol"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return create_test_pki(tmp_path_factory.mktemp("pki"), [*PARTIES, "mallory"])


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory):
    return create_test_pki(tmp_path_factory.mktemp("other-pki"), PARTIES)


async def _alice(ch):
    await ch.send("bob", {"x": 3}, step="one")
    await ch.send("carol", [1, 2, 3], step="one")
    return (await ch.recv("bob", step="two")) + (await ch.recv("carol", step="two"))


async def _bob(ch):
    m = await ch.recv("alice", step="one")
    await ch.send("alice", m["x"] * 10, step="two")
    return "bob ok"


async def _carol(ch):
    m = await ch.recv("alice", step="one")
    await ch.send("alice", sum(m), step="two")
    return "carol ok"


def toy():
    return FnProtocol(alice=_alice, bob=_bob, carol=_carol)


async def _secret_alice(ch):
    return await ch.recv("bob", step="secret")


async def _secret_bob(ch):
    await ch.send("alice", "the real value", step="secret")
    return "sent"


def secret():
    return FnProtocol(alice=_secret_alice, bob=_secret_bob)


def mtls_run(pki, proto, parties):
    ts = [honest(p, tls=tls_for(pki, p)) for p in parties]
    wire(ts)
    return ts, asyncio.run(run_all(proto, ts))


# ------------------------------------------------------------------ the happy path


def test_three_parties_over_mtls_match_the_in_memory_run(pki):
    ts, results = mtls_run(pki, toy(), PARTIES)
    mem = run_protocol(toy(), transport=InMemoryTransport())
    outputs = {}
    for r in results:
        assert not isinstance(r, BaseException), r
        outputs.update(r.outputs)
    assert outputs == dict(mem.outputs) == {"alice": 36, "bob": "bob ok", "carol": "carol ok"}
    assert {t.security for t in ts} == {"mtls"}
    assert len({t.run_id for t in ts}) == 1 and len(ts[0].run_id) == 64
    fp = {p: fingerprint(_der(pki[p]["certificate"])) for p in PARTIES}
    assert ts[0].peer_identities == {"bob": fp["bob"], "carol": fp["carol"]}
    # a second run of the same parties gets another run id
    ts2, _ = mtls_run(pki, toy(), PARTIES)
    assert len({t.run_id for t in ts2}) == 1 and ts2[0].run_id != ts[0].run_id


def _der(path):
    import ssl
    from pathlib import Path

    return ssl.PEM_cert_to_DER_cert(Path(path).read_text())


def test_pins_without_a_ca(pki):
    def cfg(me, other):
        return TlsConfig(
            certificate=pki[me]["certificate"],
            key=pki[me]["key"],
            peer_certificates={other: pki[other]["certificate"]},
        )

    a = honest("alice", tls=cfg("alice", "bob"))
    b = honest("bob", tls=cfg("bob", "alice"))
    wire([a, b])
    ra, _rb = asyncio.run(run_all(secret(), [a, b]))
    assert ra.outputs == {"alice": "the real value"} and a.run_id == b.run_id


def test_certificates_and_config_are_checked(pki, tmp_path):
    assert party_names(_der(pki["bob"]["certificate"])) == {"bob"}
    assert PARTY_URI_PREFIX == "urn:privreg:party:"
    with pytest.raises(PrivregValueError, match="refuses to overwrite"):
        create_test_pki(pki["ca"]["certificate"].parent, ["bob"])
    with pytest.raises(PrivregValueError, match="does not exist"):
        TlsConfig(certificate=tmp_path / "nope.pem", key=pki["bob"]["key"], ca=pki["ca"]["certificate"])
    with pytest.raises(PrivregValueError, match="matching"):
        TlsConfig(certificate=pki["bob"]["certificate"], key=pki["alice"]["key"], ca=pki["ca"]["certificate"])
    with pytest.raises(PrivregValueError, match="something to trust"):
        TlsConfig(certificate=pki["bob"]["certificate"], key=pki["bob"]["key"])
    with pytest.raises(PrivregValueError, match="64 hex"):
        tls_for(pki, "bob", pins={"alice": "abc"})


# ------------------------------------------------------------------ refusals


def test_a_security_choice_is_required(pki):
    with pytest.raises(PrivregValueError, match="insecure_plaintext=True"):
        TcpTransport(local=["alice"])
    with pytest.raises(PrivregValueError, match="only one"):
        TcpTransport(local=["alice"], tls=tls_for(pki, "alice"), insecure_plaintext=True)


class _NoSelfCheck(TcpTransport):
    """An impostor: skips the check that its own certificate names its parties."""

    def _check_own_certificate(self):
        return None


def test_impostor_with_a_certificate_of_another_ca_is_refused(pki, other_pki):
    a = honest("alice", tls=tls_for(pki, "alice"))
    b = honest("bob", tls=tls_for(pki, "bob"))
    wire([a, b])
    # trusts the run's CA, but its own certificate comes from another CA
    bad = TlsConfig(
        certificate=other_pki["bob"]["certificate"], key=other_pki["bob"]["key"], ca=pki["ca"]["certificate"]
    )
    imp = honest("bob", tls=bad, connect_timeout=3.0)
    imp.set_peers({"alice": a.address})

    async def main():
        imp_task = asyncio.ensure_future(run_all(secret(), [imp]))
        await asyncio.sleep(0.2)
        genuine = await run_all(secret(), [a, b])
        return genuine, await imp_task

    (ra, rb), (ri,) = asyncio.run(main())
    assert ra.outputs == {"alice": "the real value"} and rb.outputs == {"bob": "sent"}
    # asyncio closes a failed TLS handshake without sending the alert, so the impostor only
    # sees its connection cut (and retries until connect_timeout); alice noted why
    assert isinstance(ri, ProtocolError)
    assert any("CERTIFICATE_VERIFY_FAILED" in r or "certificate verify failed" in r for r in a._refusals), a._refusals


def test_valid_certificate_for_another_party_is_refused_both_ways(pki):
    a = honest("alice", tls=tls_for(pki, "alice"))
    b = honest("bob", tls=tls_for(pki, "bob"))
    wire([a, b])
    imp = _NoSelfCheck(local=["bob"], tls=tls_for(pki, "mallory"), handshake_timeout=1.0, connect_timeout=3.0)
    imp.set_peers({"alice": a.address})

    async def main():
        imp_task = asyncio.ensure_future(run_all(secret(), [imp]))
        await asyncio.sleep(0.2)
        genuine = await run_all(secret(), [a, b])
        return genuine, await imp_task

    (ra, rb), (ri,) = asyncio.run(main())
    assert ra.outputs == {"alice": "the real value"} and rb.outputs == {"bob": "sent"}
    assert isinstance(ri, ProtocolError)
    assert "refused this process" in str(ri) and "'mallory'" in str(ri) and "'bob'" in str(ri)
    # connecting side: the process at bob's address presents mallory's certificate
    a2 = honest("alice", tls=tls_for(pki, "alice"), connect_timeout=3.0)
    m2 = _NoSelfCheck(local=["bob"], tls=tls_for(pki, "mallory"), handshake_timeout=1.0, connect_timeout=3.0)
    a2.set_peers({"bob": m2.address})
    m2.set_peers({"alice": a2.address})
    ra2, _ = asyncio.run(run_all(secret(), [a2, m2]))
    host, port = m2.address
    assert isinstance(ra2, ProtocolError)
    assert f"the peer at {host}:{port} presented a certificate for 'mallory', expected 'bob'" in str(ra2)


class _Recording(TcpTransport):
    """Records every frame it writes (meta, data)."""

    sent: list

    async def _write_raw(self, out, meta, data):
        self.sent.append((meta, data))
        await super()._write_raw(out, meta, data)


class _Replaying(TcpTransport):
    """Holds bob's valid certificate, but writes frames recorded in an earlier run."""

    recorded: list

    async def _send_frame(self, out, kind, fields, data=b""):
        async with out.lock:
            while self.recorded:
                meta, old = self.recorded.pop(0)
                await self._write_raw(out, meta, old)


class _Duplicating(TcpTransport):
    async def _send_frame(self, out, kind, fields, data=b""):
        async with out.lock:
            out.seq += 1
            meta = (kind, self._run_bytes, out.seq, *fields)
            await self._write_raw(out, meta, data)
            await self._write_raw(out, meta, data)


class _Skipping(TcpTransport):
    async def _send_frame(self, out, kind, fields, data=b""):
        async with out.lock:
            out.seq += 3 if out.seq == 0 else 1
            await self._write_raw(out, (kind, self._run_bytes, out.seq, *fields), data)


def _bob_as(cls, pki, **attrs):
    t = cls(local=["bob"], tls=tls_for(pki, "bob"), handshake_timeout=1.0, recv_timeout=5.0, linger_timeout=1.0)
    for k, v in attrs.items():
        setattr(t, k, v)
    return t


def test_replayed_frames_from_an_earlier_run_are_refused(pki):
    a1 = honest("alice", tls=tls_for(pki, "alice"))
    b1 = _bob_as(_Recording, pki, sent=[])
    wire([a1, b1])
    r1 = asyncio.run(run_all(secret(), [a1, b1]))
    assert r1[0].outputs == {"alice": "the real value"} and len(b1.sent) == 2  # the message and bob's finish
    a2 = honest("alice", tls=tls_for(pki, "alice"), linger_timeout=1.0)
    b2 = _bob_as(_Replaying, pki, recorded=list(b1.sent))
    wire([a2, b2])
    ra, _ = asyncio.run(run_all(secret(), [a2, b2]))
    assert isinstance(ra, ProtocolError) and "frame from another run" in str(ra)
    assert "alice waits for bob" in str(ra) and "broke the transport protocol" in str(ra)
    assert a2.run_id != a1.run_id


@pytest.mark.parametrize(
    "cls, expected", [(_Duplicating, "duplicate frame seq 1"), (_Skipping, "out-of-order frame: expected seq 1, got 3")]
)
def test_duplicate_and_out_of_order_frames_are_refused(pki, cls, expected):
    a = honest("alice", tls=tls_for(pki, "alice"), linger_timeout=1.0)
    b = _bob_as(cls, pki)
    wire([a, b])

    async def twice(ch):
        await ch.send("alice", 1, step="s")
        await ch.send("alice", 2, step="s")

    async def reader(ch):
        return [await ch.recv("bob", step="s"), await ch.recv("bob", step="s")]

    ra, _ = asyncio.run(run_all(FnProtocol(alice=reader, bob=twice), [a, b]))
    assert isinstance(ra, ProtocolError) and expected in str(ra)


def test_a_second_claim_of_a_party_is_refused_and_the_first_stays(pki):
    """Two processes with valid certificates for bob: the first claim wins, the second gets
    an explicit refusal (not a silent success)."""
    a = honest("alice", tls=tls_for(pki, "alice"), connect_timeout=3.0, recv_timeout=2.0, linger_timeout=1.0)
    fake = FakePeer("bob", ["alice", "bob"], tls=tls_for(pki, "bob"))
    b = honest("bob", tls=tls_for(pki, "bob"), connect_timeout=2.0)
    a.set_peers({"bob": fake.address})
    b.set_peers({"alice": a.address})

    async def main():
        task = asyncio.ensure_future(run_all(secret(), [a]))
        loop = asyncio.get_running_loop()
        threads = await loop.run_in_executor(None, lambda: fake.run(a.address, _hold, accept_delay=1.5))
        await asyncio.sleep(0.5)
        (rb,) = await run_all(secret(), [b])
        fake.close()
        (ra,) = await task
        return ra, rb, threads

    ra, rb, threads = asyncio.run(main())
    for t in threads:
        t.join(5)
    assert isinstance(rb, ProtocolError) and "already connected" in str(rb)
    assert isinstance(ra, ProtocolError)  # the fake bob never sends


def _hold(sock, run_id):
    import time

    time.sleep(1.0)


def test_an_own_certificate_outside_its_validity_is_refused_at_load(pki, tmp_path):
    """An expired (or not yet valid) own certificate fails here, naming its dates, instead
    of surfacing as a peer cutting the connection."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(past)
        .not_valid_after(past + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "old.pem", tmp_path / "old.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    with pytest.raises(PrivregValueError, match="is valid from 2020-01-01 00:00 to 2020-01-02 00:00 UTC, not now"):
        TlsConfig(certificate=cert_path, key=key_path, ca=pki["ca"]["certificate"])
