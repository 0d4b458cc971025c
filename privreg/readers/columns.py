"""Column names: the header rule, the names given for a file without one, the
missing-column error, and numeric columns.

Column names are schema, not data, so errors may quote them -- except a "header" row that
holds a number, which is most likely the first record of a file without a header row: an
error about such a row says so and quotes none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.validation import MAX_COLUMNS, check_header

__all__ = [
    "check_columns_given",
    "header_names",
    "looks_like_record",
    "missing_columns_error",
    "require_columns",
    "names_option",
    "numeric_column",
]


def names_option(param: str = "columns") -> str:
    """How a caller names the columns of a file without a header row, for messages:
    ``param`` is its parameter (``columns=``, on the command line ``--columns a,b,c``)."""
    return f"{param}= (CLI: --{param.replace('_', '-')} a,b,c)"


def _no_header_fix(param: str) -> str:
    return f"if the file has no header row, name its columns with {names_option(param)}"


def looks_like_record(names: Sequence[str]) -> bool:
    """Whether a header row holds a number (``"39"``, ``"1e-3"``): then it is most likely
    a record of a file without a header row, and its cells are data."""
    for name in names:
        try:
            float(name)
        except ValueError:
            continue
        return True
    return False


def header_names(row: Sequence[str], path: Path, what: str = "input", *, param: str = "columns") -> list[str]:
    """The column names of ``path``'s header row (stripped); an empty or repeated name is
    refused (:func:`~privreg.core.validation.check_header`) without quoting the row: in a
    file without a header row it is a record."""
    names = [str(c).strip() for c in row]
    if len(names) > MAX_COLUMNS:  # the count only: the row may be a record
        raise PrivregValueError(
            f"{what} {str(path)!r}: its first row has {len(names)} columns, more than the {MAX_COLUMNS} a table "
            f"may have; keep only the columns the analysis needs"
        )
    try:
        return check_header(names, repr(str(path)))
    except PrivregValueError:
        fault = "has an empty column name" if not all(names) else "names a column more than once"
        numbers = ", holds numbers" if looks_like_record(names) else ""
        raise PrivregValueError(
            f"{what} {str(path)!r}: its first row {fault}{numbers} and so is not a usable header row (names "
            f"not shown: it may be a record); rename the columns, or, {_no_header_fix(param)}"
        ) from None


def check_columns_given(columns: Any, *, param: str = "columns") -> list[str]:
    """``columns``, the names of a file without a header row (the caller's parameter
    ``param``), as a list: non-empty, distinct strings. (The CLI's ``--columns a,b,c`` is
    split by :func:`~privreg.core.validation.split_columns`.)"""
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise PrivregTypeError(
            f"{param} must be a list of column names; got {type(columns).__name__} (split 'a,b,c' into names first)"
        )
    names = list(columns)
    if not names:
        raise PrivregValueError(f"{param} must name at least one column; pass None for a file with a header row")
    if not all(isinstance(c, str) for c in names):
        raise PrivregTypeError(f"{param} must hold strings (the column names)")
    return check_header(names, param)


def missing_columns_error(
    missing: Sequence[str],
    found: Sequence[str],
    path: Path,
    *,
    what: str = "input",
    hint: str = "",
    param: str = "columns",
    header_row: bool = True,
) -> PrivregValueError:
    """The error for wanted columns ``missing`` from ``path``, whose columns are
    ``found``. It names the missing ones (the caller's) and ends with ``hint`` (the
    parameter that picks the columns). With ``header_row`` (a CSV's first row) the found
    names are counted, never quoted -- in a file without a header row they are a record
    -- and ``param``, which names the columns of such a file, is pointed at; otherwise
    (JSON keys, a Parquet schema, the mail table) they are schema and are listed."""
    missing = list(missing)
    head = f"column {missing[0]!r} is" if len(missing) == 1 else f"columns {missing} are"
    if header_row:
        text = f"{head} not among the {len(found)} column(s) of the header row of {what} {str(path)!r}" + (
            ", which holds numbers (a record?)" if looks_like_record(found) else ""
        )
        text += f"; check the name, or, {_no_header_fix(param)}"
    else:
        text = f"{head} not in {what} {str(path)!r}; its columns are {list(found)}"
    return PrivregValueError(text + (f". {hint}" if hint else ""))


def require_columns(
    wanted: Sequence[str],
    found: Sequence[str],
    path: Path,
    *,
    what: str = "input",
    hint: str = "",
    param: str = "columns",
    header_row: bool = True,
) -> None:
    """Raise :func:`missing_columns_error` unless every name of ``wanted`` is in ``found``."""
    have = set(found)
    missing = [c for c in wanted if c not in have]
    if missing:
        raise missing_columns_error(missing, found, path, what=what, hint=hint, param=param, header_row=header_row)


def numeric_column(values: Sequence[str | None], column: str, where: str) -> np.ndarray:
    """The cells of ``column`` as float64; a missing cell (None) reads as NaN. A cell that
    is not a number is an error naming the column and ``where``, never the cell or its
    row."""
    try:
        return np.asarray(["nan" if v is None else v for v in values], dtype=np.float64)
    except ValueError:
        raise PrivregValueError(f"column {column!r} of {where} is not numeric: a cell is not a number") from None
