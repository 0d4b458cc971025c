"""Shared by the max-ball-cover methods (:mod:`.ball_cover`): point arrays, squared
distances computed coordinate by coordinate, the pairs within ``2r`` (the edge graph of the
fit-truss and core bounds), points ordered by integer keys, and CSR row ranges."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from privreg.core.errors import PrivregValueError

__all__ = ["FIT_SLACK", "close_pairs", "index_ranges", "keyed_points", "points_array", "squared_distances"]

#: relative slack on squared radii: rounding can only add edges and triangles
FIT_SLACK = 1e-9


def points_array(points: Any) -> np.ndarray:
    """``points`` as a float64 array of shape (points, coordinates)."""
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2:
        raise PrivregValueError(f"points must be a 2-d array (points x coordinates); got shape {p.shape}")
    return p


def squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared distances between broadcast rows of ``a`` and ``b``, summed coordinate by
    coordinate in a fixed order: the value for a pair is the same whatever else is computed
    with it (no BLAS, no reassociation)."""
    d = a.shape[-1]
    if d == 0:  # no coordinates: every pair coincides
        return np.zeros(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]))
    diff = a[..., 0] - b[..., 0]
    out = diff * diff
    for c in range(1, d):
        diff = a[..., c] - b[..., c]
        out = out + diff * diff
    return out


def index_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` over ``zip(starts, lengths)`` (vectorised)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total)


def keyed_points(points: Any, keys: Any) -> tuple[np.ndarray, np.ndarray]:
    """The points sorted by their integer keys (stable; all keys 0 when ``None``)."""
    p = points_array(points)
    m = p.shape[0]
    keys = np.zeros(m, dtype=np.int64) if keys is None else np.asarray(keys, dtype=np.int64).reshape(-1)
    if keys.shape[0] != m:
        raise PrivregValueError(f"keys must have one entry per point ({m}); got {keys.shape[0]}")
    order = np.argsort(keys, kind="stable")
    return p[order], keys[order]


def close_pairs(p: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(i < j)`` within ``2 radius`` (relative slack 1e-9 towards inclusion)
    and their squared distances, by the coordinate-by-coordinate predicate: KD-tree
    candidates at a wider radius, then the deterministic test."""
    if p.shape[0] >= 2:
        cand = cKDTree(p).query_pairs(2.0 * float(radius) * (1.0 + 1e-6), output_type="ndarray")
    else:
        cand = np.zeros((0, 2), dtype=np.int64)
    cand = np.sort(cand.astype(np.int64).reshape(-1, 2), axis=1)
    sq = squared_distances(p[cand[:, 0]], p[cand[:, 1]])
    keep = sq <= 4.0 * float(radius) * float(radius) * (1.0 + FIT_SLACK)
    return cand[keep], sq[keep]
