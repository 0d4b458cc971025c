"""Where :mod:`privreg.analysis` reads data: the few exact aggregates its statistics need.

A planned statistic never touches a DataFrame: it asks its query's :class:`Frame` for an
exact, noise-free aggregate of the contribution-bounded rows (a count, a sum of centred
values and of their squares, the ranks of a quantile grid, counts and sums per key, the
number of persons per key for partition selection), then adds noise on the driver with a
registered mechanism. :class:`PandasFrame` computes them in memory;
:class:`~privreg.analysis.spark_frame.SparkFrame` computes them in Spark and collects
only the aggregates. Both give the same numbers for the same rows:

* sums are exact sums of the float64 terms, rounded once (``math.fsum``; on Spark an
  exact integer decomposition) and clamped to the finite float range (1-Lipschitz), so
  they do not depend on row order or partitioning and never overflow;
* the terms are the same float64 operations in both: ``v - centre`` and its square,
  ``v`` the value after the declared rule (clipped to the bounds, imputed, or its row
  dropped; a missing value imputed or its row dropped);
* no rule refuses the data, except the curator rule 'error', which raises before
  anything is charged, saying neither which values nor how many.

pyspark is imported only when a Spark DataFrame is passed (:func:`as_frame`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
import pandas as pd

from privreg.analysis.bounding import (
    OneRowPerUser,
    apply_rule,
    bound_contributions,
    no_column,
    not_numeric,
    numeric_column,
    user_ids,
    with_person,
)
from privreg.core.errors import PrivregTypeError
from privreg.mechanisms.quantile import GridRanks, grid_ranks

__all__ = [
    "Frame",
    "PandasFrame",
    "Values",
    "Moments",
    "KeyAggregates",
    "as_frame",
    "clamped_float",
    "clamped_fsum",
    "is_spark_frame",
]


@attrs.frozen(kw_only=True)
class Values:
    """A numeric column read under declared ``bounds``, ``rule`` and ``impute`` (the
    value of missing cells; None: their rows are left out), see
    :func:`~privreg.analysis.bounding.apply_rule`."""

    column: str
    bounds: tuple[float, float]
    rule: str
    impute: float | None = None


@attrs.frozen(kw_only=True)
class Moments:
    """``count`` values ``v`` kept by the rule; ``total``: the exact sum of the float64
    terms ``v - centre``, rounded once; ``squares``: likewise of ``(v - centre)**2``
    (0.0 when not asked for)."""

    count: int
    total: float
    squares: float


@attrs.frozen(kw_only=True)
class KeyAggregates:
    """Per key, in the order of the keys asked for: rows (``counts``, int64) and, with a
    value column, the exact sums of ``v - centre`` (``totals``, float64)."""

    counts: np.ndarray
    totals: np.ndarray | None


class Frame(ABC):
    """A DataFrame as :mod:`privreg.analysis` reads it, with its privacy unit.

    ``native`` is the DataFrame itself; :meth:`bound` returns the frame keeping at most
    ``k`` rows per person. The aggregates are exact and noise-free: callers add noise
    before anything leaves the library."""

    native: Any
    unit: Hashable | OneRowPerUser

    @property
    @abstractmethod
    def columns(self) -> list[Any]:
        """The column names (schema)."""

    def check_column(self, column: Any) -> str:
        """``column`` if it names a column; else an error listing the columns."""
        if not isinstance(column, str) or column not in self.columns:
            raise no_column(column, self.columns)
        return column

    @abstractmethod
    def check_numeric(self, column: str) -> None:
        """Refuse (by its type, never its values) a column a numeric statistic cannot read."""

    def check_key_column(self, column: str) -> None:
        """Refuse (by its type) a column whose values cannot be keys."""

    @abstractmethod
    def bound(self, k: int, key: bytes) -> Frame:
        """``min(k, n)`` of each person's ``n`` rows, a uniformly random subset under the
        secret ``key`` (:func:`~privreg.analysis.bounding.bounding_key`), chosen by the
        one rule of :mod:`privreg.analysis.selection`: every backend keeps the same rows."""

    @abstractmethod
    def count(self) -> int:
        """Number of rows."""

    @abstractmethod
    def moments(self, values: Values, *, centre: float, squares: bool) -> Moments:
        """Count and exact sums of the centred values (and squares) under the rule."""

    @abstractmethod
    def ranks(self, values: Values, grid: np.ndarray) -> GridRanks:
        """The values' ranks at every point of ``grid`` (quantiles)."""

    @abstractmethod
    def key_persons(self, by: str, values: Values | None) -> dict[Hashable, int]:
        """Distinct persons per present (non-missing) key of ``by``, over the rows the
        rule keeps: the candidates of partition selection."""

    @abstractmethod
    def key_aggregates(
        self, by: str, keys: Sequence[Hashable], values: Values | None, *, centre: float
    ) -> KeyAggregates:
        """Rows per key of ``keys`` (others are not counted) and, with ``values``, the
        exact sums of ``v - centre`` per key."""


def clamped_float(exact: Fraction | int) -> float:
    """``exact`` rounded once to the nearest float64 and clamped to the finite range.
    Clamping is 1-Lipschitz, so a sum clamped so still moves by at most one term's bound
    when a term is added or removed; it never raises and never returns inf."""
    limit = Fraction(sys.float_info.max)
    return float(max(-limit, min(limit, Fraction(exact))))


def clamped_fsum(terms: Sequence[float]) -> float:
    """The exact sum of finite float ``terms``, rounded once to the nearest float64
    (``math.fsum``) and clamped to the finite range (:func:`clamped_float`), so that a
    sum beyond 1.8e308 is a finite value the noise mechanisms accept, not an error after
    a charge."""
    with contextlib.suppress(OverflowError):  # an intermediate overflow: the exact sum below
        total = math.fsum(terms)
        if math.isfinite(total):
            return total
    return clamped_float(sum(map(Fraction, terms), Fraction(0)))


def exact_sums(terms: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    """Per group ``0..size-1`` of ``index``: the exact sum of its ``terms``, rounded once
    and clamped to the finite range (:func:`clamped_fsum`)."""
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(size + 1))
    ordered = terms[order]
    return np.asarray([clamped_fsum(ordered[a:b].tolist()) for a, b in itertools.pairwise(bounds)], dtype=np.float64)


class PandasFrame(Frame):
    """A pandas DataFrame (its index reset), read in memory."""

    def __init__(self, data: pd.DataFrame, unit: Hashable | OneRowPerUser, users: np.ndarray | None = None) -> None:
        self.native = (data if users is not None else with_person(data, unit)).reset_index(drop=True)
        self.unit = unit
        # one integer code per row (validates the unit column; rows without a person are out)
        self.users = user_ids(self.native, unit) if users is None else users

    @property
    def columns(self) -> list[Any]:
        return list(self.native.columns)

    def check_numeric(self, column: str) -> None:
        series = self.native[column]
        if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
            raise not_numeric(column, series.dtype)

    def bound(self, k: int, key: bytes) -> PandasFrame:
        keep = bound_contributions(self.native, self.users, k, key)
        return PandasFrame(self.native.iloc[keep], self.unit, self.users[keep])

    def count(self) -> int:
        return len(self.native)

    def _apply(self, values: Values) -> tuple[np.ndarray, np.ndarray]:
        raw = numeric_column(self.native, values.column)
        return apply_rule(raw, values.bounds, values.rule, values.column, values.impute)

    def moments(self, values: Values, *, centre: float, squares: bool) -> Moments:
        c = self._apply(values)[0] - centre
        return Moments(
            count=int(c.size),
            total=clamped_fsum(c.tolist()),
            squares=clamped_fsum((c * c).tolist()) if squares else 0.0,
        )

    def ranks(self, values: Values, grid: np.ndarray) -> GridRanks:
        return grid_ranks(self._apply(values)[0], grid)

    def key_persons(self, by: str, values: Values | None) -> dict[Hashable, int]:
        frame, users = self.native, self.users
        if values is not None:
            keep = self._apply(values)[1]
            frame, users = frame[keep], users[keep]
        pairs = pd.DataFrame({"key": frame[by].to_numpy(), "user": users}).dropna().drop_duplicates()
        return {k: int(c) for k, c in pairs.groupby("key", sort=False).size().items()}

    def key_aggregates(
        self, by: str, keys: Sequence[Hashable], values: Values | None, *, centre: float
    ) -> KeyAggregates:
        frame, terms = self.native, None
        if values is not None:
            kept, keep = self._apply(values)
            frame, terms = frame[keep], kept - centre
        index = {k: i for i, k in enumerate(keys)}
        pos = frame[by].map(index).to_numpy(dtype=np.float64, na_value=np.nan)
        inside = ~np.isnan(pos)
        idx = pos[inside].astype(np.int64)
        counts = np.bincount(idx, minlength=len(keys)).astype(np.int64)
        totals = None if terms is None else exact_sums(terms[inside], idx, len(keys))
        return KeyAggregates(counts=counts, totals=totals)


def is_spark_frame(frame: Any) -> bool:
    """Whether ``frame`` is a ``pyspark.sql.DataFrame`` (without importing pyspark: a
    Spark DataFrame exists only if pyspark was imported)."""
    sql = sys.modules.get("pyspark.sql")
    return sql is not None and isinstance(frame, sql.DataFrame)


def as_frame(frame: Any, unit: Hashable | OneRowPerUser) -> Frame:
    """``frame`` (a pandas or a Spark DataFrame) as a :class:`Frame` with privacy ``unit``."""
    if isinstance(frame, pd.DataFrame):
        return PandasFrame(frame, unit)
    if is_spark_frame(frame):
        from privreg.analysis.spark_frame import SparkFrame

        return SparkFrame(frame, unit)
    raise PrivregTypeError(
        f"frame must be a pandas DataFrame or a pyspark.sql.DataFrame; got {type(frame).__name__}. "
        f"Build one from your data first (e.g. pandas.DataFrame(columns_dict))."
    )
