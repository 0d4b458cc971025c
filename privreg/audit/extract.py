"""Which features of the pooled outputs the auditor searches.

The data-dependent choices made here (coordinates of a vector, member values, the
category table) look at the selection halves only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from privreg.audit.features import Feature, FeatureSet
from privreg.audit.grid import grid_features, grid_pairs
from privreg.audit.pool import Layout, Pool, show_key
from privreg.core.errors import PrivregError

__all__ = ["build_features"]

#: At most this many coordinates of a vector output get features of their own.
MAX_COORDINATES = 8
#: Integer vectors with at most this many distinct entries get membership features.
MAX_MEMBER_VALUES = 64
#: At most this many categories (most frequent on the selection halves) get events.
MAX_CATEGORIES = 4096


def _categories(keys: Sequence[Hashable], selection: np.ndarray, label: str, show: Any) -> Feature:
    """Codes 0.. for the categories seen on the selection halves (most frequent first,
    ties in order of first appearance); NaN for the others."""
    freq: dict[Hashable, int] = {}
    for key, chosen in zip(keys, selection):
        if chosen:
            freq[key] = freq.get(key, 0) + 1
    ranked = sorted(freq, key=lambda k: -freq[k])[:MAX_CATEGORIES]  # stable sort
    code = {k: float(i) for i, k in enumerate(ranked)}
    values = np.array([code.get(k, np.nan) for k in keys], dtype=np.float64)
    labels = tuple(show(k) for k in ranked)
    return Feature(label=label, kind="category", values=values, labels=labels)


def _coordinates(flat: np.ndarray, layout: Layout) -> list[int]:
    """The coordinates whose selection-half means differ most between the two sides
    (all of them when there are at most MAX_COORDINATES)."""
    d = flat.shape[1]
    if d <= MAX_COORDINATES:
        return list(range(d))
    with np.errstate(invalid="ignore"):
        gap = np.abs(np.nanmean(flat[layout.sel_first], axis=0) - np.nanmean(flat[layout.sel_second], axis=0))
    gap = np.where(np.isnan(gap), -1.0, gap)
    order = np.argsort(-gap, kind="stable")[:MAX_COORDINATES]
    return sorted(int(i) for i in order)


def _membership(flat: np.ndarray, layout: Layout) -> list[Feature]:
    """For integer vectors holding at least 3 and at most MAX_MEMBER_VALUES distinct values
    on the selection halves (e.g. reported subsets): the features ``v in output`` for the
    MAX_COORDINATES values whose frequency differs most between the two selection halves."""
    sel = layout.selection
    distinct = np.unique(flat[sel][~np.isnan(flat[sel])])
    if not 3 <= distinct.size <= MAX_MEMBER_VALUES:
        return []
    codes = np.searchsorted(distinct, flat)
    known = (codes < distinct.size) & (distinct[np.minimum(codes, distinct.size - 1)] == flat)
    rows = np.broadcast_to(np.arange(flat.shape[0])[:, None], flat.shape)
    member = np.zeros((flat.shape[0], distinct.size), dtype=bool)
    member[rows[known], codes[known]] = True
    gap = np.abs(member[layout.sel_first].mean(axis=0) - member[layout.sel_second].mean(axis=0))
    chosen = sorted(int(i) for i in np.argsort(-gap, kind="stable")[:MAX_COORDINATES])
    return [
        Feature(label=repr(int(distinct[i])), kind="member", values=member[:, i].astype(np.float64)) for i in chosen
    ]


def _index_label(shape: tuple[int, ...], i: int) -> str:
    idx = np.unravel_index(i, shape)
    return "output[" + ", ".join(str(int(j)) for j in idx) + "]"


def build_features(pool: Pool, *, layout: Layout, direction: np.ndarray | None = None) -> FeatureSet:
    """The features the auditor searches: for a scalar output, its value and float-grid
    features; for a vector output, those of up to MAX_COORDINATES coordinates, the sum,
    the projection on ``direction`` (the difference of the two neighbouring inputs, when
    it has the output's size), and, for integer vectors, each distinct vector as a
    category; for anything else, each distinct output as a category."""
    selection = layout.selection
    if pool.values is None:
        if pool.keys is None:  # to_pool always fills one of the two
            raise PrivregError("internal error: a pool holds neither values nor keys")
        return FeatureSet(singles=(_categories(pool.keys, selection, "output", show_key),), pairs=())
    values, integer = pool.values, pool.integer
    singles: list[Feature] = []
    pairs: list[tuple[tuple[Feature, ...], Feature]] = []

    def add_real(column: np.ndarray, label: str) -> None:
        singles.append(Feature(label=label, kind="value", values=column, integer=integer))
        grid = grid_features(column, label)
        singles.extend(grid)
        if not (integer and values.ndim > 1):  # integer vectors get coordinate pairs instead
            pairs.extend(grid_pairs(*grid))

    if values.ndim == 1:
        add_real(values, "output")
        return FeatureSet(singles=tuple(singles), pairs=tuple(pairs))
    shape = values.shape[1:]
    flat = values.reshape(values.shape[0], -1)
    for i in _coordinates(flat, layout):
        add_real(np.ascontiguousarray(flat[:, i]), _index_label(shape, i))
    singles.append(Feature(label="sum(output)", kind="value", values=flat.sum(axis=1), integer=integer))
    if direction is not None and direction.size == flat.shape[1] and np.any(direction != 0):
        singles.append(Feature(label="<output, second - first>", kind="value", values=flat @ direction))
    if integer:
        members = _membership(flat, layout)
        singles.extend(members)
        coordinates = [f for f in singles if f.kind == "value" and f.label.startswith("output[")]
        small = members or coordinates  # "0 in output and 1 not in output", "output[0] == 1 and output[3] == 0"
        pairs.extend(((a,), b) for a in small for b in small if a is not b)
        rows = [r.tobytes() for r in np.ascontiguousarray(flat)]
        singles.append(
            _categories(
                rows,
                selection,
                "output",
                lambda k: _integer_row(np.frombuffer(k, dtype=np.float64).reshape(shape)),
            )
        )
    return FeatureSet(singles=tuple(singles), pairs=tuple(pairs))


def _integer_row(row: np.ndarray) -> str:
    """An integer-valued output row, exactly (Python ints: no int64 overflow at 2**63)."""
    values = [int(x) if np.isfinite(x) else float(x) for x in row.ravel().tolist()]
    if row.ndim <= 1:
        return "[" + ",".join(str(x) for x in values) + "]"
    return np.array2string(np.array(values, dtype=object).reshape(row.shape), separator=",")
