"""Dummy candidate pairs (privreg.plugins.pprl.padding) and the linkage unit discarding
their decisions (issue #33, membership). Seeded sources (tests only); the rates below are
checked with stated false-alarm rates."""

from __future__ import annotations

import numpy as np
import pytest

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.plugins.pprl.dice_protocol import DiceLinkageProtocol
from privreg.plugins.pprl.padding import pad_candidates


def _real(seed: int = 0, covered: int = 150) -> np.ndarray:
    """Candidates for a third of 400 left records (1 to 3 each), partners cycling over the
    first ``covered`` right records (the others have none)."""
    g = np.random.default_rng(seed)
    left = np.repeat(np.arange(0, 400, 3), g.integers(1, 4, size=len(range(0, 400, 3))))
    return np.unique(np.column_stack([left, np.arange(left.size) % covered]), axis=0)  # sorted, as blocking gives


def test_no_padding_returns_the_real_pairs():
    real = _real()
    got, dummy = pad_candidates(real, rows=(400, 300), pad=0.0, rng=InsecureReproducibleRandom(seed=1))
    assert np.array_equal(got, real) and not dummy.any()


def test_full_padding_gives_every_record_a_candidate_and_keeps_the_real_ones():
    real = _real()
    got, dummy = pad_candidates(real, rows=(400, 300), pad=1.0, rng=InsecureReproducibleRandom(seed=1))
    assert np.array_equal(got[~dummy], real)  # the real pairs, in their order
    assert set(np.unique(got[:, 0])) == set(range(400)) and set(np.unique(got[:, 1])) == set(range(300))
    # canonical: unique and lexicographically sorted, so positions tell nothing
    assert np.array_equal(got, np.unique(got, axis=0))
    # a dummy's own record has no real candidate: no dummy equals a real pair
    real_left, real_right = set(real[:, 0].tolist()), set(real[:, 1].tolist())
    assert all(i not in real_left or j not in real_right for i, j in got[dummy].tolist())


def test_dummy_counts_follow_the_real_counts():
    real = _real(covered=100)  # every right record has a candidate: all dummies are the left's
    got, dummy = pad_candidates(real, rows=(400, 100), pad=1.0, rng=InsecureReproducibleRandom(seed=2))
    real_counts = np.bincount(np.bincount(real[:, 0])[np.unique(real[:, 0])], minlength=4)[1:]
    bare = np.setdiff1d(np.arange(400), real[:, 0])
    fake = got[dummy]
    counts = np.bincount(fake[np.isin(fake[:, 0], bare), 0], minlength=400)[bare]
    # 266 padded records, each count drawn from the real ones (1-3; a repeated partner
    # merges two). Mean within 0.25: a false alarm below 1e-4 (the counts' sd is about
    # 0.8, so the mean's sd about 0.05)
    assert counts.min() >= 1 and abs(counts.mean() - (real_counts * [1, 2, 3]).sum() / real_counts.sum()) <= 0.25


def test_partial_padding_pads_that_fraction():
    real = _real(covered=100)
    got, dummy = pad_candidates(real, rows=(400, 100), pad=0.5, rng=InsecureReproducibleRandom(seed=3))
    bare = np.setdiff1d(np.arange(400), real[:, 0])
    padded = np.isin(bare, got[dummy][:, 0]).mean()
    # 266 Bernoulli(0.5) draws: |mean - 0.5| > 0.15 has probability below 1e-5 (Hoeffding)
    assert 0.35 <= padded <= 0.65


def test_the_padding_draws_come_from_the_given_source():
    real = _real()
    a = pad_candidates(real, rows=(400, 300), pad=1.0, rng=InsecureReproducibleRandom(seed=4))
    b = pad_candidates(real, rows=(400, 300), pad=1.0, rng=InsecureReproducibleRandom(seed=5))
    assert not np.array_equal(a[0], b[0])


def test_the_linkage_unit_discards_every_dummy_decision():
    """Even a dummy pair decided as a match never becomes an edge."""
    proto = DiceLinkageProtocol(parties=3)
    pairs = np.array([[0, 1], [2, 0], [3, 3]])
    plan = [{"left": 0, "right": 1, "pairs": pairs, "dummy": np.array([False, True, False]), "real": 2}]
    edges, where = proto._edges(plan, [np.ones(3, dtype=bool)])
    assert edges.tolist() == [[0, 0, 1, 1], [0, 3, 1, 3]] and where == [(0, 0), (0, 2)]


@pytest.mark.parametrize("pad", [-0.1, 1.5, float("nan"), "1"])
def test_pad_is_a_probability(pad):
    with pytest.raises((PrivregValueError, PrivregTypeError)) as err:
        DiceLinkageProtocol(parties=3, pad=pad)
    assert "pad" in str(err.value)


def test_pad_is_a_public_deployment_option_in_the_digest():
    from privreg.mpc.deployment import options_digest
    from privreg.plugins.pprl.dice_deployment import DiceDeployment

    dep = DiceDeployment()
    default = dep.options({"records": [10, 10, 10], "blocking": "linkage-unit"})
    off = dep.options({"records": [10, 10, 10], "blocking": "linkage-unit", "pad": 0})
    assert default["pad"] == 1.0 and off["pad"] == 0.0
    assert options_digest(dep, default) != options_digest(dep, off)  # parties with other pads refuse each other
    with pytest.raises(PrivregValueError, match="pad"):
        dep.options({"records": [10, 10, 10], "blocking": "linkage-unit", "pad": 2})
