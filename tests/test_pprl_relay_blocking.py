"""clk-dice with ``blocking="relay"`` (issue #33): the linkage unit finds collisions among
tokens it cannot link to records or columns, each pair of data parties forms its candidates
from them, and the linkage unit receives only slot counts and digests before the decisions.

Data and seeds as in test_pprl_party_blocking (300 synthetic people at 3 parties, fixed
secret, keys and seeds: deterministic). Statistical checks: under independence Spearman's
rho over n pairs is about normal with sd 1/sqrt(n - 1); with n >= 600 candidate pairs
(sd 0.041) the bound 0.3 is more than 7 sd away (false-alarm probability below 1e-12), and
over n >= 10,000 word positions (sd 0.01) the bound 0.05 is 5 sd away (below 6e-7); a
record's >= 20 words at uniform positions span on average 0.9 of the list or more except
with a probability below 1e-12 over >= 50 records.
"""

from __future__ import annotations

import contextvars
import itertools

import numpy as np
import pytest
from scipy.stats import spearmanr
from test_pprl_party_blocking import SECRET, _left_right, _proto, _records, slot_rows

from privreg.core.errors import ProtocolError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl import leakage as lk
from privreg.plugins.pprl.bands import (
    MIN_SHARED,
    BandConfig,
    band_tokens,
    candidate_pairs,
    exact_pairs,
    pair_orientation,
    union_pairs,
)
from privreg.plugins.pprl.dice_protocol import LINKAGE_UNIT, DiceLinkageProtocol, run_candidates
from privreg.plugins.pprl.relay_blocking import (
    check_groups,
    position_order,
    relay_candidates,
    relay_entry,
    relay_groups,
    relay_words,
)


@pytest.fixture(scope="module")
def runs():
    out = {
        mode: run_protocol(_proto(blocking=mode, pad=0), transport=InMemoryTransport(keep_payloads=True))
        for mode in ("linkage-unit", "relay")
    }
    out["padded"] = run_protocol(_proto(blocking="relay"), transport=InMemoryTransport(keep_payloads=True))
    return out


@pytest.mark.parametrize("mode", ["relay", "padded"])
def test_the_candidate_pairs_and_groups_equal_the_linkage_unit_modes(runs, mode):
    names, _, _ = _records()
    old, new = runs["linkage-unit"].outputs, runs[mode].outputs
    a, b = run_candidates(old, names), run_candidates(new, names)
    assert sorted(a) == sorted(b) and sum(len(c) for c in a.values()) > 600
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert new[LINKAGE_UNIT]["candidates"] is None  # the linkage unit never knows them
    assert sorted(map(sorted, old[LINKAGE_UNIT]["groups"])) == sorted(map(sorted, new[LINKAGE_UNIT]["groups"]))
    assert old[LINKAGE_UNIT]["accepted"] == new[LINKAGE_UNIT]["accepted"]
    assert new[LINKAGE_UNIT]["candidate_count"] == sum(len(c) for c in a.values())
    for p in names:
        np.testing.assert_array_equal(old[p]["links"][:, 1], new[p]["links"][:, 1])
    # padding (the default) adds dummies, decided and discarded
    assert (new[LINKAGE_UNIT]["dummy_pairs"] > 0) == (mode == "padded")


def test_padding_hides_from_the_right_party_which_of_its_records_have_candidates(runs):
    """Under relay the left party of a pair forms the candidates (so it knows which of its
    records have one) and pads the right party's side: at pad=1 every record of the right
    party has a slot, though some have no real candidate (membership hidden, as under
    linkage-unit blocking); at pad=0 its slots are exactly its real candidates."""
    names, _, records = _records()
    for i, j in pair_orientation(names):
        left, right = _left_right(names, i, j)
        real = run_candidates(runs["relay"].outputs, names)[(left, right)]
        bare = len(records[right]) - np.unique(real[:, 1]).size
        assert bare > 5
        padded = runs["padded"].outputs[right]["slots"][left]
        assert np.unique(padded).size == len(records[right])
        unpadded = runs["relay"].outputs[right]["slots"][left]
        assert np.unique(unpadded).size == len(records[right]) - bare
        dummy = runs["padded"].outputs[left]["dummy_slots"][right]
        assert dummy.sum() >= bare
        assert left not in runs["padded"].outputs[right]["dummy_slots"]  # the right party never knows them


def _relayed(a, b, ea, eb, rng, **kw):
    """Both sides of the relay in memory: the candidates the left party forms from the groups."""
    w_a, w_b = relay_words(a, ea, rng), relay_words(b, eb, rng)
    o_a = position_order(SECRET, "A", w_a.size)
    o_b = position_order(SECRET, "B", w_b.size)
    sent_a = w_a.reshape(-1)[o_a]
    sent_b = w_b.reshape(-1)[o_b]
    groups = check_groups(relay_entry(sent_a, sent_b), "LU", sent=sent_a, theirs=w_b.size)
    for got, want in zip(groups, relay_groups(sent_a, sent_b)):  # the left party's side, rebuilt from a bit each
        np.testing.assert_array_equal(got, want)
    return relay_candidates(groups, o_a, o_b, width=w_a.shape[1], bands=a.shape[1], rows=(a.shape[0], b.shape[0]), **kw)


@pytest.mark.parametrize("seed", range(8))
def test_the_candidates_from_the_groups_equal_those_of_the_full_token_matrices(seed):
    """Small token alphabets so blocks are large (some skipped by max_block_pairs), exact
    passes with missing values and a frequent value (that pass dropped by its cap): the
    candidates the left party forms from the collision groups alone equal
    bands.candidate_pairs on both parties' full tokens, with the same skipped blocks, from
    either side."""
    r = np.random.default_rng(seed)
    ma, mb, J = int(r.integers(20, 60)), int(r.integers(20, 60)), 5
    a = r.integers(0, 6, (ma, J)).astype(np.uint64)
    b = r.integers(0, 6, (mb, J)).astype(np.uint64)
    ea = r.integers(0, 40, (ma, 2)).astype(np.uint64)
    eb = r.integers(0, 40, (mb, 2)).astype(np.uint64)
    ea[:, 1] = r.integers(0, 10, ma)  # frequent exact values: small blocks, but the pass exceeds its cap
    eb[:, 1] = r.integers(0, 10, mb)
    rng = InsecureReproducibleRandom(seed=seed)
    kw = {"max_block_pairs": 40, "min_shared": 2}
    want, want_skipped = candidate_pairs(a, b, exact_a=ea, exact_b=eb, **kw)
    got, skipped = _relayed(a, b, ea, eb, rng, **kw)
    np.testing.assert_array_equal(got, want)
    assert skipped == want_skipped and want_skipped > 0 and len(want) > 0
    # the same, whole groups taken a few positions at a time
    small, small_skipped = _relayed(a, b, ea, eb, rng, chunk=7, **kw)
    np.testing.assert_array_equal(small, want)
    assert small_skipped == want_skipped
    back, _ = candidate_pairs(b, a, exact_a=eb, exact_b=ea, **kw)
    got2, _ = _relayed(b, a, eb, ea, rng, **kw)
    np.testing.assert_array_equal(got2, back)
    # the cap mattered: with a generous one the frequent pass is kept, on both routes alike
    loose, _ = exact_pairs(ea, eb, max_block_pairs=40, max_pairs_per_record=1e9)
    assert len(loose) > len(exact_pairs(ea, eb, max_block_pairs=40)[0])
    wide, _ = candidate_pairs(a, b, exact_a=ea, exact_b=eb, **kw)
    got3, _ = _relayed(a, b, ea, eb, rng, max_pairs_per_record=1e9, **kw)
    assert len(got3) > len(wide)
    np.testing.assert_array_equal(got3, union_pairs(candidate_pairs(a, b, **kw)[0], loose))


def _reference_groups(mine, theirs):
    """relay_groups by a dictionary: per shared word (ascending) its positions on each side."""
    shared = sorted(set(mine.tolist()) & set(theirs.tolist()))
    rank = {w: g for g, w in enumerate(shared)}
    return tuple(
        np.array(sorted((rank[w], k) for k, w in enumerate(x.tolist()) if w in rank), dtype=np.int64).reshape(-1, 2)
        for x in (mine, theirs)
    )


@pytest.mark.parametrize("seed", range(4))
def test_relay_groups_over_the_whole_word_space_equal_a_dictionarys(seed, monkeypatch):
    """Words spread over all 2^64 values (so every pass over the word space has some, and
    shared words fall in several): the groups equal a dictionary's, in one pass or many."""
    import privreg.plugins.pprl.relay_blocking as rb

    r = np.random.default_rng(seed)
    pool = r.integers(0, 2**64 - 1, 300, dtype=np.uint64, endpoint=True)
    pool[:2] = (0, 2**64 - 1)  # both ends of the space
    mine, theirs = pool[r.integers(0, 300, 900)], pool[r.integers(0, 300, 700)]
    want = _reference_groups(mine, theirs)
    got = relay_groups(mine, theirs)
    assert got[0].dtype == np.int32 and len(want[0]) > 100
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    monkeypatch.setattr(rb, "RELAY_PASSES", 1)
    for g, w in zip(relay_groups(mine, theirs), want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", range(4))
def test_the_candidates_of_spread_words_equal_those_of_the_full_token_matrices(seed):
    """As the test above, with each token mapped to a keyed-looking 64-bit word (an odd
    multiplier: one to one), so the words fall in every pass of relay_groups and a block of
    the left party can sort past all of the peer's."""
    r = np.random.default_rng(100 + seed)
    ma, mb, J = int(r.integers(20, 60)), int(r.integers(20, 60)), 5
    spread = np.uint64(0x9E3779B97F4A7C15)
    a, b = ((r.integers(1, 8, (m, J)).astype(np.uint64) * spread) for m in (ma, mb))
    ea, eb = ((r.integers(1, 30, (m, 2)).astype(np.uint64) * spread) for m in (ma, mb))
    kw = {"max_block_pairs": 40, "min_shared": 2}
    want, want_skipped = candidate_pairs(a, b, exact_a=ea, exact_b=eb, **kw)
    got, skipped = _relayed(a, b, ea, eb, InsecureReproducibleRandom(seed=seed), **kw)
    np.testing.assert_array_equal(got, want)
    assert skipped == want_skipped and len(want) > 0


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 10**9])
def test_row_chunks_cover_every_entry_in_order_without_splitting_a_row(chunk):
    """relay_candidates' chunks: consecutive, covering, each ending at a row's end, and
    holding at most ``chunk`` pairs plus one cutting block's and one row's."""
    from privreg.plugins.pprl.relay_blocking import _row_chunks

    r = np.random.default_rng(chunk)
    rows = np.sort(r.integers(0, 300, 5000)).astype(np.int32)
    pairs = r.integers(0, 40, rows.size).astype(np.int32)
    got = _row_chunks(rows, pairs, chunk)
    assert got[0][0] == 0 and got[-1][1] == rows.size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(got))
    assert all(hi == rows.size or rows[hi - 1] != rows[hi] for _, hi in got)
    block = max(1, min(4096, chunk // 64))
    most_per_row = max(int(pairs[rows == x].sum()) for x in np.unique(rows))
    assert all(int(pairs[lo:hi].sum()) <= chunk + block * 39 + most_per_row for lo, hi in got)
    assert len(got) >= min(int(pairs.sum()) // (chunk + block * 39 + most_per_row), 300)
    assert _row_chunks(rows[:0], pairs[:0], chunk) == []


def test_the_linkage_unit_cannot_estimate_similarity(runs):
    names, _, _ = _records()
    view, rows = lk.slot_view(runs["relay"].transcript, names, LINKAGE_UNIT), slot_rows(runs["relay"])
    decile = np.concatenate([r[0] for r in rows])
    dice = np.concatenate([r[1] for r in rows])
    accepted = np.concatenate([r[2] for r in rows])
    assert dice.size > 600
    assert abs(lk.bucket_spearman(decile[:, None], dice)) <= 0.3
    np.testing.assert_array_equal(accepted, dice >= 0.75)  # the decisions: what it is meant to learn
    # what it received: words, then per pair only a count and a digest, then accepted slots' records
    assert {s for s in view.steps if not s.startswith("cmp-")} == {"relay-tokens", "candidates", "resolved"}
    for (i, j), (_, _, acc, _, pairs) in zip(pair_orientation(names), rows):
        left, right = _left_right(names, i, j)
        np.testing.assert_array_equal(view.resolved[(left, right)], pairs[acc, 0])


def _words_by_record(res, party):
    """The words ``party`` sent the linkage unit and, from the ground truth (its band
    tokens recomputed from the secret), the record and column behind each position."""
    _, _, records = _records()
    out = res.outputs[party]
    cfg = BandConfig(bands=out["bands"], bits=out["band_bits"], min_shared=MIN_SHARED)
    tok, _ = band_tokens(records[party].match_filters, config=cfg, secret=SECRET)
    (sent,) = [
        m.payload for m in res.transcript.received_by(LINKAGE_UNIT) if m.step == "relay-tokens" and m.sender == party
    ]
    J = tok.shape[1]
    W = J + records[party].exact_keys.shape[1]
    assert sent.shape == (len(records[party]) * W,)
    flat = tok.reshape(-1)
    uniq, first, counts = np.unique(flat, return_index=True, return_counts=True)
    single = uniq[counts == 1]  # band words held by one (record, band) only: their owner is known
    at = np.flatnonzero(np.isin(sent, single))
    owner = first[counts == 1][np.searchsorted(single, sent[at])]
    return at, owner // J, owner % J, sent.size


def test_a_words_position_tells_neither_its_record_nor_its_band(runs):
    """The positions of one record's words are spread over the whole list: position and
    record number (or band) are uncorrelated, and the gap between two words of one record
    is as long as between two random positions."""
    names, _, _ = _records()
    for p in names:
        pos, record, band, size = _words_by_record(runs["relay"], p)
        assert pos.size > 10_000
        assert abs(spearmanr(pos, record).statistic) <= 0.05
        assert abs(spearmanr(pos, band).statistic) <= 0.05
        # a record's words span the whole list (k random positions: (k - 1) / (k + 1) of it,
        # about 0.98 here), not the W adjacent positions of a record-major layout
        lo = np.full(record.max() + 1, size)
        hi = np.zeros(record.max() + 1, dtype=np.int64)
        np.minimum.at(lo, record, pos)
        np.maximum.at(hi, record, pos)
        held = np.bincount(record) >= 20
        assert held.sum() >= 50 and np.mean((hi - lo)[held]) >= 0.9 * size
    # control: the linkage-unit mode's tokens arrive as a record x band matrix
    view = lk.linkage_unit_view(runs["linkage-unit"].transcript, names, LINKAGE_UNIT)
    assert view[names[0]]["tokens"].ndim == 2


def test_a_data_party_receives_no_peer_word(runs):
    """From the linkage unit a data party gets positions only; the peer words it can know
    are exactly the words it holds itself (so it cannot invert a peer's token by trying
    values, as it could under blocking='parties' without the OPRF)."""
    names, _, _ = _records()
    res = runs["relay"]
    me = names[0]
    (msg,) = [m.payload for m in res.transcript.received_by(me) if m.step == "relay-groups"]
    # it is the left party (the one that forms the candidates) of its pair with P3 only
    assert [d["peer"] for d in msg] == ["P3"] and _left_right(names, 0, 2)[0] == me
    for d in msg:
        assert set(d) == {"peer", "size", "shared", "theirs"}
        assert d["shared"].dtype == np.uint8 and d["theirs"].dtype == np.int32  # a bit per own position
    from_peers = {m.step for m in res.transcript.received_by(me) if m.sender != LINKAGE_UNIT}
    # besides the comparison circuit's openings (uniform bits): popcounts, slots, masked CLKs
    assert {x for x in from_peers if not (x.startswith("cmp-") and ".open" in x)} <= {
        "popcount",
        "relay-slots",
        "masked",
        *(f"masked.{k}" for k in range(1, 10)),
    }
    # the shared words are the intersection: as many peer positions as carry a word of mine
    sent = {m.sender: m.payload for m in res.transcript.received_by(LINKAGE_UNIT) if m.step == "relay-tokens"}
    for d in msg:
        assert d["theirs"].shape[0] == int(np.isin(sent[d["peer"]], sent[me]).sum()) > 0
        assert d["theirs"].shape[0] < sent[d["peer"]].size  # the others are never named


_ME: contextvars.ContextVar[str] = contextvars.ContextVar("me", default="")


class _Tracks(DiceLinkageProtocol):
    async def _relay_with_peers(self, ch, me, *args):
        _ME.set(me)
        return await super()._relay_with_peers(ch, me, *args)


def test_a_mismatch_between_the_parties_slot_lists_is_refused(monkeypatch):
    """P1 digests one slot fewer than the left party sent it (a list changed on its way):
    the linkage unit compares both parties' digests and refuses to deal."""
    import privreg.plugins.pprl.dice_protocol as dp

    real = dp.slot_digest
    monkeypatch.setattr(dp, "slot_digest", lambda slots, key: real(slots[1:] if _ME.get() == "P1" else slots, key))
    with pytest.raises(ProtocolError, match="sent different candidate lists for their pair") as err:
        run_protocol(_proto(_Tracks, blocking="relay", first=60), transport=InMemoryTransport())
    assert "'P1'" in str(err.value)


def test_malformed_groups_are_refused():
    sent = np.array([7, 3, 9, 3, 5], dtype=np.uint64)  # shared: positions 1, 3 (word 3) and 4 (word 5)
    bits = np.packbits(np.array([0, 1, 0, 1, 1], dtype=bool))
    ok = np.array([[0, 2], [1, 0], [1, 3]])
    a, b = check_groups({"shared": bits, "theirs": ok}, "LU", sent=sent, theirs=4)
    np.testing.assert_array_equal(a, [[0, 1], [0, 3], [1, 4]])  # group 0: word 3, group 1: word 5
    np.testing.assert_array_equal(b, ok)
    past = bits.copy()
    past[0] |= 1  # a bit for a sixth position
    bad = {
        "outside": (bits, np.array([[0, 0], [1, 4]])),
        "order": (bits, np.array([[0, 2], [1, 3], [1, 0]])),
        "twice": (bits, np.array([[0, 2], [1, 2]])),
        "one side": (bits, np.array([[0, 2]])),
        "numbering": (bits, np.array([[1, 2], [2, 0]])),
        "float": (bits, np.array([[0.0, 2.0], [1.0, 0.0]])),
        "bits past the list": (past, ok),
        "bitmap length": (np.r_[bits, 0].astype(np.uint8), ok),
        "bitmap type": (bits.astype(np.int64), ok),
        "no bitmap": (None, ok),
    }
    for what, (m, t) in bad.items():
        with pytest.raises(ProtocolError, match="'LU' sent") as err:
            check_groups({"shared": m, "theirs": t}, "LU", sent=sent, theirs=4)
        assert err.value, what


class _SendsMore(DiceLinkageProtocol):
    async def _relay_with_peers(self, ch, me, secret, held, exact, rng):
        if me == "P3":  # words for one more band than the others
            tok = held.pop()
            held.append(np.column_stack([tok, tok[:, :1]]))
        return await super()._relay_with_peers(ch, me, secret, held, exact, rng)


def test_an_oversized_word_list_is_refused():
    with pytest.raises(ProtocolError, match="'P3' sent a malformed relay word list"):
        run_protocol(
            _proto(_SendsMore, blocking="relay", first=40, bands=BandConfig(bands=6, bits=16, min_shared=2)),
            transport=InMemoryTransport(),
        )


def test_message_bounds_and_options_of_relay_blocking():
    from privreg.mpc.deployment import options_digest
    from privreg.plugins.pprl.dice_deployment import DiceDeployment

    kw = {"record_counts": {"P1": 100, "P2": 120, "P3": 90}, "exact_passes": 2}
    relay = DiceLinkageProtocol(blocking="relay", **kw)
    assert relay.message_bound(sender="P1", receiver=LINKAGE_UNIT, step="relay-tokens") == 8 * 1026 * 100 + 1024
    assert relay.message_bound(sender="P1", receiver=LINKAGE_UNIT, step="tokens") == 0
    assert relay.message_bound(sender="P1", receiver="P2", step="pair-tokens") == 0
    assert relay.message_bound(sender="P1", receiver=LINKAGE_UNIT, step="oprf-blinded") == 0
    # the groups go to the left party of a pair only: P1 is left of P3, P2 of P1, P3 of P2
    # (a bit per own position and 16 bytes per peer position)
    bound = {p: relay.message_bound(sender=LINKAGE_UNIT, receiver=p, step="relay-groups") for p in ("P1", "P2")}
    assert bound == {"P1": 12825 + 16 * 1026 * 90 + 4096, "P2": 15390 + 16 * 1026 * 100 + 4096}
    # the slots go from the left party to the right one; the candidates carry the left party's dummies
    assert relay.message_bound(sender="P2", receiver="P1", step="relay-slots") == 8 * 100 * 120 + 1024
    assert relay.message_bound(sender="P1", receiver="P2", step="relay-slots") == 0
    cands = 3 * 256 + 8 * (100 * 120 + 100 * 90) + 1024
    assert relay.message_bound(sender="P1", receiver=LINKAGE_UNIT, step="candidates") == cands
    parties = DiceLinkageProtocol(blocking="parties", **kw)
    assert parties.message_bound(sender=LINKAGE_UNIT, receiver="P1", step="relay-groups") == 0
    assert parties.message_bound(sender="P2", receiver="P1", step="relay-slots") == 0
    assert DiceLinkageProtocol(blocking="relay").pad == 1.0
    assert DiceLinkageProtocol(blocking="relay", pad=0.5).pad == 0.5
    dep = DiceDeployment()
    opts = dep.options({"records": [10, 10, 10], "blocking": "relay"})
    assert opts["pad"] == 1.0
    other = dep.options({"records": [10, 10, 10], "blocking": "parties"})
    assert options_digest(dep, opts) != options_digest(dep, other)
    assert dep.options({"records": [10, 10, 10], "blocking": "relay", "pad": 0.25})["pad"] == 0.25
