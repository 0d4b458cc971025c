"""One keyed choice of rows for every backend: contribution bounding's selection rule.

When a person has more rows (``analysis``: ``max_rows_per_user = k``) or keys (the
``ngrams`` plugin: ``max_keys``) than the bound, a subset of them is kept. This module
is the single definition of which ones, used by pandas, the local n-gram backend and
Spark (:mod:`privreg.analysis.spark_selection` builds the same function from Spark
built-ins), so that under one seed every backend keeps the same rows and makes the same
releases, whatever is dropped.

**The rule.** Each row is encoded as bytes (:func:`row_message`): a context string,
its fields in column order (:func:`field`), then its *position among identical rows*
(0, 1, ... over the rows of that person whose fields encode identically). Its *tag* is
``HMAC-SHA256(key, message)`` (RFC 2104, :func:`tag`), ``key`` 32 bytes drawn from the
session's random source (:func:`selection_key`; an explicit seed in tests). Each
person's rows are ordered by tag (bytewise, i.e. as 256-bit big-endian integers) and the
first ``min(k, n)`` are kept. Identical rows are interchangeable, so numbering them in
any order keeps the same multiset of rows: the choice depends on neither the input's
order nor its partitioning.

**Guarantee.** Exactly ``min(k, n_user)`` rows of each person are kept, so one person
changes a count by at most ``k`` and a bounded sum by ``k`` times the value bound (Wilson
et al. 2020, "Differentially Private SQL with Bounded User Contribution", PoPETs,
Section 3; Amin et al. 2019, ICML): those sensitivities hold whatever rows are kept. The
choice is a uniformly random ``k``-subset, independent of the values, for data fixed
before the key is drawn: a person's messages are distinct (identical rows differ in
position), and HMAC-SHA256 under a uniformly random key is a pseudorandom function
(Bellare 2006, "New Proofs for NMAC and HMAC: Security without Collision-Resistance",
CRYPTO: if SHA-256's compression function is a PRF), so the tags are computationally
indistinguishable from independent uniform 256-bit strings, and ordering by them is a
uniformly random order (ties need a 256-bit collision). The tags never leave the
library and are never released.

**The encoding** (:func:`field`, injective and self-delimiting; lengths count UTF-8
bytes, written in decimal)::

    N                   missing: None, NaN, NaT, pd.NA (Spark: null, NaN)
    n<len>:<number>     an integer or float, by value: "<int>" if integral in [-2^63, 2^63),
                        else "[-]<M>p<E>" for +-M 2^E with M odd, or "inf" / "-inf"
    b1:0, b1:1          a boolean
    s<len>:<text>       a string, UTF-8
    d<len>:<date>       a date, YYYY-MM-DD
    t<len>:<micros>     a timestamp, microseconds since 1970-01-01 UTC (naive: read as UTC)
    l<count>:<fields>   a list of fields (an n-gram's tokens)
    x<len>:<text>       anything else (pandas: str(value); Spark: its JSON or string cast)

Floats are encoded by their exact value (``M 2^E``), never through a decimal rendering
(whose digits differ between Python and the JVM); -0.0 reads as 0, as equality does.
The same rows have the same encoding on pandas and on a Spark DataFrame made from them
(``spark.createDataFrame(pdf)``) for integer, float, boolean, string and date columns,
and timestamps when Spark's session time zone is UTC; ``x`` fields have no such promise.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privreg.core.randomness import RandomSource

__all__ = [
    "KEY_BYTES",
    "ROW_CONTEXT",
    "Tagger",
    "field",
    "column_fields",
    "context_field",
    "keep_first",
    "list_field",
    "number",
    "row_message",
    "selection_key",
    "tag",
]

#: Bytes of the selection key (256 bits).
KEY_BYTES = 32
#: The context string opening the message of an ``analysis`` row.
ROW_CONTEXT = "privreg.analysis.row"
_TWO63 = 2.0**63


def selection_key(rng: RandomSource) -> bytes:
    """The secret key of one selection: :data:`KEY_BYTES` bytes from ``rng`` (the only
    draw a selection makes, whatever the size of the data or where it lives)."""
    return rng.random_bytes(KEY_BYTES)


def _framed(kind: str, payload: str) -> str:
    return f"{kind}{len(payload.encode('utf-8', 'surrogatepass'))}:{payload}"


def number(x: Any) -> str:
    """The payload of a finite or infinite number (see the module docstring): decimal
    for an integral value in [-2^63, 2^63), else ``[-]MpE`` with ``M`` odd, exact."""
    if isinstance(x, numbers.Integral):
        i = int(x)
        if -(1 << 63) <= i < 1 << 63:
            return str(i)
        t = (abs(i) & -abs(i)).bit_length() - 1
        return f"{'-' if i < 0 else ''}{abs(i) >> t}p{t}"
    f = float(x)
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f.is_integer() and -_TWO63 <= f < _TWO63:
        return str(int(f))
    m, q = abs(f).as_integer_ratio()
    if q == 1:
        e = (m & -m).bit_length() - 1
        m >>= e
    else:
        e = -(q.bit_length() - 1)
    return f"{'-' if f < 0 else ''}{m}p{e}"


def _micros(ts: pd.Timestamp) -> int:
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return int(ts.value // 1000)


def field(value: Any) -> str:
    """One value's field (see the module docstring)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return "N"
    if isinstance(value, (bool, np.bool_)):
        return "b1:1" if value else "b1:0"
    if isinstance(value, numbers.Integral):
        return _framed("n", number(value))
    if isinstance(value, numbers.Real):
        return "N" if math.isnan(float(value)) else _framed("n", number(value))
    if isinstance(value, str):
        return _framed("s", value)
    if isinstance(value, (datetime.datetime, np.datetime64)):
        ts = pd.Timestamp(value)
        return "N" if ts is pd.NaT else _framed("t", str(_micros(ts)))
    if isinstance(value, datetime.date):
        return _framed("d", value.isoformat())
    return _framed("x", str(value))


def list_field(items: Iterable[Any]) -> str:
    """A list of values as one field: ``l<count>:`` then each value's field."""
    parts = [field(v) for v in items]
    return f"l{len(parts)}:" + "".join(parts)


def column_fields(series: pd.Series) -> list[str]:
    """The field of every value of a pandas column (vectorised for plain dtypes)."""
    dtype = series.dtype
    plain = isinstance(dtype, np.dtype)  # not a nullable extension dtype (pd.NA)
    if plain and dtype == np.bool_:
        return ["b1:1" if b else "b1:0" for b in series.to_numpy().tolist()]
    if plain and dtype.kind == "i":
        return [f"n{len(s)}:{s}" for s in series.to_numpy().astype(str).tolist()]
    if plain and dtype.kind == "f":
        x = series.to_numpy(dtype=np.float64)
        integral = np.isfinite(x) & (np.floor(x) == x) & (x >= -_TWO63) & (x < _TWO63)
        ints = np.where(integral, x, 0.0).astype(np.int64).astype(str).tolist()
        return [f"n{len(i)}:{i}" if ok else field(v) for ok, i, v in zip(integral.tolist(), ints, x.tolist())]
    if dtype.kind == "M" or isinstance(dtype, pd.DatetimeTZDtype):
        return [field(ts) for ts in series.tolist()]
    return [
        f"s{len(v.encode('utf-8', 'surrogatepass'))}:{v}" if type(v) is str else field(v)
        for v in series.astype(object).tolist()
    ]


def row_message(fields: Sequence[str], position: int, context: str = ROW_CONTEXT) -> bytes:
    """The message of a row: its context, its fields, its position among identical rows."""
    text = context_field(context) + "".join(fields) + _framed("n", str(int(position)))
    return text.encode("utf-8", "surrogatepass")


def context_field(context: str) -> str:
    """The field opening every message of a context (:func:`row_message`)."""
    return _framed("s", context)


class Tagger:
    """``HMAC-SHA256(key, message)`` (RFC 2104) with the key's padded blocks hashed once."""

    def __init__(self, key: bytes) -> None:
        key = bytes(key)
        if len(key) > 64:  # RFC 2104: longer keys are hashed first
            key = hashlib.sha256(key).digest()
        padded = key.ljust(64, b"\x00")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))

    def __call__(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def joined(
        self, heads: Sequence[bytes], tails: Sequence[bytes], head: Iterable[int], tail: Iterable[int]
    ) -> list[bytes]:
        """The tags of the messages ``heads[h] + tails[t]`` for the pairs ``(h, t)`` of
        ``head`` and ``tail`` (a head's hashed state is reused while it repeats: group
        the pairs by head for speed)."""
        out: list[bytes] = []
        append = out.append
        last, state = -1, self._inner
        outer = self._outer
        for h, t in zip(head, tail, strict=True):
            if h != last:
                state = self._inner.copy()
                state.update(heads[h])
                last = h
            inner = state.copy()
            inner.update(tails[t])
            final = outer.copy()
            final.update(inner.digest())
            append(final.digest())
        return out


def tag(key: bytes, message: bytes) -> bytes:
    """The 32-byte tag of ``message`` under ``key``: ``HMAC-SHA256(key, message)``."""
    return Tagger(key)(message)


def keep_first(groups: np.ndarray, tags: Sequence[bytes], k: int) -> np.ndarray:
    """Indices (sorted) of the ``min(k, n)`` smallest tags (bytewise) of each group."""
    n = len(tags)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.asarray(tags, dtype="S32"), np.asarray(groups)))
    ordered = np.asarray(groups)[order]
    starts = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    return np.sort(order[rank < k])
