"""What the recommended profile's messages let each party infer (issue #33), computed from
the transcript of a small real run with blocking="linkage-unit" (the default before
relay blocking, #33; bands agreed by the data
parties, exact passes on soc_sec_id and date of birth), without membership padding
(``pad=0``: the control, today's transcript-level behaviour before padding) and with the
default padding (``pad=1``, :mod:`privreg.plugins.pprl.padding`).

The figures document that mode's leakage, which the README and ``DiceLinkageProtocol.learns``
state; a change to the blocking moves them and fails this test. The private-blocking modes
(``"relay"``, the default, and ``"parties"``) reach ``spearman <= 0.3`` in
tests/test_pprl_relay_blocking.py and tests/test_pprl_party_blocking.py.

Data: 300 synthetic people (datasets.synthetic_population, seed 31) at 3 parties,
overlap 0.7, 30 % of records corrupted (seed 32), plus 12 near-duplicates added inside
P1. Measured today: Spearman 0.996 between the shared-band estimate and the true Dice over
736 candidate pairs, MAE 0.008 (0.002 for pairs sharing >= 5 bands), all 702 pairs sharing
>= 10 bands true matches; membership TPR 1.00, FPR 0.04 (6 of 157); every injected
near-duplicate found by the linkage unit. With the default padding: 161 dummy pairs (980 ->
1,141 secure decisions, 1.16x), membership TPR = FPR = 1.00 (advantage 0 from 0.96), the
best test on candidate counts an advantage of 0.02, and the same linked groups.
Deterministic: fixed seeds and keys, so the figures are exact for this code and the
tolerances only allow for small changes of the generator.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from crypto_keys import cached_dgk_keypair, cached_keypair

from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl import leakage as lk
from privreg.plugins.pprl.bands import MIN_SHARED
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, corrupt_value, make_parties, synthetic_population
from privreg.plugins.pprl.dice_protocol import LINKAGE_UNIT, DiceLinkageProtocol

SECRET = bytes(range(7, 39))  # tests only: a real run draws secrets.token_bytes(32)
L = FEBRL_CLK_SCHEMA.filter_length
DUPLICATES = 12


def _frames():
    pop = synthetic_population(300, rng=InsecureReproducibleRandom(seed=31))
    data = make_parties(pop, parties=3, corruption=0.3, rng=InsecureReproducibleRandom(seed=32), overlap=0.7)
    frames = dict(data.frames)
    # near-duplicates inside P1: a copy of a record with one typo in the surname
    g = np.random.default_rng(33)
    p1 = frames["P1"]
    extra = p1.iloc[:DUPLICATES].copy()
    extra["surname"] = [corrupt_value(s, "substitute", g) for s in extra["surname"]]
    extra.index = pd.Index([f"P1-dup-{k}" for k in range(DUPLICATES)], name=p1.index.name)
    frames["P1"] = pd.concat([p1, extra])
    return data.parties, frames


def _run(**pad):
    names, frames = _frames()
    records = {
        p: encode_clks(frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY) for p in names
    }
    dk = cached_dgk_keypair()
    proto = DiceLinkageProtocol(  # the default profile under linkage-unit blocking (the leakage it documents)
        blocking="linkage-unit",
        parties=names,
        records=records,
        secret=SECRET,
        keypair=cached_keypair(512, 4),
        dgk_keypair=dk,
        insecure_allow_small_keys=True,
        workers=1,
        rng=InsecureReproducibleRandom(seed=1),
        **pad,
    )
    res = run_protocol(proto, transport=InMemoryTransport(keep_payloads=True))
    return names, frames, records, res


@pytest.fixture(scope="module")
def run():
    """Without membership padding: the blocking leakage as before padding existed."""
    return _run(pad=0.0)


@pytest.fixture(scope="module")
def padded():
    """The default profile, membership padding included (same seeds, keys and secret)."""
    return _run()


def _entities(frames, p):
    return frames[p][ENTITY].astype(str).to_numpy()


def _similarity(run):
    """The linkage unit's best similarity estimate over the candidate pairs, from the tokens
    it received and the candidate pairs it dealt (transcript), against the truth."""
    names, frames, records, res = run
    view = lk.linkage_unit_view(res.transcript, names, LINKAGE_UNIT)
    cands = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    bands = view[names[0]]["tokens"].shape[1]
    popcount, bits = lk.popcount_from_bands(
        bands, filter_length=L, records=max(v["tokens"].shape[0] for v in view.values())
    )
    shared, truth, match = [], [], []
    for (p, q), pairs in cands.items():
        if names.index(p) > names.index(q):
            continue  # each pair of parties once
        shared.append(lk.shared_bands(view[p]["tokens"], view[q]["tokens"], pairs))
        truth.append(lk.true_dice(records[p].match_filters, records[q].match_filters, pairs))
        match.append(_entities(frames, p)[pairs[:, 0]] == _entities(frames, q)[pairs[:, 1]])
    s = np.concatenate(shared)
    est = lk.estimate_dice(s, bands=bands, bits=bits, filter_length=L, popcount=popcount)
    return lk.similarity_leakage(s, est, np.concatenate(truth), np.concatenate(match)), popcount


def test_linkage_unit_reads_similarities_off_the_band_tokens(run):
    got, popcount = _similarity(run)
    names, _, records, _ = run
    assert got.pairs > 500
    # today's blocking: the estimate ranks the pairs almost exactly as the true Dice
    assert got.spearman >= 0.9
    assert got.mae <= 0.03 and got.mae_five <= 0.02
    assert got.strong_pairs > 0.8 * got.pairs and got.strong_match_fraction == 1.0
    # and the popcount it reads off the number of bands is within 2 % of the true median
    true_median = max(np.median(records[p].match_filters.sum(axis=1)) for p in names)
    assert abs(popcount - true_median) <= 0.02 * true_median


def test_the_estimator_fails_on_tokens_that_carry_no_similarity(run):
    """The same estimator on shuffled shared-band counts: what a private-blocking mode must
    reach (Spearman <= 0.3); checks that the estimator has no free ride on the truth."""
    names, frames, records, res = run
    got, _ = _similarity(run)
    cands = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    view = lk.linkage_unit_view(res.transcript, names, LINKAGE_UNIT)
    p, q = names[0], names[1]
    pairs = cands[(p, q)]
    s = lk.shared_bands(view[p]["tokens"], view[q]["tokens"], pairs)
    s = np.random.default_rng(0).permutation(s)
    est = lk.estimate_dice(s, bands=view[p]["tokens"].shape[1], bits=16, filter_length=L, popcount=540)
    truth = lk.true_dice(records[p].match_filters, records[q].match_filters, pairs)
    match = _entities(frames, p)[pairs[:, 0]] == _entities(frames, q)[pairs[:, 1]]
    # permuted over ~200 pairs: |Spearman| > 0.3 has probability below 1e-5 (normal approximation)
    assert abs(lk.similarity_leakage(s, est, truth, match).spearman) <= 0.3 < got.spearman


def test_linkage_unit_finds_near_duplicates_within_one_party(run):
    names, frames, records, res = run
    view = lk.linkage_unit_view(res.transcript, names, LINKAGE_UNIT)
    tok = view["P1"]["tokens"]
    pairs = lk.within_party_pairs(tok, min_shared=MIN_SHARED)
    n = len(frames["P1"]) - DUPLICATES
    injected = {(k, n + k) for k in range(DUPLICATES)}
    assert injected <= {tuple(x) for x in pairs.tolist()}
    s = lk.shared_bands(tok, tok, pairs)
    f = records["P1"].match_filters
    truth = lk.true_dice(f, f, pairs)
    ent = _entities(frames, "P1")
    est = lk.estimate_dice(s, bands=tok.shape[1], bits=16, filter_length=L, popcount=540)
    got = lk.similarity_leakage(s, est, truth, ent[pairs[:, 0]] == ent[pairs[:, 1]])
    assert got.mae <= 0.03


def test_exact_tokens_show_date_of_birth_classes_and_id_equality(run):
    names, frames, _, res = run
    view = lk.linkage_unit_view(res.transcript, names, LINKAGE_UNIT)
    passes = [c for (c,) in FEBRL_CLK_SCHEMA.exact]
    dob = passes.index("date_of_birth")
    # the frequency classes of the tokens are those of the (normalised) dates of birth
    values = pd.concat([frames[p]["date_of_birth"].astype(str).str.strip() for p in names])
    values = values[values != ""]
    counts = values.map(values.value_counts())
    want = {int(k): int(v) for k, v in counts.value_counts().items()}
    assert lk.frequency_classes([view[p]["exact"][:, dob] for p in names]) == want
    # equal id tokens across parties: a pair with equal soc_sec_id tokens is one person
    ssn = passes.index("soc_sec_id")
    cands = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    p, q = names[0], names[1]
    pairs = cands[(p, q)]
    eq = (view[p]["exact"][pairs[:, 0], ssn] == view[q]["exact"][pairs[:, 1], ssn]) & (
        view[p]["exact"][pairs[:, 0], ssn] != 0
    )
    same = _entities(frames, p)[pairs[:, 0]] == _entities(frames, q)[pairs[:, 1]]
    assert eq.sum() > 50 and same[eq].mean() == 1.0


def test_data_parties_infer_who_their_peers_hold(run):
    names, frames, _, res = run
    cands = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    rows = {k: np.unique(v[:, 0]) for k, v in cands.items()}
    got = lk.membership(rows, {p: _entities(frames, p) for p in names})
    assert got.positives > 500 and got.negatives > 50
    assert got.tpr >= 0.95 and got.fpr <= 0.08


def test_record_counts_are_exchanged(run):
    names, frames, _, res = run
    # peer to peer with the median popcount, and to the linkage unit as the token matrices' rows
    for p in names:
        for m in res.transcript.received_by(p):
            if m.step == "popcount":
                assert m.payload[1] == len(frames[m.sender])
    view = lk.linkage_unit_view(res.transcript, names, LINKAGE_UNIT)
    assert [view[p]["tokens"].shape[0] for p in names] == [len(frames[p]) for p in names]


def test_learns_states_the_measured_leakage():
    learns = DiceLinkageProtocol(parties=3, blocking="linkage-unit").learns()
    assert "estimates their Dice similarity" in learns[LINKAGE_UNIT] and "record count" in learns[LINKAGE_UNIT]
    assert "record count" in learns["P1"] and "holds the person" in learns["P1"]
    assert "never learns" not in learns[LINKAGE_UNIT] and "a similarity" not in DiceLinkageProtocol.caveats


def _membership(run):
    names, frames, _, res = run
    cands = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    ent = {p: _entities(frames, p) for p in names}
    return lk.membership({k: np.unique(v[:, 0]) for k, v in cands.items()}, ent), lk.count_advantage(
        {k: v[:, 0] for k, v in cands.items()}, ent
    )


def test_padding_hides_who_the_peers_hold(run, padded):
    (plain, (plain_count, _)), (pad, (pad_count, _)) = _membership(run), _membership(padded)
    assert pad.positives == plain.positives and pad.negatives == plain.negatives > 100
    # the deals differ only by dummies: every real candidate is still there
    assert padded[3].outputs[LINKAGE_UNIT]["candidate_count"] == run[3].outputs[LINKAGE_UNIT]["candidate_count"]
    # at pad=1 every record without a real candidate gets at least one dummy: "has a
    # candidate" no longer separates (exact: no sampling in whether a record is padded)
    assert plain.tpr - plain.fpr >= 0.9
    assert pad.tpr == 1.0 and pad.fpr == 1.0
    # counts keep a little: dummy counts follow all candidate-holding records' counts;
    # measured 0.02 here from 0.96 (tolerance: a change of the dummy draws moves it by a few hundredths)
    assert pad_count <= 0.15 < 0.9 <= plain_count


def test_padding_costs_one_decision_per_dummy(run, padded):
    base, pad = run[3].outputs[LINKAGE_UNIT], padded[3].outputs[LINKAGE_UNIT]
    assert base["dummy_pairs"] == 0 and pad["dummy_pairs"] > 50
    assert pad["decisions"] == base["decisions"] + pad["dummy_pairs"]  # dummies are never refined
    assert pad["decisions"] <= 1.5 * base["decisions"]


def test_padding_changes_no_output(run, padded):
    """Same records, secret and seed: the same linked groups (the group ids are random)."""

    def groups(r):
        names, _, _, res = r
        lu = res.outputs[LINKAGE_UNIT]
        by_party = {}
        for p in names:
            for gid, rec in res.outputs[p]["links"].tolist():
                by_party.setdefault(gid, set()).add((p, rec))
        return sorted(sorted(g) for g in lu["groups"]), lu["accepted"], sorted(sorted(g) for g in by_party.values())

    assert groups(run) == groups(padded)
    assert groups(run)[1] > 100


def test_a_dummy_pair_is_never_linked(padded):
    """Every dummy pair dealt is absent from the accepted edges, and no dummy is a real
    candidate (the linkage unit's real candidates against what the parties were dealt)."""
    names, _, _, res = padded
    lu = res.outputs[LINKAGE_UNIT]
    dealt = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    dummies = 0
    linked = {frozenset(g) for g in lu["groups"]}
    members = {}
    for k, g in enumerate(linked):
        for x in g:
            members[x] = k
    for (p, q), real in lu["candidates"].items():
        got = {tuple(x) for x in dealt[(p, q)].tolist()}
        fake = got - {tuple(x) for x in real.tolist()}
        assert {tuple(x) for x in real.tolist()} <= got
        dummies += len(fake)
        for i, j in fake:  # a dummy's own record has no real candidate, so never a group with the partner
            a, b = members.get((p, i)), members.get((q, j))
            assert a is None or a != b
    assert dummies == lu["dummy_pairs"] > 50


def test_without_padding_the_deals_are_the_real_candidates(run):
    """The control: at pad=0 every dealt pair is a real candidate (today's transcript)."""
    names, _, _, res = run
    dealt = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    for (p, q), real in res.outputs[LINKAGE_UNIT]["candidates"].items():
        assert np.array_equal(dealt[(p, q)], real)
