"""Extreme inputs: finite values where floating-point and int64 arithmetic break, and
neighbouring pairs moved there.

A release must not fail after its charge for any input that passed validation: an
observer of the error learns which side of a threshold the secret value is on (issue
#16). The values here are where such failures hide -- the end of exact float integers
(2**53), of int64 (2**63) and uint64 (2**64), the largest doubles, -0.0 and subnormals --
and :func:`extreme_neighbours` moves a mechanism's declared neighbours there, keeping
their difference, so that the auditor and :mod:`privreg.testing` can try them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["EXTREME_FLOATS", "EXTREME_INTS", "extreme_neighbours", "show_input"]

_MAX = 1.7976931348623157e308

#: Finite doubles at the edges of float and integer arithmetic.
EXTREME_FLOATS: tuple[float, ...] = (
    0.0,
    -0.0,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1e-300,
    1.0,
    -1.0,
    2.0**31,
    2.0**52,
    2.0**53 - 1,
    2.0**53,
    2.0**53 + 2,
    -(2.0**53),
    2.0**62,
    2.0**63 - 1024,
    2.0**63,
    -(2.0**63),
    2.0**64,
    1e15,
    1e300,
    -1e300,
    1e308,
    -1e308,
    _MAX,
    -_MAX,
)

#: Integers at the edges of int64, uint64 and exact doubles (Python ints: an array of
#: them becomes int64, uint64 or object, as a caller's would).
EXTREME_INTS: tuple[int, ...] = (
    0,
    1,
    -1,
    2**31,
    2**53 - 1,
    2**53,
    2**53 + 1,
    -(2**53),
    2**62,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    10**20,
    -(10**20),
)

#: Where the largest coordinate of a moved float pair lands.
_FLOAT_TOPS = (2.0**53, 2.0**63, 2.0**64, 1e300, 1e308)
#: Where the largest coordinate of a moved integer pair lands (2**63 crosses from int64
#: to uint64, 2**64 - 1 is the largest uint64).
_INT_TOPS = (2**53, 2**63 - 1, 2**63, 2**64 - 1)


def show_input(value: Any, limit: int = 160) -> str:
    """A short, exact rendering of an input for a report (floats by repr)."""
    if isinstance(value, np.ndarray):
        text = (
            f"array({value.tolist()!r}, dtype={value.dtype})"
            if value.size <= 8
            else f"array of shape {value.shape}, dtype {value.dtype}, from {value.ravel()[0]!r} "
            f"to {value.ravel()[-1]!r}"
        )
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(value: Any) -> str | None:
    """'int' or 'float' for numeric inputs, 'mapping' for mappings of numbers, else None."""
    if isinstance(value, Mapping):
        vals = list(value.values())
        if vals and all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in vals):
            return "mapping"
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if arr.size == 0:
        return None
    return {"i": "int", "u": "int", "f": "float"}.get(arr.dtype.kind)


def _values(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return list(value.values())
    return np.asarray(value).ravel().tolist()


def _shift(value: Any, c: Any, *, keys: frozenset | None = None) -> Any:
    """``value`` with ``c`` added to every coordinate (to the values of ``keys`` only for a
    mapping), in exact Python arithmetic for integers; None when a result is not finite."""
    if isinstance(value, Mapping):
        out = {k: (x + c if k in keys else x) for k, x in value.items()}  # type: ignore[operator]
        if any(isinstance(x, float) and not math.isfinite(x) for x in out.values()):
            return None
        return out
    arr = np.asarray(value)
    if arr.dtype.kind in "iu":
        moved = [int(x) + int(c) for x in arr.ravel().tolist()]
        if arr.ndim == 0 and isinstance(value, (int, np.integer)):
            return moved[0]
        return np.array(moved).reshape(arr.shape)  # int64, uint64 or object, as a caller's would be
    with np.errstate(over="ignore"):
        moved_f = arr.astype(np.float64) + float(c)
    if not np.all(np.isfinite(moved_f)):
        return None
    if arr.ndim == 0 and not isinstance(value, np.ndarray):
        return float(moved_f)
    return moved_f


def extreme_neighbours(first: Any, second: Any) -> list[tuple[Any, Any]]:
    """The declared neighbours ``(first, second)`` moved to extreme magnitudes, keeping
    their difference: every coordinate (for a mapping: every key both hold) is shifted by
    the same ``c``, chosen so that the largest coordinate lands on 2**53, 2**63, 2**64,
    1e300 and 1e308 (integers: 2**53, 2**63 - 1, 2**63 and 2**64 - 1), or the smallest on
    -2**63 / -1e308. Shifting both inputs by what the other individuals contribute keeps
    them neighbours. Returns ``[]`` for inputs that are not numbers, numeric arrays or
    mappings to numbers (or not both of one kind)."""
    kind = _kind(first)
    if kind is None or _kind(second) != kind:
        return []
    if kind == "mapping":
        keys = frozenset(first) & frozenset(second)
        if not keys:
            return []
        vals = [first[k] for k in keys] + [second[k] for k in keys]
        integer = all(isinstance(x, (int, np.integer)) for x in vals)
    else:
        keys = None
        vals = _values(first) + _values(second)
        integer = kind == "int"
    pairs: list[tuple[Any, Any]] = []
    # exact ints for integer inputs (shifts past 2**63 must not round), floats otherwise
    shifts: list[int] | list[float]
    if integer:
        top, bottom = max(int(x) for x in vals), min(int(x) for x in vals)
        shifts = [t - top for t in _INT_TOPS] + [-(2**63) - bottom]
    else:
        top_f, bottom_f = max(float(x) for x in vals), min(float(x) for x in vals)
        shifts = [t - top_f for t in _FLOAT_TOPS] + [-1e308 - bottom_f]
    seen = set()
    for c in shifts:
        a, b = _shift(first, c, keys=keys), _shift(second, c, keys=keys)
        if a is None or b is None:
            continue
        key = (show_input(a, 10_000), show_input(b, 10_000))
        if key not in seen:
            seen.add(key)
            pairs.append((a, b))
    return pairs
