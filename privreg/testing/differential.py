"""Pairs of invalid inputs for the ``data-free-errors`` check: error messages are compared
between neighbours instead of searched for digits.

An error raised before the charge is an output nobody paid for: it must say the same thing
for two neighbouring inputs that both break the same rule. :func:`error_pairs` builds,
from an item's declared neighbours, inputs that reach each error path -- out of range on
each side (negative, huge, beyond int64 and uint64), NaN and infinities, fractions where
integers are wanted, a wrong length -- and pairs them so that the two inputs of a pair
differ in exactly one thing:

* ``value``: the offending value itself (-1.5 against -2.5e6; 2**63 + 5 against 2**70):
  a message quoting it, its ``float.hex``, or its order of magnitude differs;
* ``count``: one offending entry against two: a message counting them differs;
* ``position``: the offending entry first against last (or under another key): a
  message naming the index or the key differs;
* ``context``: the same offending entry among the first declared neighbour's valid
  entries against the second's: a message quoting other entries (``got max 3`` from
  ``counts.max()``, the input's sum) differs.

Whatever the mechanism, two inputs of a pair are neighbours or near-neighbours (one entry,
one count, one position apart), so an error that tells them apart leaks that entry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from privreg.testing.inputs import describe_like

__all__ = ["ErrorPair", "error_pairs"]


@attrs.frozen(kw_only=True)
class ErrorPair:
    """Two inputs breaking the same ``rule`` that differ only in ``differs``."""

    rule: str
    differs: str
    first: Any
    second: Any


#: Offending values by rule: two of each, of different magnitude and representation.
_FLOAT_BAD: tuple[tuple[str, float, float], ...] = (
    ("NaN", math.nan, math.nan),
    ("+inf", math.inf, math.inf),
    ("-inf", -math.inf, -math.inf),
    ("negative", -1.5, -2.5e6),
    ("huge", 1.5e300, 3.25e305),
    ("fraction", 0.5, 2.25),
)
_INT_BAD: tuple[tuple[str, int, int], ...] = (
    ("negative", -1, -7321),
    ("large", 10**6 + 3, 10**9 + 7),
    ("beyond int64", 2**63 + 5, 2**70 + 3),
    ("beyond uint64", 2**64 + 11, 10**30 + 1),
)


def _bad_values(integer: bool) -> list[tuple[str, Any, Any]]:
    """The offending pairs for an integer or a float domain; both values of a pair break
    the same rules (a fraction against a fraction, an integer against an integer)."""
    if integer:
        floats = [(r, a, b) for r, a, b in _FLOAT_BAD if r in ("NaN", "+inf", "-inf", "fraction")]
        return [*_INT_BAD, *floats, ("negative fraction", -1.5, -2500000.5), ("huge float", 1.5e300, 3.25e305)]
    return list(_FLOAT_BAD) + [(r, a, b) for r, a, b in _INT_BAD if r.startswith("beyond")]


def _array(values: list[Any], integer: bool) -> np.ndarray:
    if integer and all(isinstance(v, int) for v in values):
        return np.array(values)  # int64, uint64 or object beyond, as a caller's would be
    return np.array([float(v) for v in values], dtype=np.float64)


def _vector_pairs(x: Any, y: Any, integer: bool) -> list[ErrorPair]:
    xs = [int(v) if integer else float(v) for v in np.asarray(x).ravel().tolist()]
    ys = [int(v) if integer else float(v) for v in np.asarray(y).ravel().tolist()]
    n = len(xs)
    out: list[ErrorPair] = []

    def put(base: list[Any], at: list[int], v: Any) -> np.ndarray:
        row = list(base)
        for i in at:
            row[i] = v
        return _array(row, integer and isinstance(v, int))

    for rule, a, b in _bad_values(integer):
        if rule not in ("NaN", "+inf", "-inf"):
            out.append(ErrorPair(rule=rule, differs="value", first=put(xs, [0], a), second=put(xs, [0], b)))
        if n >= 2:
            out.append(ErrorPair(rule=rule, differs="count", first=put(xs, [0], a), second=put(xs, [0, n - 1], a)))
            out.append(ErrorPair(rule=rule, differs="position", first=put(xs, [0], a), second=put(xs, [n - 1], a)))
        if len(ys) == n and ys != xs and n >= 2:
            # the offending entry where the neighbours agree, so that the rest still differs
            at = next((i for i in range(n) if xs[i] == ys[i]), 0)
            out.append(ErrorPair(rule=rule, differs="context", first=put(xs, [at], a), second=put(ys, [at], a)))
    # one coordinate too many: the extra entry and the others differ, never the length
    extra_a, extra_b = (3, 9001) if integer else (0.25, 7.5e5)
    out.append(
        ErrorPair(
            rule="wrong length",
            differs="value",
            first=_array([*xs, extra_a], integer),
            second=_array([*xs, extra_b], integer),
        )
    )
    if len(ys) == n and ys != xs:
        out.append(
            ErrorPair(
                rule="wrong length",
                differs="context",
                first=_array([*xs, extra_a], integer),
                second=_array([*ys, extra_a], integer),
            )
        )
    return out


def _scalar_pairs(integer: bool) -> list[ErrorPair]:
    return [
        ErrorPair(rule=rule, differs="value", first=a, second=b)
        for rule, a, b in _bad_values(integer)
        if rule not in ("NaN", "+inf", "-inf")
    ]


def _population_pairs(x: Any, y: Any) -> list[ErrorPair]:
    """A randomizer's users: three holding ``x``, three holding ``y``; bad users among them."""
    rx, ry = np.asarray(x), np.asarray(y)
    integer = rx.dtype.kind in "iu"
    row_shape = rx.shape[1:] if rx.ndim > 1 else ()
    good = [rx.reshape(-1, *row_shape)[0], ry.reshape(-1, *row_shape)[0]]
    base = [good[0]] * 3 + [good[1]] * 3
    other = [good[1]] * 3 + [good[0]] * 3

    def users(rows: list[Any], at: list[int], v: Any) -> np.ndarray:
        values = [np.asarray(r).ravel().tolist() for r in rows]
        flat = []
        for i, r in enumerate(values):
            flat.append([v] * len(r) if i in at else r)
        cells = [c for r in flat for c in r]
        arr = _array(cells, integer and isinstance(v, int))
        return arr.reshape(len(rows), *row_shape) if row_shape else arr

    out: list[ErrorPair] = []
    last = len(base) - 1
    for rule, a, b in _bad_values(integer):
        if rule not in ("NaN", "+inf", "-inf"):
            out.append(ErrorPair(rule=rule, differs="value", first=users(base, [0], a), second=users(base, [0], b)))
        out.append(ErrorPair(rule=rule, differs="count", first=users(base, [0], a), second=users(base, [0, 1], a)))
        out.append(ErrorPair(rule=rule, differs="position", first=users(base, [0], a), second=users(base, [last], a)))
        out.append(ErrorPair(rule=rule, differs="context", first=users(base, [0], a), second=users(other, [0], a)))
    return out


def _mapping_pairs(x: Mapping[Any, Any], y: Mapping[Any, Any]) -> list[ErrorPair]:
    integer = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in x.values())
    keys = list(dict.fromkeys([*x, *y]))
    base = {k: x.get(k, y.get(k)) for k in keys}
    if len(keys) < 2:
        base["privreg-testing-b"] = next(iter(base.values()))
        keys = list(base)
    k0, k1 = keys[0], keys[-1]
    out: list[ErrorPair] = []
    for rule, a, b in _bad_values(integer):
        if rule not in ("NaN", "+inf", "-inf"):
            out.append(ErrorPair(rule=rule, differs="value", first={**base, k0: a}, second={**base, k0: b}))
        out.append(ErrorPair(rule=rule, differs="count", first={**base, k0: a}, second={**base, k0: a, k1: a}))
        out.append(ErrorPair(rule=rule, differs="position", first={**base, k0: a}, second={**base, k1: a}))
        out.append(
            ErrorPair(
                rule=rule,
                differs="position",
                first={**base, "privreg-testing-new-a": a},
                second={**base, "privreg-testing-new-b": a},
            )
        )
        if dict(x) != dict(y):
            bad = "privreg-testing-bad"
            out.append(ErrorPair(rule=rule, differs="context", first={**x, bad: a}, second={**y, bad: a}))
    return out


def error_pairs(x: Any, y: Any, *, population: bool = False) -> list[ErrorPair]:
    """Pairs of invalid inputs shaped like the declared neighbours ``x`` and ``y``
    (module docstring); ``population``: ``x`` and ``y`` are single users of a randomizer.
    Empty for inputs that are not numbers, numeric arrays or mappings to numbers."""
    kind = describe_like(x)
    if kind is None:
        return []
    if kind == "mapping":
        return _mapping_pairs(x, y if isinstance(y, Mapping) else x)
    if population:
        return _population_pairs(x, y)
    integer = kind == "int"
    if np.asarray(x).ndim == 0:
        return _scalar_pairs(integer)
    return _vector_pairs(x, y, integer)
