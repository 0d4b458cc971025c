"""Distance-based outliers in a subspace (Okada et al. 2015, paper 003, Definitions 7-8).

For records ``x`` in ``R^D`` and a subspace ``S`` (a set of attribute indices), the
distance is ``dist_S(x, y) = sqrt(sum_{i in S} (x_i - y_i)^2 / |S|)``. The neighbours of a
record are the *other* records (by index: duplicates count) within ``dist_S <= r``; its
degree is their number (eq. (19)), and it is an outlier when its degree is below ``k``
(Definition 8). ``q_count`` (eq. (14)) is the number of outliers.

Neighbouring datasets replace one of ``n`` records (``n`` is public), as in the paper.
Degrees are counted with scipy's KD-tree, in ``O(n log n)`` for low dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from scipy.spatial import cKDTree

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "as_dataset",
    "check_subspace",
    "subspace_points",
    "degrees",
    "outlier_mask",
    "outlier_count",
    "OutlierCountQuery",
]


#: Largest coordinate magnitude of a record: a squared coordinate difference is then at
#: most 4e200, so squared distances stay inside the float64 range for any realistic
#: number of attributes.
MAX_COORDINATE = 1e100


def as_dataset(data: Any, name: str = "data") -> np.ndarray:
    """``data`` as a finite float64 matrix with one record per row (a 1-d array is one
    attribute), every coordinate within ``[-1e100, 1e100]`` (:data:`MAX_COORDINATE`, so
    squared distances cannot overflow). Errors name the rule, never a cell or its position."""
    try:
        arr = np.asarray(data, dtype=np.float64)
    except OverflowError:
        arr = np.array([np.inf])
    except (TypeError, ValueError):
        raise PrivregTypeError(
            f"{name} must be a 2-d array of numbers (one record per row); got {type(data).__name__}"
        ) from None
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise PrivregValueError(f"{name} must be 2-d (records x attributes); got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise PrivregValueError(f"{name} is empty; it needs records and attributes")
    if not np.all(np.isfinite(arr)):
        raise PrivregValueError(f"{name} must be finite; remove or impute NaN/inf before analysing outliers")
    if np.any(np.abs(arr) > MAX_COORDINATE):
        raise PrivregValueError(
            f"every coordinate of {name} must lie in [-1e100, 1e100] (so that squared distances "
            f"cannot overflow); scale the attributes by a public constant"
        )
    return arr + 0.0


def check_subspace(subspace: Any, dimension: int | None = None) -> tuple[int, ...] | None:
    """A subspace as a sorted tuple of distinct attribute indices (``None``: all)."""
    if subspace is None:
        return None
    if isinstance(subspace, (str, bytes)) or not isinstance(subspace, Sequence | np.ndarray):
        raise PrivregTypeError(f"subspace must be a sequence of attribute indices such as (0, 2); got {subspace!r}")
    idx = tuple(v.check_int("subspace index", int(i) if isinstance(i, np.integer) else i, minimum=0) for i in subspace)
    if not idx:
        raise PrivregValueError("subspace is empty; name at least one attribute index, e.g. (0,)")
    if len(set(idx)) != len(idx):
        raise PrivregValueError(f"subspace {idx} repeats an attribute; list each index once")
    if dimension is not None and max(idx) >= dimension:
        raise PrivregValueError(
            f"subspace {idx} names attribute {max(idx)} but the data have {dimension} attributes "
            f"(indices 0..{dimension - 1})"
        )
    return tuple(sorted(idx))


def subspace_points(data: Any, subspace: Sequence[int] | None = None) -> np.ndarray:
    """The records restricted to ``subspace`` and divided by ``sqrt(|S|)``, so that the
    plain Euclidean distance between rows is ``dist_S`` (paper 003, Section 3.1)."""
    x = as_dataset(data)
    s = check_subspace(subspace, x.shape[1])
    if s is not None:
        x = x[:, list(s)]
    return x / math.sqrt(x.shape[1])


def degrees(points: np.ndarray, radius: float) -> np.ndarray:
    """``deg(x)`` (eq. (19)) for every row of ``points`` (already in subspace units): the
    number of *other* rows within Euclidean distance ``radius`` (closed ball)."""
    tree = cKDTree(points)
    return tree.query_ball_point(points, radius, return_length=True).astype(np.int64) - 1


def _radius(r: Any) -> float:
    return v.check_sensitivity("radius", r)


#: The largest k: far above any record count a run can hold, and safe in 64-bit arithmetic.
MAX_K = 10**9


def _k(k: Any) -> int:
    x = v.check_int("k", k, minimum=1)
    if x > MAX_K:
        raise PrivregValueError(f"k must be <= {MAX_K}; got {k!r}.")
    return x


def outlier_mask(data: Any, *, k: int, radius: float, subspace: Sequence[int] | None = None) -> np.ndarray:
    """Boolean mask of the ``(k, r)``-outliers of ``data`` in ``subspace`` (Definition 8)."""
    pts = subspace_points(data, subspace)
    return degrees(pts, _radius(radius)) < _k(k)


def outlier_count(data: Any, *, k: int, radius: float, subspace: Sequence[int] | None = None) -> int:
    """``q_count(X, k, r, S)`` (eq. (14)): the number of outliers."""
    return int(outlier_mask(data, k=k, radius=radius, subspace=subspace).sum())


@attrs.frozen(kw_only=True)
class OutlierCountQuery:
    """The query ``X -> q_count(X, k, r, S)`` as a callable (for the smooth Gaussian)."""

    k: int = attrs.field(converter=_k)
    radius: float = attrs.field(converter=_radius)
    subspace: tuple[int, ...] | None = attrs.field(default=None, converter=check_subspace)

    @property
    def __name__(self) -> str:  # shown in the ledger's mechanism parameters
        where = "all attributes" if self.subspace is None else f"S={list(self.subspace)}"
        return f"outlier_count[k={self.k}, r={self.radius:g}, {where}]"

    def __call__(self, data: Any) -> float:
        return float(outlier_count(data, k=self.k, radius=self.radius, subspace=self.subspace))
