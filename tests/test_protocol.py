"""Tests of the multi-party protocol runtime (privreg.mpc) and the Protocol interface.

Every test that could hang on a broken deadlock detector runs the protocol through
``asyncio.wait_for`` with a timeout, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import numpy as np
import pytest

from privreg.core.errors import PrivregValueError, ProtocolError
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import arun_protocol, run_protocol
from privreg.mpc.transcript import Message, Transcript
from privreg.mpc.transport import InMemoryTransport
from privreg.mpc.wire import decode, encode

TIMEOUT = 10.0  # seconds; generous, the protocols below finish in milliseconds
MODULUS = (1 << 61) - 1


def run_guarded(protocol: Protocol, **kwargs):
    """Run ``protocol`` but fail (TimeoutError) rather than hang if it never finishes."""

    async def main():
        return await asyncio.wait_for(arun_protocol(protocol, **kwargs), timeout=TIMEOUT)

    return asyncio.run(main())


# --------------------------------------------------------------------------- helpers


class FnParty(Party):
    """A party whose role is an ``async fn(channel)``."""

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn
        self.ran = False

    async def run(self, channel: Channel):
        self.ran = True
        return await self.fn(channel)


class FnProtocol(Protocol):
    name = "fn-protocol"
    caveats = "Test protocol: parties are arbitrary coroutines; no security claims."

    def __init__(self, parties, learns=None):
        self._parties = list(parties)
        self._learns = learns

    def parties(self):
        return self._parties

    def learns(self):
        if self._learns is not None:
            return self._learns
        return {p.name: "whatever its coroutine receives" for p in self._parties}


class SumParty(Party):
    """Additive-sharing secure sum: split the input into shares mod MODULUS, send one to
    every other party (step 'share'), broadcast the sum of the shares held (step
    'partial'), output the total. Records what it sent, for checking the transcript."""

    def __init__(self, name, value, seed):
        self.name = name
        self.value = value
        self.rng = InsecureReproducibleRandom(seed=seed)
        self.sent: list[tuple[str, str, object]] = []  # (receiver, step, payload)

    async def _send(self, ch, to, payload, step):
        self.sent.append((to, step, payload))
        await ch.send(to, payload, step=step)

    async def run(self, ch: Channel):
        others = [p for p in ch.parties if p != self.name]
        shares = [self.rng.randbelow(MODULUS) for _ in others]
        own = (self.value - sum(shares)) % MODULUS
        for other, share in zip(others, shares):
            await self._send(ch, other, {"share": share}, "share")
        held = own
        for other in others:
            held = (held + (await ch.recv(other, step="share"))["share"]) % MODULUS
        for other in others:
            await self._send(ch, other, held, "partial")
        total = held
        for other in others:
            total = (total + await ch.recv(other, step="partial")) % MODULUS
        return total


class SecureSum(Protocol):
    name = "secure-sum"
    caveats = "Semi-honest parties only; no party may collude with all others."

    def __init__(self, values: dict[str, int]):
        self._parties = [SumParty(n, x, seed=i) for i, (n, x) in enumerate(values.items())]

    def parties(self):
        return self._parties

    def learns(self):
        return {p.name: "the sum of all inputs" for p in self._parties}


# --------------------------------------------------------------------------- happy path


@pytest.mark.parametrize("values", [{"A": 5, "B": 11}, {"alice": 3, "bob": 1000, "carol": 2**40}])
def test_secure_sum_outputs_and_transcript(values):
    proto = SecureSum(values)
    parties = {p.name: p for p in proto.parties()}
    res = run_guarded(proto)
    n = len(values)
    expected = sum(values.values()) % MODULUS
    assert dict(res.outputs) == dict.fromkeys(values, expected)

    msgs = res.transcript.messages
    # every party sends one 'share' and one 'partial' to every other party
    assert len(msgs) == 2 * n * (n - 1)
    assert [m.seq for m in msgs] == list(range(1, len(msgs) + 1))
    for m in msgs:
        assert m.size_bytes == len(encode(m.payload))
        assert m.sender != m.receiver and {m.sender, m.receiver} <= set(values)
    # the transcript records exactly what the parties sent (sender, receiver, step, payload)
    recorded = Counter((m.sender, m.receiver, m.step, encode(m.payload)) for m in msgs)
    actually_sent = Counter(
        (p.name, to, step, encode(payload)) for p in parties.values() for to, step, payload in p.sent
    )
    assert recorded == actually_sent  # so size_bytes is also len(encode(<what was sent>))


def test_transcript_filters_and_totals_are_consistent():
    res = run_guarded(SecureSum({"A": 1, "B": 2, "C": 3}))
    t = res.transcript
    msgs = t.messages
    for party in "ABC":
        assert t.sent_by(party) == tuple(m for m in msgs if m.sender == party)
        assert t.received_by(party) == tuple(m for m in msgs if m.receiver == party)
        assert len(t.sent_by(party)) == 4 and len(t.received_by(party)) == 4
        assert {m.receiver for m in t.sent_by(party)} == set("ABC") - {party}
        assert {m.sender for m in t.received_by(party)} == set("ABC") - {party}
    assert t.sent_by("nobody") == () and t.received_by("nobody") == ()

    per_party = t.per_party()
    assert set(per_party) == set("ABC")
    for party, traffic in per_party.items():
        assert traffic["sent"].messages == len(t.sent_by(party))
        assert traffic["sent"].bytes == sum(m.size_bytes for m in t.sent_by(party))
        assert traffic["received"].messages == len(t.received_by(party))
        assert traffic["received"].bytes == sum(m.size_bytes for m in t.received_by(party))

    per_step = t.per_step()
    assert set(per_step) == {"share", "partial"}
    for step, traffic in per_step.items():
        of_step = [m for m in msgs if m.step == step]
        assert traffic.messages == len(of_step) == 6
        assert traffic.bytes == sum(m.size_bytes for m in of_step)
    total = sum(m.size_bytes for m in msgs)
    assert sum(tr.bytes for tr in per_step.values()) == total
    assert sum(tr["sent"].bytes for tr in per_party.values()) == total
    assert sum(tr["received"].bytes for tr in per_party.values()) == total

    d = t.to_dict()
    assert [(x["seq"], x["step"], x["sender"], x["receiver"], x["size_bytes"]) for x in d["messages"]] == [
        (m.seq, m.step, m.sender, m.receiver, m.size_bytes) for m in msgs
    ]


def test_ping_pong_order_steps_and_sizes():
    payloads = [None, True, -(2**100), 3.5, "héllo", b"\x00\x01", (1, [2, {"k": 3}]), np.arange(6.0).reshape(2, 3)]

    async def ping(ch):
        echoed = []
        for i, p in enumerate(payloads):
            await ch.send("pong", p, step=f"ping{i}")
            echoed.append(await ch.recv("pong", step=f"pong{i}"))
        return echoed

    async def pong(ch):
        for i in range(len(payloads)):
            got = await ch.recv("ping", step=f"ping{i}")
            await ch.send("ping", got, step=f"pong{i}")
        return len(payloads)

    res = run_guarded(FnProtocol([FnParty("ping", ping), FnParty("pong", pong)]))
    assert res.outputs["pong"] == len(payloads)
    for sent, back in zip(payloads, res.outputs["ping"]):
        assert encode(back) == encode(sent)  # round trip through the codec is faithful
    msgs = res.transcript.messages
    assert [(m.sender, m.receiver, m.step) for m in msgs] == [
        x for i in range(len(payloads)) for x in (("ping", "pong", f"ping{i}"), ("pong", "ping", f"pong{i}"))
    ]
    for m, p in zip(msgs[::2], payloads):
        assert m.size_bytes == len(encode(p))


# --------------------------------------------------------------------------- isolation


def test_received_values_are_decoded_copies():
    box = {}

    async def sender(ch):
        box["list"] = [1, 2, [3, 4]]
        box["array"] = np.array([1.0, 2.0, 3.0])
        await ch.send("receiver", box["list"], step="list")
        await ch.send("receiver", box["array"], step="array")
        return None

    async def receiver(ch):
        lst = await ch.recv("sender", step="list")
        arr = await ch.recv("sender", step="array")
        box["got_list"], box["got_array"] = lst, arr
        lst.append(99)
        lst[2].append(5)
        lst[0] = -1
        arr[0] = -100.0
        return None

    run_guarded(FnProtocol([FnParty("sender", sender), FnParty("receiver", receiver)]))
    assert box["got_list"] is not box["list"] and box["got_array"] is not box["array"]
    assert box["list"] == [1, 2, [3, 4]]
    np.testing.assert_array_equal(box["array"], [1.0, 2.0, 3.0])
    assert box["got_list"] == [-1, 2, [3, 4, 5], 99]  # the receiver's own copy was mutable


def test_receiver_mutation_does_not_rewrite_transcript():
    async def sender(ch):
        await ch.send("receiver", [1, 2, 3], step="s")

    async def receiver(ch):
        got = await ch.recv("sender", step="s")
        got.append(4)

    res = run_guarded(FnProtocol([FnParty("sender", sender), FnParty("receiver", receiver)]))
    (msg,) = res.transcript.messages
    assert msg.payload == [1, 2, 3]


# --------------------------------------------------------------------------- deadlock


def test_two_party_deadlock_is_reported_not_hung():
    async def a(ch):
        return await ch.recv("B")

    async def b(ch):
        return await ch.recv("A")

    with pytest.raises(ProtocolError) as info:
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)]))
    msg = str(info.value)
    assert "deadlock" in msg
    assert "A waits for B" in msg and "B waits for A" in msg


def test_three_party_cycle_deadlock():
    async def a(ch):
        return await ch.recv("B")

    async def b(ch):
        return await ch.recv("C")

    async def c(ch):
        return await ch.recv("A")

    with pytest.raises(ProtocolError) as info:
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b), FnParty("C", c)]))
    msg = str(info.value)
    assert "deadlock" in msg
    for w in ("A waits for B", "B waits for C", "C waits for A"):
        assert w in msg


def test_deadlock_after_partial_progress_and_a_finished_party():
    """A sends to B, then waits for C; B finishes; C waits for B (who is done)."""

    async def a(ch):
        await ch.send("B", 1, step="x")
        return await ch.recv("C")

    async def b(ch):
        return await ch.recv("A", step="x")

    async def c(ch):
        return await ch.recv("B")

    with pytest.raises(ProtocolError) as info:
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b), FnParty("C", c)]))
    msg = str(info.value)
    assert "deadlock" in msg and "A waits for C" in msg and "C waits for B" in msg
    assert "B waits" not in msg  # B finished normally


def test_waiting_on_a_slow_but_live_party_is_not_a_deadlock():
    async def slow(ch):
        for _ in range(20):
            await asyncio.sleep(0)  # other parties block meanwhile; slow is still live
        await ch.send("waiter", "late", step="s")
        return "sent"

    async def waiter(ch):
        return await ch.recv("slow", step="s")

    res = run_guarded(FnProtocol([FnParty("waiter", waiter), FnParty("slow", slow)]))
    assert dict(res.outputs) == {"waiter": "late", "slow": "sent"}


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("failing_first", [True, False])
def test_failing_party_is_named_as_root_cause(failing_first):
    async def bad(ch):
        raise ValueError("boom in bad party")

    async def good(ch):
        return await ch.recv("bad")  # induced deadlock once 'bad' is gone

    parties = [FnParty("bad", bad), FnParty("good", good)]
    if not failing_first:
        parties.reverse()
    with pytest.raises(ProtocolError) as info:
        run_guarded(FnProtocol(parties))
    msg = str(info.value)
    assert "'bad'" in msg and "ValueError" in msg and "boom in bad party" in msg
    assert "deadlock" not in msg and "'good'" not in msg
    assert isinstance(info.value.__cause__, ValueError)


def test_failure_after_sending_names_the_failing_party():
    async def a(ch):
        await ch.send("B", 1, step="one")
        await ch.recv("B", step="ack")
        raise RuntimeError("A broke after the ack")

    async def b(ch):
        await ch.recv("A", step="one")
        await ch.send("A", "ack", step="ack")
        return await ch.recv("A", step="two")

    with pytest.raises(ProtocolError, match=r"party 'A' failed: RuntimeError: A broke after the ack"):
        run_guarded(FnProtocol([FnParty("B", b), FnParty("A", a)]))


def test_root_cause_whose_message_mentions_deadlock():
    async def bad(ch):
        raise RuntimeError("lock manager detected a deadlock")

    async def good(ch):
        return await ch.recv("bad")

    with pytest.raises(ProtocolError) as info:
        run_guarded(FnProtocol([FnParty("good", good), FnParty("bad", bad)]))
    assert "party 'bad' failed: RuntimeError" in str(info.value)


def test_step_mismatch_raises():
    async def a(ch):
        await ch.send("B", 1, step="b")

    async def b(ch):
        return await ch.recv("A", step="a")

    with pytest.raises(ProtocolError) as info:
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)]))
    msg = str(info.value)
    assert "party 'B' failed" in msg
    assert "expected step 'a'" in msg and "got step 'b'" in msg


def test_recv_without_step_accepts_any_step():
    async def a(ch):
        await ch.send("B", 7, step="anything")

    async def b(ch):
        return await ch.recv("A")

    assert run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)])).outputs["B"] == 7


def test_send_to_unknown_party_raises():
    async def a(ch):
        await ch.send("Zed", 1, step="s")

    async def b(ch):
        return await ch.recv("A")

    with pytest.raises(ProtocolError) as info:
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)]))
    msg = str(info.value)
    assert "party 'A' failed" in msg and "'Zed'" in msg and "not a party" in msg


def test_recv_from_unknown_party_raises():
    async def a(ch):
        return await ch.recv("Zed")

    async def b(ch):
        return None

    with pytest.raises(ProtocolError, match=r"party 'A' failed.*'Zed' is not a party"):
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)]))


def test_send_to_self_raises():
    async def a(ch):
        await ch.send("A", 1, step="loop")

    async def b(ch):
        return None

    with pytest.raises(ProtocolError, match=r"party 'A' failed.*'A' sent a message to itself at step 'loop'"):
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)]))
    # nothing was recorded for the refused message
    transport = InMemoryTransport()
    with pytest.raises(ProtocolError):
        run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)]), transport=transport)
    assert transport.transcript.messages == ()


def test_transport_rejects_direct_misuse():
    t = InMemoryTransport()
    t.open(["A", "B"])

    async def go():
        with pytest.raises(ProtocolError, match="sender 'Q'"):
            await t.send(sender="Q", receiver="A", step="s", payload=1)
        with pytest.raises(ProtocolError, match="receiver 'Q'"):
            await t.send(sender="A", receiver="Q", step="s", payload=1)
        with pytest.raises(ProtocolError, match="itself"):
            await t.send(sender="B", receiver="B", step="s", payload=1)

    asyncio.run(go())
    assert t.transcript.messages == ()


# --------------------------------------------------------------------------- declarations


def _noop_parties(*names):
    async def noop(ch):
        return None

    return [FnParty(n, noop) for n in names]


@pytest.mark.parametrize(
    "learns",
    [
        {"A": "nothing"},  # B missing
        {"A": "nothing", "B": "nothing", "C": "nothing"},  # C is not a party
        {"A": "nothing", "X": "nothing"},  # wrong name
        {},
    ],
)
def test_learns_must_cover_exactly_the_parties(learns):
    parties = _noop_parties("A", "B")
    with pytest.raises(ProtocolError, match="learns"):
        run_guarded(FnProtocol(parties, learns=learns))
    assert not any(p.ran for p in parties)  # refused before any party ran


def test_learns_covering_exactly_the_parties_runs():
    parties = _noop_parties("A", "B")
    res = run_guarded(FnProtocol(parties, learns={"B": "x", "A": "y"}))
    assert dict(res.outputs) == {"A": None, "B": None}
    assert all(p.ran for p in parties)


def test_duplicate_party_names_rejected():
    parties = _noop_parties("A", "B", "A")
    with pytest.raises(ProtocolError, match="unique"):
        run_guarded(FnProtocol(parties))
    assert not any(p.ran for p in parties)


def test_invalid_party_name_rejected():
    with pytest.raises(PrivregValueError):
        run_guarded(FnProtocol(_noop_parties("A", "bad name")))


def test_concrete_protocol_without_caveats_is_a_type_error():
    with pytest.raises(TypeError, match=r"NoCaveats.*caveats"):

        class NoCaveats(Protocol):
            def parties(self):
                return []

            def learns(self):
                return {}

    with pytest.raises(TypeError, match="caveats"):

        class BlankCaveats(Protocol):
            caveats = "   \n "

            def parties(self):
                return []

            def learns(self):
                return {}


def test_abstract_intermediate_protocol_may_omit_caveats():
    class Intermediate(Protocol):  # still abstract: learns() missing
        def parties(self):
            return _noop_parties("A", "B")

    class Concrete(Intermediate):
        caveats = "documented"

        def learns(self):
            return {"A": "-", "B": "-"}

    assert dict(run_guarded(Concrete()).outputs) == {"A": None, "B": None}
    with pytest.raises(TypeError, match="caveats"):

        class ConcreteNoCaveats(Intermediate):
            def learns(self):
                return {"A": "-", "B": "-"}


def test_sync_run_works():
    res = run_protocol(SecureSum({"A": 40, "B": 2}))
    assert dict(res.outputs) == {"A": 42, "B": 42}


# --------------------------------------------------------------------------- transcript


def test_transcript_without_payloads_keeps_sizes():
    with_payloads = run_guarded(SecureSum({"A": 1, "B": 2, "C": 3}))
    transport = InMemoryTransport(keep_payloads=False)
    without = run_guarded(SecureSum({"A": 1, "B": 2, "C": 3}), transport=transport)
    assert without.transcript is transport.transcript
    assert dict(without.outputs) == dict(with_payloads.outputs) == dict.fromkeys("ABC", 6)
    a, b = with_payloads.transcript.messages, without.transcript.messages
    assert len(a) == len(b) == 12
    assert all(m.payload is None for m in b)
    assert all(m.payload is not None for m in a)
    # seeded parties: the very same messages, so the very same metadata
    assert [(m.seq, m.step, m.sender, m.receiver, m.size_bytes) for m in a] == [
        (m.seq, m.step, m.sender, m.receiver, m.size_bytes) for m in b
    ]
    assert without.transcript.per_party() == with_payloads.transcript.per_party()


def test_transcript_record_directly():
    msg = Message(seq=1, step="s", sender="A", receiver="B", size_bytes=9, payload=[1, 2])
    kept, dropped = Transcript(), Transcript(keep_payloads=False)
    kept.record(msg)
    dropped.record(msg)
    assert kept.messages[0].payload == [1, 2]
    assert dropped.messages[0].payload is None
    assert dropped.messages[0].size_bytes == 9 and dropped.messages[0].seq == 1
    assert msg.payload == [1, 2]  # the original message is untouched


def test_table_lists_every_communicating_party_with_its_traffic():
    res = run_guarded(SecureSum({"alice": 1, "bob": 2, "carol": 3}))
    t = res.transcript
    lines = t.table().splitlines()
    assert lines[0].split()[0] == "party"
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert set(rows) == {"alice", "bob", "carol"}
    for party, cells in rows.items():
        traffic = t.per_party()[party]
        assert cells == [
            str(traffic["sent"].messages),
            str(traffic["sent"].bytes),
            str(traffic["received"].messages),
            str(traffic["received"].bytes),
        ]


def test_table_lists_a_silent_party():
    async def a(ch):
        await ch.send("B", 1, step="s")

    async def b(ch):
        return await ch.recv("A", step="s")

    async def silent(ch):
        return "computed locally"

    res = run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b), FnParty("silent", silent)]))
    rows = [line.split()[0] for line in res.transcript.table().splitlines()[1:]]
    assert sorted(rows) == ["A", "B", "silent"]


def test_decode_of_recorded_size_matches_payload():
    """size_bytes is the length of the bytes actually carried: decoding them gives the payload."""

    async def a(ch):
        await ch.send("B", {"v": np.arange(10, dtype=np.int64), "n": 2**70}, step="s")

    async def b(ch):
        return await ch.recv("A", step="s")

    res = run_guarded(FnProtocol([FnParty("A", a), FnParty("B", b)]))
    (m,) = res.transcript.messages
    data = encode(m.payload)
    assert m.size_bytes == len(data) > 80  # 10 int64 alone are 80 bytes
    back = decode(data)
    np.testing.assert_array_equal(back["v"], np.arange(10))
    assert back["n"] == 2**70


def test_reused_transport_does_not_deliver_stale_messages():
    async def send_unread(ch):
        await ch.send("B", "stale", step="x")

    async def ignore(ch):
        return None  # leaves the message unread (the runtime accepts this)

    async def send_fresh(ch):
        await ch.send("B", "fresh", step="x")

    async def read(ch):
        return await ch.recv("A", step="x")

    transport = InMemoryTransport()
    run_guarded(FnProtocol([FnParty("A", send_unread), FnParty("B", ignore)]), transport=transport)
    res = run_guarded(FnProtocol([FnParty("A", send_fresh), FnParty("B", read)]), transport=transport)
    assert res.outputs["B"] == "fresh"
