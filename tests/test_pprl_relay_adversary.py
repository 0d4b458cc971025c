"""Adversarial checks of clk-dice's ``blocking="relay"`` (issue #33): shapes of data the
relay must block exactly like ``blocking="linkage-unit"`` (2 and 5 parties, no exact
passes, no declared counts, explicit bands, a one-record party, padding), tampered
messages from a malicious linkage unit or peer, and what the linkage unit learns when a
party holds very few records.

Data: synthetic people (privreg.plugins.pprl.datasets) at fixed seeds, fixed secret and
protocol seeds: every run is deterministic. The one statistical figure (the one-record
parties' Spearman) is computed on fixed data and states its value, not a random bound.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from test_pprl_leakage import SECRET
from test_pprl_relay_blocking import _reference_groups, _relayed

from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.mpc.wire import decode, encode_buffer
from privreg.plugins.pprl import leakage as lk
from privreg.plugins.pprl import relay_blocking as rb
from privreg.plugins.pprl.bands import BandConfig, candidate_pairs, exact_pairs
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, corrupt_value, make_parties, synthetic_population
from privreg.plugins.pprl.dice_protocol import LINKAGE_UNIT, DiceLinkageProtocol, run_candidates
from privreg.plugins.pprl.relay_blocking import relay_groups


def _records(n: int, size: int, *, sizes: dict[str, int] | None = None, seed: int = 41) -> tuple[list[str], dict]:
    """``n`` parties (the first ``n`` of a 3+ party split) of ``size`` synthetic people."""
    pop = synthetic_population(size, rng=InsecureReproducibleRandom(seed=seed))
    data = make_parties(pop, parties=max(n, 3), corruption=0.3, rng=InsecureReproducibleRandom(seed=seed + 1))
    names = list(data.parties)[:n]
    frames = {p: data.frames[p].iloc[: (sizes or {}).get(p)] for p in names}
    return names, {
        p: encode_clks(frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY) for p in names
    }


def _run(names, records, cls=DiceLinkageProtocol, *, counts=True, **kw):
    proto = cls(
        parties=names,
        records=records,
        secret=SECRET,
        workers=1,
        rng=InsecureReproducibleRandom(seed=1),
        record_counts={p: len(r) for p, r in records.items()} if counts else None,
        **kw,
    )
    return run_protocol(proto, transport=InMemoryTransport(keep_payloads=True))


def _same_as_linkage_unit(names, records, *, counts=True, pad=1.0, some=True, **kw):
    """Relay (at ``pad``) and linkage-unit blocking give the same candidates, groups and
    links; the dummies are decided but never reach a candidate list or an output."""
    old = _run(names, records, blocking="linkage-unit", pad=0, counts=counts, **kw)
    new = _run(names, records, blocking="relay", pad=pad, counts=counts, **kw)
    a, b = run_candidates(old.outputs, names), run_candidates(new.outputs, names)
    assert sorted(a) == sorted(b) and (sum(len(c) for c in a.values()) > 0) == some
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    lu_old, lu_new = old.outputs[LINKAGE_UNIT], new.outputs[LINKAGE_UNIT]
    assert sorted(map(sorted, lu_old["groups"])) == sorted(map(sorted, lu_new["groups"]))
    assert lu_old["accepted"] == lu_new["accepted"]
    assert lu_new["candidate_count"] == sum(len(c) for c in a.values())
    for p in names:
        np.testing.assert_array_equal(old.outputs[p]["links"][:, 1], new.outputs[p]["links"][:, 1])  # ids are random
    return new


def test_two_parties_with_declared_counts_run_under_relay():
    """With two parties one of them is left of no peer: the linkage unit still sends it
    the (empty) relay-groups list, which the bound must admit (it was 0: every two-party
    run with declared counts failed under the default blocking)."""
    names, records = _records(2, 60)
    new = _same_as_linkage_unit(names, records)
    assert new.outputs[LINKAGE_UNIT]["dummy_pairs"] > 0
    right = [p for p in names if not new.outputs[p]["dummy_slots"]]
    assert len(right) == 1  # one left party, one right party
    proto = DiceLinkageProtocol(parties=names, record_counts={p: len(r) for p, r in records.items()})
    assert proto.message_bound(sender=LINKAGE_UNIT, receiver=right[0], step="relay-groups") >= 1024


@pytest.mark.parametrize("counts", [True, False])
def test_five_parties_with_and_without_declared_counts(counts):
    names, records = _records(5, 40)
    _same_as_linkage_unit(names, records, counts=counts)


def test_no_exact_passes_and_explicit_bands():
    names, records = _records(5, 40)
    bare = {p: attrs.evolve(r, exact_keys=None) for p, r in records.items()}
    _same_as_linkage_unit(names, bare, exact_passes=0, pad=0.0)
    _same_as_linkage_unit(names, records, bands=BandConfig(bands=40, bits=12, min_shared=3), pad=0.5)


def test_a_party_with_one_record_and_half_padding():
    names, records = _records(3, 60, sizes={"P2": 1})
    new = _same_as_linkage_unit(names, records, pad=0.5)
    assert new.outputs[LINKAGE_UNIT]["dummy_pairs"] > 0


def test_empty_clks_and_exact_duplicates_inside_parties():
    """Two records with every field empty at P1 and at P2 (never candidates) and three
    exact copies of records inside P1."""
    pop = synthetic_population(40, rng=InsecureReproducibleRandom(seed=41))
    data = make_parties(pop, parties=3, corruption=0.3, rng=InsecureReproducibleRandom(seed=42))
    names = list(data.parties)
    frames = {p: data.frames[p] for p in names}
    for p, dups in (("P1", 3), ("P2", 0)):
        f = frames[p]
        copies, empty = f.iloc[:dups].copy(), f.iloc[:2].copy()
        copies.index = pd.Index([f"{p}-copy-{k}" for k in range(dups)], name=f.index.name)
        empty.index = pd.Index([f"{p}-empty-{k}" for k in range(2)], name=f.index.name)
        empty[[c for c in empty.columns if c != ENTITY]] = ""
        frames[p] = pd.concat([f, copies, empty])
    records = {
        p: encode_clks(frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY) for p in names
    }
    assert all(int((~records[p].match_filters.any(axis=1)).sum()) == 2 for p in ("P1", "P2"))
    new = _same_as_linkage_unit(names, records)
    cands = run_candidates(new.outputs, names)
    for (left, right), pairs in cands.items():  # an empty record is never a real candidate
        for col, p in enumerate((left, right)):
            empty = np.flatnonzero(~records[p].match_filters.any(axis=1))
            assert not np.isin(pairs[:, col], empty).any()
    n1 = len(data.frames["P1"])  # a copy (rows n1..n1+2) is a candidate wherever its original (0..2) is
    found = 0
    for (left, right), pairs in cands.items():
        if "P1" in (left, right):
            col = 0 if left == "P1" else 1
            for k in range(3):
                mine = np.sort(pairs[pairs[:, col] == k, 1 - col])
                np.testing.assert_array_equal(np.sort(pairs[pairs[:, col] == n1 + k, 1 - col]), mine)
                found += mine.size
    assert found > 0


def test_a_pair_with_no_candidate_at_pad_zero():
    """P2 holds one record with no candidate at P3 (pad=0: an empty slot list)."""
    names, records = _records(3, 60, sizes={"P2": 1}, seed=47)
    new = _same_as_linkage_unit(names, records, pad=0.0)
    sizes = {k: len(v) for k, v in run_candidates(new.outputs, names).items()}
    assert sizes[("P3", "P2")] == 0 and sizes[("P2", "P1")] == 1


def test_an_accepted_dummy_never_reaches_an_output():
    """P2 (left of P1 in a two-party run) holds one record, P1's first with 20 of its set
    bits cleared (Dice about 0.97), and bands so strict (4 of 64 bits, all shared) that it
    is no candidate: at pad=1 every P1 record gets a dummy slot with P2's record, and that
    record's dummy is decided above the threshold. The linkage unit discards it: no link,
    no group, as under linkage-unit blocking."""
    names, records = _records(2, 40)
    one = records["P1"]
    near = one.match_filters[:1].copy()
    near[0, np.flatnonzero(near[0])[::3][:20]] = False
    assert lk.true_dice(one.match_filters, near, np.array([[0, 0]]))[0] > 0.9
    records = {
        "P1": attrs.evolve(one, exact_keys=None),
        "P2": attrs.evolve(
            one, party="P2", ids=one.ids[:1], entities=one.entities[:1], exact_keys=None,
            block_filters=near, match_filters=near,
        ),
    }  # fmt: skip
    strict = BandConfig(bands=4, bits=64, min_shared=4)
    new = _same_as_linkage_unit(names, records, exact_passes=0, bands=strict, some=False)
    lu = new.outputs[LINKAGE_UNIT]
    assert lu["candidate_count"] == 0 and lu["accepted"] == 0 and lu["dummy_pairs"] == len(one)
    assert all(len(new.outputs[p]["links"]) == 0 for p in names)


@pytest.mark.parametrize("shape", ["empty left", "empty right", "one record", "duplicates", "no exact"])
def test_the_candidates_from_the_groups_on_edge_shapes(shape):
    """Edge shapes of the token matrices: the relay's candidates equal
    bands.candidate_pairs on the full matrices; where both sides hold records, every
    exact pass (the last included) adds pairs the bands do not give."""
    r = np.random.default_rng(3)
    ma, mb = {"empty left": (0, 20), "empty right": (20, 0), "one record": (1, 30)}.get(shape, (25, 25))
    F = 0 if shape == "no exact" else 2
    a, b = (r.integers(0, 20, (m, 5)).astype(np.uint64) for m in (ma, mb))
    ea, eb = (r.integers(1, 40, (m, F)).astype(np.uint64) for m in (ma, mb))
    if shape == "one record":  # each of its exact values held by one record of B (the cap: 1.5 pairs)
        eb[:, :] = r.integers(100, 1000, eb.shape)
        eb[7, 0], eb[9, 1] = ea[0, 0], ea[0, 1]
    if shape == "duplicates":  # a record twice in A and four copies of it in B
        a[5], ea[5] = a[3], ea[3]
        b[:4], eb[:4] = a[3], ea[3]
    kw = {"max_block_pairs": 40, "min_shared": 2}
    want, skipped = candidate_pairs(a, b, exact_a=ea, exact_b=eb, **kw)
    got, got_skipped = _relayed(a, b, ea, eb, InsecureReproducibleRandom(seed=3), **kw)
    np.testing.assert_array_equal(got, want)
    assert got_skipped == skipped
    if ma and mb and F:
        for drop in range(F):  # without exact pass `drop`, fewer pairs
            keep = [c for c in range(F) if c != drop]
            fewer, _ = candidate_pairs(a, b, exact_a=ea[:, keep], exact_b=eb[:, keep], **kw)
            assert len(fewer) < len(want)


# --- tampered messages --------------------------------------------------------------


class _Tap:
    """A channel that rewrites the payloads of one step (``edit(to, payload)``)."""

    def __init__(self, ch: Any, step: str, edit: Any) -> None:
        self._ch, self._step, self._edit = ch, step, edit

    async def send(self, to: str, payload: Any, *, step: str) -> None:
        await self._ch.send(to, self._edit(to, payload) if step == self._step else payload, step=step)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ch, name)


def _tampering(who: str, step: str, edit: Any) -> type[DiceLinkageProtocol]:
    class _Tampers(DiceLinkageProtocol):
        async def _run_linkage_unit(self, ch):
            return await super()._run_linkage_unit(_Tap(ch, step, edit) if who == LINKAGE_UNIT else ch)

        async def _run_party(self, ch, me):
            return await super()._run_party(_Tap(ch, step, edit) if who == me else ch, me)

    return _Tampers


def _groups_edit(change):
    def edit(to, payload):
        return [change(dict(d)) for d in payload] if payload else payload

    return edit


def _shift(d):
    d["theirs"] = d["theirs"] + np.array([0, 1])  # every peer position one later (the last out of range)
    d["theirs"][-1, 1] = d["size"]
    return d


def _merge_first_groups(d):
    """Groups 0 and 1 (two words) as one, on both sides, renumbered: well-formed but mixed."""
    x = d["theirs"].copy()  # the left party numbers its own side from its words
    x[:, 0] = np.maximum(x[:, 0] - 1, 0)
    d["theirs"] = x[np.lexsort((x[:, 1], x[:, 0]))]
    return d


_LU_GROUPS = {
    "size not an int": lambda d: {**d, "size": float(d["size"])},
    "size off the declared records": lambda d: {**d, "size": 2 * d["size"]},
    "float groups": lambda d: {**d, "theirs": d["theirs"].astype(float)},
    "a bitmap of another length": lambda d: {**d, "shared": d["shared"][1:]},
    "no shared position": lambda d: {**d, "shared": np.zeros_like(d["shared"])},
    "one-dimensional groups": lambda d: {**d, "theirs": d["theirs"].reshape(-1)},
    "a position outside the list": _shift,
    "a group on one side only": lambda d: {**d, "theirs": d["theirs"][d["theirs"][:, 0] != 0]},
    "two words in one group": _merge_first_groups,
    "missing peer": lambda d: {k: v for k, v in d.items() if k != "peer"},
    "not a dict": lambda d: [d["shared"], d["theirs"]],
}


@pytest.mark.parametrize("what", sorted(_LU_GROUPS))
def test_tampered_relay_groups_are_refused_naming_the_linkage_unit(what):
    names, records = _records(3, 30)
    cls = _tampering(LINKAGE_UNIT, "relay-groups", _groups_edit(_LU_GROUPS[what]))
    with pytest.raises(ProtocolError, match=f"{LINKAGE_UNIT!r} (sent|put)"):
        _run(names, records, cls, blocking="relay")


_SLOTS = {
    "a row past the party's records": lambda to, x: x + 10_000,
    "negative rows": lambda to, x: -1 - x,
    "float rows": lambda to, x: x.astype(float),
    "a matrix": lambda to, x: np.column_stack([x, x]),
    "a list": lambda to, x: x.tolist(),
    "a dropped slot": lambda to, x: x[1:],
}


@pytest.mark.parametrize("what", sorted(_SLOTS))
def test_tampered_relay_slots_are_refused_naming_the_sender(what):
    """P2 is left of P1 (it sends P1 its rows of every slot); each tampering is refused by
    P1 (malformed) or by the linkage unit (the two digests differ), naming P2 or the pair."""
    names, records = _records(3, 30)
    cls = _tampering("P2", "relay-slots", _SLOTS[what])
    with pytest.raises(ProtocolError, match=r"'P2' sent malformed relay slots|'P2' and 'P1' sent different"):
        _run(names, records, cls, blocking="relay")


def _candidates_edit(change):
    def edit(to, payload):
        return [change(dict(d)) for d in payload]

    return edit


_CANDIDATES = {
    # P2 is left of P1, right of P3
    "dummies out of range": lambda d: {**d, "dummies": np.array([d["count"]])} if "dummies" in d else d,
    "dummies repeated": lambda d: {**d, "dummies": np.array([0, 0])} if "dummies" in d else d,
    "dummies as floats": lambda d: {**d, "dummies": d["dummies"].astype(float)} if "dummies" in d else d,
    "dummies from the right party": lambda d: {**d, "dummies": np.zeros(0, dtype=np.int64)},
    "no dummies from the left party": lambda d: {k: v for k, v in d.items() if k != "dummies"},
    "a negative count": lambda d: {**d, "count": -1},
    "more pairs than the two hold": lambda d: {**d, "count": 10**9},
}


@pytest.mark.parametrize("what", sorted(_CANDIDATES))
def test_tampered_candidates_are_refused_naming_the_sender(what):
    names, records = _records(3, 30)
    cls = _tampering("P2", "candidates", _candidates_edit(_CANDIDATES[what]))
    with pytest.raises(ProtocolError, match=r"'P2'"):
        _run(names, records, cls, blocking="relay")


_RESOLVE = {
    "a slot past the pair's": lambda to, x: [s if not s.size else np.r_[s, 10**6] for s in x],
    "repeated slots": lambda to, x: [np.r_[s, s] if s.size else s for s in x],
    "float slots": lambda to, x: [s.astype(float) + 0.5 if s.size else s for s in x],
    "one entry short": lambda to, x: x[1:],
}


@pytest.mark.parametrize("what", sorted(_RESOLVE))
def test_a_tampered_resolve_is_refused_naming_the_linkage_unit(what):
    names, records = _records(3, 30)
    cls = _tampering(LINKAGE_UNIT, "resolve", _RESOLVE[what])
    with pytest.raises(ProtocolError, match=f"{LINKAGE_UNIT!r} (asked for slots outside|sent a malformed resolve)"):
        _run(names, records, cls, blocking="relay")


def test_an_oversized_relay_word_list_is_refused_before_the_linkage_unit_reads_it():
    """A party that sends ten times its declared words: above the message bound, refused
    by the transport naming the party and the step."""
    names, records = _records(3, 30)
    cls = _tampering("P1", "relay-tokens", lambda to, x: np.tile(x, 10))
    with pytest.raises(ProtocolError, match=r"'P1' sent a \d+-byte message to 'linkage_unit' at step 'relay-tokens'"):
        _run(names, records, cls, blocking="relay")


@pytest.mark.parametrize("parties", [2, 3])
def test_a_word_list_of_another_width_names_its_sender(parties):
    """P1 sends twice its words (within the bound: the linkage unit does not know the
    bands). The linkage unit used to take the first party's width as the norm and blame the
    next, honest, party; now it names the parties off the most common width, and on a tie
    (two parties) both."""
    names, records = _records(parties, 30)
    cls = _tampering("P1", "relay-tokens", lambda to, x: np.tile(x, 2))
    with pytest.raises(ProtocolError, match="sent a malformed relay word list") as err:
        _run(names, records, cls, blocking="relay")
    blamed = str(err.value).split(" sent a malformed")[0]
    assert "'P1'" in blamed and ("'P2'" in blamed) == (parties == 2) and "'P3'" not in blamed


def test_without_declared_counts_a_ragged_word_list_names_its_sender():
    """Without declared counts the linkage unit cannot check a party's list and relays its
    size; the left party that finds it ragged used to blame the linkage unit alone, now it
    names the peer that sent the list too."""
    names, records = _records(3, 30)
    cls = _tampering("P3", "relay-tokens", lambda to, x: np.concatenate([x, x[:1]]))
    with pytest.raises(ProtocolError, match="'P3' sent a malformed relay word list or 'linkage_unit' altered it"):
        _run(names, records, cls, blocking="relay", counts=False)


# --- what the linkage unit learns from parties with few records ----------------------


def test_the_linkage_unit_estimates_dice_when_each_party_holds_one_record():
    """A known limit (reported, not fixed): the linkage unit sees, for every pair of
    parties, how many positions of the two lists carry a shared word. When a party holds
    one record, that number *is* the shared band and exact count of its candidate pair
    with each peer (the real count it knows from the dummy slots the left party names), so
    over the pairs of 8 one-record parties (copies of two people, 0-3 typos each) it ranks
    the true Dice with Spearman 0.96 (the claim's 0.3 holds only for parties with many
    records: 0.07 over 5 parties of about 30 records with this estimator)."""
    pop = synthetic_population(40, rng=InsecureReproducibleRandom(seed=5))
    g = np.random.default_rng(6)
    frames = {}
    for k in range(8):
        row = pop.iloc[[k % 2]].copy()
        for _ in range(k // 2):
            col = ["surname", "given_name", "address_1", "suburb"][g.integers(4)]
            row[col] = [corrupt_value(row[col].iloc[0], "substitute", g)]
        row.index = pd.Index([f"r{k}"], name=pop.index.name)
        frames[f"P{k + 1}"] = row
    names = list(frames)
    records = {
        p: encode_clks(frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY) for p in names
    }
    res = _run(names, records, blocking="relay")
    sent = {m.sender: m.payload for m in res.transcript.received_by(LINKAGE_UNIT) if m.step == "relay-tokens"}
    shared, dice = [], []
    for (left, right), pairs in run_candidates(res.outputs, names).items():
        if len(pairs):  # one real candidate: the linkage unit's feature is its list intersection
            shared.append(relay_groups(sent[left], sent[right])[0].shape[0])
            dice.append(float(lk.true_dice(records[left].match_filters, records[right].match_filters, pairs)[0]))
    assert len(dice) == 12
    assert spearmanr(shared, dice).statistic > 0.9


def test_the_linkage_unit_counts_near_duplicates_inside_a_party():
    """A known limit (reported, not fixed): a word a party sends twice is two records of
    that party sharing a band (a word is keyed with its column), so the linkage unit counts
    each party's within-party band collisions: on the test data (P1 holds 12 typo copies of
    its own records) P1's list repeats 956 words at 100 bands, P2's and P3's 230-243 (993 and
    243-254 in a full run); it cannot tell
    which positions, but it learns that P1 holds near-duplicates and roughly how many."""
    from test_pprl_party_blocking import _records as _leak_records

    from privreg.plugins.pprl.bands import MIN_SHARED, band_tokens
    from privreg.plugins.pprl.relay_blocking import position_order, relay_words

    names, _, records = _leak_records()
    cfg = BandConfig(bands=100, bits=16, min_shared=MIN_SHARED)  # about the bands these runs agree on
    repeats = {}
    for p in names:
        tok, _ = band_tokens(records[p].match_filters, config=cfg, secret=SECRET)
        words = relay_words(tok, records[p].exact_keys, InsecureReproducibleRandom(seed=2)).reshape(-1)
        sent = words[position_order(SECRET, p, words.size)]  # what the linkage unit receives
        repeats[p] = int(sent.size - np.unique(sent).size)
    assert repeats["P1"] > 3 * max(repeats["P2"], repeats["P3"])


# --- round 2 (issue #33's memory rewrite): found and held ---------------------------


def test_max_records_without_declared_counts_runs_under_relay():
    """``max_records`` bounds the records but declares none: the linkage unit used to take
    it as every party's count (a list of fewer records was 'malformed') and the left party
    as the peer's (a smaller peer refused). The relay now agrees with the linkage-unit mode."""
    names, records = _records(3, 30)
    _same_as_linkage_unit(names, records, counts=False, max_records=100)


def test_a_peer_size_above_max_records_is_refused_before_anything_is_allocated():
    """Without declared counts the linkage unit relays each peer's word count; with
    ``max_records`` the left party refuses a count above it (it would size its position
    index and the peer's permutation by it: 8 bytes per claimed word)."""
    names, records = _records(3, 30)
    cls = _tampering(LINKAGE_UNIT, "relay-groups", _groups_edit(lambda d: {**d, "size": d["size"] * 1000}))
    with pytest.raises(ProtocolError, match=f"{LINKAGE_UNIT!r} sent a word count for peer 'P.' above"):
        _run(names, records, cls, blocking="relay", counts=False, max_records=100)


@pytest.mark.parametrize("passes", [1, 2, 3, 5, 7, 16])
def test_relay_groups_in_any_number_of_passes_keep_the_top_of_the_word_space(passes, monkeypatch):
    """Each pass of relay_groups takes a range of the word space; with a pass count other
    than a power of two the ranges used to stop short of 2^64 (3 passes: 3 * 2^62), so a
    shared word above them lost its group (and its candidates) without a sound."""
    monkeypatch.setattr(rb, "RELAY_PASSES", passes)
    top = np.uint64(2**64 - 1)
    pool = np.array([0, 1, 2**62, 3 * 2**62 - 1, 3 * 2**62, 2**63, 2**64 - 2, top], dtype=np.uint64)
    mine, theirs = pool[[7, 0, 5, 7, 3, 4, 6, 1]], pool[[4, 7, 6, 2, 0, 0, 7, 3]]
    want = _reference_groups(mine, theirs)
    assert want[0][-1, 0] == 4  # five shared words, 2^64 - 1 the last
    for got, w in zip(rb.relay_groups(mine, theirs), want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("own_huge", [False, True])
def test_candidates_of_rows_and_groups_past_int32_keep_their_codes(own_huge):
    """Rows past 2^32 on one side (int64 orders) and group numbers near 2^31 (int32 groups
    times a width of 1024 pass 2^31): pair codes and block keys are formed in int64, so
    no pair wraps onto another. Small inputs with large declared sizes."""
    W, big = 1024, 2**33 - 1
    huge = np.array([big * W, big * W + 1, (2**32 + 7) * W, 5 * W + 1], dtype=np.int64)
    small = np.array([0, 1, W, W + 1], dtype=np.int32)  # rows 0 and 1, columns 0 and 1
    g = 2**31 - 3
    mine = np.array([[g, 0], [g + 1, 1], [g + 2, 3]], dtype=np.int32)  # own (row, column): (0, 0), (0, 1), (1, 1)
    theirs = np.array([[g, 0], [g + 1, 1], [g + 2, 3]], dtype=np.int32)  # peer: (big, 0), (big, 1), (5, 1)
    orders, rows = (small, huge), (2, big + 1)
    if own_huge:
        mine, theirs, orders, rows = theirs, mine, orders[::-1], rows[::-1]
    for min_shared, want in ((1, [[0, big], [1, 5]]), (2, [[0, big]])):
        got, skipped = rb.relay_candidates(
            (mine.copy(), theirs.copy()), *orders, width=W, bands=W, rows=rows, min_shared=min_shared,
            max_block_pairs=10, chunk=1,
        )  # fmt: skip
        want_rows = np.array(want, dtype=np.int64)
        np.testing.assert_array_equal(got, np.unique(want_rows[:, ::-1], axis=0) if own_huge else want_rows)
        assert skipped == 0


_RETYPE = {
    "int8": lambda x: x.astype(np.int8),
    "int16": lambda x: x.astype(np.int16),
    "big-endian": lambda x: x.astype(">i8"),
    "Fortran order": np.asfortranarray,
    "empty of uint8": lambda x: np.zeros((0, 2), dtype=np.uint8),
}


@pytest.mark.parametrize("what", sorted(_RETYPE))
def test_groups_of_other_integer_types_after_the_wire_give_the_same_candidates(what):
    """A linkage unit may send the peer's rows in any integer type (the left party keeps
    the type sent): through the wire, int8, int16, big-endian and Fortran-ordered rows
    give the honest candidates, and an empty side of any type is the empty side."""
    r = np.random.default_rng(5)
    a, b = r.integers(0, 6, 40).astype(np.uint64), r.integers(0, 6, 48).astype(np.uint64)
    orders = (rb.position_order(SECRET, "A", 40), rb.position_order(SECRET, "B", 48))
    kw = {"width": 4, "bands": 3, "rows": (10, 12), "min_shared": 1, "max_block_pairs": 50}
    honest = rb.relay_entry(a, b)
    want = rb.relay_candidates(rb.check_groups(honest, "LU", sent=a, theirs=48), *orders, **kw)
    if what == "empty of uint8":  # both sides empty: no shared word
        a = a + np.uint64(100)
        honest = rb.relay_entry(a, b)
        want = (np.zeros((0, 2), dtype=np.int64), 0)
    entry = decode(encode_buffer({**honest, "theirs": _RETYPE[what](honest["theirs"])}))
    got = rb.relay_candidates(rb.check_groups(entry, "LU", sent=a, theirs=48), *orders, **kw)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1] and (what == "empty of uint8") == (len(want[0]) == 0)


def test_a_tampered_groups_entry_is_refused_or_gives_candidates_in_range():
    """600 entries tampered at random (a row's group or position moved, rows shuffled,
    dropped or added, a bitmap bit flipped, every bit set): each is refused with
    ProtocolError or, if accepted, gives candidates of rows in range, the same in chunks of
    one pair as at once. Deterministic (seeded), so no false alarm."""
    r = np.random.default_rng(11)
    kw = {"width": 4, "bands": 3, "min_shared": 1, "max_block_pairs": 20}
    accepted = refused = 0
    for _ in range(600):
        ma, mb = int(r.integers(0, 8)), int(r.integers(0, 8))
        a, b = (r.integers(0, 6, 4 * m).astype(np.uint64) for m in (ma, mb))
        orders = (rb.position_order(SECRET, "A", a.size), rb.position_order(SECRET, "B", b.size))
        e = rb.relay_entry(a, b)
        x, bits, k = e["theirs"].astype(np.int64), e["shared"].copy(), int(r.integers(0, 7))
        if k == 0 and len(x):
            x[r.integers(0, len(x)), 0] += int(r.integers(-2, 3))
        elif k == 1 and len(x):
            x[r.integers(0, len(x)), 1] = int(r.integers(0, b.size))
        elif k == 2:
            x = x[r.permutation(len(x))]
        elif k == 3 and len(x):
            x = np.concatenate([x, x[-1:] + [int(r.integers(0, 2)), 1]])
        elif k == 4 and len(x):
            x = x[:-1]
        elif k == 5 and bits.size:
            bits[r.integers(0, bits.size)] ^= np.uint8(1 << int(r.integers(0, 8)))
        elif k == 6 and a.size:
            bits = np.packbits(np.ones(a.size, dtype=bool))
        entry = decode(encode_buffer({"shared": bits, "theirs": x}))
        try:
            groups = rb.check_groups(entry, "LU", sent=a, theirs=b.size)
        except ProtocolError:
            refused += 1
            continue
        accepted += 1
        again = rb.check_groups(entry, "LU", sent=a, theirs=b.size)
        got, sk = rb.relay_candidates(groups, *orders, rows=(ma, mb), **kw)
        small, sk1 = rb.relay_candidates(again, *orders, rows=(ma, mb), chunk=1, **kw)
        np.testing.assert_array_equal(got, small)
        assert sk == sk1 and (not got.size or (got.min() >= 0 and got[:, 0].max() < ma and got[:, 1].max() < mb))
    assert accepted > 100 and refused > 100


def test_the_checks_in_slices_accept_and_refuse_the_same_entries(monkeypatch):
    """check_groups reads the bitmap and the peer's rows CHECK_ROWS at a time with one row
    of overlap: a swap or repeat across a slice border is refused as at once, and what is
    accepted is the same rows (slices of 8, 16 and 24 rows against one slice)."""
    r = np.random.default_rng(1)
    for _ in range(300):
        ma, mb = int(r.integers(0, 40)), int(r.integers(0, 40))
        a, b = r.integers(0, 30, ma).astype(np.uint64), r.integers(0, 30, mb).astype(np.uint64)
        e = rb.relay_entry(a, b)
        x, bits, k = e["theirs"].astype(np.int64), e["shared"].copy(), int(r.integers(0, 4))
        if k == 0 and len(x) > 1:
            i = int(r.integers(1, len(x)))
            x[[i - 1, i]] = x[[i, i - 1]]
        elif k == 1 and len(x) > 1:
            i = int(r.integers(1, len(x)))
            x[i, 1] = x[i - 1, 1]
        elif k == 2 and bits.size:
            bits[r.integers(0, bits.size)] ^= np.uint8(1 << int(r.integers(0, 8)))
        seen = set()
        for rows in (1 << 22, 8, 16, 24):
            monkeypatch.setattr(rb, "CHECK_ROWS", rows)
            try:
                mine, theirs = rb.check_groups({"shared": bits, "theirs": x}, "LU", sent=a, theirs=mb)
                seen.add((mine.tobytes(), theirs.tobytes()))
            except ProtocolError:
                seen.add(None)
        assert len(seen) == 1


def test_the_left_party_keeps_no_reference_to_the_groups_it_passes_on(monkeypatch):
    """relay_candidates drops each side of the groups once indexed (memory: the peer's
    rows are the largest array of the left party's relay). That frees them only if the
    caller holds no other reference: the last peer's rows used to stay referenced by the
    loop variable over the linkage unit's entries, for the whole candidate search."""
    import gc
    import weakref

    from privreg.plugins.pprl import dice_protocol as dp

    real, alive = dp.relay_candidates, []

    def spy(groups, *args, **kw):
        out = real(tuple(g.copy() for g in groups), *args, **kw)
        refs = [weakref.ref(g) for g in groups]
        del groups
        gc.collect()
        alive.append(sum(ref() is not None for ref in refs))
        return out

    monkeypatch.setattr(dp, "relay_candidates", spy)
    names, records = _records(3, 30)
    _run(names, records, blocking="relay")
    assert len(alive) == 3 and alive == [0, 0, 0]


def test_an_int8_group_step_that_wraps_is_refused():
    """int8 groups 0..127 then -128: the step 127 -> -128 wraps to +1 in int8, but the
    129th row needs a 129th distinct non-negative int8 position, which does not exist: the
    entry is refused (no type short enough to wrap leaves room for enough positions)."""
    sent = np.arange(128, dtype=np.uint64)
    x = np.zeros((129, 2), dtype=np.int8)
    x[:, 0] = (np.arange(129) % 256).astype(np.int16).astype(np.int8)
    x[:128, 1], x[128, 1] = np.arange(128), 5
    assert x[128, 0] == -128 and np.all(np.diff(x[:, 0]) == 1)  # the wrap the order check sees
    entry = {"shared": np.packbits(np.ones(128, dtype=bool)), "theirs": x}
    with pytest.raises(ProtocolError, match="'LU' sent 'theirs' groups naming a position twice"):
        rb.check_groups(entry, "LU", sent=sent, theirs=200)


@pytest.mark.parametrize("chunk", [0, -1, 2.5])
def test_a_chunk_that_is_not_a_positive_int_is_refused_naming_it(chunk):
    """chunk=0 used to raise a bare ValueError from range(), and a negative chunk skipped
    the own side's index (np.empty: the candidates came from uninitialised memory)."""
    a = np.arange(8, dtype=np.uint64)
    groups = rb.check_groups(rb.relay_entry(a, a), "LU", sent=a, theirs=8)
    orders = (rb.position_order(SECRET, "A", 8), rb.position_order(SECRET, "B", 8))
    kw = {"width": 2, "bands": 2, "rows": (4, 4), "min_shared": 1, "max_block_pairs": 10}
    with pytest.raises((PrivregTypeError, PrivregValueError), match=f"chunk must be .*got {chunk!r}"):
        rb.relay_candidates(groups, *orders, chunk=chunk, **kw)


@pytest.mark.parametrize("cap", [0, -1.0, float("nan"), "1.5"])
def test_a_bad_exact_pass_cap_is_refused_as_by_exact_pairs(cap):
    """bands.exact_pairs refuses a cap that is not a positive real; relay_candidates used
    to take it (0 kept only an empty pass, NaN dropped every pass): the two routes now
    agree on what they refuse."""
    a = np.arange(8, dtype=np.uint64)
    groups = rb.check_groups(rb.relay_entry(a, a), "LU", sent=a, theirs=8)
    orders = (rb.position_order(SECRET, "A", 8), rb.position_order(SECRET, "B", 8))
    kw = {"width": 2, "bands": 1, "rows": (4, 4), "min_shared": 1, "max_block_pairs": 10}
    ea = np.arange(1, 5, dtype=np.uint64).reshape(4, 1)
    with pytest.raises((PrivregTypeError, PrivregValueError), match="max_pairs_per_record"):
        exact_pairs(ea, ea, max_pairs_per_record=cap)
    with pytest.raises((PrivregTypeError, PrivregValueError), match="max_pairs_per_record"):
        rb.relay_candidates(groups, *orders, max_pairs_per_record=cap, **kw)


def test_an_absurd_peer_size_without_any_bound_is_a_protocol_error():
    """Without declared counts or max_records the left party sizes the peer's permutation
    by the count the linkage unit relays; 2^70 words used to fail in numpy (ValueError)
    rather than as the linkage unit's fault. Records are capped at 2^40 as for the
    popcount message."""
    names, records = _records(3, 30)
    cls = _tampering(LINKAGE_UNIT, "relay-groups", _groups_edit(lambda d: {**d, "size": d["size"] << 70}))
    with pytest.raises(ProtocolError, match=f"{LINKAGE_UNIT!r} sent a word count for peer 'P.' above 2\\^40 records"):
        _run(names, records, cls, blocking="relay", counts=False)


def test_relay_candidates_drops_both_sides_of_the_groups_before_forming_pairs(monkeypatch):
    """The memory model counts the groups until indexed only: when the pairs are formed
    (_row_chunks) no reference to either side passed in is left."""
    import gc
    import weakref

    r = np.random.default_rng(2)
    a, b = r.integers(0, 5, 40).astype(np.uint64), r.integers(0, 5, 40).astype(np.uint64)
    refs, alive = [], []

    def groups():
        g = rb.check_groups(rb.relay_entry(a, b), "LU", sent=a, theirs=40)
        refs.extend(weakref.ref(x) for x in g)
        return g

    real = rb._row_chunks

    def spy(*args):
        gc.collect()
        alive.append([ref() is not None for ref in refs])
        return real(*args)

    monkeypatch.setattr(rb, "_row_chunks", spy)
    own, peer = rb.position_order(SECRET, "A", 40), rb.position_order(SECRET, "B", 40)
    # called as the protocol calls it (no *args: CALL_FUNCTION_EX would hold the arguments)
    got, _ = rb.relay_candidates(groups(), own, peer, width=4, bands=4, rows=(10, 10), min_shared=1, max_block_pairs=99)
    assert len(got) and alive == [[False, False]]


def test_max_records_without_declared_counts_runs_under_parties_blocking():
    """The same for ``blocking="parties"``: the linkage unit took ``max_records`` as every
    party's count of OPRF queries ("'P1' sent ... blinded elements"), and each data party as
    its peers' token rows; it is now a bound."""
    from privreg.plugins.pprl.bands import BandConfig

    names, records = _records(3, 30)
    bands = BandConfig(bands=6, bits=16, min_shared=2)
    old = _run(names, records, blocking="linkage-unit", pad=0, counts=False, max_records=100, bands=bands)
    new = _run(names, records, blocking="parties", counts=False, max_records=100, bands=bands)
    a, b = run_candidates(old.outputs, names), run_candidates(new.outputs, names)
    assert sorted(a) == sorted(b) and sum(len(c) for c in a.values()) > 0
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
