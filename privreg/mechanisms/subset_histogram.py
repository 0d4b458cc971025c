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


def _split_pvals(pop: int, succ: int, needs: np.ndarray, memo: dict[tuple[int, int, int], np.ndarray]) -> np.ndarray:
    """Row ``j``: the law of the number of items among ``succ`` marked ones when
    ``needs[j]`` items are drawn without replacement from ``pop`` (hypergeometric),
    over ``0..max(needs)``. Built from the ratios ``P(i+1)/P(i)``, each a quotient of
    integer products, so the relative error stays near ``r 2^-53``. ``memo`` keeps the
    rows already computed (the two keep classes of a level ask for the same ones)."""
    width = int(needs.max()) + 1 if needs.size else 1
    out = np.zeros((needs.size, width))
    wanted = needs.tolist()
    missing = [r for r in wanted if (pop, succ, r) not in memo]
    if missing:
        for r, row in zip(missing, _split_rows(pop, succ, missing)):
            memo[pop, succ, r] = row
    for j, r in enumerate(wanted):
        row = memo[pop, succ, r]
        out[j, : row.size] = row
    return out


def _split_rows(pop: int, succ: int, needs: list[int]) -> list[np.ndarray]:
    """The laws of :func:`_split_pvals` for the given needs, row ``r`` over ``0..r``.
    The ratios, their logs and running sums are computed for all needs at once, each
    element by the same operations as one need at a time; each row is then normalised by
    its own sum over its own support (the float results do not depend on the batching)."""
    fail = pop - succ
    r = np.array(needs, dtype=np.int64)
    lo, hi = np.maximum(0, r - fail), np.minimum(r, succ)
    if (lo > hi).any():
        raise AssertionError(f"subset_histogram: a node of {pop} items cannot supply {int(r[lo > hi][0])}")
    steps = hi - lo
    i = (lo[:, None] + np.arange(int(steps.max()))).astype(np.float64)
    rr = r[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):  # past a row's support: unused
        step = np.log((rr - i) * (succ - i)) - np.log((i + 1) * (fail - rr + i + 1))
    logw = np.zeros((r.size, i.shape[1] + 1))
    np.cumsum(step, axis=1, out=logw[:, 1:])
    rows = []
    for j, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        lw = logw[j, : b - a + 1]
        w = np.exp(lw - lw.max())
        row = np.zeros(b + 1)
        row[a:] = w / w.sum()
        rows.append(row)
    return rows


def _scatter(target: np.ndarray, rows: np.ndarray, cols: np.ndarray, counts: np.ndarray) -> None:
    """``target[rows, cols] += counts`` with repeated cells (integer adds, exact)."""
    if not target.flags.c_contiguous:  # reshape would add into a copy
        raise AssertionError("subset_histogram: _scatter needs a C-contiguous target")
    np.add.at(target.reshape(-1), rows * target.shape[1] + cols, counts)


def _split_picks(
    gen: np.random.Generator,
    hist: np.ndarray,
    width: np.ndarray,
    pop_less: int,
    succ_less: int,
    memo: dict[tuple[int, int, int], np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split every report of ``hist`` (nodes x need) between the two children:
    ``(node, left need, need, count)`` rows; the right child gets ``need - left need``.
    The population is ``width - pop_less`` with ``width // 2 - succ_less`` on the left
    (``memo``: see :func:`_split_pvals`)."""
    node, need = np.nonzero(hist)
    counts = hist[node, need]
    nodes, lefts, outs, needs_out = [], [], [], []
    widths = width[node]
    for w in np.unique(widths).tolist():  # two widths per level at most
        at = widths == w
        pop, succ = w - pop_less, w // 2 - succ_less
        needs = need[at]
        uniq = np.flatnonzero(np.bincount(needs))  # np.unique of small integers, by counting
        inv = np.zeros(uniq[-1] + 1, dtype=np.int64)
        inv[uniq] = np.arange(uniq.size)
        pvals = _split_pvals(pop, succ, uniq, memo)[inv[needs]]
        drawn = gen.multinomial(counts[at], pvals)
        n_idx, i_idx = np.nonzero(drawn)
        nodes.append(node[at][n_idx])
        lefts.append(i_idx)
        needs_out.append(needs[n_idx])
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
    # an empty column draws nothing and leaves `rest` as it is: skipping it keeps the draws
    for r in np.flatnonzero(hist.any(axis=0)).tolist():
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
    # numpy's binomial returns 0 for n = 0 without consuming the stream, so drawing only
    # for the non-zero counts (a few percent of a TrieHH layer) gives the same values
    kept = np.zeros_like(c)
    held = np.flatnonzero(c)
    kept[held] = gen.binomial(c[held], keep_probability)
    votes = kept.copy()
    own = np.stack([kept, c - kept])  # class 0 needs d - 1 other items, class 1 needs d
    prefix = np.zeros((2, s + 1), dtype=np.int64)
    np.cumsum(own, axis=1, out=prefix[:, 1:])

    lo = np.zeros(1, dtype=np.int64)
    width = np.full(1, s, dtype=np.int64)
    pure = np.zeros((1, d + 1), dtype=np.int64)
    mixed = np.zeros((2, 1, d + 1), dtype=np.int64)
    mixed[0, 0, d - 1], mixed[1, 0, d] = prefix[0, s], prefix[1, s]
    memo: dict[tuple[int, int, int], np.ndarray] = {}  # split laws by (population, successes, need)
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
        node, left, r, x = _split_picks(gen, pure, width, 0, 0, memo)
        _scatter(nxt_pure, 2 * node, left, x)
        _scatter(nxt_pure, 2 * node + 1, r - left, x)
        for cls in (0, 1):
            on_left = _owner_split(gen, mixed[cls], prefix[cls, mid] - prefix[cls, lo])
            # item in the left child: one fewer success on the left
            node, left, r, x = _split_picks(gen, on_left, width, 1, 1, memo)
            _scatter(nxt_mixed[cls], 2 * node, left, x)
            _scatter(nxt_pure, 2 * node + 1, r - left, x)
            node, left, r, x = _split_picks(gen, mixed[cls] - on_left, width, 1, 0, memo)
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
                first = int(base.min())  # votes land in first .. first + hits.size - 1
                hits = np.bincount((base[rows][:, None] + (pick - first)).ravel())
                votes[first : first + hits.size] += hits


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
