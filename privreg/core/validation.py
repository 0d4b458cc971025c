"""Early argument validation with errors that name the argument, the value and the fix.

These helpers are the single place where privreg decides what a valid epsilon, delta,
sensitivity or count is, so that every mechanism, event and accountant rejects the same
inputs with the same words.
"""

from __future__ import annotations

import collections
import math
import numbers
from typing import Any

from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "MAX_COLUMNS",
    "MAX_NAME_LENGTH",
    "check_real",
    "check_epsilon",
    "check_delta",
    "check_sensitivity",
    "check_probability",
    "check_count",
    "check_int",
    "check_name",
    "check_header",
    "split_columns",
]


def check_real(name: str, value: Any) -> float:
    """Return ``value`` as a float; raise ``PrivregTypeError`` for non-numbers and bools."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PrivregTypeError(
            f"{name} must be a real number; got {value!r} of type {type(value).__name__}. "
            f"Pass a float such as {name}=1.0."
        )
    try:
        x = float(value)
    except OverflowError:
        raise PrivregValueError(f"{name} must be finite; got a number too large for a float") from None
    return x + 0.0  # -0.0 becomes 0.0: equal values must serialise equally


def _check_finite(name: str, x: float, value: Any, example: str) -> None:
    if math.isnan(x) or math.isinf(x):
        raise PrivregValueError(f"{name} must be finite; got {value!r}. Pass a finite number such as {example}.")


def check_epsilon(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """Validate a privacy parameter epsilon: finite and positive (or >= 0 if ``allow_zero``)."""
    x = check_real(name, value)
    _check_finite(name, x, value, f"{name}=1.0")
    if x < 0 or (x == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise PrivregValueError(f"{name} must be {bound}; got {value!r}. Pass a positive value such as {name}=1.0.")
    return x


def check_delta(name: str, value: Any, *, allow_zero: bool = True) -> float:
    """Validate a privacy parameter delta in [0, 1) (or (0, 1) if not ``allow_zero``)."""
    x = check_real(name, value)
    _check_finite(name, x, value, f"{name}=1e-6")
    lo_ok = x >= 0 if allow_zero else x > 0
    if not lo_ok or x >= 1:
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise PrivregValueError(
            f"{name} must lie in {interval}; got {value!r}. Pass a small probability such as "
            f"{name}=1e-6 (well below 1/n for n records)."
        )
    return x


def check_sensitivity(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """Validate a sensitivity: finite and positive (zero only if ``allow_zero``)."""
    x = check_real(name, value)
    _check_finite(name, x, value, f"{name}=1.0")
    if x < 0 or (x == 0 and not allow_zero):
        raise PrivregValueError(
            f"{name} must be {'>= 0' if allow_zero else '> 0'}; got {value!r}. Pass the "
            f"largest change one individual can cause, such as {name}=1.0."
        )
    return x


def check_probability(name: str, value: Any, *, open_low: bool = False, open_high: bool = False) -> float:
    """Validate a probability in [0, 1], with either end optionally excluded."""
    x = check_real(name, value)
    _check_finite(name, x, value, f"{name}=0.5")
    if (x < 0 or x > 1) or (open_low and x == 0) or (open_high and x == 1):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise PrivregValueError(f"{name} must lie in {interval}; got {value!r}.")
    return x


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """Validate an integer (numpy integers accepted, bools and floats rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PrivregTypeError(f"{name} must be an integer; got {value!r} of type {type(value).__name__}.")
    x = int(value)
    if minimum is not None and x < minimum:
        raise PrivregValueError(f"{name} must be >= {minimum}; got {value!r}.")
    return x


def check_count(name: str, value: Any) -> int:
    """Validate a repetition count: an integer >= 1."""
    return check_int(name, value, minimum=1)


#: The longest registry or party name: a party's name is a file name and a certificate's
#: DNS name (whose labels hold at most 63 characters).
MAX_NAME_LENGTH = 63


def check_name(name: str, value: Any) -> str:
    """Validate a registry or party name: 1 to :data:`MAX_NAME_LENGTH` ASCII letters,
    digits, '-', '_' or '.'."""
    if not isinstance(value, str):
        raise PrivregTypeError(f"{name} must be a str; got {value!r} of type {type(value).__name__}.")
    if not value or not value.isascii() or not all(c.isalnum() or c in "-_." for c in value):
        raise PrivregValueError(
            f"{name} must be non-empty and use only ASCII letters, digits, '-', '_' or '.'; got {value!r}."
        )
    if len(value) > MAX_NAME_LENGTH:
        raise PrivregValueError(
            f"{name} must be at most {MAX_NAME_LENGTH} characters; got {len(value)} ({value[:20]!r}...)."
        )
    return value


#: Neighbour relations: add or remove one user's data, or replace one user's data.
RELATIONS = ("add_remove", "replace_one")
_LEGACY_RELATIONS = {"substitution": "replace_one"}


def check_relation(name: str, value: Any) -> str:
    """Validate a neighbour relation: ``"add_remove"`` or ``"replace_one"`` (the legacy
    name ``"substitution"`` is read as ``"replace_one"``)."""
    if not isinstance(value, str):
        raise PrivregTypeError(f"{name} must be a str; got {value!r} of type {type(value).__name__}.")
    relation = _LEGACY_RELATIONS.get(value, value)  # a new name, typed str (value is Any)
    if relation not in RELATIONS:
        raise PrivregValueError(f"{name} must be one of {RELATIONS}; got {relation!r}.")
    return relation


#: The most columns a table's header row (or a list of column names) may have.
MAX_COLUMNS = 65536


def _repeated(names: list[str]) -> list[str]:
    """The names given more than once, sorted (one pass: linear in the names)."""
    return sorted(n for n, count in collections.Counter(names).items() if count > 1)


def check_header(header: Any, where: str) -> list[str]:
    """The column names of a table's header row, stripped; an empty name or a name given
    twice is refused (which column would a name pick?). Column names are schema, not
    data, so the error may quote them."""
    names = [str(h).strip() for h in header]
    if len(names) > MAX_COLUMNS:
        raise PrivregValueError(
            f"{where} has {len(names)} columns in its header row, more than the {MAX_COLUMNS} a table may have; "
            f"keep only the columns the analysis needs"
        )
    if any(not n for n in names):
        raise PrivregValueError(
            f"{where} has an empty column name in its header row; name every column (or remove the empty one)"
        )
    dupes = _repeated(names)
    if dupes:
        raise PrivregValueError(
            f"{where} names column(s) {dupes} more than once in its header row; rename them so each name is unique"
        )
    return names


def split_columns(name: str, text: str) -> list[str]:
    """``"age,hours"`` -> ``["age", "hours"]``; ``""`` -> ``[]``. An empty name between
    commas (``"age,,hours"``, a trailing comma) or a name given twice is refused."""
    if not text.strip():
        return []
    names = [c.strip() for c in text.split(",")]
    if any(not c for c in names):
        raise PrivregValueError(
            f"parameter {name} has an empty column name in {text!r}; separate non-empty names by single commas"
        )
    dupes = _repeated(names)
    if dupes:
        raise PrivregValueError(f"parameter {name} names column(s) {dupes} more than once; give each column once")
    return names
