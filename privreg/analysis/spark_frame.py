"""privreg.analysis on a Spark DataFrame: the exact aggregates computed in Spark.

Only aggregates reach the driver (the planned statistics add noise there, exactly as for
pandas): a row count; per exponent of two, the count and the integer sum of the
mantissas of the centred values and of their squares (an exact sum, see below); per grid
point, how many values lie at or between grid points (quantile ranks); per key, the rows,
the mantissa sums and the distinct persons; and, under the curator rule 'error' only, how
many values it would refuse, used only to refuse before any charge (never shown, never
in the ledger).

**Exact sums.** Spark's ``sum`` of doubles rounds at every step, in an order that depends
on the partitioning. Here each term ``t`` (a double, computed per row with the same
IEEE-754 operations as the pandas path: clip, ``v - centre``, its square) is split as
``t = m 2^s`` with ``m`` an integer below ``2^56`` and ``s = max(floor(log2|t|) - 54,
-1074)`` (a power-of-two division, exact; a ``floor(log2)`` off by one still leaves ``m``
an integer); the ``m`` are summed per ``s`` as ``DECIMAL(38, 0)`` (exact), and the driver
rounds ``sum_s M_s 2^s`` once. That is the correctly rounded sum, as ``math.fsum`` gives
on pandas: the same number, whatever the partitioning.

**Contribution bounding** (``max_rows_per_user = k``): the rule of
:mod:`privreg.analysis.selection`, built from Spark built-ins
(:mod:`privreg.analysis.spark_selection`): each row's message (its fields in column order)
and its position among the same user's identical rows (``row_number`` over a window by
user and message), tagged with HMAC-SHA256 under the query's 256-bit secret key, and the
``k`` smallest tags of each user kept (``row_number`` over a window by user, ordered by
tag). It keeps the same rows as pandas, so the releases are the same under one seed.
The order is uniformly random and independent of the values, and deterministic given the
key and the rows (not their order or partitioning), so every release of a query sees the
same bounded rows. The key is written into the Spark plan (visible in its UI and logs):
privacy does not rest on its secrecy -- whatever rows are kept, one person's rows decide
only which of their own are kept, so the sensitivities hold -- only the uniformity of the
choice does, for data fixed before the key was drawn.

**Requirements.** The frame must be deterministic (re-reading it gives the same rows):
each release re-evaluates it (cache or checkpoint it otherwise). Quantiles run a
numpy function on the executors (``mapInArrow``): their Python must import privreg,
numpy and pyarrow (for local masters, set ``PYSPARK_PYTHON`` to this interpreter).
Running time depends on the data (sizes of groups, exponents, keys).
"""

from __future__ import annotations

import datetime
import functools
import math
import numbers
from collections.abc import Hashable, Iterable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privreg.analysis import spark_selection as selection
from privreg.analysis.bounding import (
    OneRowPerUser,
    apply_rule,
    no_unit_column,
    not_numeric,
    refuse_by_rule,
)
from privreg.analysis.frames import Frame, KeyAggregates, Moments, Values, clamped_float
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.mechanisms.quantile import GridRanks

__all__ = ["SparkFrame", "exact_float"]

# internal column names (a frame holding one is refused)
_PREFIX = "__privreg_"
_MSG, _DUP, _RANK = (f"{_PREFIX}{x}" for x in ("msg", "dup", "rank"))
# status of a value under a rule
_IN, _OUT, _MISSING = 0, 1, 2
_KEY_TYPES = (T.StringType, T.NumericType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType)


def _col(name: str) -> Column:
    """A top-level column by name (quoted: names may hold dots)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _decompose(term: Column) -> tuple[Column, Column]:
    """``(s, m)`` with ``term = m 2^s`` exactly, ``m`` an integer (``|m| < 2^56``); (0, 0)
    for a zero term, nulls for a null one (see the module docstring)."""
    e = F.floor(F.log2(F.abs(term)))
    s = F.when(term == 0, F.lit(0)).otherwise(F.greatest(e - 54, F.lit(-1074))).cast("int")
    m = F.when(term == 0, F.lit(0.0)).otherwise(term / F.pow(F.lit(2.0), s)).cast("long")
    return s.alias("s"), m.alias("m")  # aliased only here: s is used inside m


def exact_float(parts: Iterable[tuple[int, int]]) -> float:
    """``sum m 2^s`` over ``(s, m)`` rounded once to the nearest float64 (ties to even, as
    ``math.fsum`` rounds) and clamped to the finite range, as on pandas."""
    nonzero = [(s, m) for s, m in parts if m]
    if not nonzero:
        return 0.0
    low = min(s for s, _ in nonzero)
    num = sum(m << (s - low) for s, m in nonzero)
    return clamped_float(Fraction(num, 1 << -low) if low < 0 else num << low)


def _rank_batches(
    batches: Iterator[Any], *, grid: np.ndarray, bounds: tuple[float, float], rule: str, impute: float | None
) -> Iterator[Any]:
    """On an executor: per Arrow batch of one double column ``x`` (null: missing), the
    histograms of ``#{g < v}`` and ``#{g <= v}`` over the values ``v`` the rule keeps,
    as rows ``(j, a, b)``; and ``(-1, missing, 0)``, ``(-2, outside, 0)`` (missing values
    not imputed, values outside the bounds: counted only for the curator rule 'error')."""
    import pyarrow as pa

    lower, upper = bounds
    size = grid.size + 1
    for batch in batches:
        x = np.asarray(batch.column(0).to_numpy(zero_copy_only=False), dtype=np.float64)
        missing = np.isnan(x) & (impute is None)
        outside = ~np.isnan(x) & ((x < lower) | (x > upper))
        # 'error' is refused on the driver from the counts: its values as under 'clip'
        v = apply_rule(x, bounds, "clip" if rule == "error" else rule, "", impute)[0]
        a = np.bincount(np.searchsorted(grid, v, side="left"), minlength=size)
        b = np.bincount(np.searchsorted(grid, v, side="right"), minlength=size)
        j = np.flatnonzero((a > 0) | (b > 0))
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(np.r_[j, -1, -2], type=pa.int32()),
                pa.array(np.r_[a[j], int(missing.sum()), int(outside.sum())], type=pa.int64()),
                pa.array(np.r_[b[j], 0, 0], type=pa.int64()),
            ],
            names=["j", "a", "b"],
        )


def _literal_keys(dtype: T.DataType, keys: Sequence[Hashable]) -> list[Any]:
    """The keys that can equal a value of a column of ``dtype`` (Spark would coerce the
    others, or refuse them): the prefilter of a keyed aggregate, whose rows are then
    matched to the keys on the driver by Python equality, as pandas matches them."""

    def ok(k: Any) -> bool:
        if isinstance(dtype, (T.StringType, T.VarcharType, T.CharType)):
            return isinstance(k, str)
        if isinstance(dtype, T.BooleanType):
            return isinstance(k, (bool, np.bool_))
        if isinstance(dtype, T.NumericType):
            return isinstance(k, numbers.Real) and not isinstance(k, (bool, np.bool_)) and math.isfinite(float(k))
        if isinstance(dtype, T.DateType):
            return isinstance(k, datetime.date) and not isinstance(k, datetime.datetime)
        return isinstance(k, datetime.datetime)

    return [k.item() if isinstance(k, np.generic) else k for k in keys if ok(k)]


class SparkFrame(Frame):
    """A ``pyspark.sql.DataFrame``: aggregates run in Spark, only they are collected."""

    def __init__(self, data: DataFrame, unit: Hashable | OneRowPerUser, *, checked: bool = False) -> None:
        self.native = data
        self.unit = unit
        self._types = {f.name: f.dataType for f in data.schema.fields}
        clash = [c for c in self._types if c.startswith(_PREFIX)]
        if clash:
            raise PrivregValueError(
                f"column {clash[0]!r} uses the prefix {_PREFIX!r} that privreg.analysis reserves on Spark; "
                f"rename it first"
            )
        if not isinstance(unit, OneRowPerUser) and (not isinstance(unit, str) or unit not in self._types):
            raise no_unit_column(unit, self.columns)
        self._user = None if isinstance(unit, OneRowPerUser) else str(unit)
        self._checked = checked  # whether rows without a person were left out (bounded)

    @property
    def columns(self) -> list[Any]:
        return list(self._types)

    def check_numeric(self, column: str) -> None:
        dtype = self._types[column]
        if not isinstance(dtype, T.NumericType):
            raise not_numeric(column, dtype.simpleString())

    def check_key_column(self, column: str) -> None:
        dtype = self._types[column]
        if not isinstance(dtype, _KEY_TYPES):
            raise PrivregTypeError(
                f"column {column!r} has Spark type {dtype.simpleString()}, which privreg.analysis cannot use as "
                f"keys on Spark; use a string, number, boolean, date or timestamp column (cast it first)"
            )

    def _float(self, column: str) -> bool:
        return isinstance(self._types[column], (T.FloatType, T.DoubleType))

    def _present(self, column: str) -> Column:
        """Whether the column holds a value (not null; not NaN, which pandas reads as missing)."""
        c = _col(column)
        return c.isNotNull() & ~F.isnan(c) if self._float(column) else c.isNotNull()

    # --- contribution bounding -------------------------------------------------------------

    def bound(self, k: int, key: bytes) -> SparkFrame:
        if self._user is None:
            return self  # one row per person: nothing to bound
        user = _col(self._user)
        fields = [selection.field(_col(c), t) for c, t in self._types.items()]
        by_row = Window.partitionBy(user, F.col(_MSG)).orderBy(F.col(_MSG))  # identical rows: any order
        position = F.row_number().over(by_row) - F.lit(1)
        order = selection.tag(key, selection.message([F.col(_MSG)], F.col(_DUP)))
        kept = (
            self.native.where(self._present(self._user))  # rows without a person are left out (as on pandas)
            .withColumn(_MSG, F.concat(*fields))
            .withColumn(_DUP, position)
            .withColumn(_RANK, F.row_number().over(Window.partitionBy(user).orderBy(order)))
            .where(F.col(_RANK) <= F.lit(int(k)))
            .drop(_MSG, _DUP, _RANK)
        )
        # every statistic of the query reads these rows: keep them rather than re-running the
        # tagging windows per statistic (the result is the same either way: the tags are a
        # deterministic function of the rows and the key)
        return SparkFrame(kept.cache(), self.unit, checked=True)

    # --- aggregates --------------------------------------------------------------------------

    def count(self) -> int:
        return int(self.native.count())

    def _rule(self, values: Values) -> tuple[DataFrame, Column, Column]:
        """(rows the rule keeps, status of each, value after the rule), as
        :func:`~privreg.analysis.bounding.apply_rule` on pandas. The status is ``_IN``
        except under the curator rule 'error' (then rows are kept, and a missing value
        not imputed or a value outside the bounds refuses the statistic)."""
        x = _col(values.column).cast("double")
        lower, upper = values.bounds
        missing = x.isNull() | F.isnan(x)
        outside = ~missing & ((x < lower) | (x > upper))
        fill = values.impute
        filled = x if fill is None else F.when(missing, F.lit(fill)).otherwise(x)
        if values.rule == "impute":
            filled = F.when(outside, F.lit(fill)).otherwise(filled)
        clipped = F.least(F.greatest(filled, F.lit(lower)), F.lit(upper))
        if values.rule == "error":
            lost = missing if fill is None else F.lit(False)
            status = F.when(lost, _MISSING).when(outside, _OUT).otherwise(_IN)
            return self.native, status, F.when(status == _IN, clipped)
        keep = ~missing if fill is None else F.lit(True)
        if values.rule == "drop":
            keep = keep & ~outside
        return self.native.where(keep), F.lit(_IN), clipped

    @staticmethod
    def _refuse(values: Values, statuses: dict[int, int]) -> None:
        refuse_by_rule(
            values.column, values.rule, missing=statuses.get(_MISSING, 0) > 0, outside=statuses.get(_OUT, 0) > 0
        )

    def _check(self, values: Values) -> None:
        """Refuse data the curator rule 'error' cannot bound (one aggregate; nothing for
        the other rules, which never refuse)."""
        if values.rule != "error":
            return
        _, status, _ = self._rule(values)
        rows = self.native.groupBy(status.alias("st")).count().collect()
        self._refuse(values, {int(r["st"]): int(r["count"]) for r in rows})

    def _exact(self, frame: DataFrame, group: list[Column], terms: list[Column], skip: Column | None) -> list[Any]:
        """Per group and term: rows ``n`` and mantissa sums ``m`` per exponent ``s`` (the
        term's index ``q``; -1 for the rows ``skip`` leaves out, counted only)."""
        parts = [F.struct(F.lit(q).alias("q"), *_decompose(t)) for q, t in enumerate(terms)]
        cells = F.array(*parts)
        if skip is not None:
            none = F.array(F.struct(F.lit(-1).alias("q"), F.lit(None).cast("int").alias("s"),
                                    F.lit(None).cast("long").alias("m")))  # fmt: skip
            cells = F.when(skip, none).otherwise(cells)
        cols = [g.alias(f"g{i}") for i, g in enumerate(group)]
        return (
            frame.select(*cols, F.explode(cells).alias("t"))
            .groupBy(*[f"g{i}" for i in range(len(group))], F.col("t.q").alias("q"), F.col("t.s").alias("s"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("t.m").cast("decimal(38,0)")).alias("m"))
            .collect()
        )

    def moments(self, values: Values, *, centre: float, squares: bool) -> Moments:
        frame, status, v = self._rule(values)
        c = v - F.lit(centre)
        rows = self._exact(frame, [status], [c, c * c] if squares else [c], None)
        statuses: dict[int, int] = {}
        for r in rows:
            if r["q"] == 0:
                statuses[int(r["g0"])] = statuses.get(int(r["g0"]), 0) + int(r["n"])
        self._refuse(values, statuses)
        sums = [exact_float((int(r["s"]), int(r["m"])) for r in rows if r["q"] == q and r["s"] is not None)
                for q in range(2)]  # fmt: skip
        return Moments(
            count=statuses.get(_IN, 0),
            total=sums[0],
            squares=sums[1] if squares else 0.0,
        )

    def ranks(self, values: Values, grid: np.ndarray) -> GridRanks:
        task = functools.partial(
            _rank_batches,
            grid=np.asarray(grid, dtype=np.float64),
            bounds=values.bounds,
            rule=values.rule,
            impute=values.impute,
        )
        rows = (
            self.native.select(_col(values.column).cast("double").alias("x"))
            .mapInArrow(task, "j int, a long, b long")
            .groupBy("j")
            .agg(F.sum("a").alias("a"), F.sum("b").alias("b"))
            .collect()
        )
        a = np.zeros(grid.size + 1, dtype=np.int64)
        b = np.zeros(grid.size + 1, dtype=np.int64)
        statuses: dict[int, int] = {}
        for r in rows:
            j = int(r["j"])
            if j >= 0:
                a[j], b[j] = int(r["a"]), int(r["b"])
            else:
                statuses[_MISSING if j == -1 else _OUT] = int(r["a"])
        self._refuse(values, statuses)
        # x <= g_j iff #{g < x} <= j;  x < g_j iff #{g <= x} <= j
        return GridRanks(below=np.cumsum(b)[:-1], at_most=np.cumsum(a)[:-1], size=int(a.sum()))

    def key_persons(self, by: str, values: Values | None) -> dict[Hashable, int]:
        frame = self.native
        if values is not None:
            self._check(values)
            frame = self._rule(values)[0]
        frame = frame.where(self._present(by))
        key = _col(by).alias("key")
        if self._user is None:
            grouped = frame.groupBy(key).count()
        else:
            grouped = frame.select(key, _col(self._user).alias("user")).distinct().groupBy("key").count()
        return {r["key"]: int(r["count"]) for r in grouped.collect()}

    def key_aggregates(
        self, by: str, keys: Sequence[Hashable], values: Values | None, *, centre: float
    ) -> KeyAggregates:
        index = {k: i for i, k in enumerate(keys)}
        literals = _literal_keys(self._types[by], keys)
        listed = _col(by).isin(literals) if literals else F.lit(False)
        counts = np.zeros(len(keys), dtype=np.int64)
        if values is None:
            for r in self.native.where(listed).groupBy(_col(by).alias("key")).count().collect():
                i = index.get(r["key"])
                if i is not None:
                    counts[i] += int(r["count"])
            return KeyAggregates(counts=counts, totals=None)
        frame, status, v = self._rule(values)
        # rows of unlisted keys are only counted (the rule refuses on every row, as on pandas)
        rows = self._exact(frame, [F.when(listed, _col(by)), status], [v - F.lit(centre)], ~listed)
        statuses: dict[int, int] = {}
        parts: list[list[tuple[int, int]]] = [[] for _ in keys]
        for r in rows:
            statuses[int(r["g1"])] = statuses.get(int(r["g1"]), 0) + int(r["n"])
            i = None if r["q"] != 0 else index.get(r["g0"])
            if i is None:
                continue
            counts[i] += int(r["n"])
            if r["s"] is not None:
                parts[i].append((int(r["s"]), int(r["m"])))
        self._refuse(values, statuses)
        return KeyAggregates(counts=counts, totals=np.asarray([exact_float(p) for p in parts], dtype=np.float64))
