"""The TCP transport (privreg.mpc.tcp) and the transcript counts of the
protocol runtime (privreg.mpc).

One test runs a protocol (the DGK secure comparison) with its two parties in two
processes over loopback TCP on ephemeral ports. The others run two transports in one
event loop (still real TCP over loopback), which keeps them fast. Every run is bounded
by asyncio.wait_for or a queue timeout, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import ssl
import sys
import time
from pathlib import Path

import pytest
from crypto_keys import cached_keypair
from tcp_helpers import FnProtocol

from privreg.core.errors import PrivregValueError, ProtocolError
from privreg.crypto.compare import SecureComparison
from privreg.mpc.certs import create_test_pki, fingerprint
from privreg.mpc.runtime import arun_protocol, run_protocol
from privreg.mpc.tcp import TcpTransport
from privreg.mpc.tls import TlsConfig
from privreg.mpc.transcript import Message, Traffic, Transcript
from privreg.mpc.transport import InMemoryTransport

HERE = Path(__file__).parent
TIMEOUT = 30.0


def fingerprint_of(pem_path):
    return fingerprint(ssl.PEM_cert_to_DER_cert(Path(pem_path).read_text()))


def pair(local_a, local_b, **kw):
    a = TcpTransport(local=local_a, insecure_plaintext=True, **kw)
    b = TcpTransport(local=local_b, insecure_plaintext=True, **kw)
    a.set_peers(dict.fromkeys(local_b, b.address))
    b.set_peers(dict.fromkeys(local_a, a.address))
    return a, b


def run_split(proto, *transports):
    """Run ``proto`` once per transport, concurrently in one loop; results or exceptions."""

    async def main():
        return await asyncio.wait_for(
            asyncio.gather(*(arun_protocol(proto, transport=t) for t in transports), return_exceptions=True), TIMEOUT
        )

    return asyncio.run(main())


def keyed(transcript):
    return [(m.step, m.sender, m.receiver, m.size_bytes, m.ciphertexts) for m in transcript.messages]


# ------------------------------------------------------------------ two processes


def test_secure_comparison_with_parties_in_two_processes(tmp_path):
    """Over mutual TLS, with certificates from a throw-away test CA."""
    pki = create_test_pki(tmp_path, ["keyholder", "holder"])
    tls = {
        p: {"certificate": str(pki[p]["certificate"]), "key": str(pki[p]["key"]), "ca": str(pki["ca"]["certificate"])}
        for p in ("keyholder", "holder")
    }
    kp = cached_keypair(512, 5)
    bits = 8
    a = [0, 0, 255, 255, 17, 200, 128]
    b = [0, 255, 0, 255, 18, 199, 128]
    ctx = mp.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    sys.path.insert(0, str(HERE))
    try:
        import tcp_protocol_worker

        child = ctx.Process(target=tcp_protocol_worker.run_holder, args=(q_in, q_out, bits, b, tls["holder"]))
        child.start()
    finally:
        sys.path.remove(str(HERE))
    try:
        kind, child_addr = q_out.get(timeout=60)
        assert kind == "address", child_addr
        transport = TcpTransport(
            local=["keyholder"], peers={"holder": child_addr}, recv_timeout=60.0, tls=TlsConfig(**tls["keyholder"])
        )
        q_in.put({"keyholder": transport.address})
        proto = SecureComparison(
            bits=bits, count=len(a), output="both", keypair=kp, keyholder_values=a, allow_insecure=True
        )
        res = run_protocol(proto, transport=transport)
        status, child_outputs, child_transcript, child_run_id = q_out.get(timeout=60)
        assert status == "ok", child_outputs
        assert transport.security == "mtls" and transport.run_id == child_run_id
        assert transport.peer_identities == {"holder": fingerprint_of(pki["holder"]["certificate"])}
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    expected = [int(x < y) for x, y in zip(a, b)]
    assert dict(res.outputs) == {"keyholder": expected}
    assert child_outputs == {"holder": expected}
    assert child.exitcode == 0

    # both processes recorded the same messages: same steps, directions, sizes and ciphertext counts,
    # in the same order per direction (the final share exchange runs both ways at once)
    def by_direction(msgs):
        return sorted(msgs, key=lambda m: (m[1], m[2]))  # stable: keeps the order within a direction

    assert by_direction(keyed(res.transcript)) == by_direction([tuple(x) for x in child_transcript])
    assert res.transcript.per_step()["cmp.dgk.bits"].ciphertexts == 9 * len(a)


# ------------------------------------------------------------------ two transports, one loop


async def ping(ch):
    got = []
    for i in range(3):
        await ch.send("pong", {"i": i, "pad": b"x" * i}, step=f"ping{i}")
        got.append(await ch.recv("pong", step=f"pong{i}"))
    return got


async def pong(ch):
    for i in range(3):
        m = await ch.recv("ping", step=f"ping{i}")
        await ch.send("ping", m["i"] * 10, step=f"pong{i}")
    return "done"


def test_ping_pong_over_loopback_and_transcripts_agree():
    ta, tb = pair(["ping"], ["pong"])
    ra, rb = run_split(FnProtocol(ping=ping, pong=pong), ta, tb)
    assert dict(ra.outputs) == {"ping": [0, 10, 20]} and dict(rb.outputs) == {"pong": "done"}
    assert keyed(ra.transcript) == keyed(rb.transcript)
    assert [m.step for m in ra.transcript.messages] == ["ping0", "pong0", "ping1", "pong1", "ping2", "pong2"]
    mem = run_protocol(FnProtocol(ping=ping, pong=pong), transport=InMemoryTransport())
    assert keyed(mem.transcript) == keyed(ra.transcript)  # the same sizes as in memory


def test_remote_failure_reaches_the_waiting_party_with_its_cause():
    async def bad(ch):
        await ch.send("good", 1, step="one")
        raise ValueError("boom in bad")

    async def good(ch):
        await ch.recv("bad", step="one")
        return await ch.recv("bad", step="two")

    ta, tb = pair(["bad"], ["good"], recv_timeout=20.0)
    ra, rb = run_split(FnProtocol(bad=bad, good=good), ta, tb)
    assert isinstance(ra, ProtocolError) and "boom in bad" in str(ra)
    assert isinstance(rb, ProtocolError)
    assert "good waits for bad" in str(rb) and "ValueError: boom in bad" in str(rb)


def test_waiting_for_a_remote_party_that_finished_fails_at_once():
    async def quiet(ch):
        return "left"

    async def waiter(ch):
        return await ch.recv("quiet")

    ta, tb = pair(["quiet"], ["waiter"], recv_timeout=25.0)
    start = time.monotonic()
    ra, rb = run_split(FnProtocol(quiet=quiet, waiter=waiter), ta, tb)
    assert dict(ra.outputs) == {"quiet": "left"}
    assert isinstance(rb, ProtocolError) and "finished without sending" in str(rb)
    assert time.monotonic() - start < 20.0  # well before recv_timeout


def test_cross_process_wait_cycle_times_out():
    async def a(ch):
        return await ch.recv("b")

    async def b(ch):
        return await ch.recv("a")

    ta, tb = pair(["a"], ["b"], recv_timeout=0.3, linger_timeout=0.5)
    ra, rb = run_split(FnProtocol(a=a, b=b), ta, tb)
    for r in (ra, rb):
        assert isinstance(r, ProtocolError) and "recv_timeout" in str(r)


def test_local_deadlock_is_still_detected_with_remote_parties():
    async def a(ch):
        return await ch.recv("b")

    async def b(ch):
        return await ch.recv("a")

    async def c(ch):
        return "c ran"

    ta, tb = pair(["a", "b"], ["c"], recv_timeout=25.0)
    ra, rb = run_split(FnProtocol(a=a, b=b, c=c), ta, tb)
    assert isinstance(ra, ProtocolError) and "deadlock" in str(ra)
    assert "a waits for b" in str(ra.__cause__) and "b waits for a" in str(ra.__cause__)
    assert dict(rb.outputs) == {"c": "c ran"}


def test_messages_to_a_finished_remote_party_do_not_fail_the_sender():
    async def talker(ch):
        for i in range(3):
            await ch.send("reader", i, step="s")
        return "sent"

    async def reader(ch):
        return await ch.recv("talker", step="s")

    ta, tb = pair(["talker"], ["reader"])
    ra, rb = run_split(FnProtocol(talker=talker, reader=reader), ta, tb)
    assert dict(ra.outputs) == {"talker": "sent"} and dict(rb.outputs) == {"reader": 0}


def test_missing_peer_address_and_session_mismatch():
    async def a(ch):
        return await ch.recv("b")

    async def b(ch):
        await ch.send("a", 1, step="s")

    async def c(ch):
        return None

    lonely = TcpTransport(local=["a"], insecure_plaintext=True)
    (res,) = run_split(FnProtocol(a=a, b=b), lonely)
    assert isinstance(res, ProtocolError) and "no address" in str(res) and "set_peers" in str(res)
    # the two processes run different party sets: the connecting one is refused, with the reason
    ta = TcpTransport(local=["a"], insecure_plaintext=True, connect_timeout=1.0, linger_timeout=0.5)
    tb = TcpTransport(local=["b"], insecure_plaintext=True, connect_timeout=1.0, linger_timeout=0.5)
    ta.set_peers({"b": tb.address})
    tb.set_peers({"a": ta.address, "c": ta.address})

    async def main():
        return await asyncio.wait_for(
            asyncio.gather(
                arun_protocol(FnProtocol(a=a, b=b), transport=ta),
                arun_protocol(FnProtocol(a=a, b=b, c=c), transport=tb),
                return_exceptions=True,
            ),
            TIMEOUT,
        )

    ra, rb = asyncio.run(main())
    assert isinstance(rb, ProtocolError) and "refused this process" in str(rb) and "runs parties" in str(rb)
    assert isinstance(ra, ProtocolError)


def test_unreachable_peer_fails_after_connect_timeout():
    async def a(ch):
        return await ch.recv("b")

    async def b(ch):
        return None

    closed = TcpTransport(local=["b"], insecure_plaintext=True)
    address = closed.address
    closed.close()  # nothing listens there any more
    t = TcpTransport(local=["a"], peers={"b": address}, connect_timeout=0.3, insecure_plaintext=True)
    (res,) = run_split(FnProtocol(a=a, b=b), t)
    assert isinstance(res, ProtocolError) and "cannot connect" in str(res)


def test_transport_arguments_are_validated():
    with pytest.raises(PrivregValueError, match="at least one"):
        TcpTransport(local=[], insecure_plaintext=True)
    with pytest.raises(PrivregValueError):
        TcpTransport(local=["bad name"], insecure_plaintext=True)
    t = TcpTransport(local=["a"], insecure_plaintext=True)
    try:
        with pytest.raises(PrivregValueError, match="port"):
            t.set_peers({"b": ("127.0.0.1", 0)})
        with pytest.raises(PrivregValueError, match="local"):
            t.set_peers({"a": ("127.0.0.1", 5000)})
        with pytest.raises(PrivregValueError, match="recv_timeout"):
            TcpTransport(local=["a"], recv_timeout=0, insecure_plaintext=True)
    finally:
        t.close()


def test_a_transport_serves_one_run():
    async def a(ch):
        await ch.send("b", 1, step="s")

    async def b(ch):
        return await ch.recv("a", step="s")

    ta, tb = pair(["a"], ["b"])
    run_split(FnProtocol(a=a, b=b), ta, tb)
    (again,) = run_split(FnProtocol(a=a, b=b), ta)
    assert isinstance(again, ProtocolError) and "one run" in str(again)


def test_oversized_messages_are_refused():
    async def a(ch):
        await ch.send("b", b"x" * 5000, step="big")

    async def b(ch):
        return await ch.recv("a", step="big")

    ta, tb = pair(["a"], ["b"], max_message_bytes=1000, recv_timeout=5.0, linger_timeout=1.0)
    ra, _rb = run_split(FnProtocol(a=a, b=b), ta, tb)
    assert isinstance(ra, ProtocolError) and "max_message_bytes" in str(ra)


# ------------------------------------------------------------------ transcript counts


def _msg(seq, step, s, r, size, cts):
    return Message(seq=seq, step=step, sender=s, receiver=r, size_bytes=size, ciphertexts=cts)


def test_transcript_counts_per_party_and_step():
    t = Transcript(parties=["A", "B", "C"])
    for m in [
        _msg(1, "keys", "B", "A", 100, 0),
        _msg(2, "enc", "B", "A", 1000, 4),
        _msg(3, "enc", "B", "C", 500, 2),
        _msg(4, "back", "A", "B", 300, 1),
    ]:
        t.record(m)
    pps = t.per_party_step()
    assert pps["B"]["enc"]["sent"] == Traffic(messages=2, bytes=1500, ciphertexts=6)
    assert pps["A"]["enc"]["received"] == Traffic(messages=1, bytes=1000, ciphertexts=4)
    assert pps["A"]["back"]["sent"].ciphertexts == 1 and pps["C"]["enc"]["sent"] == Traffic()
    assert list(pps["A"]) == ["keys", "enc", "back"]
    assert t.per_party()["B"]["sent"] == Traffic(messages=3, bytes=1600, ciphertexts=6)
    assert t.per_step()["enc"] == Traffic(messages=2, bytes=1500, ciphertexts=6)
    assert t.total() == Traffic(messages=4, bytes=1900, ciphertexts=7)
    rows = [line.split() for line in t.step_table().splitlines()]
    assert rows[0] == ["step", "from", "to", "msgs", "ciphertexts", "bytes"]
    assert rows[2] == ["enc", "B", "A", "1", "4", "1000"] and rows[-1] == ["total", "4", "7", "1900"]
    head, *body = [line.split() for line in t.table(ciphertexts=True).splitlines()]
    assert head == [
        "party",
        "sent",
        "msgs",
        "sent",
        "bytes",
        "sent",
        "cts",
        "recv",
        "msgs",
        "recv",
        "bytes",
        "recv",
        "cts",
    ]
    assert ["B", "3", "1600", "6", "1", "300", "1"] in body
    assert t.to_dict()["messages"][1]["ciphertexts"] == 4
