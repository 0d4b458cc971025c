"""Exact integer ids of every distinct n-gram of a partitioned corpus (the DPSU baselines).

The DPSU baselines of paper 002 (DPSU-all, -even, -single; Section 3.1.2) aggregate all
n-grams, unpruned. Keys must identify n-grams *exactly*: a 64-bit hash would merge two
distinct n-grams whose hashes collide (about n^2 / 2^65 for n distinct n-grams) and
silently add their users' weights together. So ids are built by induction on the length:
the id of a 1-gram is its token id; the id of a k-gram is the first-seen index of the
exact pair ``(id of its (k-1)-prefix, token id of its last token)``, encoded without loss
as the int64 code ``prefix_id * V + last`` (V = vocabulary size). A global table per
length maps codes to ids across partitions; its size is the number of distinct k-grams.

Those ids depend on the order in which n-grams are first seen (so on how the corpus was
partitioned, and on the input's row order); histogram keys use *canonical* ids instead:
for a token the rank of its string, for a k-gram the rank of ``(canonical id of the
prefix, canonical id of the last token)`` among the k-grams, so that a release under a
seed depends on neither. Neither is used to choose which keys a user keeps: that reads
each n-gram's *content*, its tokens (:meth:`RawNgrams.key_fields`, the field the Spark
backend builds from the n-gram's token array), under the selection rule of
:meth:`privreg.plugins.ngrams.backends.LocalBackend.bounded_histogram`. A histogram key is
``canonical id * 64 + (k - 1)`` (lengths up to 64).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privreg.analysis.selection import list_field
from privreg.core.errors import PrivregValueError
from privreg.plugins.ngrams.backends.base import DEFAULT_SCALE
from privreg.plugins.ngrams.backends.local import LocalBackend
from privreg.plugins.ngrams.backends.tokens import LocalPairs
from privreg.plugins.ngrams.levels import lookup
from privreg.plugins.ngrams.partitions import SEPARATOR, Partition, PartitionedCorpus

__all__ = ["RawNgrams", "MAX_LENGTH"]

#: Longest n-gram length a raw key can hold (6 bits).
MAX_LENGTH = 64


class RawNgrams:
    """Per-length exact id tables and, per partition, the id of the k-gram starting at
    every slot (state ``raw<k>``, -1 where no k-gram of one record starts)."""

    def __init__(self, corpus: PartitionedCorpus) -> None:
        self.corpus = corpus
        self.vocab_size = int(corpus.vocab.size)
        self.codes: dict[int, np.ndarray] = {}  # k >= 2: code of each id
        # id -> canonical id; for tokens, the rank of the token string: the vocabulary's ids
        # follow first appearance in the input, so they depend on the input's row order
        rank = np.empty(self.vocab_size, dtype=np.int64)
        rank[np.argsort(np.asarray(corpus.vocab, dtype=object), kind="stable")] = np.arange(self.vocab_size)
        self.canonical: dict[int, np.ndarray] = {1: rank}
        self.built = 1

    def build(self, length: int) -> None:
        """Ids of every k-gram, k <= ``length``, in every partition."""
        if not 1 <= length <= MAX_LENGTH:
            raise PrivregValueError(f"n-gram length must lie in 1..{MAX_LENGTH}; got {length}")
        for k in range(self.built + 1, length + 1):
            table = (np.zeros(0, np.int64), np.zeros(0, np.int64))  # codes sorted, their ids
            codes: list[np.ndarray] = []
            count = 0
            for part in self.corpus.partitions:
                table, new = self._extend(part, k, table, count)
                codes.append(new)
                count += new.size
            self.codes[k] = np.concatenate(codes) if codes else np.zeros(0, np.int64)
            v = np.int64(self.vocab_size)
            prefix, last = self.codes[k] // v, self.codes[k] % v
            # canonical ids: the rank of (canonical prefix id, canonical last token), which
            # depends neither on the order partitions were read nor on the input's row
            # order (the ids above do)
            self.canonical[k] = np.empty(count, dtype=np.int64)
            self.canonical[k][np.argsort(self.canonical[k - 1][prefix] * v + self.canonical[1][last])] = np.arange(
                count
            )
            self.built = k

    def _ids(self, part: Partition, k: int) -> np.ndarray:
        if k == 1:
            return part.load().tokens
        return part.load_state(f"raw{k}", "id")[0]

    def _extend(
        self, part: Partition, k: int, table: tuple[np.ndarray, np.ndarray], count: int
    ) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        tokens = part.load().tokens
        prev = self._ids(part, k - 1)
        pos = np.flatnonzero(prev >= 0)
        pos = pos[tokens[pos + (k - 1)] != SEPARATOR]  # in range: a record ends with a separator
        if self.vocab_size and int(prev.max(initial=0)) >= (1 << 62) // self.vocab_size:
            raise PrivregValueError("too many distinct n-grams for exact int64 codes")  # pragma: no cover
        code = prev[pos].astype(np.int64) * self.vocab_size + tokens[pos + (k - 1)]
        local, uniq = pd.factorize(code)  # hash-based: the partition's distinct codes
        order = np.argsort(uniq)
        ordered = uniq[order]
        found, _ = lookup(table[0], ordered)
        new = ordered[~found]
        if count + new.size >= 1 << 31:
            raise PrivregValueError(
                f"more than 2^31 distinct {k}-grams: too many for the local backend; use backend='spark'"
            )  # pragma: no cover
        at = np.searchsorted(table[0], new)
        table = (np.insert(table[0], at, new), np.insert(table[1], at, np.arange(count, count + new.size)))
        gid = np.empty(uniq.size, dtype=np.int64)
        gid[order] = table[1][np.searchsorted(table[0], ordered)]  # sorted queries: cache-friendly
        ids = np.full(tokens.size, -1, dtype=np.int32)
        ids[pos] = gid[local]
        part.save_state(f"raw{k}", id=ids)
        return table, new

    def partition_histogram(
        self, part: Partition, lengths: tuple[int, ...], backend: LocalBackend, *, max_keys: int, secret: bytes
    ) -> tuple[np.ndarray, np.ndarray]:
        """One partition's bounded histogram of its users' distinct n-grams of the given
        lengths, pooled (keys ``canonical id * 64 + (k - 1)``)."""
        a = part.load()
        users, keys = [], []
        for k in lengths:
            ids = self._ids(part, k)
            pos = np.flatnonzero(ids >= 0)
            users.append(a.user[pos])
            keys.append(self.canonical[k][ids[pos]] * MAX_LENGTH + (k - 1))
        key = np.concatenate(keys)
        local, uniq = pd.factorize(key)  # hash-based dense codes; the content (not codes) orders the keyed choice
        pairs = LocalPairs(
            user=np.concatenate(users),
            key=local.astype(np.int64),
            users=a.users,
            key_fields=lambda codes: self.key_fields(uniq[codes]),
        )
        h = backend.bounded_histogram(pairs, max_keys=max_keys, secret=secret, scale=DEFAULT_SCALE)
        return uniq[h.keys], h.counts

    def key_fields(self, keys: np.ndarray) -> list[str]:
        """The field of each histogram key's content: its tokens, as
        :func:`~privreg.analysis.selection.list_field` (intrinsic to the n-gram, unlike its
        id, which depends on the order partitions were read)."""
        return [list_field(tokens) for tokens in self.tokens(keys)]

    def _internal(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(length, internal id) of histogram keys ``canonical id * 64 + (k - 1)``."""
        keys = np.asarray(keys, dtype=np.int64)
        length, canon = keys % MAX_LENGTH + 1, keys // MAX_LENGTH
        ident = np.empty_like(canon)
        for k in np.unique(length).tolist():
            m = length == k
            inverse = np.empty_like(self.canonical[k])
            inverse[self.canonical[k]] = np.arange(self.canonical[k].size)
            ident[m] = inverse[canon[m]]
        return length, ident

    def labels(self, keys: np.ndarray) -> list[str]:
        """The n-gram strings of histogram keys, in the order of ``keys``."""
        return [" ".join(tokens) for tokens in self.tokens(keys)]

    def tokens(self, keys: np.ndarray) -> list[list[str]]:
        """The tokens of each histogram key's n-gram, in the order of ``keys``."""
        length, ident = self._internal(keys)
        out: list[list[str]] = [[] for _ in range(ident.size)]
        vocab = self.corpus.vocab
        for k in np.unique(length).tolist():
            sel = np.flatnonzero(length == k)
            cur = ident[sel]
            cols = []
            for j in range(k, 1, -1):
                code = self.codes[j][cur]
                cols.append(code % self.vocab_size)
                cur = code // self.vocab_size
            cols.append(cur)
            words = vocab[np.stack(cols[::-1], axis=1)].tolist()
            for i, row in zip(sel.tolist(), words, strict=True):
                out[i] = [str(w) for w in row]
        return out
