"""Candidate events, their counts on the selection halves, and the choice of one event.

An event is a conjunction of comparisons ``feature <op> value`` (``op`` one of ``==``,
``>=``, ``<=``) on the features of :mod:`privreg.audit.features`. The candidate values
(thresholds at quantiles, distinct values of discrete features, category codes) come
from the selection halves only, and so does the choice: the estimation halves are never
looked at until one event is fixed.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from privreg.audit.features import Feature, FeatureSet
from privreg.audit.pool import Layout
from privreg.audit.stats import epsilon_lower_bound

__all__ = ["Event", "Choice", "choose_event"]

#: A numeric feature with at most this many distinct values on the selection halves is
#: treated as discrete (an event per value, and tails at every value).
DISCRETE_MAX = 1024
#: Largest number of (class, value) cells of a conjunction family.
PAIR_MAX_CELLS = 20_000
#: Evenly spaced quantile thresholds of a continuous feature (plus geometric tails).
QUANTILES = 256
TAIL_THRESHOLDS = 64

_OPS = ("==", ">=", "<=")


@attrs.frozen(kw_only=True, eq=False)
class Event:
    """A conjunction of comparisons ``(feature, op, value)``: a fixed set of outputs."""

    terms: tuple[tuple[Feature, str, float], ...]

    def mask(self) -> np.ndarray:
        out = np.ones(self.terms[0][0].values.shape[0], dtype=bool)
        for feature, op, value in self.terms:
            out &= feature.mask(op, value)
        return out

    def describe(self) -> str:
        return " and ".join(f.describe(op, v) for f, op, v in self.terms)


@attrs.frozen(kw_only=True)
class _Block:
    count_first: np.ndarray
    count_second: np.ndarray
    build: Callable[[int], Event]


@attrs.frozen(kw_only=True)
class Choice:
    """The event chosen on the selection halves, which neighbour it favours
    (``larger_on``: ``"first"`` or ``"second"``), its selection counts, the bound those
    counts give (optimistic: they chose the event) and how many candidates were compared."""

    event: Event | None
    larger_on: str
    selection_first: int
    selection_second: int
    selection_bound: float
    candidates: int


def _valid(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def _thresholds(pooled_sorted: np.ndarray) -> np.ndarray:
    """Order statistics of the pooled selection values: evenly spaced quantiles and
    geometrically spaced ranks towards both extremes."""
    n = pooled_sorted.size
    even = np.linspace(0, n - 1, QUANTILES + 1)
    geo = np.geomspace(1, max(n / 2, 1), TAIL_THRESHOLDS) - 1
    ranks = np.unique(np.clip(np.round(np.concatenate([even, geo, n - 1 - geo])), 0, n - 1).astype(np.int64))
    return np.unique(pooled_sorted[ranks])


def _single_block(feature: Feature, layout: Layout) -> _Block | None:
    """Events ``feature <op> t`` for the candidate points ``t`` of the selection halves."""
    a = np.sort(_valid(feature.values[layout.sel_first]))
    b = np.sort(_valid(feature.values[layout.sel_second]))
    pooled = np.sort(np.concatenate([a, b]))
    if pooled.size == 0:
        return None
    distinct = np.unique(pooled)
    if feature.kind == "category":
        ops: tuple[str, ...] = ("==",)
        points = distinct
    elif feature.kind != "value" or distinct.size <= DISCRETE_MAX:
        ops, points = _OPS, distinct
    else:
        ops, points = (">=", "<="), _thresholds(pooled)

    def counts(side: np.ndarray) -> np.ndarray:
        lt = np.searchsorted(side, points, side="left")
        le = np.searchsorted(side, points, side="right")
        by_op = {"==": le - lt, ">=": side.size - lt, "<=": le}
        return np.concatenate([by_op[op] for op in ops])

    m = points.size

    def build(i: int) -> Event:
        return Event(terms=((feature, ops[i // m], float(points[i % m])),))

    return _Block(count_first=counts(a), count_second=counts(b), build=build)


def _pair_block(classes: tuple[Feature, ...], feature: Feature, layout: Layout) -> _Block | None:
    """Events ``classes == one of their joint values seen on the selection halves and
    feature <op> t``, counted from a 2-d histogram (class, value of ``feature``)."""
    sel = layout.selection
    cols = np.stack([c.values[sel] for c in classes] + [feature.values[sel]], axis=1)
    ok = ~np.isnan(cols).any(axis=1)
    n_first = layout.sel_first.stop - layout.sel_first.start
    is_first = (np.arange(sel.sum()) < n_first)[ok]
    cols = cols[ok]
    if cols.shape[0] == 0:
        return None
    combined = np.zeros(cols.shape[0], dtype=np.int64)
    levels = []
    for j in range(len(classes)):  # mixed-radix code of the class values (1-d uniques are fast)
        vals, idx = np.unique(cols[:, j], return_inverse=True)
        combined = combined * vals.size + idx.reshape(-1)
        levels.append(vals)
    codes, class_idx = np.unique(combined, return_inverse=True)
    class_rows = np.empty((codes.size, len(classes)))
    rest_codes = codes.copy()
    for j in range(len(classes) - 1, -1, -1):
        class_rows[:, j] = levels[j][rest_codes % levels[j].size]
        rest_codes //= levels[j].size
    points, point_idx = np.unique(cols[:, -1], return_inverse=True)
    nc, ng = class_rows.shape[0], points.size
    if nc * ng > PAIR_MAX_CELLS:
        return None
    cell = class_idx.reshape(-1) * ng + point_idx.reshape(-1)

    def counts(mask: np.ndarray) -> np.ndarray:
        hist = np.bincount(cell[mask], minlength=nc * ng).reshape(nc, ng)
        le = np.cumsum(hist, axis=1)
        ge = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1]
        return np.concatenate([hist.reshape(-1), ge.reshape(-1), le.reshape(-1)])

    def build(i: int) -> Event:
        op, rest = _OPS[i // (nc * ng)], i % (nc * ng)
        row, g = class_rows[rest // ng], float(points[rest % ng])
        terms = tuple((c, "==", float(v)) for c, v in zip(classes, row))
        return Event(terms=(*terms, (feature, op, g)))

    return _Block(count_first=counts(is_first), count_second=counts(~is_first), build=build)


def choose_event(features: FeatureSet, layout: Layout, *, alpha: float, delta: float) -> Choice:
    """The candidate event (and direction) with the largest epsilon lower bound computed
    on the selection halves alone, as if they were the estimation halves. Ties go to the
    first candidate in a fixed order, so the choice is a function of the selection halves."""
    blocks = [b for f in features.singles if (b := _single_block(f, layout)) is not None]
    blocks += [b for c, f in features.pairs if (b := _pair_block(c, f, layout)) is not None]
    if not blocks:
        return Choice(
            event=None, larger_on="first", selection_first=0, selection_second=0, selection_bound=-np.inf, candidates=0
        )
    ca = np.concatenate([b.count_first for b in blocks]).astype(np.int64)
    cb = np.concatenate([b.count_second for b in blocks]).astype(np.int64)
    n_a = layout.sel_first.stop - layout.sel_first.start
    n_b = layout.sel_second.stop - layout.sel_second.start
    pairs, inverse = np.unique(np.stack([ca, cb], axis=1), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    ab = epsilon_lower_bound(pairs[:, 0], n_a, pairs[:, 1], n_b, alpha=alpha, delta=delta)
    ba = epsilon_lower_bound(pairs[:, 1], n_b, pairs[:, 0], n_a, alpha=alpha, delta=delta)
    score = np.maximum(ab, ba)[inverse]
    best = int(np.argmax(score))
    larger_on = "first" if ab[inverse[best]] >= ba[inverse[best]] else "second"
    offsets = np.cumsum([0] + [b.count_first.size for b in blocks])
    k = int(np.searchsorted(offsets, best, side="right") - 1)
    return Choice(
        event=blocks[k].build(best - int(offsets[k])),
        larger_on=larger_on,
        selection_first=int(ca[best]),
        selection_second=int(cb[best]),
        selection_bound=float(score[best]),
        candidates=int(ca.size),
    )
