"""Scalable matching of MP-SPPRL (plugin pprl: matching.py, assignment.py; paper 004,
Algorithm 1): the round-by-round session with early termination and completion gives
exactly the plaintext verdict, computes no distance twice, and costs what its counts
say; the encryptor assignment matches a brute-force optimum on small instances and its
lower bound is never above the optimum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.core.errors import PrivregValueError, ProtocolError
from privreg.plugins.pprl.assignment import assign_encryptors, group_units, unit_costs
from privreg.plugins.pprl.matching import (
    MatchingSession,
    match_plaintext,
    plaintext_comparer,
    run_matching,
)
from privreg.plugins.pprl.records import CandidateGroups, FinalBlock


def instance(seed, n, records=6, groups=25, L=24, noise=0.08):
    """Parties holding noisy copies of the same filters, and random candidate groups."""
    rng = np.random.default_rng(seed)
    parties = tuple(f"P{i + 1}" for i in range(n))
    base = rng.random((records, L)) < 0.5
    filters = {p: base ^ (rng.random((records, L)) < noise) for p in parties}
    g = rng.integers(0, records, (groups, n))
    g[: groups // 3] = np.arange(groups // 3)[:, None] % records  # some true groups
    recs = np.unique(g, axis=0)
    cg = CandidateGroups(parties=parties, records=recs, block=np.zeros(len(recs), dtype=np.int64))
    return cg, filters, rng.integers(0, n, len(recs))


class RecordingComparer:
    """The plaintext comparer, remembering every pair it was asked for."""

    def __init__(self, parties, filters):
        self.inner = plaintext_comparer(parties, filters)
        self.pairs = []

    def __call__(self, plan):
        for k in range(len(plan)):
            a = (int(plan.enc_party[k]), int(plan.enc_record[k]))
            b = (int(plan.cmp_party[k]), int(plan.cmp_record[k]))
            self.pairs.append(frozenset((a, b)))
        return self.inner(plan)


@settings(max_examples=60)  # each example runs a whole matching session
@given(st.integers(0, 10_000), st.integers(2, 4), st.sampled_from(["star", "all"]), st.integers(0, 5), st.data())
def test_session_verdict_equals_plaintext_and_no_pair_twice(seed, n, rule, T, data):
    groups, filters, enc = instance(seed, n)
    early = data.draw(st.integers(1, n - 1))
    session = MatchingSession(groups, enc, threshold=T, rule=rule, early_rounds=early)
    comparer = RecordingComparer(groups.parties, filters)
    res = run_matching(session, comparer)
    want = match_plaintext(groups, filters, T, rule=rule, encryptor=enc)
    np.testing.assert_array_equal(res.matched, want)
    np.testing.assert_array_equal(res.links, groups.records[want])
    assert len(set(comparer.pairs)) == len(comparer.pairs) == res.counts.comparisons  # computed once each
    assert res.counts.comparisons <= res.counts.required_pairs <= res.counts.naive_pairs
    assert sum(r.pairs for r in res.counts.rounds) == res.counts.comparisons
    labels = [r.label for r in res.counts.rounds]
    assert labels == sorted(set(labels), key=labels.index)  # each round once, in order


def test_star_rule_is_the_papers_and_differs_from_all_pairs():
    """Encrypted record close to both others, the two others 2T apart: a star match, not
    an all-pairs match (Section 5: the n-1 others are *taken* to be similar)."""
    L, T = 12, 2
    x = np.zeros(L, dtype=bool)
    y, z = x.copy(), x.copy()
    y[:2] = True
    z[2:4] = True  # HD(x, y) = HD(x, z) = 2, HD(y, z) = 4
    filters = {"P1": x[None], "P2": y[None], "P3": z[None]}
    g = CandidateGroups(
        parties=("P1", "P2", "P3"), records=np.zeros((1, 3), dtype=np.int64), block=np.zeros(1, dtype=np.int64)
    )
    for enc, rule, expected in [(0, "star", True), (0, "all", False), (1, "star", False)]:
        s = MatchingSession(g, np.array([enc]), threshold=T, rule=rule)
        assert run_matching(s, plaintext_comparer(g.parties, filters)).matched.tolist() == [expected]
        assert match_plaintext(g, filters, T, rule=rule, encryptor=[enc]).tolist() == [expected]


def test_early_termination_skips_the_later_rounds_of_dropped_groups():
    rng = np.random.default_rng(1)
    L, m = 40, 30
    base = rng.random((m, L)) < 0.5
    filters = {"P1": base, "P2": base.copy(), "P3": base.copy()}
    filters["P2"][m // 2 :] ^= True  # the second half of P2 is far from everything
    recs = np.stack([np.arange(m)] * 3, axis=1)
    g = CandidateGroups(parties=("P1", "P2", "P3"), records=recs, block=np.zeros(m, dtype=np.int64))
    s = MatchingSession(g, np.zeros(m, dtype=np.int64), threshold=3)
    res = run_matching(s, plaintext_comparer(g.parties, filters))
    r1, r2 = res.counts.rounds
    assert (r1.label, r1.pairs, r1.dropped) == ("r1", m, m // 2)
    assert (r2.label, r2.alive_before, r2.pairs) == ("r2", m // 2, m // 2)
    assert res.counts.comparisons == 3 * m // 2 < res.counts.required_pairs == 2 * m
    assert res.counts.saving == pytest.approx(0.25)
    assert res.counts.encrypted == {"P1": m, "P2": 0, "P3": 0}
    assert "saving 25.0%" in res.counts.table()


def test_completion_encrypts_non_star_pairs_once_and_balances():
    """rule='all', one early round: the completion batch holds the second star pairs and
    the pairs between non-encrypting parties; a side already encrypted is reused."""
    groups, filters, _ = instance(3, 3, records=8, groups=40, noise=0.0)
    enc = np.zeros(len(groups), dtype=np.int64)
    s = MatchingSession(groups, enc, threshold=100, rule="all", early_rounds=1)  # nothing is dropped
    plans = []

    def compare(plan):
        plans.append(plan)
        return plaintext_comparer(groups.parties, filters)(plan)

    res = run_matching(s, compare)
    assert [p.label for p in plans] == ["r1", "completion"]
    comp = plans[1]
    assert set(comp.new_encryptions) <= {1, 2}  # only P2/P3 records are new
    new = {p: set(r.tolist()) for p, r in comp.new_encryptions.items()}
    for k in range(len(comp)):
        e, r = int(comp.enc_party[k]), int(comp.enc_record[k])
        assert e == 0 or r in new.get(e, set())
    assert res.matched.all() and res.counts.comparisons == res.counts.required_pairs
    total_new = sum(len(x) for x in new.values())
    assert res.counts.encrypted["P2"] + res.counts.encrypted["P3"] == total_new


def test_encrypt_sets_put_records_with_common_partners_together():
    recs = np.array([[5, 0, 0], [1, 0, 0], [3, 1, 1], [2, 1, 1], [4, 0, 1]])
    g = CandidateGroups(parties=("A", "B", "C"), records=recs, block=np.zeros(5, dtype=np.int64))
    s = MatchingSession(g, np.zeros(5, dtype=np.int64), threshold=1)
    order = s.encrypt_sets()[0].tolist()
    assert sorted(order) == [1, 2, 3, 4, 5]
    assert order.index(3) in (order.index(2) - 1, order.index(2) + 1)  # both meet B's record 1
    assert s.encrypt_sets()[1].size == 0


def test_session_misuse_raises():
    groups, filters, enc = instance(0, 3)
    with pytest.raises(PrivregValueError, match="encryptor"):
        MatchingSession(groups, enc[:-1], threshold=3)
    with pytest.raises(PrivregValueError, match="early_rounds"):
        MatchingSession(groups, enc, threshold=3, early_rounds=3)
    with pytest.raises(PrivregValueError, match="rule"):
        MatchingSession(groups, enc, threshold=3, rule="majority")
    s = MatchingSession(groups, enc, threshold=3)
    plan = s.next_round()
    with pytest.raises(ProtocolError, match="waiting"):
        s.next_round()
    with pytest.raises(PrivregValueError, match="distances"):
        s.submit(plan, np.zeros(len(plan) + 1, dtype=np.int64))
    with pytest.raises(ProtocolError, match="not finished"):
        s.result()
    with pytest.raises(PrivregValueError, match="encryptor="):
        match_plaintext(groups, filters, 3, rule="star")


def test_no_groups():
    g = CandidateGroups(parties=("A", "B"), records=np.zeros((0, 2), dtype=np.int64), block=np.zeros(0, dtype=np.int64))
    s = MatchingSession(g, np.zeros(0, dtype=np.int64), threshold=3)
    res = run_matching(s, lambda plan: pytest.fail("no round expected"))
    assert res.links.shape == (0, 2) and res.counts.comparisons == 0
    a = assign_encryptors(g, np.zeros(0, dtype=np.int64))
    assert a.makespan == 0 and a.loads.tolist() == [0, 0]


# ------------------------------------------------------------------ assignment


def brute_force(groups, units, speeds):
    """The optimal makespan over all assignments of units to parties."""
    n = len(groups.parties)
    best = None
    for combo in itertools.product(range(n), repeat=int(units.max()) + 1):
        owner = np.asarray(combo)[units]
        loads = [len(set(groups.records[owner == p, p].tolist())) / speeds[p] for p in range(n)]
        best = max(loads) if best is None else min(best, max(loads))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_assignment_is_optimal_on_small_instances(seed):
    rng = np.random.default_rng(seed)
    n = 3 if seed % 3 else 2
    g = int(rng.integers(3, 16))
    recs = rng.integers(0, 6, (g, n))
    units = np.unique(rng.integers(0, int(rng.integers(2, 7)), g), return_inverse=True)[1].reshape(-1)
    groups = CandidateGroups(parties=tuple(f"P{i}" for i in range(n)), records=recs, block=np.zeros(g, dtype=np.int64))
    speeds = {p: float(s) for p, s in zip(groups.parties, rng.choice([1.0, 2.0], n))}
    opt = brute_force(groups, units, [speeds[p] for p in groups.parties])
    exact = assign_encryptors(groups, units, speeds=speeds)
    greedy = assign_encryptors(groups, units, speeds=speeds, method="greedy")
    assert exact.makespan == pytest.approx(opt) and exact.optimal
    assert greedy.lower_bound <= opt + 1e-9 <= greedy.makespan + 1e-9
    assert greedy.ratio >= 1.0
    for a in (exact, greedy):  # loads are the distinct records the assignment implies
        owner = a.group_encryptors(units)
        for i, p in enumerate(groups.parties):
            assert set(a.encrypt[p].tolist()) == set(recs[owner == i, i].tolist())
            assert a.loads[i] == a.encrypt[p].size


def test_a_record_shared_by_units_is_encrypted_once():
    """Two units share P1's record 0: giving both to P1 costs 1, not 2."""
    recs = np.array([[0, 1], [0, 2], [0, 3], [0, 4]])
    groups = CandidateGroups(parties=("P1", "P2"), records=recs, block=np.zeros(4, dtype=np.int64))
    units = np.array([0, 0, 1, 1])
    assert unit_costs(groups, units).tolist() == [[1, 2], [1, 2]]
    a = assign_encryptors(groups, units)
    assert a.loads.tolist() == [1, 0] and a.makespan == 1 and a.optimal


def test_speeds_shift_the_load_to_faster_parties():
    rng = np.random.default_rng(3)
    recs = np.stack([np.arange(60), np.arange(60)], axis=1)
    groups = CandidateGroups(parties=("P1", "P2"), records=recs, block=np.zeros(60, dtype=np.int64))
    units = np.arange(60) // 3
    even = assign_encryptors(groups, units)
    fast = assign_encryptors(groups, units, speeds={"P1": 3.0, "P2": 1.0})
    assert even.loads.tolist() == [30, 30]
    assert fast.loads.tolist() == [45, 15] and fast.makespan == 15.0
    del rng


def test_group_units_follow_the_lsh_key_of_the_first_block():
    m = {"A": np.array([0]), "B": np.array([0])}
    blocks = [
        FinalBlock(lsh_group=0, lsh_key=2**63 + 5, members=m),
        FinalBlock(lsh_group=1, lsh_key=7, members=m),
        FinalBlock(lsh_group=0, lsh_key=2**63 + 5, members=m),
    ]
    groups = CandidateGroups(parties=("A", "B"), records=np.array([[0, 0], [1, 1], [2, 2]]), block=np.array([2, 1, 0]))
    units = group_units(groups, blocks)
    assert units[0] == units[2] != units[1]
    with pytest.raises(PrivregValueError, match="blocks"):
        group_units(
            CandidateGroups(parties=("A", "B"), records=np.zeros((1, 2), dtype=np.int64), block=np.array([5])), blocks
        )


def test_assignment_arguments_are_validated():
    groups, _, _ = instance(0, 3)
    units = np.zeros(len(groups), dtype=np.int64)
    with pytest.raises(PrivregValueError, match="method"):
        assign_encryptors(groups, units, method="optimal")
    with pytest.raises(PrivregValueError, match="speeds"):
        assign_encryptors(groups, units, speeds={"P1": 1.0})
    with pytest.raises(PrivregValueError, match="units"):
        assign_encryptors(groups, units[:-1])
