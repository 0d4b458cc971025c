"""The aggregate Subset Selection vote sampler has the law of the summed reports.

Goodness-of-fit tests are chi-square tests against laws computed exactly (enumeration,
or convolution of per-report laws), with outcomes of expected count below 5 pooled; each
has a false-alarm rate of 1e-4 and a fixed seed, so the suite is deterministic.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from privreg import EventLog
from privreg.core.errors import BudgetExceededError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mechanisms.subset_histogram import subset_histogram
from privreg.mechanisms.subset_selection import SubsetSelection
from privreg.noise.stream import keyed_generator

ALPHA = 1e-4


def _gen(seed: int) -> np.random.Generator:
    return keyed_generator(InsecureReproducibleRandom(seed=seed))


def _report_law(x: int, s: int, d: int, p: float) -> dict[frozenset, float]:
    """Exact law of one report with true item ``x`` (enumeration of subsets)."""
    others = [y for y in range(s) if y != x]
    keep = list(itertools.combinations(others, d - 1))
    drop = list(itertools.combinations(others, d))
    law: dict[frozenset, float] = {}
    for sub in keep:
        law[frozenset(sub + (x,))] = law.get(frozenset(sub + (x,)), 0.0) + p / len(keep)
    for sub in drop:
        law[frozenset(sub)] = law.get(frozenset(sub), 0.0) + (1 - p) / len(drop)
    return law


def _histogram_law(counts: list[int], d: int, p: float) -> dict[tuple, float]:
    s = len(counts)
    dist = {tuple([0] * s): 1.0}
    for x, cx in enumerate(counts):
        law = _report_law(x, s, d, p)
        for _ in range(cx):
            nxt: dict[tuple, float] = {}
            for h, ph in dist.items():
                for sub, ps in law.items():
                    h2 = tuple(v + (i in sub) for i, v in enumerate(h))
                    nxt[h2] = nxt.get(h2, 0.0) + ph * ps
            dist = nxt
    return dist


def _chi2_pvalue(observed: Counter, law: dict, samples: int) -> float:
    """Chi-square p-value, pooling the outcomes expected fewer than 5 times (and any
    outcome outside the law's support lands in the pool with expected mass 0)."""
    big = [k for k, q in law.items() if q * samples >= 5]
    o = [observed.get(k, 0) for k in big]
    e = [law[k] * samples for k in big]
    pooled_e = samples - sum(e)
    pooled_o = samples - sum(o)
    if pooled_e >= 1e-9 * samples:
        o.append(pooled_o)
        e.append(pooled_e)
    else:
        assert pooled_o == 0, f"{pooled_o} samples outside the support"
    o, e = np.array(o, dtype=float), np.array(e)
    return float(stats.chi2.sf(((o - e) ** 2 / e).sum(), len(o) - 1))


# The cheapest case stays in the fast lane (`-m "not slow"`); the larger joint laws are slow.
@pytest.mark.parametrize(
    "counts, d, p, seed",
    [
        pytest.param([1, 0, 2, 1], 2, 0.6, 1, marks=pytest.mark.slow),
        ([2, 1, 0], 1, 0.7, 2),  # d = 1: k-ary randomized response
        pytest.param([0, 3, 0, 0, 1], 2, 0.3, 3, marks=pytest.mark.slow),
        pytest.param([1, 1, 0, 1, 0, 0], 3, 0.55, 4, marks=pytest.mark.slow),
    ],
)
def test_small_domains_have_the_exact_joint_law(counts, d, p, seed):
    law = _histogram_law(counts, d, p)
    gen, samples = _gen(seed), 3000
    seen = Counter(
        tuple(subset_histogram(np.array(counts), subset_size=d, keep_probability=p, gen=gen).tolist())
        for _ in range(samples)
    )
    assert set(seen) <= set(law), "an impossible histogram was drawn"
    assert _chi2_pvalue(seen, law, samples) > ALPHA


def _pair_law(counts: np.ndarray, y: int, z: int, d: int, p: float) -> dict[tuple, float]:
    """Exact law of ``(votes[y], votes[z])``: a convolution over reports of the law of
    ``(y in R, z in R)``, which depends only on whether the true item is y, z or neither."""
    s = counts.size
    pk, pd = (d - 1) / (s - 1), d / (s - 1)  # another given item, kept or dropped
    pk2, pd2 = (d - 1) * (d - 2) / ((s - 1) * (s - 2)), d * (d - 1) / ((s - 1) * (s - 2))
    own_y = np.array([[1 - p - (1 - p) * pd, (1 - p) * pd], [p * (1 - pk), p * pk]])  # [y in, z in]
    other = p * np.array([[1 - 2 * pk + pk2, pk - pk2], [pk - pk2, pk2]]) + (1 - p) * np.array(
        [[1 - 2 * pd + pd2, pd - pd2], [pd - pd2, pd2]]
    )
    n = int(counts.sum())
    dist = np.zeros((n + 1, n + 1))
    dist[0, 0] = 1.0
    from scipy.signal import convolve2d

    for law, times in ((own_y, counts[y]), (own_y.T, counts[z]), (other, n - counts[y] - counts[z])):
        for _ in range(int(times)):
            dist = convolve2d(dist, law)[: n + 1, : n + 1]
    return {(a, b): float(dist[a, b]) for a in range(n + 1) for b in range(n + 1) if dist[a, b] > 0}


@pytest.mark.slow
def test_deep_trees_have_the_exact_pairwise_laws():
    """s = 70 > the direct-finish width: pure reports are split down several levels. The
    joint law of two items' votes (their within-report dependence included) and the
    total are checked for an owner pair, an owner and a non-owner, and two non-owners."""
    s, d, p = 70, 9, 0.45
    counts = np.zeros(s, dtype=np.int64)
    counts[[0, 5, 33, 34, 69]] = [6, 1, 9, 4, 5]
    gen, samples = _gen(7), 2000
    draws = np.array([subset_histogram(counts, subset_size=d, keep_probability=p, gen=gen) for _ in range(samples)])
    assert (draws.sum(axis=1) == counts.sum() * d).all()
    pairs = [(33, 34), (0, 17), (40, 41), (69, 5)]
    for y, z in pairs:
        law = _pair_law(counts, y, z, d, p)
        seen = Counter(map(tuple, draws[:, [y, z]].tolist()))
        assert _chi2_pvalue(seen, law, samples) > ALPHA / len(pairs), (y, z)


def test_marginals_at_scale_match_the_binomial_sums():
    """s = 5001 with many reports: each item's votes are Binomial(c_y, p) plus
    Binomial(n - c_y, q) in law; the standardised votes of all items stay within 5.5
    (a false-alarm rate below 2e-4 over 5001 items) and their mean square is near 1."""
    s, d, p = 5001, 12, 0.8
    ss_rng = np.random.default_rng(0)  # the test's input data only
    counts = np.bincount(ss_rng.zipf(1.5, 200_000) % s, minlength=s)
    votes = subset_histogram(counts, subset_size=d, keep_probability=p, gen=_gen(11))
    n = counts.sum()
    q = (d - p) / (s - 1)
    mean = counts * p + (n - counts) * q
    sd = np.sqrt(counts * p * (1 - p) + (n - counts) * q * (1 - q))
    z = (votes - mean) / sd
    assert np.abs(z).max() < 5.5
    assert 0.9 < float(np.mean(z**2)) < 1.1
    assert votes.sum() == n * d


def test_vote_counts_charges_first_and_matches_the_randomizers_law():
    ss = SubsetSelection(epsilon=2.0, s=40)
    inputs = np.repeat(np.arange(5), 30)
    log = EventLog()
    votes = ss.vote_counts(inputs, charger=log, rng=InsecureReproducibleRandom(seed=3))
    assert votes.shape == (40,) and votes.sum() == inputs.size * ss.subset_size
    (entry,) = log.charges
    assert entry.parameters["num_reports"] == inputs.size

    class Refuse(EventLog):
        def charge(self, *args, **kwargs):
            raise BudgetExceededError("no budget")

    with pytest.raises(BudgetExceededError):
        ss.vote_counts(inputs, charger=Refuse(), rng=InsecureReproducibleRandom(seed=3))
    with pytest.raises(PrivregValueError, match="outside"):
        ss.vote_counts(np.array([0, 40]), charger=EventLog())


@pytest.mark.parametrize(
    "counts, d, match",
    [
        (np.array([1, -1, 2]), 1, "non-negative"),
        (np.array([1.0, 2.0]), 1, "integer"),
        (np.array([3]), 1, "domain"),
        (np.array([1, 2, 3]), 3, "below the domain size"),
    ],
)
def test_bad_input_is_refused_with_the_argument_named(counts, d, match):
    with pytest.raises(PrivregValueError, match=match):
        subset_histogram(counts, subset_size=d, keep_probability=0.5, gen=_gen(1))


def test_keyed_generator_is_reproducible_only_from_a_seeded_source():
    a = keyed_generator(InsecureReproducibleRandom(seed=9)).integers(0, 1 << 62, 4)
    b = keyed_generator(InsecureReproducibleRandom(seed=9)).integers(0, 1 << 62, 4)
    c = keyed_generator(None).integers(0, 1 << 62, 4)
    assert (a == b).all() and not (a == c).all()


# Recorded with the sampler before its bookkeeping was trimmed (commit 15d05da): a SHA-256
# prefix of the votes, for TrieHH-like counts (mostly empty, one heavy dummy item).
_RECORDED_VOTES = {(20_001, 40, 0.9): "775c261bee8370c1", (3_001, 7, 0.3): "e0adc28075a85a49"}


@pytest.mark.parametrize(("s", "d", "p"), sorted(_RECORDED_VOTES))
def test_votes_under_a_seed_match_the_recorded_ones(s, d, p):
    """The same key gives the same votes as before: skipping empty counts and empty need
    columns and reusing split laws must leave every draw of the stream as it was."""
    data = np.random.default_rng(32)  # the test's input data only
    rows = [(20_001, 40, 0.9), (3_001, 7, 0.3)]
    for shape in rows[: rows.index((s, d, p)) + 1]:  # the inputs are drawn in turn
        counts = np.zeros(shape[0], dtype=np.int64)
        counts[data.choice(shape[0] - 1, 300, replace=False)] = data.integers(1, 2000, 300)
        counts[-1] = 200_000
    votes = subset_histogram(counts, subset_size=d, keep_probability=p, gen=_gen(5))
    assert votes.sum() == counts.sum() * d
    assert hashlib.sha256(votes.tobytes()).hexdigest()[:16] == _RECORDED_VOTES[s, d, p]
