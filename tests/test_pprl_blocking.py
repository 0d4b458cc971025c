"""Plugin ``pprl`` (paper 004): LSH + suffix blocking, block dispersion, sliding-window
merge, candidate groups, quality metrics and LSH tuning.

The blocking and merge tests are small cases worked by hand: the expected keys, suffixes,
blocks and groups are written out below, not computed by the code under test. Monte
Carlo comparisons use fixed seeds and state their false-alarm rates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.plugins.pprl.blocking import (
    BlockingConfig,
    choose_lmin,
    lsh_bit_keys,
    lsh_positions,
    pack_bits,
    paper_window,
    party_signatures,
    plain_signatures,
    protect_signatures,
    suffix_positions,
)
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.dispersion import (
    DispersionConfig,
    block_entropies,
    dispersion_positions,
    lmin_from_dispersion,
    overall_dispersion,
    round_lmin,
    sequence_entropy,
)
from privreg.plugins.pprl.encoding import encode_records
from privreg.plugins.pprl.merge import block_statistics, candidate_groups, oversized_blocks, sliding_window_merge
from privreg.plugins.pprl.quality import blocking_quality, linkage_quality
from privreg.plugins.pprl.records import CandidateGroups, EncodedRecords, FinalBlock, Signatures
from privreg.plugins.pprl.schema import FEBRL_SCHEMA
from privreg.plugins.pprl.tuning import (
    calibrate_dispersion,
    collision_probability,
    deviation_for_distance,
    key_probability,
    multiparty_collision_probability,
    spread_distribution,
    suggest_lsh,
)

SECRET = bytes(range(32))


def _bits(*rows: str) -> np.ndarray:
    return np.array([[c == "1" for c in r] for r in rows], dtype=bool)


def _records(party: str, *rows: str) -> EncodedRecords:
    f = _bits(*rows)
    return EncodedRecords(
        party=party, ids=tuple(f"{party}{i}" for i in range(len(rows))), block_filters=f, match_filters=f.copy()
    )


def _sig(party: str, rows: list[tuple[int, int, int, int, int]]) -> Signatures:
    """Signatures from (record, group, key, suffix_len, suffix) rows."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return Signatures(
        party=party,
        record=a[:, 0],
        lsh_group=a[:, 1],
        lsh_key=a[:, 2].astype(np.uint64),
        suffix_len=a[:, 3],
        suffix=a[:, 4].astype(np.uint64),
    )


def _members(block: FinalBlock) -> dict[str, list[int]]:
    return {p: m.tolist() for p, m in block.members.items()}


# --- LSH and suffix blocking, by hand ----------------------------------------------------

#            position: 0123456789
HAND = _records(
    "P1",
    "0101010101",  # key bits at 1,3,5,7 = 1111; bits 8,9 = 01
    "0101010100",  # key 1111; bits 8,9 = 00
    "1100000011",  # key 1000; bits 8,9 = 11
    "0101010110",
)  # key 1111; bits 8,9 = 10
HAND_POS = np.array([[1, 3, 5, 7]])


def test_pack_bits_and_lsh_keys_by_hand():
    assert pack_bits(_bits("1011", "0001", "0000")).tolist() == [11, 1, 0]
    assert lsh_bit_keys(HAND.block_filters, HAND_POS).tolist() == [[15], [15], [8], [15]]
    two = np.array([[1, 3, 5, 7], [0, 2, 8, 9]])
    # group 1 bits at 0,2,8,9: r0 0,0,0,1 -> 1; r1 0,0,0,0 -> 0; r2 1,0,1,1 -> 11; r3 0,0,1,0 -> 2
    assert lsh_bit_keys(HAND.block_filters, two)[:, 1].tolist() == [1, 0, 11, 2]


def test_suffix_positions_by_hand():
    # non-LSH positions of the group: 0, 2, 4, 6, 8, 9
    assert suffix_positions(HAND_POS, filter_length=10, length=2).tolist() == [[8, 9]]
    assert suffix_positions(HAND_POS, filter_length=10, length=3).tolist() == [[6, 8, 9]]
    assert suffix_positions(HAND_POS, filter_length=10, length=3, exclude_lsh=False).tolist() == [[7, 8, 9]]
    with pytest.raises(PrivregValueError):
        suffix_positions(HAND_POS, filter_length=10, length=7)


def test_plain_signatures_by_hand():
    sig = plain_signatures(HAND, positions=HAND_POS, suffix_lengths=(2, 3))
    rows = list(
        zip(
            sig.record.tolist(),
            sig.lsh_group.tolist(),
            sig.lsh_key.tolist(),
            sig.suffix_len.tolist(),
            sig.suffix.tolist(),
        )
    )
    # suffix 2 = bits (8, 9); suffix 3 = bits (6, 8, 9)
    assert rows == [
        (0, 0, 15, 2, 1),
        (1, 0, 15, 2, 0),
        (2, 0, 8, 2, 3),
        (3, 0, 15, 2, 2),
        (0, 0, 15, 3, 1),
        (1, 0, 15, 3, 0),
        (2, 0, 8, 3, 3),
        (3, 0, 15, 3, 2),
    ]
    literal = plain_signatures(HAND, positions=HAND_POS, suffix_lengths=(3,), exclude_lsh=False)
    # the paper's last 3 bits (7, 8, 9): 101, 100, 011, 110
    assert literal.suffix.tolist() == [5, 4, 3, 6]
    lsh_only = plain_signatures(HAND, positions=HAND_POS, suffix_lengths=(0,))
    assert lsh_only.suffix_len.tolist() == [0] * 4 and lsh_only.suffix.tolist() == [0] * 4
    # blocks: LSH block 1111 = {r0, r1, r3} splits by 2-bit suffix into {r1}, {r0}, {r3}
    stats = block_statistics(plain_signatures(HAND, positions=HAND_POS, suffix_lengths=(0,)))
    assert (stats.count, stats.min, stats.max) == (2, 1, 3)


def test_lsh_positions_are_keyed_distinct_and_shared():
    cfg = BlockingConfig(lsh_groups=4, lsh_bits=20)
    a = lsh_positions(cfg, filter_length=100, secret=SECRET)
    assert a.shape == (4, 20) and a.dtype == np.int64
    assert all(len(set(row)) == 20 and row.tolist() == sorted(row) for row in a)
    assert a.min() >= 0 and a.max() < 100
    np.testing.assert_array_equal(a, lsh_positions(cfg, filter_length=100, secret=SECRET))
    b = lsh_positions(cfg, filter_length=100, secret=bytes(range(1, 33)))
    assert not np.array_equal(a, b)
    assert len({tuple(r) for r in a}) == 4  # groups drawn independently
    with pytest.raises(PrivregValueError):
        lsh_positions(BlockingConfig(lsh_bits=20), filter_length=10, secret=SECRET)


def test_protection_keeps_equality_and_prefix_structure():
    rng = np.random.default_rng(3)  # simulated filters
    f = rng.random((400, 100)) < 0.3
    f[200:] = f[:200]  # duplicates share keys
    f[200:, 95:] = ~f[200:, 95:]  # ... but differ in the last 5 suffix bits
    rec = EncodedRecords(party="A", ids=tuple(map(str, range(400))), block_filters=f, match_filters=f)
    cfg = BlockingConfig(lsh_groups=2, lsh_bits=6)
    pos = lsh_positions(cfg, filter_length=100, secret=SECRET)
    plain = plain_signatures(rec, positions=pos, suffix_lengths=(20, 32))
    prot = protect_signatures(plain, secret=SECRET, lsh_bits=6)
    assert prot.record.tolist() == plain.record.tolist()
    np.testing.assert_array_equal(prot.suffix_len, plain.suffix_len)
    # tokens: equal iff (group, raw key) equal
    raw = list(zip(plain.lsh_group.tolist(), plain.lsh_key.tolist()))
    tok = list(zip(plain.lsh_group.tolist(), prot.lsh_key.tolist()))
    assert len(set(raw)) == len(set(tok)) == len(set(zip(raw, tok)))
    assert not np.array_equal(prot.lsh_key, plain.lsh_key)
    # masks: constant within a (group, key, length) list, XOR differences preserved
    mask = prot.suffix ^ plain.suffix
    lists = {}
    for g, k, ln, m, _s_plain, s_prot in zip(
        plain.lsh_group.tolist(),
        plain.lsh_key.tolist(),
        plain.suffix_len.tolist(),
        mask.tolist(),
        plain.suffix.tolist(),
        prot.suffix.tolist(),
    ):
        lists.setdefault((g, k, ln), set()).add(m)
        assert m < 2**ln and s_prot < 2**ln
    assert all(len(ms) == 1 for ms in lists.values())
    # distinct lists get distinct 32-bit masks (a collision has probability < 1e-5 here)
    masks32 = [next(iter(ms)) for key, ms in lists.items() if key[2] == 32]
    assert len(set(masks32)) == len(masks32)
    # common-prefix length is preserved: a ^ b unchanged within a list
    sel = (plain.lsh_group == plain.lsh_group[0]) & (plain.lsh_key == plain.lsh_key[0]) & (plain.suffix_len == 32)
    p, q = plain.suffix[sel], prot.suffix[sel]
    np.testing.assert_array_equal(p[:, None] ^ p[None, :], q[:, None] ^ q[None, :])


def test_party_signatures_shapes_and_options():
    rec = _records("A", *["0110100111" * 10, "1110100111" * 10, "0000011111" * 10])
    cfg = BlockingConfig(lsh_groups=3, lsh_bits=10, suffix_count=2)
    sig = party_signatures(rec, config=cfg, secret=SECRET, lmin=12)
    assert len(sig) == 3 * 3 * 2 and sig.party == "A"
    assert sorted(set(sig.suffix_len.tolist())) == [12, 13]
    plain = party_signatures(rec, config=cfg, secret=SECRET, lmin=12, protect=False)
    pos = lsh_positions(cfg, filter_length=100, secret=SECRET)
    ref = plain_signatures(rec, positions=pos, suffix_lengths=(12, 13))
    np.testing.assert_array_equal(plain.lsh_key, ref.lsh_key)
    np.testing.assert_array_equal(plain.suffix, ref.suffix)
    lsh_only = party_signatures(rec, config=attrs_evolve(cfg, lmin=0), secret=SECRET)
    assert len(lsh_only) == 9 and set(lsh_only.suffix_len.tolist()) == {0}
    with pytest.raises(PrivregValueError, match="exceed"):
        party_signatures(rec, config=cfg, secret=SECRET, lmin=80)
    with pytest.raises(PrivregTypeError):
        party_signatures(rec.block_filters, config=cfg, secret=SECRET, lmin=12)


def attrs_evolve(cfg: BlockingConfig, **kw) -> BlockingConfig:
    import attrs

    return attrs.evolve(cfg, **kw)


def test_blocking_config_validation():
    assert paper_window(3) == 5 and paper_window(5) == 7 and paper_window(7) == 9 and paper_window(9) == 12
    assert paper_window(4) == 6 and paper_window(10) == 13
    assert BlockingConfig().window_for(3) == 5 and BlockingConfig(window=8).window_for(3) == 8
    assert BlockingConfig().suffix_lengths(15, 100) == (15, 16)
    assert BlockingConfig().max_suffix_length(100) == 64
    assert BlockingConfig(lsh_bits=20).max_suffix_length(70) == 50
    for bad, err in [
        (dict(lsh_groups=0), PrivregValueError),
        (dict(lsh_bits=65), PrivregValueError),
        (dict(lmin=-1), PrivregValueError),
        (dict(lmin=1.5), PrivregTypeError),
        (dict(window=1), PrivregValueError),
        (dict(suffix_excludes_lsh=1), PrivregTypeError),
        (dict(dispersion={}), PrivregTypeError),
    ]:
        with pytest.raises(err):
            BlockingConfig(**bad)


# --- sliding-window merge, by hand (the paper's Fig. 6) --------------------------------

# One signature list: group 0, key 7, suffix length 2. Blocks Bij = block j of party Pi:
#   B11 = P1 {0}    suffix 00      B12 = P1 {1, 2} suffix 10
#   B21 = P2 {0}    suffix 01      B22 = P2 {1}    suffix 11
#   B31 = P3 {0, 1} suffix 01
# Sorted by (suffix, party): B11, B21, B31, B12, B22. With w = 4 the windows are
# [B11 B21 B31 B12] and [B21 B31 B12 B22]; both hold all three parties (Fig. 6).
FIG6 = [
    _sig("P1", [(0, 0, 7, 2, 0b00), (1, 0, 7, 2, 0b10), (2, 0, 7, 2, 0b10)]),
    _sig("P2", [(0, 0, 7, 2, 0b01), (1, 0, 7, 2, 0b11)]),
    _sig("P3", [(0, 0, 7, 2, 0b01), (1, 0, 7, 2, 0b01)]),
]


def test_sliding_window_merge_fig6_by_hand():
    blocks = sliding_window_merge(FIG6, window=4)
    assert [_members(b) for b in blocks] == [
        {"P1": [0, 1, 2], "P2": [0], "P3": [0, 1]},  # B11 + B21 + B31 + B12
        {"P1": [1, 2], "P2": [0, 1], "P3": [0, 1]},  # B21 + B31 + B12 + B22
    ]
    assert all(b.lsh_group == 0 and b.lsh_key == 7 for b in blocks)
    # w = 3: windows [B11 B21 B31], [B21 B31 B12], [B31 B12 B22]
    assert [_members(b) for b in sliding_window_merge(FIG6, window=3)] == [
        {"P1": [0], "P2": [0], "P3": [0, 1]},
        {"P1": [1, 2], "P2": [0], "P3": [0, 1]},
        {"P1": [1, 2], "P2": [1], "P3": [0, 1]},
    ]
    # a list shorter than w is one window
    assert [_members(b) for b in sliding_window_merge(FIG6, window=9)] == [
        {"P1": [0, 1, 2], "P2": [0, 1], "P3": [0, 1]}
    ]


def test_merge_requires_every_party_in_the_window():
    # P3's only block is far down the list: windows of 3 without P3 are not final blocks
    sigs = [
        _sig("P1", [(0, 0, 1, 3, 0b000), (1, 0, 1, 3, 0b010)]),
        _sig("P2", [(0, 0, 1, 3, 0b001), (1, 0, 1, 3, 0b011)]),
        _sig("P3", [(0, 0, 1, 3, 0b111)]),
    ]
    # sorted: P1:000, P2:001, P1:010, P2:011, P3:111 -> windows of 3: only [010 011 111] is complete
    assert [_members(b) for b in sliding_window_merge(sigs, window=3)] == [{"P1": [1], "P2": [1], "P3": [0]}]
    # different keys never meet
    other = [sigs[0], sigs[1], _sig("P3", [(0, 0, 2, 3, 0b111)])]
    assert sliding_window_merge(other, window=3) == []
    # different LSH groups never meet either
    other = [sigs[0], sigs[1], _sig("P3", [(0, 1, 1, 3, 0b111)])]
    assert sliding_window_merge(other, window=5) == []


def test_shorter_suffix_rescues_a_typo_fig5():
    """Fig. 5: Peter (P1) and Pete (P2) share the LSH key; their 3-bit suffixes 100 and
    000 differ in the first bit, their 2-bit suffixes are both 00."""
    p1 = _sig("P1", [(0, 0, 5, 3, 0b100), (1, 0, 5, 3, 0b011), (0, 0, 5, 2, 0b00), (1, 0, 5, 2, 0b11)])
    p2 = _sig("P2", [(0, 0, 5, 3, 0b000), (1, 0, 5, 3, 0b010), (0, 0, 5, 2, 0b00), (1, 0, 5, 2, 0b10)])
    blocks = sliding_window_merge([p1, p2], window=2)
    # length 2 list (sorted first): P1:00(Peter) P2:00(Pete) P2:10 P1:11 -> windows of 2 with
    # both parties: [00 00], [10 11]; length 3 list: P2:000(Pete) P2:010 P1:011 P1:100(Peter)
    # -> only [010 011], the same members as [10 11]: dropped as a duplicate
    assert [_members(b) for b in blocks] == [
        {"P1": [0], "P2": [0]},  # Peter + Pete, found only through the 2-bit suffix
        {"P1": [1], "P2": [1]},
    ]
    groups = candidate_groups(blocks, parties=["P1", "P2"])
    assert sorted(map(tuple, groups.records.tolist())) == [(0, 0), (1, 1)]


def test_duplicate_final_blocks_are_dropped():
    # the same two blocks under suffix lengths 2 and 3 and in two LSH groups
    p1 = _sig("P1", [(0, 0, 1, 2, 1), (0, 0, 1, 3, 1), (0, 1, 9, 2, 3)])
    p2 = _sig("P2", [(4, 0, 1, 2, 1), (4, 0, 1, 3, 1), (4, 1, 9, 2, 3)])
    blocks = sliding_window_merge([p1, p2], window=2)
    assert [_members(b) for b in blocks] == [{"P1": [0], "P2": [4]}]
    assert blocks[0].lsh_group == 0  # the first occurrence is kept


def test_merge_validation():
    with pytest.raises(PrivregValueError, match="window must be >="):
        sliding_window_merge(FIG6, window=2)
    with pytest.raises(PrivregValueError, match="same lmin"):
        sliding_window_merge([FIG6[0], _sig("P2", [(0, 0, 7, 3, 1)])], window=4)
    with pytest.raises(PrivregValueError, match="distinct"):
        sliding_window_merge([FIG6[0], FIG6[0]], window=4)
    with pytest.raises(PrivregTypeError):
        sliding_window_merge(FIG6[0], window=4)
    with pytest.raises(PrivregValueError, match="at least 2"):
        sliding_window_merge([FIG6[0]], window=4)


# --- candidate groups, by hand -----------------------------------------------------------


def test_candidate_groups_fig6_by_hand():
    blocks = sliding_window_merge(FIG6, window=4)
    groups = candidate_groups(blocks, parties=["P1", "P2", "P3"])
    # block 0: {0,1,2} x {0} x {0,1} = 6 groups; block 1: {1,2} x {0,1} x {0,1} = 8 groups,
    # of which (1,0,0) (1,0,1) (2,0,0) (2,0,1) already came from block 0
    expected = [
        (0, 0, 0),
        (0, 0, 1),
        (1, 0, 0),
        (1, 0, 1),
        (2, 0, 0),
        (2, 0, 1),
        (1, 1, 0),
        (1, 1, 1),
        (2, 1, 0),
        (2, 1, 1),
    ]
    assert [tuple(r) for r in groups.records.tolist()] == expected
    assert groups.block.tolist() == [0] * 6 + [1] * 4
    assert groups.parties == ("P1", "P2", "P3") and len(groups) == 10
    # column order follows `parties`
    swapped = candidate_groups(blocks, parties=["P3", "P1", "P2"])
    assert sorted(map(tuple, swapped.records.tolist())) == sorted((c, a, b) for a, b, c in expected)
    stats = block_statistics(blocks)
    assert (stats.count, stats.min, stats.max, stats.mean, stats.products) == (2, 6, 6, 6.0, 14)


def test_candidate_groups_are_unique_across_generation_chunks(monkeypatch):
    from privreg.plugins.pprl import merge

    blocks = sliding_window_merge(FIG6, window=4)
    whole = candidate_groups(blocks, parties=["P1", "P2", "P3"])
    monkeypatch.setattr(merge, "_CHUNK", 4)  # one block per chunk: duplicates span chunks
    chunked = candidate_groups(blocks, parties=["P1", "P2", "P3"])
    np.testing.assert_array_equal(chunked.records, whole.records)
    np.testing.assert_array_equal(chunked.block, whole.block)


def test_candidate_groups_guards():
    blocks = sliding_window_merge(FIG6, window=4)
    with pytest.raises(PrivregValueError, match="max_group_products=13"):
        candidate_groups(blocks, parties=["P1", "P2", "P3"], max_group_products=13)
    assert len(candidate_groups(blocks, parties=["P1", "P2", "P3"], max_group_products=14)) == 10
    # skip blocks above 6 products: only block 0 remains
    kept = candidate_groups(blocks, parties=["P1", "P2", "P3"], max_block_products=6)
    assert len(kept) == 6 and kept.block.tolist() == [0] * 6
    assert oversized_blocks(blocks, parties=["P1", "P2", "P3"], limit=6).tolist() == [1]
    with pytest.raises(PrivregValueError, match="expected exactly"):
        candidate_groups(blocks, parties=["P1", "P2"])
    empty = candidate_groups([], parties=["P1", "P2"])
    assert empty.records.shape == (0, 2)


def test_identical_records_always_meet():
    """Records equal at all parties have equal keys and suffixes: their blocks are
    adjacent in every list, so w >= n puts them in one window (recall 1)."""
    pop = synthetic_population(300, rng=InsecureReproducibleRandom(seed=11))
    parts = [encode_records(pop, schema=FEBRL_SCHEMA, secret=SECRET, party=p) for p in ("A", "B", "C")]
    cfg = BlockingConfig(lsh_groups=2, lsh_bits=12, lmin=10)
    sigs = [party_signatures(r, config=cfg, secret=SECRET) for r in parts]
    groups = candidate_groups(sliding_window_merge(sigs, window=3), parties=["A", "B", "C"])
    found = {tuple(r) for r in groups.records.tolist()}
    assert all((i, i, i) in found for i in range(300))


# --- dispersion (Section 4.2.2) ----------------------------------------------------------


def test_dispersion_worked_example():
    raw = lmin_from_dispersion(1.11, theta=0.5, ht=1.4, lt=15)
    assert raw == pytest.approx(15 * 0.61 / 0.9) and round(raw, 2) == 10.17
    assert round_lmin(raw, maximum=64) == 10
    assert lmin_from_dispersion(0.5, theta=0.5, ht=1.4, lt=15) is None  # Hs <= theta: skip
    assert round_lmin(None, maximum=64) == 0
    assert round_lmin(10.5, maximum=64) == 11  # halves round up
    assert round_lmin(0.2, maximum=64) == 1 and round_lmin(90.0, maximum=63) == 63
    with pytest.raises(PrivregValueError):
        lmin_from_dispersion(1.0, theta=0.5, ht=0.5, lt=15)


def test_sequence_entropy_by_hand():
    assert sequence_entropy(np.array([0, 0, 1, 1])) == pytest.approx(1.0)
    assert sequence_entropy(np.array([0, 1, 2, 3])) == pytest.approx(2.0)
    assert sequence_entropy(np.array([5, 5, 5])) == 0.0
    assert sequence_entropy(np.array([0, 0, 0, 1]), log_base=math.e) == pytest.approx(
        -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    )


def test_block_entropies_by_hand():
    # keys (one group): block 1 = records 0-3, block 2 = records 4-7, block 3 = records 8-9
    keys = np.array([[1], [1], [1], [1], [2], [2], [2], [2], [3], [3]])
    f = _bits(
        "00000000",
        "00000000",
        "00000011",
        "00000011",  # bits 6,7: 00 00 11 11 -> H = 1
        "00000010",
        "00000010",
        "00000010",
        "00000010",  # 10 10 10 10 -> H = 0
        "00000001",
        "00000010",
    )  # only 2 records <= X: excluded
    cfg = DispersionConfig(positions=2, records=4, blocks=10, min_block_size=3)
    h = block_entropies(f, keys, positions=np.array([6, 7]), config=cfg, rng=InsecureReproducibleRandom(seed=1))
    assert sorted(h.tolist()) == [0.0, 1.0]
    # per-group positions: a second group puts all ten records in one block and reads bits
    # 5, 6: sequences 00 00 01 01 01 01 01 01 00 01 (3 x 00, 7 x 01); q = 4 of them give
    # entropy 0, H(1/4, 3/4) or 1 bit depending on the draw
    keys2 = np.concatenate([keys, np.zeros((10, 1), dtype=int)], axis=1)
    h2 = block_entropies(
        f, keys2, positions=np.array([[6, 7], [5, 6]]), config=cfg, rng=InsecureReproducibleRandom(seed=1)
    ).tolist()
    assert len(h2) == 3
    h2.remove(0.0)
    h2.remove(1.0)
    h_quarter = -(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75))
    assert min(abs(h2[0] - x) for x in (0.0, h_quarter, 1.0)) < 1e-12
    assert overall_dispersion([h, np.array([2.0])]) == pytest.approx(1.0)
    assert overall_dispersion([np.zeros(0)]) is None
    # N = 1: one of the two eligible blocks
    one = block_entropies(
        f, keys, positions=np.array([6, 7]), config=attrs_evolve(cfg, blocks=1), rng=InsecureReproducibleRandom(seed=2)
    )
    assert one.size == 1 and one[0] in (0.0, 1.0)
    # q = 2 of a block whose 4 sequences are all different: exactly 1 bit whatever is sampled
    f2 = _bits("00000000", "00000001", "00000010", "00000011")
    two = block_entropies(
        f2,
        np.ones((4, 1), dtype=int),
        positions=np.array([6, 7]),
        config=DispersionConfig(positions=2, records=2, blocks=5, min_block_size=3),
        rng=InsecureReproducibleRandom(seed=3),
    )
    assert two.tolist() == [1.0]


def test_dispersion_positions_avoid_lsh_and_are_keyed():
    cfg = BlockingConfig()
    pos = lsh_positions(cfg, filter_length=100, secret=SECRET)
    m = dispersion_positions(pos, filter_length=100, count=8, secret=SECRET)
    assert m.shape == (3, 8) and (m == m[0]).all()  # the paper: one set, unused by every group
    assert not set(m.ravel().tolist()) & set(pos.ravel().tolist())
    np.testing.assert_array_equal(m, dispersion_positions(pos, filter_length=100, count=8, secret=SECRET))
    # groups covering every position: row j avoids group j only
    dense = np.array([np.arange(0, 60), np.arange(40, 100)])
    rows = dispersion_positions(dense, filter_length=100, count=8, secret=SECRET)
    assert set(rows[0].tolist()) <= set(range(60, 100)) and set(rows[1].tolist()) <= set(range(40))
    with pytest.raises(PrivregValueError, match="outside an LSH group"):
        dispersion_positions(np.arange(98)[None, :], filter_length=100, count=3, secret=SECRET)
    with pytest.raises(PrivregValueError, match="min_block_size"):
        DispersionConfig(records=10, min_block_size=5)


def test_choose_lmin_applies_formula_3():
    pop = synthetic_population(1500, rng=InsecureReproducibleRandom(seed=5))
    parts = [encode_records(pop, schema=FEBRL_SCHEMA, secret=SECRET, party=p) for p in ("A", "B")]
    cfg = BlockingConfig(lsh_bits=8)
    choice = choose_lmin(parts, config=cfg, secret=SECRET, rng=InsecureReproducibleRandom(seed=6))
    assert choice.sampled_blocks > 0 and choice.hs is not None
    d = cfg.dispersion
    if choice.hs > d.theta:
        assert choice.raw == pytest.approx(d.lt * (choice.hs - d.theta) / (d.ht - d.theta))
        assert choice.lmin == min(max(math.floor(choice.raw + 0.5), 1), cfg.max_lmin(100))
    else:
        assert choice.lmin == 0
    # no block larger than X (4 records, X = 8): suffix blocking is skipped
    few = [_records(p, *["0110100111" * 10] * 4) for p in ("A", "B")]
    tiny = choose_lmin(few, config=cfg, secret=SECRET, rng=InsecureReproducibleRandom(seed=6))
    assert tiny.hs is None and tiny.lmin == 0
    # a single party's run applies the rule to its own blocks
    sig = party_signatures(parts[0], config=cfg, secret=SECRET, rng=InsecureReproducibleRandom(seed=6))
    assert len(sig) > 0


# --- quality metrics, by hand ------------------------------------------------------------

ENT = {"A": ["e1", "e2", "e3", None], "B": ["e1", "e2", "e2", "e4"], "C": ["e1", "e3", "e2"]}
# true groups: e1 (A0,B0,C0); e2: A1 x {B1,B2} x C2 -> 2; e3 missing at B -> T = 3


def test_blocking_quality_by_hand():
    groups = CandidateGroups(
        parties=("A", "B", "C"),
        records=np.array([[0, 0, 0], [1, 1, 2], [1, 2, 1], [3, 3, 0], [0, 0, 0]]),
        block=np.zeros(5, dtype=np.int64),
    )
    q = blocking_quality(groups, entities=ENT)
    assert (q.candidates, q.true_groups, q.true_candidates) == (4, 3, 2)  # duplicate counted once
    assert q.pair_completeness == pytest.approx(2 / 3)
    assert q.pairs_quality == pytest.approx(0.5)
    assert q.reduction_ratio == pytest.approx(1 - 4 / 48)
    # pairwise: AB {00 11 12 33}: 3 true; AC {00 12 11 30}: 2; BC {00 12 21 30}: 2
    # true pairs: AB 1 + 2, AC 1 + 1 + 1, BC 1 + 2 -> 9; space 16 + 12 + 12 = 40
    pw = q.pairwise
    assert (pw.pairs, pw.true_pairs, pw.true_found) == (12, 9, 7)
    assert pw.recall == pytest.approx(7 / 9) and pw.precision == pytest.approx(7 / 12)
    assert pw.reduction_ratio == pytest.approx(1 - 12 / 40)


def test_linkage_quality_by_hand():
    q = linkage_quality(np.array([[0, 0, 0], [1, 2, 1]]), entities=ENT, parties=["A", "B", "C"])
    assert (q.linked, q.true_linked, q.true_groups) == (2, 1, 3)
    assert q.recall == pytest.approx(1 / 3) and q.precision == 0.5 and q.error_rate == 0.5
    assert q.f1 == pytest.approx(0.4)
    none = linkage_quality(np.zeros((0, 3), dtype=np.int64), entities=ENT, parties=["A", "B", "C"])
    assert none.recall == 0.0 and math.isnan(none.precision)
    with pytest.raises(PrivregValueError, match="no ground-truth"):
        linkage_quality(np.array([[0, 0]]), entities={"A": ["x"]}, parties=["A", "B"])
    with pytest.raises(PrivregValueError, match="outside"):
        linkage_quality(np.array([[0, 0, 9]]), entities=ENT, parties=["A", "B", "C"])


# --- tuning: formulas against Monte Carlo ------------------------------------------------


def _mc_pair(L, d, K, J, trials, replacement, seed):
    rng = np.random.default_rng(seed)  # simulation of the hash choice, not privacy noise
    if replacement:
        pos = rng.integers(0, L, size=(trials, J, K))
    else:
        pos = np.argsort(rng.random((trials, J, L)), axis=2)[:, :, :K]
    avoid = np.all(pos >= d, axis=2)  # the differing positions are 0..d-1 (symmetry)
    return avoid.any(axis=1).mean()


@pytest.mark.parametrize("replacement", [True, False])
def test_collision_probability_matches_monte_carlo(replacement):
    """20,000 simulated pairs per case; tolerance 5 standard errors (false-alarm rate
    about 6e-7 per comparison, 4 comparisons)."""
    L, K, J, trials = 100, 20, 3, 20_000
    for d, seed in ((5, 1), (10, 2)):
        p = float(collision_probability(d, filter_length=L, bits=K, groups=J, replacement=replacement))
        mc = _mc_pair(L, d, K, J, trials, replacement, seed)
        assert abs(mc - p) < 5 * math.sqrt(p * (1 - p) / trials)
    # the with-replacement formula is the paper's 1 - (1 - (1 - d/L)^K)^J
    assert collision_probability(10, filter_length=100, bits=20, groups=3, replacement=True) == pytest.approx(
        1 - (1 - 0.9**20) ** 3
    )
    # distinct positions: C(L-d, K) / C(L, K)
    assert key_probability(10, filter_length=100, bits=20) == pytest.approx(math.comb(90, 20) / math.comb(100, 20))


def test_multiparty_collision_matches_monte_carlo():
    """Star model, 3 records each 3 random bits off a reference; 20,000 simulated groups,
    tolerance 5 standard errors (false-alarm rate about 6e-7)."""
    L, K, J, n, dev, trials = 100, 20, 3, 3, 3, 20_000
    rng = np.random.default_rng(4)
    flips = np.argsort(rng.random((trials, n, L)), axis=2)[:, :, :dev]  # per record distinct
    spread = np.zeros((trials, L), dtype=bool)
    np.put_along_axis(spread, flips.reshape(trials, -1), True, axis=1)
    pos = np.argsort(rng.random((trials, J, L)), axis=2)[:, :, :K]
    hit = ~np.take_along_axis(np.repeat(spread[:, None, :], J, axis=1), pos, axis=2).any(axis=2)
    mc = hit.any(axis=1).mean()
    p = multiparty_collision_probability(deviation=dev, parties=n, filter_length=L, bits=K, groups=J)
    assert abs(mc - p) < 5 * math.sqrt(p * (1 - p) / trials)
    # n = 2 with the reference included is the pairwise formula at distance dev
    assert multiparty_collision_probability(
        deviation=5, parties=2, filter_length=L, bits=K, groups=J, reference_included=True
    ) == pytest.approx(float(collision_probability(5, filter_length=L, bits=K, groups=J)))
    # all records of a group must collide in the same group: lower than any single pair
    assert p < float(collision_probability(2 * dev, filter_length=L, bits=K, groups=J))


def test_spread_distribution_by_hand():
    # two random 2-subsets of 10 positions: union 2 w.p. 1/45, 3 w.p. 16/45, 4 w.p. 28/45
    pmf = spread_distribution(filter_length=10, deviation=2, records=2)
    assert pmf[2] == pytest.approx(1 / 45) and pmf[3] == pytest.approx(16 / 45) and pmf[4] == pytest.approx(28 / 45)
    assert deviation_for_distance(10, filter_length=100) == 5  # 2*5*(1-0.05) = 9.5 ~ 10


def test_suggest_lsh_meets_target_and_minimises_work():
    s = suggest_lsh(filter_length=100, distance=10, target_recall=0.9, background_distance=35, records=5000)
    J, K = s
    assert (s.groups, s.bits) == (J, K)
    assert float(collision_probability(10, filter_length=100, bits=K, groups=J)) >= 0.9
    # brute force: nothing cheaper meets the target
    for k in range(1, 65):
        for j in range(1, 65):
            if float(collision_probability(10, filter_length=100, bits=k, groups=j)) >= 0.9:
                work = j * (1 + 5000 * float(key_probability(35, filter_length=100, bits=k)))
                assert work >= s.work - 1e-9
    multi = suggest_lsh(filter_length=100, distance=10, target_recall=0.9, parties=3, background_distance=35)
    assert (
        multiparty_collision_probability(
            deviation=5, parties=3, filter_length=100, bits=multi.bits, groups=multi.groups
        )
        >= 0.9
    )
    with pytest.raises(PrivregValueError, match="no J"):
        suggest_lsh(filter_length=100, distance=40, target_recall=0.99, max_groups=2)


def test_suggest_lsh_respects_min_bits():
    free = suggest_lsh(filter_length=100, distance=10, target_recall=0.9, background_distance=35, records=5000)
    floor = free.bits + 3
    s = suggest_lsh(
        filter_length=100,
        distance=10,
        target_recall=0.9,
        background_distance=35,
        records=5000,
        min_bits=floor,
        max_groups=64,
    )
    assert s.bits >= floor and s.work >= free.work
    assert float(collision_probability(10, filter_length=100, bits=s.bits, groups=s.groups)) >= 0.9
    with pytest.raises(PrivregValueError, match="min_bits"):
        suggest_lsh(filter_length=100, distance=10, target_recall=0.9, min_bits=30, max_bits=20)


def test_calibrate_dispersion_reads_the_plateau():
    pop = synthetic_population(400, rng=InsecureReproducibleRandom(seed=8))
    data = make_parties(
        pop,
        parties=3,
        corruption=0.3,
        rng=InsecureReproducibleRandom(seed=9),
        overlap=1.0,
        fields=list(FEBRL_SCHEMA.columns),
    )
    parts = [
        encode_records(data.frames[p], schema=FEBRL_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in data.parties
    ]
    cfg = BlockingConfig(lsh_bits=10)
    cal = calibrate_dispersion(
        parts, config=cfg, secret=SECRET, lmins=(16, 2, 8), rng=InsecureReproducibleRandom(seed=1)
    )
    assert cal.lmins == (2, 8, 16)
    assert cal.ht == choose_lmin(parts, config=cfg, secret=SECRET, rng=InsecureReproducibleRandom(seed=1)).hs
    best = max(cal.pairs_quality)
    first = next(lmin for lmin, q in zip(cal.lmins, cal.pairs_quality) if q >= 0.95 * best)
    assert cal.lt == first
    sigs = [party_signatures(p, config=cfg, secret=SECRET, lmin=8) for p in parts]
    q8 = blocking_quality(
        candidate_groups(sliding_window_merge(sigs, window=5), parties=list(data.parties)), entities=parts
    )
    assert (q8.pair_completeness, q8.pairs_quality) == (cal.pair_completeness[1], cal.pairs_quality[1])
    with pytest.raises(PrivregValueError, match="ground-truth"):
        calibrate_dispersion([_records("A", "01" * 50), _records("B", "01" * 50)], config=cfg, secret=SECRET)
