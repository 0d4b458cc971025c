"""Per-user contribution bounding and the weighted histogram: the privacy-critical step
of the local backend (the contract is :meth:`~privreg.plugins.ngrams.backends.base.Backend.bounded_histogram`).

A user keeps at most ``max_keys`` distinct keys. A user with more keeps the ``max_keys``
with the smallest tags under the run's secret key, by the one selection rule of
:mod:`privreg.analysis.selection` (HMAC-SHA256 of the message: context
:data:`CONTEXT`, the user id's field, the key's field, position 0 -- a user's (user,
key) pairs are distinct), the rule the Spark backend builds from Spark built-ins: so both
backends keep the same keys. Each kept key gets the weight
``contribution_weights(max_keys)[t]`` (``t`` the number kept). Sorting and ``bincount``:
no Python loop over light users, keys or n-grams; only heavy users' pairs are tagged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privreg.analysis.selection import Tagger, context_field, field, keep_first
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.ngrams.backends.base import DEFAULT_SCALE, Histogram, contribution_weights
from privreg.plugins.ngrams.backends.tokens import LocalPairs

__all__ = ["CONTEXT", "bounded_histogram", "key_tags", "mix", "sorted_unique"]

#: The context string of an n-gram key's message (:func:`~privreg.analysis.selection.row_message`).
CONTEXT = "privreg.ngrams.key"

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (a bijection of uint64 with good avalanche)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M2
    x = x ^ (x >> np.uint64(27))
    x = x * _M3
    return x ^ (x >> np.uint64(31))


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """The distinct values of ``x``, sorted (np.sort plus a run mask: much faster than
    np.unique on large int64 arrays with numpy 2.x)."""
    s = np.sort(x)
    if s.size < 2:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]


def key_tags(
    secret: bytes, user_fields: list[str], key_fields: list[str], user: np.ndarray, key: np.ndarray
) -> list[bytes]:
    """The tag of each (user, key) pair: ``HMAC-SHA256(secret, message)`` of the message
    :func:`~privreg.analysis.selection.row_message` of (``user_fields[user]``,
    ``key_fields[key]``) at position 0 with context :data:`CONTEXT` (pairs grouped by user
    are fastest)."""
    head = context_field(CONTEXT)
    heads = [(head + f).encode("utf-8", "surrogatepass") for f in user_fields]
    tails = [(f + "n1:0").encode("utf-8", "surrogatepass") for f in key_fields]
    return Tagger(secret).joined(heads, tails, user.tolist(), key.tolist())


def bounded_histogram(
    pairs: Any, *, max_keys: int, weighting: str = "sqrt", secret: bytes, scale: int = DEFAULT_SCALE
) -> Histogram:
    """The local backend's :meth:`~privreg.plugins.ngrams.backends.base.Backend.bounded_histogram`
    for ``pairs`` (:class:`~privreg.plugins.ngrams.backends.tokens.LocalPairs`). A user with
    at most ``max_keys`` distinct keys keeps them all (no tags needed); a user with more
    keeps the ``max_keys`` with the smallest tags (:func:`key_tags`): a function of the
    user's own id and keys and the secret only, never of other users or of the order."""
    if not isinstance(pairs, LocalPairs):
        raise PrivregTypeError(f"pairs must be LocalPairs for the local backend; got {type(pairs).__name__}")
    max_keys = v.check_count("max_keys", max_keys)
    weights = contribution_weights(max_keys, weighting=weighting, scale=scale)
    user = pairs.user.astype(np.int64, copy=False)
    key = pairs.key.astype(np.int64, copy=False)
    empty = Histogram(keys=np.zeros(0, np.int64), counts=np.zeros(0, np.int64), scale=scale)
    if user.size == 0:
        return empty
    if user.min() < 0 or user.max() >= 1 << 31:
        raise PrivregValueError("user indices must lie in [0, 2**31)")
    if pairs.users.size <= int(user.max()):
        raise PrivregValueError("users must hold an id for every user index")
    # Key codes that preserve key order (offsets, or ranks among the distinct keys);
    # (user, code) pairs packed into int64 and sorted with np.sort (much faster than
    # argsort/lexsort).
    kmin = int(key.min())
    if int(key.max()) - kmin < 1 << 40:
        code, uniq = key - kmin, None
    else:
        order = np.argsort(key)
        ordered = key[order]
        new = np.r_[True, ordered[1:] != ordered[:-1]]
        uniq = ordered[new]
        code = np.empty(key.size, dtype=np.int64)
        code[order] = np.cumsum(new) - 1
    kbits = max(1, int(code.max()).bit_length())
    ubits = max(1, int(user.max()).bit_length())
    if ubits + kbits > 62:
        raise PrivregValueError(  # pragma: no cover - 2**31 users and 2**31 distinct keys
            "too many users and distinct keys for the local backend; use backend='spark'"
        )
    pair = sorted_unique((user << kbits) | code)  # distinct (user, key), by user then key
    user, code = pair >> kbits, pair & ((1 << kbits) - 1)
    del pair
    starts = np.flatnonzero(np.r_[True, user[1:] != user[:-1]])
    sizes = np.diff(np.r_[starts, user.size])
    heavy = sizes > max_keys
    t = np.repeat(np.minimum(sizes, max_keys), sizes)
    if heavy.any():
        # only users with more than max_keys keys need the keyed choice
        in_heavy = np.repeat(heavy, sizes)
        kept = _keep_smallest_tagged(user[in_heavy], code[in_heavy], pairs, uniq, kmin, max_keys, secret)
        light = ~in_heavy
        code = np.concatenate([code[light], kept])
        t = np.concatenate([t[light], np.full(kept.size, max_keys, dtype=np.int64)])
    w = weights[t]
    if w.size and float(w.max()) * w.size >= 2.0**63:
        raise PrivregValueError("histogram totals would overflow int64; lower scale")
    width = int(code.max()) + 1
    if width <= max(1 << 22, 4 * code.size) and int(w.sum()) < 1 << 53:
        # bincount sums in float64: exact, every partial sum is an integer below 2**53
        present = np.bincount(code, minlength=width) > 0
        sums = np.bincount(code, weights=w, minlength=width)
        codes = np.flatnonzero(present)
        counts = sums[codes].astype(np.int64)
    else:
        tbits = max(1, max_keys.bit_length())
        if kbits + tbits <= 62:
            agg = np.sort((code << tbits) | t)
            code, t = agg >> tbits, agg & ((1 << tbits) - 1)
        else:  # pragma: no cover - keys use at most 40 bits above
            order = np.argsort(code, kind="stable")
            code, t = code[order], t[order]
        first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        counts = np.add.reduceat(weights[t], first)
        codes = code[first]
    keys = codes + kmin if uniq is None else uniq[codes]
    if keys.size == 0:
        return empty  # pragma: no cover - every user keeps at least one key
    return Histogram(keys=keys, counts=counts, scale=scale)


def _keep_smallest_tagged(
    user: np.ndarray,
    code: np.ndarray,
    pairs: LocalPairs,
    uniq: np.ndarray | None,
    kmin: int,
    max_keys: int,
    secret: bytes,
) -> np.ndarray:
    """The codes each user keeps: its ``max_keys`` with the smallest tags. ``user``/``code``
    are the distinct pairs of users holding more than max_keys keys."""
    users, user_index = np.unique(user, return_inverse=True)
    codes, code_index = np.unique(code, return_inverse=True)
    keys = codes + kmin if uniq is None else uniq[codes]
    key_fields = (
        pairs.key_fields(keys) if pairs.key_fields is not None else [f"n{len(s)}:{s}" for s in keys.astype(str)]
    )
    user_fields = [field(str(u)) for u in pairs.users[users].tolist()]
    tags = key_tags(secret, user_fields, list(key_fields), user_index.reshape(-1), code_index.reshape(-1))
    return code[keep_first(user, tags, max_keys)]
