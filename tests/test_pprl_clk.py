"""The recommended profile's building blocks (plugin pprl): CLK encoding with keyed double
hashing and exact-pass tokens, keyed LSH bands and their candidate pairs, the band rule,
the greedy group solver and the group metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.pprl.bands import (
    DESIGN_DICE,
    EXACT_PAIRS_PER_RECORD,
    TARGET_COLLISION,
    BandConfig,
    band_tokens,
    candidate_pairs,
    exact_pairs,
    recommended_bands,
)
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, ClkSchema, clk_positions, dice, encode_clks
from privreg.plugins.pprl.quality import group_quality
from privreg.plugins.pprl.solver import conflict_pairs, greedy_groups
from privreg.plugins.pprl.tuning import key_probability

SECRET = bytes(range(50, 82))
OTHER = bytes(range(90, 122))
ROWS = [
    {
        "given_name": "anna",
        "surname": "smith",
        "date_of_birth": "19800101",
        "soc_sec_id": "1234567",
        "address_1": "main street",
        "suburb": "kew",
        "postcode": "3101",
        "street_number": "5",
        "address_2": "",
        "state": "vic",
    },
    {
        "given_name": "anna",
        "surname": "smyth",
        "date_of_birth": "19800101",
        "soc_sec_id": "",
        "address_1": "main st",
        "suburb": "kew",
        "postcode": "3101",
        "street_number": "5",
        "address_2": "",
        "state": "vic",
    },
    {
        "given_name": "bob",
        "surname": "jones",
        "date_of_birth": "",
        "soc_sec_id": "7654321",
        "address_1": "high road",
        "suburb": "carlton",
        "postcode": "3053",
        "street_number": "12",
        "address_2": "unit 2",
        "state": "vic",
    },
]


def test_double_hashing_positions_are_distinct_and_keyed():
    grams = ["an", "nn", "na", "_a", "a_"]
    pos = clk_positions(grams, key=SECRET, filter_length=1024, bits_per_token=20)
    assert pos.shape == (5, 20) and all(len(set(r)) == 20 for r in pos.tolist())
    assert pos.min() >= 0 and pos.max() < 1024
    assert not np.array_equal(pos, clk_positions(grams, key=OTHER, filter_length=1024, bits_per_token=20))


def test_clks_are_deterministic_under_the_secret_and_similar_records_are_close():
    a = encode_clks(pd.DataFrame(ROWS), secret=SECRET, party="P1")
    b = encode_clks(pd.DataFrame(ROWS), secret=SECRET, party="P2")
    c = encode_clks(pd.DataFrame(ROWS), secret=OTHER, party="P1")
    assert np.array_equal(a.match_filters, b.match_filters) and a.block_filters is a.match_filters
    assert not np.array_equal(a.match_filters, c.match_filters)
    d = dice(a.match_filters[[0, 0]], a.match_filters[[1, 2]])
    assert d[0] > 0.75 > d[1]
    # weights: a surname typo moves Dice less than losing the whole name would
    fill = a.match_filters.sum(1) / 1024
    assert np.all((fill > 0.2) & (fill < 0.8))


def test_exact_keys_match_equal_values_and_skip_missing_ones():
    a = encode_clks(pd.DataFrame(ROWS), secret=SECRET, party="P1")
    k = a.exact_keys
    assert k.shape == (3, 2) and k.dtype == np.uint64
    assert k[0, 1] == k[1, 1] != 0  # same date of birth
    assert k[1, 0] == 0 and k[2, 1] == 0  # missing id, missing date of birth
    assert k[0, 0] != k[2, 0]


def test_schema_is_validated():
    with pytest.raises(PrivregValueError, match="power of two"):
        ClkSchema(fields={"surname": 10}, filter_length=1000)
    with pytest.raises(PrivregTypeError, match="bits per token"):
        ClkSchema(fields=["surname"])
    with pytest.raises(PrivregValueError, match="columns"):
        encode_clks(pd.DataFrame([{"surname": "x"}]), schema=FEBRL_CLK_SCHEMA, secret=SECRET, party="P1")


def test_band_rule_is_the_smallest_j_reaching_the_target():
    cfg = recommended_bands(filter_length=1024, popcount=560)
    d = 2 * (1 - DESIGN_DICE) * 560
    p1 = float(key_probability(d, filter_length=1024, bits=cfg.bits))
    assert binom.sf(cfg.min_shared - 1, cfg.bands, p1) >= TARGET_COLLISION
    assert binom.sf(cfg.min_shared - 1, cfg.bands - 1, p1) < TARGET_COLLISION
    assert (cfg.bits, cfg.min_shared) == (16, 2) and 80 < cfg.bands < 200


def test_candidate_pairs_need_shared_bands_or_an_exact_token():
    a = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=np.uint64)
    b = np.array([[1, 2, 0], [0, 5, 0], [0, 0, 0], [1, 0, 3]], dtype=np.uint64)
    got, skipped = candidate_pairs(a, b, min_shared=1)
    assert got.tolist() == [[0, 0], [0, 3], [1, 1]] and skipped == 0
    got, _ = candidate_pairs(a, b, min_shared=2)
    assert got.tolist() == [[0, 0], [0, 3]]
    ea = np.array([[0], [11], [12]], dtype=np.uint64)
    eb = np.array([[0], [0], [12], [0]], dtype=np.uint64)
    got, _ = candidate_pairs(a, b, min_shared=2, exact_a=ea, exact_b=eb)
    assert got.tolist() == [[0, 0], [0, 3], [2, 2]]  # missing (0) never matches
    got, skipped = candidate_pairs(a, b, min_shared=1, max_block_pairs=1)
    assert got.tolist() == [[0, 0], [0, 3], [1, 1]] and skipped == 1  # (band 0, token 1): 1 x 2 records, capped
    got, _ = candidate_pairs(a[:, :1], b[:, :1], min_shared=1, max_block_pairs=1)
    assert got.size == 0


def test_band_tokens_are_keyed_and_equal_for_equal_filters():
    f = np.random.default_rng(3).random((4, 1024)) < 0.5
    f[1] = f[0]
    cfg = BandConfig(bands=10, bits=16)
    t, pos = band_tokens(f, config=cfg, secret=SECRET)
    assert t.shape == (4, 10) and np.array_equal(t[0], t[1]) and not np.array_equal(t[0], t[2])
    assert pos.shape == (10, 16)
    t2, _ = band_tokens(f, config=cfg, secret=OTHER)
    assert not np.any(t2 == t)


def test_solver_keeps_one_record_per_party_and_prefers_higher_levels():
    # P0 r0 is accepted with P1 r0 and P1 r1 (a conflict); P2 r0 matches both
    edges = np.array([[0, 0, 1, 0], [0, 0, 1, 1], [0, 0, 2, 0], [1, 1, 2, 0]])
    assert conflict_pairs(edges).tolist() == [True, True, True, True]
    groups = greedy_groups(edges, levels=[0, 2, 1, 1])
    assert groups == [[(0, 0), (1, 1), (2, 0)]]
    # input order does not matter
    perm = [3, 1, 0, 2]
    assert greedy_groups(edges[perm], levels=np.array([0, 2, 1, 1])[perm]) == groups
    # a merge needs half of the cross pairs accepted
    chain = np.array([[0, 0, 1, 0], [1, 0, 2, 0], [2, 0, 3, 0], [3, 0, 4, 0]])
    assert all(len(g) <= 3 for g in greedy_groups(chain, merge_fraction=0.6))


def test_group_quality_counts_exact_groups_and_pairs():
    entities = {"A": ["x", "y", "z"], "B": ["x", "y", "w"], "C": ["x", "q", "r"]}
    groups = [[(0, 0), (1, 0), (2, 0)], [(0, 1), (1, 1)], [(0, 2), (1, 2)]]
    q = group_quality(groups, entities=entities, parties=["A", "B", "C"])
    assert (q.true_groups, q.exact, q.groups) == (2, 2, 3)
    assert q.recall == 1.0 and q.precision == pytest.approx(2 / 3)
    assert q.pairwise.true_pairs == 4 and q.pairwise.true_found == 4 and q.pairwise.pairs == 5


def test_an_exact_pass_that_no_longer_singles_records_out_is_dropped():
    """An id pass (one pair per record) is kept; a pass of 20 values over 200 records
    (about 10 pairs per record, a frequency class) is dropped unless the cap allows it."""
    n = 200
    ids = np.arange(1, n + 1, dtype=np.uint64)
    classes = (np.arange(n, dtype=np.uint64) % 20) + 1
    ea = np.stack([ids, classes], axis=1)
    eb = ea[::-1].copy()
    pairs, skipped = exact_pairs(ea, eb)
    assert skipped == 0 and EXACT_PAIRS_PER_RECORD == 1.5
    assert sorted(map(tuple, pairs.tolist())) == [(i, n - 1 - i) for i in range(n)]
    loose, _ = exact_pairs(ea, eb, max_pairs_per_record=n)
    assert len(loose) == n * n // 20  # every pair in a class, the id pairs among them
    with pytest.raises(PrivregValueError, match="max_pairs_per_record"):
        exact_pairs(ea, eb, max_pairs_per_record=0.0)
