"""Pooling the outputs drawn on two neighbours, and the halves of the audit.

The outputs of the first neighbour come first, then those of the second; each side is
split into a *selection* half (the first ``n // 2`` outputs) and an *estimation* half (the
rest). Whether outputs are treated as numbers, and of which shape, is decided on the
selection halves only.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import attrs
import numpy as np

__all__ = ["Layout", "Pool", "to_pool", "show_key"]


@attrs.frozen(kw_only=True)
class Layout:
    """Where the four halves sit in the pooled outputs: selection and estimation halves
    of the first and of the second neighbour's outputs."""

    samples_first: int
    samples_second: int

    @property
    def sel_first(self) -> slice:
        return slice(0, self.samples_first // 2)

    @property
    def est_first(self) -> slice:
        return slice(self.samples_first // 2, self.samples_first)

    @property
    def sel_second(self) -> slice:
        return slice(self.samples_first, self.samples_first + self.samples_second // 2)

    @property
    def est_second(self) -> slice:
        return slice(self.samples_first + self.samples_second // 2, self.samples_first + self.samples_second)

    @property
    def selection(self) -> np.ndarray:
        n = self.samples_first + self.samples_second
        keep = np.zeros(n, dtype=bool)
        keep[self.sel_first] = True
        keep[self.sel_second] = True
        return keep


def _numeric(out: Any, count: int) -> np.ndarray | None:
    try:
        arr = np.asarray(out)
    except (ValueError, TypeError):  # ragged outputs
        return None
    if arr.dtype.kind not in "biuf" or arr.ndim == 0 or arr.shape[0] != count:
        return None
    return arr


def _key(x: Any) -> Hashable:
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return x.item()
    try:
        hash(x)
    except TypeError:
        return ("repr", repr(x))
    return x


def _fill(pool: np.ndarray, offset: int, out: Any, whole: np.ndarray | None) -> None:
    shape = pool.shape[1:]
    if whole is not None and whole.shape[1:] == shape:
        pool[offset : offset + whole.shape[0]] = whole
        return
    for i, x in enumerate(out):  # slow path: outputs of another shape or type stay NaN
        try:
            value = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            continue
        if value.shape == shape:
            pool[offset + i] = value


@attrs.frozen(kw_only=True, eq=False)
class Pool:
    """Both sides' outputs, first axis: the first neighbour's outputs then the second's.
    ``values``: float64 (NaN rows for outputs not of the selection halves' shape) when the
    selection halves are numeric arrays of one shape, else None and ``keys`` holds one
    hashable key per output. ``integer``: the selection halves are integer-valued."""

    values: np.ndarray | None
    keys: list[Hashable] | None
    integer: bool = False


def to_pool(first: Any, second: Any, *, layout: Layout) -> Pool:
    """Pool the outputs. Whether they are treated as numbers, and of which shape, is
    decided on the selection halves only; each output is then mapped on its own."""
    n1, n2 = layout.samples_first, layout.samples_second
    if len(first) != n1 or len(second) != n2:
        raise ValueError("output counts do not match the layout")
    whole_a, whole_b = _numeric(first, n1), _numeric(second, n2)
    h1, h2 = layout.sel_first.stop, layout.sel_second.stop - layout.sel_second.start
    sel_a = whole_a[:h1] if whole_a is not None else _numeric(list(first)[:h1], h1)
    sel_b = whole_b[:h2] if whole_b is not None else _numeric(list(second)[:h2], h2)
    if sel_a is None or sel_b is None or sel_a.shape[1:] != sel_b.shape[1:]:
        return Pool(values=None, keys=[_key(x) for x in first] + [_key(x) for x in second])
    values = np.full((n1 + n2, *sel_a.shape[1:]), np.nan)
    _fill(values, 0, first, whole_a)
    _fill(values, n1, second, whole_b)
    integer = sel_a.dtype.kind in "biu" and sel_b.dtype.kind in "biu"
    return Pool(values=values, keys=None, integer=integer)


def show_key(key: Hashable) -> str:
    if isinstance(key, tuple) and len(key) == 4 and key[0] == "ndarray":
        arr = np.frombuffer(key[3], dtype=np.dtype(key[1])).reshape(key[2])
        return np.array2string(arr, separator=",")
    if isinstance(key, tuple) and len(key) == 2 and key[0] == "repr":
        return str(key[1])
    return repr(key)
