"""Inputs the contract checks feed a mechanism, shaped like its declared neighbours:
extreme finite values (fixed, and a hypothesis strategy mixing them). The invalid inputs
of the error-message check are in :mod:`privreg.testing.differential`.

hypothesis is imported only when :func:`extreme_inputs` is called (``pip install
'privreg[testing]'``), so ``import privreg.testing`` works without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from privreg.audit.extreme import EXTREME_FLOATS, EXTREME_INTS, extreme_neighbours
from privreg.core.errors import PrivregError

__all__ = ["describe_like", "extreme_inputs", "fixed_extremes", "hypothesis_modules"]


def hypothesis_modules() -> tuple[Any, Any]:
    """``(hypothesis, hypothesis.strategies)``, imported on first use."""
    try:
        import hypothesis
        from hypothesis import strategies
    except ImportError:  # pragma: no cover - the test extra installs it
        raise PrivregError(
            "privreg.testing's extreme-input check needs hypothesis; install it with "
            "pip install 'privreg[testing]' (or pip install hypothesis)"
        ) from None
    return hypothesis, strategies


def describe_like(value: Any) -> str | None:
    """'float', 'int' (scalars and arrays), 'mapping' (to numbers), or None."""
    if isinstance(value, Mapping):
        vals = list(value.values())
        ok = vals and all(
            isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in vals
        )
        return "mapping" if ok else None
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if arr.size == 0:
        return None
    return {"i": "int", "u": "int", "f": "float"}.get(arr.dtype.kind)


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (np.ndarray, list, tuple, Mapping))


def _int_valued(mapping: Mapping[Any, Any]) -> bool:
    return all(isinstance(x, (int, np.integer)) for x in mapping.values())


def _array(values: list[Any], shape: tuple[int, ...], integer: bool) -> np.ndarray:
    """``values`` as an array of ``shape``: floats as float64; integers as numpy infers
    them (int64, uint64, or object beyond uint64), as a caller's array would be."""
    if not integer:
        return np.array(values, dtype=np.float64).reshape(shape)
    return np.array([int(x) for x in values]).reshape(shape)


def _population(like: np.ndarray, values: list[Any], integer: bool) -> np.ndarray:
    """A randomizer's population: one user per value, each shaped like ``like[0]``."""
    row = like.shape[1:]
    per = int(np.prod(row)) if row else 1
    flat = [values[i % len(values)] for i in range(per * len(values))]
    return _array(flat, (len(values), *row), integer)


def fixed_extremes(like: Any, other: Any, *, population: bool = False) -> list[Any]:
    """Deterministic extreme inputs shaped like the declared neighbour ``like``: each
    extreme value everywhere, the extremes mixed in one input, and both inputs of every
    pair of :func:`~privreg.audit.extreme.extreme_neighbours` (``other`` is the second
    neighbour). ``population``: ``like`` is one user's input to a randomizer."""
    kind = describe_like(like)
    if kind is None:
        return []
    if kind == "mapping":
        keys = list(like)
        ints = _int_valued(like)
        values = EXTREME_INTS if ints else EXTREME_FLOATS
        out: list[Any] = [dict.fromkeys(keys, e) for e in values]
        out.append({k: values[i % len(values)] for i, k in enumerate(keys)})
    elif population:
        arr = np.asarray(like)
        integer = kind == "int"
        values = EXTREME_INTS if integer else EXTREME_FLOATS
        out = [_population(arr, [e], integer) for e in values]
        out.append(_population(arr, list(values), integer))
        return out
    else:
        integer = kind == "int"
        values = EXTREME_INTS if integer else EXTREME_FLOATS
        if _is_scalar(like):
            out = list(values)
        else:
            arr = np.asarray(like)
            out = [_array([e] * arr.size, arr.shape, integer) for e in values]
            for shift in range(0, len(values), max(1, arr.size)):  # every extreme, mixed
                mixed = [values[(shift + i) % len(values)] for i in range(arr.size)]
                out.append(_array(mixed, arr.shape, integer))
    for a, b in extreme_neighbours(like, other):
        out += [a, b]
    return out


def extreme_inputs(like: Any, *, population: bool = False) -> Any:
    """A hypothesis strategy of finite inputs shaped like ``like``, each coordinate an
    extreme value (2**53, 2**63, 2**64, 1e308, -0.0, subnormals, ...) or any finite
    number, mixed freely. None when ``like`` is not numeric."""
    _, st = hypothesis_modules()
    kind = describe_like(like)
    if kind is None:
        return None
    floats = st.one_of(st.sampled_from(EXTREME_FLOATS), st.floats(allow_nan=False, allow_infinity=False))
    ints = st.one_of(st.sampled_from(EXTREME_INTS), st.integers())
    if kind == "mapping":
        keys = list(like) + ["privreg-testing-extra"]
        values = ints if _int_valued(like) else st.one_of(floats, ints)
        return st.dictionaries(st.sampled_from(keys), values, min_size=1, max_size=len(keys))
    integer = kind == "int"
    element = ints if integer else floats
    arr = np.asarray(like)
    if population:
        per = int(np.prod(arr.shape[1:])) if arr.ndim > 1 else 1
        return st.lists(st.lists(element, min_size=per, max_size=per), min_size=1, max_size=6).map(
            lambda rows: _array([x for r in rows for x in r], (len(rows), *arr.shape[1:]), integer)
        )
    if _is_scalar(like):
        return element
    return st.lists(element, min_size=arr.size, max_size=arr.size).map(lambda xs: _array(xs, arr.shape, integer))
