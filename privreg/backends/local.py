"""The in-process backend: pandas for input, numpy for everything on the hot path.

Text becomes a :class:`TokenCorpus` -- one int32 token id per position (ids index the
sorted vocabulary), the user of each position and where its record ends -- built chunk by
chunk, so peak memory while reading is one chunk of strings plus 12 bytes per token.
Aggregation (:meth:`LocalBackend.bounded_histogram`) is sorting and ``bincount``: no Python
loop over users, keys or n-grams.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.backends.base import (
    DEFAULT_SCALE,
    Backend,
    Histogram,
    Tokenizer,
    check_columns,
    check_path,
    contribution_weights,
    detect_format,
)
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = ["LocalBackend", "LocalPairs", "TokenCorpus", "keyed_rank", "sorted_unique", "string_tags"]

_CHUNK_RECORDS = 20_000
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
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


def keyed_rank(salt: int, user: np.ndarray, key: np.ndarray) -> np.ndarray:
    """A pseudo-random uint64 rank of each (user tag, key tag) under ``salt``: a function
    of the pair's intrinsic tags and the public salt only."""
    s = np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        h = _mix(user.astype(np.uint64) * _M1 + s)
        return _mix(h ^ (key.astype(np.uint64) * _M2 + _M1))


def string_tags(values: np.ndarray) -> np.ndarray:
    """A fixed 64-bit hash (pandas' SipHash with its default key) of each string: a tag
    that depends on the string alone, unlike its index in a data-dependent sorted list."""
    import pandas as pd

    return pd.util.hash_array(np.asarray(values, dtype=object).astype(str).astype(object))


@attrs.frozen(kw_only=True)
class LocalPairs:
    """(user, key) rows for :meth:`LocalBackend.bounded_histogram`: two aligned 1-d
    integer arrays (users as dense indices 0..U-1, keys as int64).

    The keyed choice of a user's kept keys must depend on that user's own data only, so
    it is computed from *intrinsic* tags: ``user_tags[user]`` (e.g. a hash of the user id
    string; required, since a dense user index shifts when another user is added) and
    ``key_tags[key]`` when keys are dense indices of data-dependent lists (e.g. token ids
    of a vocabulary), else the key itself (keys that mean the same thing whatever other
    users hold, e.g. indices into already released sets)."""

    user: np.ndarray
    key: np.ndarray
    user_tags: np.ndarray
    key_tags: np.ndarray | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("user", "key"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
                raise PrivregTypeError(f"{name} must be a 1-d integer numpy array; got {type(arr).__name__}")
        if self.user.shape != self.key.shape:
            raise PrivregValueError(f"user and key must be aligned; got {self.user.size} and {self.key.size} rows")
        for name in ("user_tags", "key_tags"):
            arr = getattr(self, name)
            if arr is not None and (not isinstance(arr, np.ndarray) or arr.dtype != np.uint64):
                raise PrivregTypeError(f"{name} must be a uint64 numpy array of tags")


@attrs.frozen(kw_only=True)
class TokenCorpus:
    """A tokenized multi-user corpus.

    * ``tokens``: int32 token id per position (index into ``vocab``);
    * ``vocab``: the distinct tokens, sorted by code point (so ids agree with Spark's
      binary string order);
    * ``user``: int32 user index per position (index into ``users``, sorted ids);
    * ``record_end``: int64 per position, the exclusive end of its record: an n-gram of
      length k starts at p only if ``p + k <= record_end[p]`` (n-grams never cross records).
    """

    tokens: np.ndarray
    vocab: np.ndarray
    user: np.ndarray
    users: np.ndarray
    record_end: np.ndarray

    @property
    def size(self) -> int:
        return int(self.tokens.size)

    @property
    def user_tags(self) -> np.ndarray:
        """Intrinsic 64-bit tag of each user (a hash of the user id string)."""
        return string_tags(self.users)

    @property
    def vocab_tags(self) -> np.ndarray:
        """Intrinsic 64-bit tag of each token (a hash of the token string)."""
        return string_tags(self.vocab)

    @classmethod
    def from_arrays(cls, *, tokens: np.ndarray, user: np.ndarray, record_end: np.ndarray,
                    vocab: np.ndarray | None = None, users: np.ndarray | None = None) -> TokenCorpus:
        """Wrap arrays made elsewhere (e.g. the synthetic generator). ``vocab`` defaults to
        ``"w<id>"`` names, ``users`` to ``"u<index>"``; both must be sorted and distinct."""
        tokens = np.asarray(tokens)
        n_vocab = int(tokens.max()) + 1 if tokens.size else 0
        if vocab is None:
            width = len(str(max(n_vocab - 1, 0)))
            vocab = np.array([f"w{i:0{width}d}" for i in range(n_vocab)], dtype=object)
        if users is None:
            n_users = int(np.max(user)) + 1 if np.size(user) else 0
            width = len(str(max(n_users - 1, 0)))
            users = np.array([f"u{i:0{width}d}" for i in range(n_users)], dtype=object)
        return cls(tokens=tokens.astype(np.int32, copy=False), vocab=np.asarray(vocab, dtype=object),
                   user=np.asarray(user).astype(np.int32, copy=False), users=np.asarray(users, dtype=object),
                   record_end=np.asarray(record_end).astype(np.int64, copy=False))

    def decode(self, start: np.ndarray, length: int) -> list[str]:
        """The n-grams of ``length`` starting at positions ``start``, as space-joined strings."""
        idx = start[:, None] + np.arange(length)[None, :]
        words = self.vocab[self.tokens[idx]]
        return [" ".join(row) for row in words]


class LocalBackend(Backend):
    """In-process numpy/pandas backend (the default)."""

    name: ClassVar[str] = "local"

    def read_records(self, path: str | Path, *, user_column: str = "user_id", text_column: str = "text",
                     format: str | None = None) -> Any:
        import pandas as pd

        p = check_path(path)
        fmt = detect_format(p, format)
        if fmt == "csv":
            df = pd.read_csv(p, dtype=str, keep_default_na=False, na_values=[""])
        elif fmt == "jsonl":
            df = pd.read_json(p, lines=True, dtype=False)
        else:
            df = pd.read_parquet(p)
        check_columns([str(c) for c in df.columns], user_column, text_column, p)
        out = pd.DataFrame({"user": df[user_column], "text": df[text_column]}).dropna()
        return out.astype({"user": str, "text": str}).reset_index(drop=True)

    def tokenize(self, records: Any, tokenizer: Tokenizer = Tokenizer()) -> TokenCorpus:
        """A :class:`TokenCorpus` from (user, text) rows, tokenized ``_CHUNK_RECORDS`` rows
        at a time (pandas' vectorised string methods); ids are renumbered at the end so that
        they index the sorted vocabulary. Records are grouped by user (stable)."""
        import pandas as pd

        if not isinstance(tokenizer, Tokenizer):
            raise PrivregTypeError(f"tokenizer must be a privreg.backends.Tokenizer; got {tokenizer!r}")
        users, user_idx = np.unique(records["user"].to_numpy(dtype=object).astype(str), return_inverse=True)
        user_idx = user_idx.reshape(-1)
        order = np.argsort(user_idx, kind="stable")
        texts = records["text"].to_numpy(dtype=object)[order]
        rec_user = user_idx[order]
        vocab: dict[str, int] = {}
        tok_parts, len_parts = [], []
        for lo in range(0, texts.size, _CHUNK_RECORDS):
            s = pd.Series(texts[lo:lo + _CHUNK_RECORDS], dtype=object)
            if tokenizer.lowercase:
                s = s.str.lower()
            lists = s.str.findall(tokenizer.pattern)
            len_parts.append(lists.str.len().to_numpy(dtype=np.int64))
            flat = lists.explode().dropna()
            codes, uniques = pd.factorize(flat.to_numpy(dtype=object))
            mapping = np.fromiter((vocab.setdefault(u, len(vocab)) for u in uniques), dtype=np.int64,
                                  count=len(uniques))
            tok_parts.append(mapping[codes].astype(np.int32))
        lengths = np.concatenate(len_parts) if len_parts else np.zeros(0, np.int64)
        raw = np.concatenate(tok_parts) if tok_parts else np.zeros(0, np.int32)
        words = np.array(list(vocab), dtype=object)
        sorted_idx = np.argsort(words.astype(str), kind="stable")
        rank = np.empty(words.size, dtype=np.int32)
        rank[sorted_idx] = np.arange(words.size, dtype=np.int32)
        tokens = rank[raw] if raw.size else raw
        ends = np.cumsum(lengths)
        return TokenCorpus(tokens=tokens.astype(np.int32), vocab=words[sorted_idx],
                           user=np.repeat(rec_user, lengths).astype(np.int32), users=users.astype(object),
                           record_end=np.repeat(ends, lengths).astype(np.int64))

    def bounded_histogram(self, pairs: Any, *, max_keys: int, weighting: str = "sqrt", salt: int,
                          scale: int = DEFAULT_SCALE) -> Histogram:
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
        # Key codes that preserve key order (offsets, or ranks among the distinct keys), so
        # every tie below is broken by the key itself: a user's kept keys depend on that
        # user's own pairs and the salt only. Everything is packed into int64 and sorted
        # with np.sort (much faster than argsort/lexsort).
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
                "too many users and distinct keys for the local backend; use backend='spark'")
        pair = sorted_unique((user << kbits) | code)  # distinct (user, key), by user then key
        user, code = pair >> kbits, pair & ((1 << kbits) - 1)
        original = code + kmin if uniq is None else uniq[code]
        if pairs.user_tags.size <= int(user.max()):
            raise PrivregValueError("user_tags must hold a tag for every user index")
        key_tag = original.astype(np.uint64) if pairs.key_tags is None else pairs.key_tags[original]
        rank = keyed_rank(salt, pairs.user_tags[user], key_tag)
        # order each user's keys by (full 64-bit rank, key): sort on the top rank bits that
        # fit beside user and key, then re-sort the (rare) runs whose top bits tie
        rbits = 63 - ubits - kbits
        if rbits >= 8:
            r = (rank >> np.uint64(64 - rbits)).astype(np.int64)
            packed = np.sort((user << (rbits + kbits)) | (r << kbits) | code)
            user, code = packed >> (rbits + kbits), packed & ((1 << kbits) - 1)
            top = packed >> kbits
            tie = np.flatnonzero(top[1:] == top[:-1])
            if tie.size:
                slots = np.union1d(tie, tie + 1)
                u, c = user[slots], code[slots]
                o = c + kmin if uniq is None else uniq[c]
                full = keyed_rank(salt, pairs.user_tags[u],
                                  o.astype(np.uint64) if pairs.key_tags is None else pairs.key_tags[o])
                order = np.lexsort((c, full, u))
                user[slots], code[slots] = u[order], c[order]
        else:  # general (slower) ordering by (user, rank, key)
            order = np.lexsort((code, rank, user))
            user, code = user[order], code[order]
        starts = np.flatnonzero(np.r_[True, user[1:] != user[:-1]])
        sizes = np.diff(np.r_[starts, user.size])
        position = np.arange(user.size) - np.repeat(starts, sizes)
        keep = position < max_keys
        t = np.repeat(np.minimum(sizes, max_keys), sizes)[keep]
        code = code[keep]
        tbits = max(1, max_keys.bit_length())
        if kbits + tbits <= 62:
            agg = np.sort((code << tbits) | t)
            code, t = agg >> tbits, agg & ((1 << tbits) - 1)
        else:  # pragma: no cover - keys use at most 40 bits above
            order = np.argsort(code, kind="stable")
            code, t = code[order], t[order]
        w = weights[t]
        if w.size and float(w.max()) * w.size >= 2.0**63:
            raise PrivregValueError("histogram totals would overflow int64; lower scale")
        first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        counts = np.add.reduceat(w, first) if w.size else np.zeros(0, np.int64)
        keys = code[first] + kmin if uniq is None else uniq[code[first]]
        if keys.size == 0:
            return empty
        return Histogram(keys=keys, counts=counts, scale=scale)
