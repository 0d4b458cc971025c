"""The vote histogram of many Subset Selection reports, sampled without forming the reports.

A server running LDP TrieHH (Sun et al. 2024, Algorithm 2, line 21) only keeps the sum of
the reports' indicator vectors. Simulating a layer report by report costs ``n d`` uniform
draws (``3 10^7`` reports of ``d = 46`` items in the paper's deep layers);
:func:`subset_histogram` samples the same sum directly, in time that grows with the domain
``s`` and ``log n`` rather than with ``n d``.

**Law.** For the counts ``c_x`` of reports whose true item is ``x``, the output has exactly
the law of ``sum_j 1[R_j]`` over independent reports ``R_j`` of
:class:`~.subset_selection.SubsetSelection` (a report keeps its item with probability
``p`` and completes it with a uniform ``(d-1)``-subset of the other ``s - 1`` items, or is
a uniform ``d``-subset of them), up to the double-precision rounding of numpy's samplers
(:mod:`privreg.noise.stream`). Derivation:

1. keeps: ``K_x ~ Binomial(c_x, p)`` independently per item (each report keeps its item
   independently);
2. the other items are split down a balanced binary tree over ``[0, s)``. At a node ``A``
   a report still needs ``r`` items from ``A`` minus its own item. If its item lies
   outside ``A`` (*pure*), its ``r`` items are a uniform ``r``-subset of ``A``, so the
   number in the left child ``L`` is ``Hypergeometric(|A|, |L|, r)``, and given that
   number the two parts are uniform subsets of ``L`` and ``A \\ L``, independent: each
   child sees a pure report with a smaller need. If its item lies inside ``A`` (*mixed*),
   the population is ``|A| - 1`` and the left successes ``|L| - 1`` or ``|L|``; the
   report stays mixed in the child holding its item and becomes pure in the other;
3. reports are only counted, never listed, per node and need: a node holds a histogram of
   pure reports by need and, for mixed ones, one histogram per keep class (need
   ``d - 1`` or ``d`` at the root). Pure reports with equal needs have the same future
   law, so merging them is exact. Mixed reports of one class at a node have had the same
   law at every ancestor, hence are exchangeable: which of them belong to items in the
   left child is a uniformly random choice of the (known) number of such reports, a
   multivariate hypergeometric draw over the need histogram;
4. a leaf ``{y}`` receives one vote per pure report that still needs an item there.

**Cost.** Per tree level ``O(#nodes x (R + 1))`` with ``R`` the largest need left (``d`` at
the top, a few at the bottom), plus one multinomial per non-empty (node, need) cell: about
``O(s log s)`` overall at the paper's parameters, independent of ``n`` except through the
sampled counts. Memory ``O(s R)`` for the widest level.

**Privacy.** This is a *simulator* of the devices' randomizers. Each simulated report
would be ``epsilon``-LDP exactly as :class:`~.subset_selection.SubsetSelection` states;
charge the same event for ``n`` reports before sampling (``SubsetSelection.vote_counts``
does). The randomness is AES-CTR keyed from the given source, the sampling law is exact
up to floating-point rounding (not to the bit, unlike ``randomize``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError

__all__ = ["subset_histogram", "MAX_REPORTS"]

#: Most reports one histogram can sample (numpy's hypergeometric needs ngood + nbad < 10**9).
MAX_REPORTS = 10**9 - 1
_FINISH_WIDTH = 32  # pure reports in nodes this small are finished directly (_finish_pure)


def _split_pvals(pop: int, succ: int, needs: np.ndarray) -> np.ndarray:
    """Row ``j``: the law of the number of items among ``succ`` marked ones when
    ``needs[j]`` items are drawn without replacement from ``pop`` (hypergeometric),
    over ``0..max(needs)``. Built from the ratios ``P(i+1)/P(i)``, each a quotient of
    integer products, so the relative error stays near ``r 2^-53``."""
    width = int(needs.max()) + 1 if needs.size else 1
    out = np.zeros((needs.size, width))
    fail = pop - succ
    for j, r in enumerate(needs.tolist()):
        lo, hi = max(0, r - fail), min(r, succ)
        if lo > hi:
            raise AssertionError(f"subset_histogram: a node of {pop} items cannot supply {r}")
        i = np.arange(lo, hi, dtype=np.float64)
        step = np.log((r - i) * (succ - i)) - np.log((i + 1) * (fail - r + i + 1))
        logw = np.concatenate([[0.0], np.cumsum(step)])
        w = np.exp(logw - logw.max())
        out[j, lo : hi + 1] = w / w.sum()
    return out


def _scatter(target: np.ndarray, rows: np.ndarray, cols: np.ndarray, counts: np.ndarray) -> None:
    """``target[rows, cols] += counts`` with repeated cells (exact: counts < 2**53)."""
    keep = counts > 0
    flat = rows[keep] * target.shape[1] + cols[keep]
    target += np.bincount(flat, weights=counts[keep], minlength=target.size).reshape(target.shape).astype(np.int64)


def _split_picks(
    gen: np.random.Generator, hist: np.ndarray, width: np.ndarray, pop_less: int, succ_less: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split every report of ``hist`` (nodes x need) between the two children:
    ``(node, left need, need, count)`` rows; the right child gets ``need - left need``.
    The population is ``width - pop_less`` with ``width // 2 - succ_less`` on the left."""
    node, need = np.nonzero(hist)
    counts = hist[node, need]
    nodes, lefts, outs, needs_out = [], [], [], []
    for w in np.unique(width[node]).tolist():
        at = width[node] == w
        pop, succ = w - pop_less, w // 2 - succ_less
        uniq, inv = np.unique(need[at], return_inverse=True)
        pvals = _split_pvals(pop, succ, uniq)[inv]
        drawn = gen.multinomial(counts[at], pvals)
        n_idx, i_idx = np.nonzero(drawn)
        nodes.append(node[at][n_idx])
        lefts.append(i_idx)
        needs_out.append(need[at][n_idx])
        outs.append(drawn[n_idx, i_idx])
    if not nodes:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    return np.concatenate(nodes), np.concatenate(lefts), np.concatenate(needs_out), np.concatenate(outs)


def _owner_split(gen: np.random.Generator, hist: np.ndarray, left: np.ndarray) -> np.ndarray:
    """For each node, which of its mixed reports (``hist``: node x need) have their item in
    the left child: a uniformly random ``left[node]`` of them (chained hypergeometric
    draws over the needs). Returns the left part, same shape as ``hist``."""
    out = np.zeros_like(hist)
    rest = hist.sum(axis=1)
    want = left.astype(np.int64).copy()
    for r in range(hist.shape[1]):
        good = hist[:, r]
        live = (want > 0) & (good > 0)
        if live.any():
            take = gen.hypergeometric(good[live], rest[live] - good[live], want[live])
            out[live, r] = take
            want[live] -= take
        rest -= good
    return out


def subset_histogram(counts: Any, *, subset_size: int, keep_probability: float, gen: np.random.Generator) -> np.ndarray:
    """How many of the reports contain each item, for ``counts[x]`` Subset Selection
    reports with true item ``x`` over the domain ``[0, s)``, ``s = len(counts)``, each of
    ``subset_size`` items keeping its true item with probability ``keep_probability``
    (module docstring for the law and the cost). ``gen`` should come from
    :func:`privreg.noise.stream.keyed_generator`. Units: reports per item (int64)."""
    c = np.asarray(counts)
    if c.ndim != 1 or c.size < 2 or (c.size and c.dtype.kind not in "iu"):
        raise PrivregValueError(f"counts must be a 1-d integer array over a domain of >= 2 items; got shape {c.shape}")
    c = c.astype(np.int64)
    if (c < 0).any():
        raise PrivregValueError("counts must be non-negative (one count of reports per item)")
    s = c.size
    d = v.check_int("subset_size", subset_size, minimum=1)
    if d >= s:
        raise PrivregValueError(f"subset_size must be below the domain size {s}; got {d}")
    n = int(c.sum())
    if n > MAX_REPORTS:
        raise PrivregValueError(f"at most {MAX_REPORTS} reports per histogram: split them into batches")
    kept = gen.binomial(c, keep_probability)
    votes = kept.copy()
    own = np.stack([kept, c - kept])  # class 0 needs d - 1 other items, class 1 needs d
    prefix = np.zeros((2, s + 1), dtype=np.int64)
    np.cumsum(own, axis=1, out=prefix[:, 1:])

    lo = np.zeros(1, dtype=np.int64)
    width = np.full(1, s, dtype=np.int64)
    pure = np.zeros((1, d + 1), dtype=np.int64)
    mixed = np.zeros((2, 1, d + 1), dtype=np.int64)
    mixed[0, 0, d - 1], mixed[1, 0, d] = prefix[0, s], prefix[1, s]
    while lo.size:
        small = width <= _FINISH_WIDTH
        if small.any():
            _finish_pure(gen, votes, lo[small], width[small], pure[small])
            pure[small] = 0
        busy = pure.any(axis=1) | mixed[:, :, 1:].any(axis=(0, 2))  # mixed need-0 reports are done
        lo, width, pure, mixed = lo[busy], width[busy], pure[busy], mixed[:, busy]
        if (width < 2).any():  # a report that needs more items than its node holds: a bug
            raise AssertionError("subset_histogram: a leaf still has reports that need items")
        if not lo.size:
            break
        half = width // 2
        mid = lo + half
        need = pure.shape[1]
        nxt_pure = np.zeros((2 * lo.size, need), dtype=np.int64)
        nxt_mixed = np.zeros((2, 2 * lo.size, need), dtype=np.int64)
        node, left, r, x = _split_picks(gen, pure, width, 0, 0)
        _scatter(nxt_pure, 2 * node, left, x)
        _scatter(nxt_pure, 2 * node + 1, r - left, x)
        for cls in (0, 1):
            on_left = _owner_split(gen, mixed[cls], prefix[cls, mid] - prefix[cls, lo])
            # item in the left child: one fewer success on the left
            node, left, r, x = _split_picks(gen, on_left, width, 1, 1)
            _scatter(nxt_mixed[cls], 2 * node, left, x)
            _scatter(nxt_pure, 2 * node + 1, r - left, x)
            node, left, r, x = _split_picks(gen, mixed[cls] - on_left, width, 1, 0)
            _scatter(nxt_pure, 2 * node, left, x)
            _scatter(nxt_mixed[cls], 2 * node + 1, r - left, x)
        nxt_pure[:, 0] = 0  # a pure report that needs nothing more is done
        lo = np.stack([lo, mid], axis=1).ravel()
        width = np.stack([half, width - half], axis=1).ravel()
        top = max(_last_nonzero_column(nxt_pure), _last_nonzero_column(nxt_mixed.reshape(-1, need)))
        pure, mixed = nxt_pure[:, : top + 1], nxt_mixed[:, :, : top + 1]
    return votes


def _finish_pure(
    gen: np.random.Generator, votes: np.ndarray, lo: np.ndarray, width: np.ndarray, pure: np.ndarray
) -> None:
    """Votes of the pure reports of small nodes: a report needing ``r`` items of a node of
    width ``w`` takes a uniform ``r``-subset of it. Need 1 (nearly all of them): one
    multinomial per node over its ``w`` items; need ``r >= 2``: each report's subset
    drawn explicitly (the ``r`` smallest of ``w`` uniform keys)."""
    for w in np.unique(width).tolist():
        at = width == w
        hist, base = pure[at], lo[at]
        cells = base[:, None] + np.arange(w)
        if hist.shape[1] > 1 and hist[:, 1].any():
            votes[cells] += gen.multinomial(hist[:, 1], np.full(w, 1.0 / w))
        for r in range(2, hist.shape[1]):
            rows = np.repeat(np.arange(base.size), hist[:, r])
            if rows.size:
                pick = _distinct(gen, rows.size, r, w)
                votes += np.bincount((base[rows][:, None] + pick).ravel(), minlength=votes.size)


def _distinct(gen: np.random.Generator, m: int, r: int, w: int) -> np.ndarray:
    """``m`` independent uniform ``r``-subsets of ``[0, w)`` as an ``(m, r)`` array: the
    ``j``-th member is uniform over the ``w - j`` values not yet taken (a uniform index
    among them, moved past the taken values in increasing order)."""
    taken = np.empty((m, r), dtype=np.int64)
    for j in range(r):
        x = gen.integers(0, w - j, m)
        if j:
            done = np.sort(taken[:, :j], axis=1)
            for k in range(j):
                x += x >= done[:, k]
        taken[:, j] = x
    return taken


def _last_nonzero_column(a: np.ndarray) -> int:
    cols = np.flatnonzero(a.any(axis=0))
    return int(cols[-1]) if cols.size else 0
