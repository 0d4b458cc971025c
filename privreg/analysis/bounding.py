"""Contribution bounding per privacy unit, and declared rules for values out of bounds.

Sensitivities in :mod:`privreg.analysis` are derived, never typed: after
:func:`bound_contributions` every privacy unit (user) has at most ``k`` rows, and after
:func:`apply_rule` every value lies in the declared ``[lower, upper]``; so adding or
removing one user changes a count by at most ``k``, a sum by at most
``k max(|lower|, |upper|)`` and a centred sum by at most ``k (upper - lower) / 2``
(Wilson et al. 2020, "Differentially Private SQL with Bounded User Contribution",
PoPETs, Section 3; Amin-Kulesza-Munoz-Vassilvitskii 2019, "Bounding User Contributions:
A Bias-Variance Trade-off in Differential Privacy", ICML).

Whether and how many values were clipped or dropped is data: it is never returned,
printed or written to the ledger. The errors here name the column and the rule, never a
value, a row or a count.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from privreg.analysis.selection import KEY_BYTES, Tagger, column_fields, keep_first, row_message, selection_key
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource

__all__ = [
    "RULES",
    "CURATOR_RULES",
    "ONE_ROW_PER_USER",
    "OneRowPerUser",
    "apply_rule",
    "bound_contributions",
    "bounding_key",
    "KEY_BYTES",
    "check_bounds",
    "check_impute",
    "check_rule",
    "with_person",
    "no_column",
    "no_unit_column",
    "not_numeric",
    "numeric_column",
    "refuse_by_rule",
    "user_ids",
]

#: What happens to a value outside its declared bounds: moved to the nearest bound
#: ("clip"; +-inf too), its row left out of that statistic ("drop"), or replaced by the
#: declared ``impute`` value ("impute"). Missing values (NaN, null) take the declared
#: ``impute`` value when there is one and leave their rows out otherwise, under every
#: rule. None of them depends on the data: whatever the values, the statistic runs.
RULES = ("clip", "drop", "impute")

#: Rules only a curator query (``Query(..., curator=True)``) accepts: "error" refuses the
#: statistic when a value is missing (and no ``impute`` is declared) or outside the
#: bounds. That refusal depends on the data, so it is private against no one who sees it.
CURATOR_RULES = ("error",)


class OneRowPerUser:
    """The privacy unit of a table in which every row is a different person."""

    def __repr__(self) -> str:
        return "ONE_ROW_PER_USER"


#: Pass as ``privacy_unit`` when each row belongs to a different person.
ONE_ROW_PER_USER = OneRowPerUser()


def check_rule(rule: Any, *, curator: bool = False) -> str:
    """One of :data:`RULES` (or of :data:`CURATOR_RULES` when ``curator``)."""
    if rule in RULES or (curator and rule in CURATOR_RULES):
        return str(rule)
    if rule in CURATOR_RULES:
        raise PrivregValueError(
            f"rule={rule!r} refuses a statistic when the data break the bounds, which tells whoever sees the "
            f"refusal something about the data; it needs Query(..., curator=True) (the data holder's own checks, "
            f"private against no one who sees its errors). Pass rule='clip', rule='drop' or rule='impute' "
            f"(with impute=<a value inside the bounds>) instead."
        )
    raise PrivregValueError(
        f"rule must be one of {list(RULES)}; got {rule!r}. Pass rule='clip' (move values to the nearest "
        f"bound), rule='drop' (leave their rows out) or rule='impute' with impute=<a value inside the bounds>."
    )


def check_impute(impute: Any, rule: str, bounds: tuple[float, float], column: str) -> float | None:
    """The declared value of missing (and, under rule 'impute', out-of-bounds) cells: a
    finite number inside ``bounds``, or None (rows with missing values are left out).
    Required with rule 'impute'."""
    if impute is None:
        if rule == "impute":
            raise PrivregValueError(
                f"rule='impute' needs impute=<a value inside the bounds> for column {column!r}; got impute=None. "
                f"Declare it from domain knowledge (e.g. the bounds' midpoint), never from the data."
            )
        return None
    value = v.check_real("impute", impute)
    lower, upper = bounds
    if not (math.isfinite(value) and lower <= value <= upper):
        raise PrivregValueError(
            f"impute must be a finite value inside the bounds [{lower!r}, {upper!r}] of column {column!r}; got "
            f"impute={impute!r}. Declare a value inside the bounds, or leave impute out to drop missing values."
        )
    return value


def check_bounds(name: str, bounds: Any, column: str) -> tuple[float, float]:
    """``bounds`` as finite ``(lower, upper)`` with ``lower < upper``; an error naming
    the argument and the fix otherwise (bounds are declared, never read from the data)."""
    fix = (
        f"Declare {name}=(lower, upper) for column {column!r} from domain knowledge (e.g. {name}=(17, 90) "
        f"for ages), never from the data: the noise is calibrated to it."
    )
    if bounds is None:
        raise PrivregValueError(f"{name} is required for column {column!r}; got None. {fix}")
    if isinstance(bounds, (str, bytes)) or not hasattr(bounds, "__len__") or len(bounds) != 2:
        raise PrivregTypeError(f"{name} must be a pair (lower, upper); got {bounds!r}. {fix}")
    lower = v.check_real(f"{name}[0]", bounds[0])
    upper = v.check_real(f"{name}[1]", bounds[1])
    if not (np.isfinite(lower) and np.isfinite(upper) and lower < upper):
        raise PrivregValueError(f"{name} must be finite with lower < upper; got {bounds!r}. {fix}")
    if not np.isfinite(upper - lower):
        raise PrivregValueError(
            f"{name}={list(bounds)!r}: their width upper - lower overflows the float range; declare narrower "
            f"bounds, or rescale the column (e.g. to other units)."
        )
    return lower, upper


def no_column(column: Any, columns: Any) -> PrivregValueError:
    """The error for a column the frame lacks: it names the columns there are (schema)."""
    return PrivregValueError(f"column {column!r} is not in the frame; its columns are {list(map(str, columns))}")


def not_numeric(column: str, dtype: Any) -> PrivregTypeError:
    """The error for a column a numeric statistic cannot read (its type is schema)."""
    return PrivregTypeError(
        f"column {column!r} must be numeric for this statistic; it has dtype {dtype}. "
        f"Convert it first, or use histogram() for categories."
    )


def numeric_column(frame: pd.DataFrame, column: str) -> np.ndarray:
    """``frame[column]`` as float64 (NaN for missing); errors name the column (schema)."""
    if column not in frame.columns:
        raise no_column(column, frame.columns)
    series = frame[column]
    if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        raise not_numeric(column, series.dtype)
    return np.asarray(series.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)


def refuse_by_rule(column: str, rule: str, *, missing: bool, outside: bool) -> None:
    """Raise if the curator rule 'error' meets a missing value (none imputed) or a value
    outside the bounds; every other rule never raises. Takes only whether there are any
    (the message says neither which nor how many)."""
    if rule != "error":
        return
    if missing:
        raise PrivregValueError(
            f"column {column!r} has missing values and rule='error' (curator mode); pass impute=<a value inside "
            f"the bounds>, or rule='clip' or rule='drop'. Nothing was charged."
        )
    if outside:
        raise PrivregValueError(
            f"column {column!r} has values outside the declared bounds and rule='error' (curator mode); widen "
            f"the bounds, or pass rule='clip', rule='drop' or rule='impute'. Nothing was charged."
        )


def apply_rule(
    values: np.ndarray, bounds: tuple[float, float], rule: str, column: str, impute: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(values within bounds, mask of the rows kept)`` under ``rule`` (:data:`RULES`):
    missing values (NaN) become ``impute``, or leave their rows out when it is None;
    values outside the bounds (+-inf included) are clipped, dropped or imputed. Only the
    curator rule 'error' can raise (:func:`refuse_by_rule`)."""
    lower, upper = bounds
    missing = np.isnan(values)
    outside = ~missing & ((values < lower) | (values > upper))
    filled = values if impute is None else np.where(missing, impute, values)
    present = ~missing if impute is None else np.ones(values.shape, dtype=bool)
    if rule == "drop":
        keep = present & ~outside
    elif rule == "error":
        refuse_by_rule(column, rule, missing=bool((missing & ~present).any()), outside=bool(outside.any()))
        keep = present
    else:
        keep = present
    if rule == "impute" and impute is not None:  # check_impute requires it for this rule
        filled = np.where(outside, impute, filled)
    return np.clip(filled[keep], lower, upper), keep


def no_unit_column(unit: Any, columns: Any) -> PrivregValueError:
    """The error for a privacy unit that is not a column (names the columns there are)."""
    return PrivregValueError(
        f"privacy_unit={unit!r} is not a column of the frame; its columns are "
        f"{list(map(str, columns))}. Name the column identifying a person, or pass "
        f"privacy_unit=ONE_ROW_PER_USER if every row is a different person."
    )


def _unit_codes(frame: pd.DataFrame, unit: str) -> np.ndarray:
    """One integer code per row (-1 for a row without a person: its id is missing)."""
    if unit not in frame.columns:
        raise no_unit_column(unit, frame.columns)
    codes, _ = pd.factorize(frame[unit], sort=False, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64)


def with_person(frame: pd.DataFrame, unit: Hashable | OneRowPerUser) -> pd.DataFrame:
    """``frame`` without its rows whose privacy unit is missing (NaN, None, pd.NA).

    A row without a person belongs to no one the guarantee protects, so it is left out
    of every statistic (a declared rule, the same on Spark): leaving it out reveals
    nothing about it, and nothing before a release says whether there were any."""
    if isinstance(unit, OneRowPerUser):
        return frame
    if unit not in frame.columns:
        raise no_unit_column(unit, frame.columns)
    present = frame[unit].notna().to_numpy()
    return frame if present.all() else frame.loc[present]


def user_ids(frame: pd.DataFrame, unit: Hashable | OneRowPerUser) -> np.ndarray:
    """One integer code per row identifying its privacy unit."""
    if isinstance(unit, OneRowPerUser):
        return np.arange(len(frame), dtype=np.int64)
    return _unit_codes(frame, str(unit))


def bounding_key(rng: RandomSource) -> bytes:
    """The secret key of a query's contribution bounding
    (:func:`~privreg.analysis.selection.selection_key`: :data:`KEY_BYTES` bytes from
    ``rng``, the only draw bounding makes, whatever the size of the data or where it lives)."""
    return selection_key(rng)


def bound_contributions(frame: pd.DataFrame, users: np.ndarray, k: int, key: bytes) -> np.ndarray:
    """Row positions (sorted) keeping ``min(k, n)`` of the ``n`` rows of each user: for a
    user with more than ``k``, the ``k`` with the smallest tags under the secret ``key``
    (:mod:`privreg.analysis.selection`: HMAC-SHA256 of the row's content and its position
    among the user's identical rows), the rule Spark applies too
    (:meth:`~privreg.analysis.spark_frame.SparkFrame.bound`), so both keep the same rows.

    The kept rows are a uniformly random ``k``-subset of the user's, independent of the
    values (a pseudorandom function of distinct messages under a key the data never
    saw); a user's own rows decide only which of theirs are kept, so the sensitivities
    hold whatever is kept (Wilson et al. 2020, Section 3)."""
    n = users.size
    if n == 0:
        return np.arange(0, dtype=np.int64)
    heavy = np.bincount(users)[users] > k
    rows = np.flatnonzero(heavy)
    if rows.size == 0:
        return np.arange(n, dtype=np.int64)
    part = frame.iloc[rows]
    columns = [column_fields(part.iloc[:, j]) for j in range(part.shape[1])]
    texts = ["".join(parts) for parts in zip(*columns, strict=True)]
    positions = pd.DataFrame({"user": users[rows], "row": texts}).groupby(["user", "row"], sort=False).cumcount()
    tagger = Tagger(key)
    tags = [tagger(row_message((t,), p)) for t, p in zip(texts, positions.tolist(), strict=True)]
    kept = rows[keep_first(users[rows], tags, k)]
    return np.sort(np.r_[np.flatnonzero(~heavy), kept])
