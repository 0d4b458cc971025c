"""MP-SPPRL as a protocol (plugin pprl: protocol.py; paper 004): the linked groups equal
the plaintext pipeline (double blocking, sliding-window merge, candidate groups, the
linkage unit's encryptor assignment, plaintext verdict); the transcript shows that the
linkage unit never receives a Bloom filter and that no party receives another party's
plaintext filter; small keys need the explicit insecure opt-in; the run also works with
the linkage unit and the data parties on two TCP transports."""

from __future__ import annotations

import asyncio

import attrs
import numpy as np
import pytest
from crypto_keys import cached_keypair

from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import arun_protocol, run_protocol
from privreg.mpc.tcp import TcpTransport
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl.assignment import group_units
from privreg.plugins.pprl.blocking import BlockingConfig, party_signatures
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.encoding import encode_records
from privreg.plugins.pprl.matching import match_plaintext
from privreg.plugins.pprl.merge import candidate_groups, sliding_window_merge
from privreg.plugins.pprl.protocol import LINKAGE_UNIT, PPRLProtocol
from privreg.plugins.pprl.schema import FEBRL_SCHEMA

SECRET = bytes(range(101, 133))  # tests only: a real run draws secrets.token_bytes(32)
PARTIES = ("P1", "P2", "P3")


@pytest.fixture(scope="module")
def records():
    pop = synthetic_population(110, rng=InsecureReproducibleRandom(seed=21))
    data = make_parties(pop, parties=3, corruption=0.3, rng=InsecureReproducibleRandom(seed=22), overlap=0.6)
    return {
        p: encode_records(data.frames[p], schema=FEBRL_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in data.parties
    }


@pytest.fixture(scope="module")
def kp():
    return cached_keypair(512, 4)


def protocol(records, kp, **kw):
    kw.setdefault("rng", InsecureReproducibleRandom(seed=1))
    return PPRLProtocol(
        parties=3, records=records, secret=SECRET, keypair=kp, insecure_allow_small_keys=True, workers=1, **kw
    )


def reference(records, lu, *, blocking=None, threshold=3, rule="star"):
    """The plaintext pipeline with the linkage unit's lmin and encryptor assignment."""
    cfg = blocking or BlockingConfig()
    sigs = [party_signatures(records[p], config=cfg, secret=SECRET, lmin=lu["lmin"]) for p in PARTIES]
    blocks = sliding_window_merge(sigs, window=cfg.window_for(3))
    groups = candidate_groups(blocks, parties=PARTIES)
    enc = lu["assignment"].group_encryptors(group_units(groups, blocks))
    filters = {p: records[p].match_filters for p in PARTIES}
    ok = match_plaintext(groups, filters, threshold, rule=rule, encryptor=enc)
    return groups, {tuple(r) for r in groups.records[ok].tolist()}


def links(lu):
    return {tuple(r) for r in np.asarray(lu["links"]).tolist()}


@pytest.mark.parametrize("layout", ["slots", "bits"])
def test_linked_groups_equal_the_plaintext_pipeline(records, kp, layout):
    res = run_protocol(protocol(records, kp, layout=layout), transport=InMemoryTransport())
    lu = res.outputs[LINKAGE_UNIT]
    groups, want = reference(records, lu)
    assert lu["candidates"] == len(groups) > 0
    assert links(lu) == want and len(want) > 10
    counts = lu["counts"]
    assert counts.matched == len(want) and counts.comparisons <= counts.required_pairs
    assert [r.label for r in counts.rounds] == ["r1", "r2"]
    steps = list(res.transcript.per_step())
    for step in (
        "keys",
        "dispersion",
        "lmin",
        "signatures",
        "groups",
        "requests-r1",
        "encrypted-filters-r1",
        "distances-r1",
        "requests-r2",
        "distances-r2",
        "result",
    ):
        assert step in steps
    assert set(lu["timings"]) >= {"keys", "blocking", "assignment", "matching", "decryption", "total"}
    assert lu["ops"]["decryptions"] > 0 and lu["ops"]["encryptions"] == 0
    # each party learns its own linked records and the group ids, matching the linkage unit's groups
    for i, p in enumerate(PARTIES):
        out = res.outputs[p]
        assert {tuple(r) for r in out["links"].tolist()} == {(g, int(row[i])) for g, row in enumerate(lu["links"])}
        assert out["encrypted"] == lu["assignment"].encrypt[p].size
    if layout == "slots":  # neighbouring encrypted records share result ciphertexts
        assert res.transcript.per_step()["distances-r1"].ciphertexts < counts.rounds[0].pairs


def test_all_pairs_rule_with_completion_round(records, kp):
    res = run_protocol(protocol(records, kp, rule="all", early_rounds=1, threshold=4))
    lu = res.outputs[LINKAGE_UNIT]
    groups, _ = reference(records, lu, threshold=4)
    filters = {p: records[p].match_filters for p in PARTIES}
    want = match_plaintext(groups, filters, 4, rule="all")
    assert links(lu) == {tuple(r) for r in groups.records[want].tolist()}
    assert [r.label for r in lu["counts"].rounds] == ["r1", "completion"]
    assert "encrypted-filters-completion" in res.transcript.per_step()


def test_fixed_lmin_skips_the_dispersion_step(records, kp):
    cfg = BlockingConfig(lmin=3, lsh_bits=12)
    res = run_protocol(protocol(records, kp, blocking=cfg))
    lu = res.outputs[LINKAGE_UNIT]
    assert lu["lmin"] == 3
    assert "dispersion" not in res.transcript.per_step() and "lmin" not in res.transcript.per_step()
    assert links(lu) == reference(records, lu, blocking=cfg)[1]


def test_party_names_in_any_order(records, kp):
    """Custom names, not in sorted order: requests and replies stay aligned."""
    from privreg.plugins.pprl.records import EncodedRecords

    names = ("C", "A", "B")
    renamed = {
        q: EncodedRecords(
            party=q, ids=records[p].ids, block_filters=records[p].block_filters, match_filters=records[p].match_filters
        )
        for q, p in zip(names, PARTIES)
    }
    res = run_protocol(
        PPRLProtocol(
            parties=names,
            records=renamed,
            secret=SECRET,
            keypair=kp,
            insecure_allow_small_keys=True,
            workers=1,
            rng=InsecureReproducibleRandom(seed=2),
        )
    )
    lu = res.outputs[LINKAGE_UNIT]
    assert lu["parties"] == names
    cfg = BlockingConfig()
    sigs = [party_signatures(renamed[q], config=cfg, secret=SECRET, lmin=lu["lmin"]) for q in names]
    blocks = sliding_window_merge(sigs, window=cfg.window_for(3))
    groups = candidate_groups(blocks, parties=names)
    enc = lu["assignment"].group_encryptors(group_units(groups, blocks))
    ok = match_plaintext(groups, {q: renamed[q].match_filters for q in names}, 3, rule="star", encryptor=enc)
    assert links(lu) == {tuple(r) for r in groups.records[ok].tolist()} and ok.sum() > 10


# ------------------------------------------------------------------ what the transcript shows


def _walk(x):
    yield x
    if isinstance(x, dict):
        for item in x.values():
            yield from _walk(item)
    elif isinstance(x, (list, tuple)):
        for item in x:
            yield from _walk(item)


def _filter_rows(records, parties):
    rows = set()
    lengths = set()
    for p in parties:
        for f in (records[p].block_filters, records[p].match_filters):
            lengths.add(f.shape[1])
            rows.update(r.tobytes() for r in np.packbits(f, axis=1))
    return rows, lengths


def assert_no_filter(payloads, records, parties):
    """No array, byte string, int or list in ``payloads`` is a filter row of ``parties``."""
    rows, lengths = _filter_rows(records, parties)
    int_rows = {int.from_bytes(r, "big") for r in rows}
    walked = 0
    for payload in payloads:
        for node in _walk(payload):
            walked += 1
            if isinstance(node, np.ndarray) and node.ndim >= 1 and node.shape[-1] in lengths:
                assert node.dtype.kind not in "b" and node.dtype != np.uint8, "a bit array of filter length was sent"
                flat = node.reshape(-1, node.shape[-1])
                if np.all((flat == 0) | (flat == 1)):
                    for row in flat.astype(bool):
                        assert np.packbits(row).tobytes() not in rows, "a filter row was sent"
            elif isinstance(node, (bytes, bytearray)):
                assert bytes(node) not in rows
            elif isinstance(node, int) and not isinstance(node, bool) and node > 255:
                assert node not in int_rows
            elif isinstance(node, list) and len(node) in lengths and all(x in (0, 1, True, False) for x in node):
                assert np.packbits(np.array(node, dtype=bool)).tobytes() not in rows
    return walked


def test_the_linkage_unit_never_receives_a_filter(records, kp):
    res = run_protocol(protocol(records, kp), transport=InMemoryTransport(keep_payloads=True))
    received = res.transcript.received_by(LINKAGE_UNIT)
    assert {m.step for m in received} >= {"dispersion", "signatures", "distances-r1", "distances-r2"}
    assert assert_no_filter([m.payload for m in received], records, PARTIES) > 50
    sig = next(m.payload for m in received if m.step == "signatures")
    assert set(sig) == {"record", "lsh_group", "lsh_key", "suffix_len", "suffix", "filter_length"}
    # the walker does catch a filter
    with pytest.raises(AssertionError):
        assert_no_filter([{"x": records["P2"].match_filters[:2]}], records, PARTIES)
    with pytest.raises(AssertionError):
        assert_no_filter([[records["P1"].block_filters[3].astype(np.int64)]], records, PARTIES)


def test_no_party_receives_another_partys_plaintext_filter(records, kp):
    res = run_protocol(protocol(records, kp), transport=InMemoryTransport(keep_payloads=True))
    for p in PARTIES:
        received = res.transcript.received_by(p)
        assert {m.sender for m in received} >= {LINKAGE_UNIT}
        others = [q for q in PARTIES if q != p]
        assert_no_filter([m.payload for m in received], records, others)
        # from the other parties only ciphertexts (encrypted filters) arrive
        for m in received:
            if m.sender != LINKAGE_UNIT:
                assert m.step.startswith("encrypted-filters-") and m.ciphertexts > 0


def test_record_ids_and_entity_labels_are_never_sent(records, kp):
    """``EncodedRecords.ids`` and ``entities`` stay with their party: no string in any
    payload anyone receives is a record id or a ground-truth entity label (records are
    addressed by position only), and the protocol's links do not depend on entities."""
    res = run_protocol(protocol(records, kp), transport=InMemoryTransport(keep_payloads=True))
    secret_strings = {s for p in PARTIES for s in records[p].ids + (records[p].entities or ())}
    assert len(secret_strings) > 100
    payloads = [m.payload for who in (*PARTIES, LINKAGE_UNIT) for m in res.transcript.received_by(who)]
    sent = {x for p in payloads for x in _walk(p) if isinstance(x, (str, bytes))}
    sent |= {k for p in payloads for x in _walk(p) if isinstance(x, dict) for k in x}
    assert not secret_strings.intersection(sent)
    # the walker does see strings: a planted id is caught
    assert secret_strings.intersection({x for x in _walk([{"a": records["P1"].ids[0]}]) if isinstance(x, str)})
    blind = {p: attrs.evolve(r, entities=None) for p, r in records.items()}
    assert links(run_protocol(protocol(blind, kp)).outputs[LINKAGE_UNIT]) == links(res.outputs[LINKAGE_UNIT])


# ------------------------------------------------------------------ keys and arguments


def test_keys_below_2048_bits_need_the_insecure_opt_in(records):
    with pytest.raises(PrivregValueError, match="2048"):
        PPRLProtocol(parties=3, records=records, secret=SECRET, key_bits=1024)
    with pytest.raises(PrivregValueError, match="2048"):
        PPRLProtocol(parties=3, records=records, secret=SECRET, keypair=cached_keypair(512, 4))
    proto = PPRLProtocol(parties=3, records=records, secret=SECRET, key_bits=512, insecure_allow_small_keys=True)
    assert proto.key_bits == 512


def test_arguments_are_validated(records):
    with pytest.raises(PrivregValueError, match="distinct names"):
        PPRLProtocol(parties=["P1", LINKAGE_UNIT])
    with pytest.raises(PrivregValueError, match="party"):
        PPRLProtocol(parties=["A", "B", "C"], records=records)
    with pytest.raises(PrivregValueError, match="window"):
        PPRLProtocol(parties=3, blocking=BlockingConfig(window=2))
    with pytest.raises(PrivregValueError, match="layout"):
        PPRLProtocol(parties=3, layout="packed")
    with pytest.raises(PrivregValueError, match="early_rounds"):
        PPRLProtocol(parties=3, early_rounds=3)
    assert set(PPRLProtocol(parties=4).learns()) == {"P1", "P2", "P3", "P4", LINKAGE_UNIT}


# ------------------------------------------------------------------ over TCP


def test_linkage_unit_and_parties_on_two_tcp_transports(records, kp):
    """One process, two transports on loopback: the linkage unit on one, the data parties
    on the other; every message between them crosses a socket."""
    lu_t = TcpTransport(local=[LINKAGE_UNIT], recv_timeout=60.0, insecure_plaintext=True)
    parties_t = TcpTransport(local=list(PARTIES), recv_timeout=60.0, insecure_plaintext=True)
    lu_t.set_peers(dict.fromkeys(PARTIES, parties_t.address))
    parties_t.set_peers({LINKAGE_UNIT: lu_t.address})
    proto = protocol(records, kp, rng=None)

    async def main():
        return await asyncio.wait_for(
            asyncio.gather(arun_protocol(proto, transport=lu_t), arun_protocol(proto, transport=parties_t)), 120
        )

    lu_res, parties_res = asyncio.run(main())
    lu = lu_res.outputs[LINKAGE_UNIT]
    assert set(parties_res.outputs) == set(PARTIES)
    assert links(lu) == reference(records, lu)[1]
    sent = {
        (m.step, m.sender, m.receiver, m.size_bytes)
        for m in parties_res.transcript.messages
        if m.receiver == LINKAGE_UNIT
    }
    got = {
        (m.step, m.sender, m.receiver, m.size_bytes) for m in lu_res.transcript.messages if m.receiver == LINKAGE_UNIT
    }
    assert sent == got and len(got) > 5  # both sides saw the same messages
