"""Tokenized text as integer arrays: the vocabulary, token chunks and corpora, and the
(user, key) pairs handed to :func:`~privreg.plugins.ngrams.backends.bounding.bounded_histogram`.

Tags (:func:`string_tags`) are hashes of the strings themselves, so a user's or token's
tag never depends on what other users hold.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

import attrs
import numpy as np

from privreg.analysis.selection import field
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.ngrams.backends.base import Tokenizer

__all__ = [
    "LocalPairs",
    "TokenChunk",
    "TokenCorpus",
    "Vocabulary",
    "string_tags",
    "token_fields",
    "tokenize_texts",
]


def string_tags(values: np.ndarray) -> np.ndarray:
    """A fixed 64-bit hash (pandas' SipHash with its default key) of each string: a tag
    that depends on the string alone, unlike its index in a data-dependent sorted list."""
    import pandas as pd

    return pd.util.hash_array(np.asarray(values, dtype=object).astype(str).astype(object))


def tokenize_texts(texts: Iterable[str], tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens of each text as ``(lengths, codes, uniques)``: ``lengths[i]`` tokens of text
    ``i``, then all tokens in order as ``uniques[codes]`` (``uniques`` in order of first
    appearance). Exactly :meth:`Tokenizer.token_lists` of the texts."""
    import pandas as pd

    lists = tokenizer.token_lists(texts)
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=object, count=int(lengths.sum()))
    if flat.size == 0:
        return lengths, np.zeros(0, np.int64), np.zeros(0, dtype=object)
    codes, uniques = pd.factorize(flat)
    return lengths, codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=object)


class Vocabulary:
    """Token strings to dense int32 ids in order of first appearance. The only state of
    streaming tokenization that lives across chunks (it grows with distinct tokens)."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}

    def ids(self, words: np.ndarray) -> np.ndarray:
        """The id of each of ``words`` (distinct strings), adding the new ones."""
        index = self._index
        return np.fromiter((index.setdefault(w, len(index)) for w in words.tolist()), dtype=np.int32, count=len(words))

    def words(self) -> np.ndarray:
        """All tokens, indexed by id."""
        return np.array(list(self._index), dtype=object)


@attrs.frozen(kw_only=True)
class TokenChunk:
    """One chunk of tokenized records: ``users`` (the user id string of each record),
    ``lengths`` (tokens per record, int64) and ``tokens`` (all tokens in record order as
    int32 ids of a :class:`Vocabulary`)."""

    users: np.ndarray
    lengths: np.ndarray
    tokens: np.ndarray


@attrs.frozen(kw_only=True)
class LocalPairs:
    """(user, key) rows for :meth:`LocalBackend.bounded_histogram`: two aligned 1-d
    integer arrays (users as dense indices 0..U-1, keys as int64).

    The choice of a heavy user's kept keys is a function of that user's own data and the
    run's secret only (:mod:`privreg.analysis.selection`), so it reads *intrinsic*
    content: ``users[user]``, the user id string (a dense index shifts when another user
    is added), and ``key_fields(keys)``, the :func:`~privreg.analysis.selection.field` of
    each key's content (a token's string, an n-gram's tokens) when keys are indices of
    data-dependent lists; without it the key itself (an integer that means the same thing
    whatever other users hold, e.g. an index into already released sets)."""

    user: np.ndarray
    key: np.ndarray
    users: np.ndarray
    key_fields: Callable[[np.ndarray], Sequence[str]] | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("user", "key"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
                raise PrivregTypeError(f"{name} must be a 1-d integer numpy array; got {type(arr).__name__}")
        if self.user.shape != self.key.shape:
            raise PrivregValueError(f"user and key must be aligned; got {self.user.size} and {self.key.size} rows")
        if not isinstance(self.users, np.ndarray) or self.users.ndim != 1:
            raise PrivregTypeError(
                f"users must be a 1-d numpy array of user id strings; got {type(self.users).__name__}"
            )
        if self.key_fields is not None and not callable(self.key_fields):
            raise PrivregTypeError("key_fields must map an array of keys to their fields")


def token_fields(vocab: np.ndarray, ids: np.ndarray) -> list[str]:
    """The fields of tokens by id: each token's string (``functools.partial`` it with the vocabulary)."""
    return [field(str(w)) for w in vocab[ids].tolist()]


@attrs.frozen(kw_only=True)
class TokenCorpus:
    """A tokenized multi-user corpus, in memory.

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
    def from_arrays(
        cls,
        *,
        tokens: np.ndarray,
        user: np.ndarray,
        record_end: np.ndarray,
        vocab: np.ndarray | None = None,
        users: np.ndarray | None = None,
    ) -> TokenCorpus:
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
        return cls(
            tokens=tokens.astype(np.int32, copy=False),
            vocab=np.asarray(vocab, dtype=object),
            user=np.asarray(user).astype(np.int32, copy=False),
            users=np.asarray(users, dtype=object),
            record_end=np.asarray(record_end).astype(np.int64, copy=False),
        )

    def decode(self, start: np.ndarray, length: int) -> list[str]:
        """The n-grams of ``length`` starting at positions ``start``, as space-joined strings."""
        idx = start[:, None] + np.arange(length)[None, :]
        words = self.vocab[self.tokens[idx]]
        return [" ".join(row) for row in words]
