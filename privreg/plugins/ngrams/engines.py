"""Per-backend n-gram aggregation: candidate k-grams, pruned to V_k, per user.

An engine turns the corpus into (user, key) pairs and hands them to its backend's
:meth:`~privreg.backends.Backend.bounded_histogram`; it keeps the trie of released sets
(:class:`~privreg.plugins.ngrams.levels.Level`) it needs for pruning. Keys are the same
integers on every backend (S_1 index for unigrams after release, ``pre * n1 + last`` for
k-grams), so the driver's release code is shared and the two engines agree exactly
whenever no user exceeds Delta_k.

* :class:`LocalNgramEngine`: positions of a :class:`~privreg.backends.TokenCorpus`; each
  length is a few vectorised numpy passes over the positions whose (k-1)-gram was released.
* :class:`SparkNgramEngine`: ``transform``/``slice`` to enumerate k-grams per record,
  broadcast joins with S_{k-1} and S_1 for pruning, all built-in functions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from privreg.backends.base import DEFAULT_SCALE, Histogram
from privreg.backends.local import LocalBackend, LocalPairs, TokenCorpus
from privreg.core.errors import PrivregValueError
from privreg.plugins.ngrams.levels import Level, _check_pruning, lookup

__all__ = ["NgramEngine", "LocalNgramEngine", "SparkNgramEngine"]

_H1 = np.uint64(0x9E3779B97F4A7C15)
_H2 = np.uint64(0xC2B2AE3D27D4EB4F)


class NgramEngine(ABC):
    """What the DPNE driver needs from a backend."""

    tokens_total: int = 0

    @abstractmethod
    def unigram_histogram(self, *, max_keys: int, salt: int) -> Histogram:
        """Bounded histogram of each user's distinct tokens (keys: token strings, sorted)."""

    @abstractmethod
    def set_unigrams(self, tokens: np.ndarray) -> None:
        """Register S_1 (sorted token strings)."""

    @abstractmethod
    def kgram_histogram(self, k: int, *, pruning: str, max_keys: int, salt: int) -> Histogram:
        """Bounded histogram of each user's distinct k-grams in V_k (keys ``pre*n1+last``)."""

    @abstractmethod
    def set_level(self, level: Level) -> None:
        """Register S_k (k >= 2) after its release."""

    @abstractmethod
    def raw_histogram(self, lengths: tuple[int, ...], *, max_keys: int, salt: int) -> Histogram:
        """Bounded histogram of every n-gram of the given lengths, unpruned (the DPSU
        baselines); keys are 64-bit hashes of the n-grams, see :meth:`labels`."""

    @abstractmethod
    def labels(self, keys: np.ndarray) -> list[str]:
        """The n-gram strings of raw-histogram keys (from the last raw_histogram call)."""

    def close(self) -> None:
        """Free cached data."""


class LocalNgramEngine(NgramEngine):
    """Vectorised numpy engine on a :class:`TokenCorpus`."""

    def __init__(self, corpus: TokenCorpus, backend: LocalBackend | None = None) -> None:
        if not isinstance(corpus, TokenCorpus):
            raise PrivregValueError(f"corpus must be a TokenCorpus; got {type(corpus).__name__}")
        self.corpus = corpus
        self.backend = backend or LocalBackend()
        self.tokens_total = corpus.size
        self._user_tags = corpus.user_tags  # intrinsic tags for the keyed choice of kept keys
        self._vocab_tags = corpus.vocab_tags
        self._s1_of_vocab: np.ndarray | None = None
        self._pos = np.zeros(0, np.int64)  # positions whose (k-1)-gram is in S_{k-1}
        self._gid = np.zeros(0, np.int64)  # ... and its index there
        self._cand: tuple[np.ndarray, np.ndarray] | None = None
        self._raw: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._n1 = 0

    def unigram_histogram(self, *, max_keys: int, salt: int) -> Histogram:
        c = self.corpus
        pairs = LocalPairs(user=c.user, key=c.tokens, user_tags=self._user_tags, key_tags=self._vocab_tags)
        hist = self.backend.bounded_histogram(pairs, max_keys=max_keys, salt=salt, scale=DEFAULT_SCALE)
        return Histogram(keys=c.vocab[hist.keys], counts=hist.counts, scale=hist.scale)

    def set_unigrams(self, tokens: np.ndarray) -> None:
        c = self.corpus
        self._n1 = int(tokens.size)
        s1 = np.full(c.vocab.size, -1, dtype=np.int64)
        found, j = lookup(c.vocab.astype(str), tokens.astype(str))
        if not found.all():
            raise PrivregValueError("S_1 holds tokens that are not in the corpus vocabulary")
        s1[j] = np.arange(tokens.size)
        self._s1_of_vocab = s1
        g = s1[c.tokens]
        self._pos = np.flatnonzero(g >= 0).astype(np.int64)
        self._gid = g[self._pos]

    def kgram_histogram(self, k: int, *, pruning: str, max_keys: int, salt: int) -> Histogram:
        _check_pruning(pruning)
        if self._s1_of_vocab is None:
            raise PrivregValueError("set_unigrams must be called before kgram_histogram")
        c, pos, gid = self.corpus, self._pos, self._gid
        fits = pos + k <= c.record_end[pos]
        pos, gid = pos[fits], gid[fits]
        z = self._s1_of_vocab[c.tokens[pos + k - 1]]
        ok = z >= 0
        if pruning == "both":  # the suffix (k-1)-gram, starting at pos + 1, must be in S_{k-1}
            ok &= lookup(self._pos, pos + 1)[0]
        pos, key = pos[ok], gid[ok] * self._n1 + z[ok]
        self._cand = (pos, key)
        # keys index released sets (public), so they are intrinsic given the earlier releases
        pairs = LocalPairs(user=c.user[pos].astype(np.int64), key=key, user_tags=self._user_tags)
        return self.backend.bounded_histogram(pairs, max_keys=max_keys, salt=salt, scale=DEFAULT_SCALE)

    def set_level(self, level: Level) -> None:
        if self._cand is None:
            raise PrivregValueError("kgram_histogram must be called before set_level")
        pos, key = self._cand
        hit, j = lookup(level.keys, key)
        self._pos, self._gid = pos[hit], j[hit]
        self._cand = None

    def raw_histogram(self, lengths: tuple[int, ...], *, max_keys: int, salt: int) -> Histogram:
        c = self.corpus
        users, keys, starts, lens = [], [], [], []
        n = c.size
        for k in lengths:
            p = np.flatnonzero(np.arange(n) + k <= c.record_end)
            h = np.full(p.size, np.uint64(k), dtype=np.uint64)
            with np.errstate(over="ignore"):
                for j in range(k):  # hash of the k tokens' string tags: intrinsic to the n-gram
                    h = (h * _H1) ^ (self._vocab_tags[c.tokens[p + j]] + _H2)
                    h ^= h >> np.uint64(29)
            users.append(c.user[p].astype(np.int64))
            keys.append(h.view(np.int64))
            starts.append(p)
            lens.append(np.full(p.size, k, dtype=np.int64))
        key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        length = np.concatenate(lens) if lens else np.zeros(0, np.int64)
        self._raw = (key, start, length)
        pairs = LocalPairs(user=np.concatenate(users) if users else key, key=key, user_tags=self._user_tags)
        return self.backend.bounded_histogram(pairs, max_keys=max_keys, salt=salt, scale=DEFAULT_SCALE)

    def labels(self, keys: np.ndarray) -> list[str]:
        if self._raw is None:
            raise PrivregValueError("raw_histogram must be called before labels")
        key, start, length = self._raw
        at = np.flatnonzero(np.isin(key, keys))
        uniq, first = np.unique(key[at], return_index=True)
        start, length = start[at[first]], length[at[first]]
        j = np.searchsorted(uniq, keys)
        out = []
        for k in np.unique(length[j]).tolist():
            sel = np.flatnonzero(length[j] == k)
            out.extend(zip(sel.tolist(), self.corpus.decode(start[j[sel]], k)))
        return [s for _, s in sorted(out)]


class SparkNgramEngine(NgramEngine):
    """Spark engine on a DataFrame of (user, tokens: array<string>) records."""

    def __init__(self, backend: Any, records: Any) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        self.backend = backend
        self.spark = backend.spark
        self.tokens = records.select("user", "tokens").persist(StorageLevel.MEMORY_AND_DISK)
        self.tokens_total = int(self.tokens.agg(F.coalesce(F.sum(F.size("tokens")), F.lit(0))).first()[0])
        self._s1 = None  # DataFrame (tok, idx)
        self._prev = None  # DataFrame (gram array<string>, gid) of S_{k-1}
        self._cand = None
        self._n1 = 0
        self._raw = None

    def _grams(self, k: int) -> Any:
        from pyspark.sql import functions as F

        t = self.tokens.where(F.size("tokens") >= k)
        windows = F.transform(F.sequence(F.lit(0), F.size("tokens") - k), lambda i: F.slice("tokens", i + 1, k))
        return t.select("user", F.explode(windows).alias("g"))

    def unigram_histogram(self, *, max_keys: int, salt: int) -> Histogram:
        from pyspark.sql import functions as F

        pairs = self.tokens.select("user", F.explode("tokens").alias("key"))
        return self.backend.bounded_histogram(pairs, max_keys=max_keys, salt=salt, scale=DEFAULT_SCALE)

    def set_unigrams(self, tokens: np.ndarray) -> None:
        import pandas as pd
        from pyspark.sql import functions as F

        self._n1 = int(tokens.size)
        pdf = pd.DataFrame({"tok": tokens.astype(str).tolist(), "idx": np.arange(tokens.size, dtype=np.int64)})
        s1 = self.spark.createDataFrame(pdf, "tok string, idx long") if tokens.size else \
            self.spark.createDataFrame([], "tok string, idx long")
        self._s1 = s1.cache()
        self._prev = self._s1.select(F.array("tok").alias("gram"), F.col("idx").alias("gid")).cache()

    def kgram_histogram(self, k: int, *, pruning: str, max_keys: int, salt: int) -> Histogram:
        from pyspark.sql import functions as F

        _check_pruning(pruning)
        prev = F.broadcast(self._prev)
        g = self._grams(k).select("user", "g", F.slice("g", 1, k - 1).alias("prefix"),
                                  F.slice("g", 2, k - 1).alias("suffix"), F.element_at("g", k).alias("last"))
        g = g.join(prev.withColumnRenamed("gram", "prefix"), "prefix")
        g = g.join(F.broadcast(self._s1).withColumnRenamed("tok", "last"), "last")
        if pruning == "both":
            g = g.join(prev.select(F.col("gram").alias("suffix")), "suffix", "left_semi")
        cand = g.select("user", "g", (F.col("gid") * F.lit(self._n1) + F.col("idx")).alias("key"))
        self._cand = cand
        return self.backend.bounded_histogram(cand.select("user", "key"), max_keys=max_keys, salt=salt,
                                              scale=DEFAULT_SCALE)

    def set_level(self, level: Level) -> None:
        import pandas as pd
        from pyspark.sql import functions as F

        pdf = pd.DataFrame({"key": level.keys.astype(np.int64), "gid": np.arange(level.size, dtype=np.int64)})
        released = self.spark.createDataFrame(pdf, "key long, gid long") if level.size else \
            self.spark.createDataFrame([], "key long, gid long")
        n1 = F.lit(self._n1)
        parts = (released.withColumn("pre", F.expr(f"key div {self._n1}"))  # exact long division
                 .withColumn("li", F.pmod(F.col("key"), n1)))
        prev = self._prev.select(F.col("gram").alias("prefix"), F.col("gid").alias("pre"))
        nxt = (parts.join(F.broadcast(prev), "pre")
               .join(F.broadcast(self._s1).select(F.col("idx").alias("li"), "tok"), "li")
               .select(F.concat("prefix", F.array("tok")).alias("gram"), "gid"))
        old = self._prev
        self._prev = nxt.cache()
        self._prev.count()
        old.unpersist()
        self._cand = None

    def raw_histogram(self, lengths: tuple[int, ...], *, max_keys: int, salt: int) -> Histogram:
        from pyspark.sql import functions as F

        frames = [self._grams(k).select("user", "g") for k in lengths]
        allg = frames[0]
        for f in frames[1:]:
            allg = allg.unionByName(f)
        allg = allg.select("user", F.xxhash64("g").alias("key"), "g")
        self._raw = allg
        return self.backend.bounded_histogram(allg.select("user", "key"), max_keys=max_keys, salt=salt,
                                              scale=DEFAULT_SCALE)

    def labels(self, keys: np.ndarray) -> list[str]:
        import pandas as pd
        from pyspark.sql import functions as F

        if self._raw is None:
            raise PrivregValueError("raw_histogram must be called before labels")
        if keys.size == 0:
            return []
        want = self.spark.createDataFrame(pd.DataFrame({"key": keys.astype(np.int64)}), "key long")
        rows = (self._raw.join(F.broadcast(want), "key").groupBy("key")
                .agg(F.min(F.concat_ws(" ", "g")).alias("s")).toPandas())
        lookup = dict(zip(rows["key"].astype(np.int64).tolist(), rows["s"].tolist()))
        return [lookup[int(x)] for x in keys.tolist()]

    def close(self) -> None:
        self.tokens.unpersist()
