"""The recommended record-linkage protocol (plugin pprl: dice_protocol.py): the groups
equal the plaintext pipeline (CLKs, bands, Dice decisions, levels, greedy solver); the
linkage unit receives only band tokens and masked or blinded values from which it learns
the threshold decisions -- never a filter, a popcount, a Hamming distance, an inner
product or a similarity -- and no party receives another party's filter in the clear."""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np
import pytest
from crypto_keys import cached_dgk_keypair, cached_keypair

from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto.dgk import DgkCiphertexts
from privreg.crypto.threshold import slot_layout
from privreg.crypto.vector import EncryptedVector
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl.bands import BandConfig, band_tokens, candidate_pairs, pair_orientation, pair_roles
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, dice, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.dice_protocol import LINKAGE_UNIT, DiceLinkageProtocol, _x_bits
from privreg.plugins.pprl.solver import conflict_pairs, greedy_groups

SECRET = bytes(range(7, 39))  # tests only: a real run draws secrets.token_bytes(32)
PARTIES = ("P1", "P2", "P3")
BANDS = BandConfig(bands=40, bits=12, min_shared=2)


@pytest.fixture(scope="module")
def records():
    return encoded_records()


def encoded_records():
    """90 synthetic people at 3 parties (40 % corrupted, overlap 0.7), CLKs under SECRET."""
    pop = synthetic_population(90, rng=InsecureReproducibleRandom(seed=31))
    data = make_parties(pop, parties=3, corruption=0.4, rng=InsecureReproducibleRandom(seed=32), overlap=0.7)
    return {
        p: encode_clks(data.frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in data.parties
    }


@pytest.fixture(scope="module")
def keys():
    kp = cached_keypair(512, 4)
    dk = cached_dgk_keypair()
    return kp, dk


def protocol(records, keys, **kw):
    kp, dk = keys
    kw.setdefault("rng", InsecureReproducibleRandom(seed=1))
    kw.setdefault("comparison", "dgk")  # these tests read the Paillier and DGK transcripts
    kw.setdefault(
        "blocking", "linkage-unit"
    )  # these tests read the tokens; tests/test_pprl_party_blocking.py: "parties"
    return DiceLinkageProtocol(
        parties=PARTIES,
        records=records,
        secret=SECRET,
        bands=BANDS,
        keypair=kp,
        dgk_keypair=dk,
        insecure_allow_small_keys=True,
        workers=1,
        **kw,
    )


def reference(records, *, threshold=0.75, levels=(0.8, 0.85, 0.9, 0.95)):
    """The plaintext pipeline: same candidates, exact Dice decisions, same solver."""
    tokens = [band_tokens(records[p].match_filters, config=BANDS, secret=SECRET)[0] for p in PARTIES]
    rows = []
    for i, j in pair_orientation(PARTIES):
        left, right = pair_roles(i, j)
        c, _ = _candidates(records, tokens, left, right)
        d = dice(records[PARTIES[left]].match_filters[c[:, 0]], records[PARTIES[right]].match_filters[c[:, 1]])
        ok = c[_at_least(d, records, left, right, c, threshold)]
        rows.append(np.column_stack([np.full(len(ok), left), ok[:, 0], np.full(len(ok), right), ok[:, 1]]))
    edges = np.concatenate(rows).astype(np.int64)
    conf = conflict_pairs(edges)
    lv = np.zeros(len(edges), dtype=np.int64)
    for k in np.flatnonzero(conf):
        a, ra, b, rb = edges[k]
        fa, fb = records[PARTIES[a]].match_filters[ra], records[PARTIES[b]].match_filters[rb]
        lv[k] = sum(_dice_at_least(fa, fb, t) for t in levels)
    return greedy_groups(edges, levels=lv)


def _candidates(records, tokens, left, right):
    return candidate_pairs(
        tokens[left],
        tokens[right],
        min_shared=BANDS.min_shared,
        exact_a=records[PARTIES[left]].exact_keys,
        exact_b=records[PARTIES[right]].exact_keys,
    )


def _dice_at_least(fa, fb, t):
    """Exact rational test ``2 |a & b| / (|a| + |b|) >= t`` (no float rounding)."""
    t = Fraction(t).limit_denominator(100)
    inter = int(np.count_nonzero(fa & fb))
    total = int(np.count_nonzero(fa)) + int(np.count_nonzero(fb))
    return 2 * t.denominator * inter >= t.numerator * total


def _at_least(d, records, left, right, c, t):
    fa = records[PARTIES[left]].match_filters
    fb = records[PARTIES[right]].match_filters
    return np.array([_dice_at_least(fa[x], fb[y], t) for x, y in c], dtype=bool)


@pytest.fixture(scope="module")
def run(records, keys):
    return run_protocol(protocol(records, keys), transport=InMemoryTransport(keep_payloads=True))


def test_groups_equal_the_plaintext_pipeline(records, run):
    lu = run.outputs[LINKAGE_UNIT]
    assert lu["group_indices"] == reference(records)
    tokens = [band_tokens(records[p].match_filters, config=BANDS, secret=SECRET)[0] for p in PARTIES]
    for i, j in pair_orientation(PARTIES):
        left, right = pair_roles(i, j)
        want, _ = _candidates(records, tokens, left, right)
        assert np.array_equal(lu["candidates"][(PARTIES[left], PARTIES[right])], want)
    assert lu["candidate_count"] == sum(len(c) for c in lu["candidates"].values())
    assert lu["accepted"] > 20 and lu["candidate_count"] > lu["accepted"]
    # every party's links are its records in those groups, under the linkage unit's group ids
    for i, p in enumerate(PARTIES):
        got = {tuple(r) for r in run.outputs[p]["links"].tolist()}
        want = {(g, r) for g, grp in zip(lu["group_ids"], lu["group_indices"]) for q, r in grp if q == i}
        assert got == want
        assert run.outputs[p]["band_bits"] == BANDS.bits  # K as the data parties used it


def _walk(x):
    yield x
    if isinstance(x, dict):
        for item in x.values():
            yield from _walk(item)
    elif isinstance(x, (list, tuple)):
        for item in x:
            yield from _walk(item)


def _true_values(records):
    """Per candidate pair of every party pair: popcounts, inner product, Hamming distance,
    Dice (x 10^k for a few k) -- everything the linkage unit must not learn."""
    tokens = [band_tokens(records[p].match_filters, config=BANDS, secret=SECRET)[0] for p in PARTIES]
    out = {}
    for i, j in pair_orientation(PARTIES):
        left, right = pair_roles(i, j)
        c, _ = _candidates(records, tokens, left, right)
        fa = records[PARTIES[left]].match_filters[c[:, 0]]
        fb = records[PARTIES[right]].match_filters[c[:, 1]]
        pa, pb = fa.sum(1), fb.sum(1)
        inter = (fa & fb).sum(1)
        out[(left, right)] = {"pop_a": pa, "pop_b": pb, "inter": inter, "hamming": pa + pb - 2 * inter}
    return out


def _level_bits(step):
    """The comparison bits of a ``cmp-<tag>...`` message: each level packs its own width
    (14 bits at 0.75 and 0.8, 15 at 0.9, 16 at 0.85 and 0.95 for 1,024-bit filters)."""
    tag = step.split(".")[0].removeprefix("cmp-")
    level = 0.75 if tag == "base" else (0.8, 0.85, 0.9, 0.95)[int(tag[1:]) - 1]
    return _x_bits((Fraction(level).limit_denominator(100),), 1024)


def test_the_linkage_unit_learns_only_threshold_decisions(records, keys, run):
    kp, dk = keys
    received = run.transcript.received_by(LINKAGE_UNIT)
    steps = {m.step for m in received}
    assert "tokens" in steps and any(s.startswith("cmp-base") for s in steps)
    truth = _true_values(records)
    forbidden_arrays = [v for per in truth.values() for v in per.values()]
    popcounts = {int(x) for p in PARTIES for x in records[p].match_filters.sum(1)}
    rows = {r.tobytes() for p in PARTIES for r in np.packbits(records[p].match_filters, axis=1)}
    walked = 0
    paillier, terms = [], []
    for m in received:
        if m.step == "tokens":
            assert set(m.payload) == {"tokens", "exact"} and m.payload["tokens"].dtype == np.uint64
            continue
        for node in _walk(m.payload):
            walked += 1
            if isinstance(node, np.ndarray):
                assert node.dtype.kind != "b", "a bit array reached the linkage unit"
                for bad in forbidden_arrays:
                    assert not (node.shape == bad.shape and np.array_equal(node, bad))
                if node.ndim == 2 and node.shape[1] == FEBRL_CLK_SCHEMA.filter_length:
                    assert not any(np.packbits(r.astype(bool)).tobytes() in rows for r in node)
            elif isinstance(node, EncryptedVector):
                kp.public_key.check_same(node.public_key, "a received vector")
                paillier.extend((_level_bits(m.step), c) for c in node.ciphertexts)
            elif isinstance(node, DgkCiphertexts):
                terms.extend(dk.private_key.decrypt(node))
    assert walked >= len(received) - 3
    # decrypt what the linkage unit received under its Paillier key: every slot is masked
    slots = []
    for bits, c in paillier:
        s, per = slot_layout(kp.public_key, bits=bits, sigma=40)
        (m,) = kp.private_key.raw_decrypt([c])
        m = int(m)
        slots.extend((m >> (s * r)) & ((1 << s) - 1) for r in range(per))
    assert len(slots) >= sum(len(t["inter"]) for t in truth.values())
    low = [z & 0xFFFF for z in slots]
    # a masked slot equals a popcount, inner product or distance by chance with probability
    # about 2^-16 each: over ~10^3 slots and ~10^3 forbidden values the expected number of
    # coincidences is ~15; a leak would make most slots match
    forbidden = popcounts | {int(x) for per_ in truth.values() for v in per_.values() for x in v}
    hits = sum(z in forbidden for z in slots)
    assert hits <= 0.05 * len(slots)
    # and the masked slots spread over 2^16 residues instead of the few values x can take
    assert len(set(low)) > 0.9 * len(low)
    # the DGK terms are blinded: zero or a uniform unit of Z_u, whatever the similarity; with
    # about 1,160 nonzero terms every unit appears (u = 67: false-alarm rate at most
    # 66 (65/66)^1160, about 1.4e-6; the seeds are fixed, so the run is deterministic)
    u = dk.public_key.u
    nonzero = [t for t in terms if t]
    assert len(terms) > 1000 and set(nonzero) == set(range(1, u))


def test_no_party_receives_another_partys_filter(records, run):
    for p in PARTIES:
        others = [q for q in PARTIES if q != p]
        rows = {r.tobytes() for q in others for r in np.packbits(records[q].match_filters, axis=1)}
        for m in run.transcript.received_by(p):
            for node in _walk(m.payload):
                if isinstance(node, np.ndarray) and node.ndim == 2 and node.shape[1] == 1024:
                    assert node.dtype == np.uint64
                    assert not any(np.packbits((r & 1).astype(bool)).tobytes() in rows and np.all(r <= 1) for r in node)


def test_arguments_are_validated(records, keys):
    with pytest.raises(PrivregValueError, match="threshold"):
        protocol(records, keys, threshold=1.5)
    with pytest.raises(PrivregValueError, match="levels"):
        protocol(records, keys, levels=(0.7,))
    with pytest.raises(PrivregValueError, match="2048"):
        DiceLinkageProtocol(parties=3, key_bits=512)
    with pytest.raises(PrivregValueError, match="filter_length"):
        protocol(records, keys, filter_length=512)


def test_decisions_in_small_batches_give_the_same_groups(records, keys, run, monkeypatch):
    import privreg.plugins.pprl.dice_protocol as dp

    monkeypatch.setattr(dp, "BATCH_DECISIONS", 8)  # a few ciphertexts per batch
    res = run_protocol(protocol(records, keys), transport=InMemoryTransport(keep_payloads=True))
    lu, before = res.outputs[LINKAGE_UNIT], run.outputs[LINKAGE_UNIT]
    assert lu["group_indices"] == before["group_indices"] == reference(records)
    assert any(m.step.startswith("cmp-base.") for m in res.transcript.received_by(LINKAGE_UNIT))


def test_default_keys_are_2048_bits_with_224_bit_dgk_subgroups(records):
    from privreg.crypto.dgk import DgkPublicKey

    small = {
        p: attrs.evolve(
            r,
            ids=r.ids[:5],
            block_filters=r.block_filters[:5],
            match_filters=r.match_filters[:5],
            entities=r.entities[:5],
            exact_keys=r.exact_keys[:5],
        )
        for p, r in records.items()
    }
    proto = DiceLinkageProtocol(parties=PARTIES, records=small, secret=SECRET, bands=BANDS, workers=1, comparison="dgk")
    res = run_protocol(proto, transport=InMemoryTransport(keep_payloads=True))
    (dgk,) = [m.payload for m in res.transcript.received_by("P1") if m.step == "keys-dgk"]
    assert isinstance(dgk, DgkPublicKey) and dgk.n.bit_length() == 2048 and dgk.t == 224
    assert not dgk.insecure
