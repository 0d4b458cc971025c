"""clk-dice's masked exchange (plugin pprl: dice_protocol.py): masks are expanded for
candidate rows only, chunk by chunk, so memory follows the candidate rows and not the
record count; chunking changes no decision."""

from __future__ import annotations

import asyncio
import tracemalloc

import numpy as np
import pytest
from crypto_keys import cached_dgk_keypair, cached_keypair

from privreg.core.protocol import Channel
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import beaver
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl.bands import BandConfig
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.dice_protocol import LINKAGE_UNIT, DiceLinkageProtocol

SECRET = bytes(range(7, 39))  # tests only
PARTIES = ("P1", "P2")
BANDS = BandConfig(bands=40, bits=12, min_shared=2)


@pytest.fixture(scope="module")
def records():
    pop = synthetic_population(60, rng=InsecureReproducibleRandom(seed=41))
    data = make_parties(pop, parties=3, corruption=0.3, rng=InsecureReproducibleRandom(seed=42), overlap=0.8)
    return {
        p: encode_clks(data.frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in PARTIES  # two of the three parties
    }


@pytest.fixture(scope="module")
def keys():
    kp = cached_keypair(512, 4)
    dk = cached_dgk_keypair()
    return kp, dk


def _run(records, keys, **kw):
    kp, dk = keys
    proto = DiceLinkageProtocol(
        parties=PARTIES,
        records=records,
        secret=SECRET,
        bands=BANDS,
        keypair=kp,
        dgk_keypair=dk,
        insecure_allow_small_keys=True,
        workers=1,
        rng=InsecureReproducibleRandom(seed=1),
        **{"levels": (), "comparison": "dgk", **kw},
    )
    return run_protocol(proto, transport=InMemoryTransport(keep_payloads=True))


class _Pipe(Channel):
    """An in-process channel between two parties (one queue per direction)."""

    def __init__(self, party, queues):
        self.party, self.parties, self.queues = party, tuple(queues), queues

    async def send(self, to, payload, *, step):
        await self.queues[(self.party, to)].put((step, payload))

    async def recv(self, frm, *, step=None):
        got, payload = await self.queues[(frm, self.party)].get()
        assert step is None or got == step
        return payload


def _exchange_peak(records_per_party: int, pairs: int) -> tuple[int, list[np.ndarray]]:
    """Peak traced memory of both data parties' masked exchange for ``pairs`` candidate
    pairs among parties of ``records_per_party`` records each (inputs allocated before)."""
    gen = np.random.default_rng(11)
    bits = {p: gen.random((records_per_party, 1024)) < 0.2 for p in PARTIES}
    cands = np.column_stack([gen.integers(0, records_per_party, pairs), gen.integers(0, records_per_party, pairs)])
    w = beaver.dealer_shares_from_seeds(
        b"a" * 32, b"b" * 32, cands, length=1024, labels=("u/P1/P2", "v/P1/P2"), rng=InsecureReproducibleRandom(seed=2)
    )
    entries = {
        "P1": {"peer": "P2", "role": "left", "seed": b"a" * 32, "pairs": cands, "w": w[0]},
        "P2": {"peer": "P1", "role": "right", "seed": b"b" * 32, "pairs": cands, "w": w[1]},
    }
    proto = DiceLinkageProtocol(parties=PARTIES)
    queues = {(a, b): asyncio.Queue() for a in PARTIES for b in PARTIES if a != b}

    async def both():
        return await asyncio.gather(
            *(proto._masked_exchange(_Pipe(p, queues), p, entries[p], bits[p]) for p in PARTIES)
        )

    tracemalloc.start()
    try:
        shares = asyncio.run(both())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    dots = (bits["P1"][cands[:, 0]] & bits["P2"][cands[:, 1]]).sum(axis=1).astype(np.uint64)
    assert np.array_equal((shares[0] + shares[1]) & np.uint64((1 << beaver.SHARE_BITS) - 1), dots)
    return peak, shares


def test_exchange_memory_grows_with_candidate_rows_not_records(monkeypatch):
    monkeypatch.setattr(beaver, "CHUNK_PAIRS", 256)
    few, _ = _exchange_peak(2_000, 100)
    many, _ = _exchange_peak(40_000, 100)
    # full masks of 40,000 records would take 40,000 x 1,024 x 8 B = 312 MiB per party; the
    # rows of 100 pairs take 2 x 100 x 8 KiB per party and side (the sent and received)
    assert many < 8 << 20 and abs(many - few) < 1 << 20
    # more candidate rows, more memory, up to one chunk (256 pairs) ...
    at_chunk, _ = _exchange_peak(40_000, 256)
    assert at_chunk > 1.8 * many
    # ... and no more beyond it
    beyond, _ = _exchange_peak(40_000, 2_000)
    assert beyond < 1.3 * at_chunk


def test_chunked_exchange_gives_the_same_decisions(records, keys, monkeypatch):
    whole = _run(records, keys, pad=1.0)
    monkeypatch.setattr(beaver, "CHUNK_PAIRS", 7)
    chunked = _run(records, keys, pad=1.0)
    a, b = whole.outputs[LINKAGE_UNIT], chunked.outputs[LINKAGE_UNIT]
    assert a["group_indices"] == b["group_indices"] and a["accepted"] == b["accepted"] > 20
    steps = [m.step for m in chunked.transcript.received_by(PARTIES[0]) if m.step.startswith("masked")]
    assert len(steps) == -(-(a["candidate_count"] + a["dummy_pairs"]) // 7) > 2
    # a row's masked filter is the same whatever the chunk it travels in
    rows_of = {}
    for res in (whole, chunked):
        got = {}
        for m in res.transcript.received_by(PARTIES[1]):
            if m.step.startswith("masked"):
                got.update({int(r): x.tobytes() for r, x in zip(m.payload["rows"], m.payload["masked"])})
        rows_of[id(res)] = got
    assert rows_of[id(whole)] == rows_of[id(chunked)]


def test_memory_estimate_covers_the_measured_exchange_and_fits_3_x_1m(monkeypatch):
    from privreg.plugins.pprl.dice_memory import memory_estimate

    monkeypatch.setattr(beaver, "CHUNK_PAIRS", 256)
    measured, _ = _exchange_peak(40_000, 2_000)  # both parties of the pair in this process
    est = memory_estimate(records=40_000, parties=2, candidates_per_record=2_000 / 40_000, chunk_pairs=256)
    assert measured <= 2 * est.data_party_transient["masked exchange"]
    for blocking, comparison in (("relay", "dealer"), ("linkage-unit", "dgk")):
        big = memory_estimate(
            records=1_000_000,
            parties=3,
            candidates_per_record=3,
            bands=64,
            exact_passes=2,
            blocking=blocking,
            comparison=comparison,
        )
        assert big.data_party_peak < 16e9  # the target: 3 x 1M within 16 GB per data party
        assert big.data_party_transient["masked exchange"] == est.data_party_transient["masked exchange"]
        # the masks no longer scale with the records: full masks would be 8 GiB per peer
        assert big.data_party_transient["masked exchange"] < 2e9
    # the default relay blocking keeps the linkage unit within 16 GB with room (its candidate join had 0.03 GB)
    relay = memory_estimate(records=1_000_000, parties=3, candidates_per_record=3, bands=64, exact_passes=2)
    assert relay.linkage_unit_peak < min(14e9, 0.75 * big.linkage_unit_peak)


def test_the_relay_estimate_covers_the_measured_relay_steps():
    """The left party's relay steps (words, orders, the groups it receives, the candidates
    from them) and the linkage unit's relay_groups, measured by tracemalloc on 3 x about
    250 records, stay within the estimate's per-word terms."""
    from test_pprl_leakage import SECRET as LEAK_SECRET
    from test_pprl_leakage import _frames

    from privreg.plugins.pprl.bands import band_tokens, recommended_bands
    from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
    from privreg.plugins.pprl.datasets import ENTITY
    from privreg.plugins.pprl.dice_memory import RELAY_CHUNK, RELAY_CHUNK_BYTES, RELAY_LU_BYTES, RELAY_PARTY_BYTES
    from privreg.plugins.pprl.relay_blocking import (
        check_groups,
        position_order,
        relay_candidates,
        relay_entry,
        relay_words,
    )

    names, frames = _frames()
    a, b = names[:2]
    recs = {
        p: encode_clks(frames[p], schema=FEBRL_CLK_SCHEMA, secret=LEAK_SECRET, party=p, entity_column=ENTITY)
        for p in (a, b)
    }
    pop = max(int(np.median(recs[p].match_filters.sum(axis=1))) for p in (a, b))
    cfg = recommended_bands(filter_length=1024, popcount=pop, records=max(len(r) for r in recs.values()))
    rng = InsecureReproducibleRandom(seed=3)
    words = {
        p: relay_words(band_tokens(recs[p].match_filters, config=cfg, secret=LEAK_SECRET)[0], recs[p].exact_keys, rng)
        for p in (a, b)
    }
    W = words[a].shape[1]
    orders = {p: position_order(LEAK_SECRET, p, words[p].size) for p in (a, b)}
    sent = {p: words[p].reshape(-1)[orders[p]] for p in (a, b)}

    tracemalloc.start()
    try:
        entry = relay_entry(sent[a], sent[b])
        lu_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        own = position_order(LEAK_SECRET, a, words[a].size)
        g = check_groups(entry, "LU", sent=sent[a], theirs=words[b].size)
        mine_rows = g[0].shape[0]
        peer = position_order(LEAK_SECRET, b, words[b].size)
        cands, _ = relay_candidates(
            g,
            own,
            peer,
            width=W,
            bands=cfg.bands,
            rows=(len(recs[a]), len(recs[b])),
            min_shared=cfg.min_shared,
            max_block_pairs=cfg.max_block_pairs,
        )
        party_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    n = words[a].size
    assert len(cands) > 100 and mine_rows > n // 4
    assert lu_peak <= RELAY_LU_BYTES * n + (1 << 20)
    assert party_peak <= RELAY_PARTY_BYTES * n + RELAY_CHUNK_BYTES * min(n, RELAY_CHUNK)


def test_band_tokens_in_chunks_are_the_same_tokens(monkeypatch):
    import privreg.plugins.pprl.bands as bands

    bits = np.random.default_rng(4).random((300, 1024)) < 0.3
    whole, _ = bands.band_tokens(bits, config=BANDS, secret=SECRET)
    monkeypatch.setattr(bands, "TOKEN_CHUNK", 7 * BANDS.bands)  # 7 records per chunk
    tracemalloc.start()
    try:
        chunked, _ = bands.band_tokens(bits, config=BANDS, secret=SECRET)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(whole, chunked) and len(np.unique(whole)) > 0.5 * whole.size
    assert peak < whole.nbytes + (1 << 20)  # the output plus one small chunk's temporaries


def test_base_decisions_use_the_base_levels_bits(records, keys):
    from privreg.crypto.dgk import DgkCiphertexts

    # with a 0.85 level the run's widest comparison has 16 bits (6 digits, a thermometer of
    # 36 DGK ciphertexts), but the base decisions at 0.75 need 14: 4 digits of 3 bits and one
    # of 2, 4 x 7 + 3 = 31 ciphertexts and 5 terms per decision
    res = _run(records, keys, pad=1.0, levels=(0.85,))
    lu = res.outputs[LINKAGE_UNIT]
    sent = [m for m in res.transcript.received_by(PARTIES[0]) if m.step.startswith("cmp-base")]
    sent += [m for m in res.transcript.received_by(PARTIES[1]) if m.step.startswith("cmp-base")]
    therm = sum(len(m.payload) for m in sent if isinstance(m.payload, DgkCiphertexts))
    base = lu["candidate_count"] + lu["dummy_pairs"]
    assert therm == 31 * base > 0
    got = [m for m in res.transcript.received_by(LINKAGE_UNIT) if m.step.startswith("cmp-base") and "terms" in m.step]
    assert sum(len(m.payload["terms"]) for m in got) == 5 * base
