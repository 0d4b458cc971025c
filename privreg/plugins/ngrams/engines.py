"""Per-backend n-gram aggregation: candidate k-grams, pruned to V_k, per user.

An engine turns the corpus into (user, key) pairs and hands them to its backend's
:meth:`~privreg.plugins.ngrams.backends.Backend.bounded_histogram`; it keeps the trie of released sets
(:class:`~privreg.plugins.ngrams.levels.Level`) it needs for pruning. Keys are the same
integers on every backend (S_1 index for unigrams after release, ``pre * n1 + last`` for
k-grams), so the driver's release code is shared and the two engines agree exactly,
users above Delta_k included (both keep the keys the one selection rule of
:mod:`privreg.analysis.selection` picks, reading each key's content: a token's string,
the integer key, an n-gram's tokens). These keys are exact encodings (``pre < |S_{k-1}|``,
``last < |S_1|``), never hashes: two distinct k-grams can not share a key. The DPSU
baselines' unpruned keys are exact too (:mod:`privreg.plugins.ngrams.raw` locally, the
n-gram's JSON token array on Spark).

* :class:`LocalNgramEngine`: a :class:`~privreg.plugins.ngrams.partitions.PartitionedCorpus`
  (user partitions in memory or on disk); each length is a few vectorised numpy passes
  per partition over the positions whose (k-1)-gram was released, optionally in worker
  processes, and the per-partition tables are summed.
* :class:`SparkNgramEngine`: ``transform``/``slice`` to enumerate k-grams per record,
  broadcast joins with S_{k-1} and S_1 for pruning, all built-in functions.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np

from privreg.core import validation as v
from privreg.core import workers as lifetime
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.ngrams.backends.base import DEFAULT_SCALE, Histogram
from privreg.plugins.ngrams.backends.local import LocalBackend
from privreg.plugins.ngrams.backends.tokens import LocalPairs, TokenCorpus, token_fields
from privreg.plugins.ngrams.levels import Level, check_pruning
from privreg.plugins.ngrams.partitions import SEPARATOR, Partition, PartitionedCorpus
from privreg.plugins.ngrams.raw import RawNgrams

if TYPE_CHECKING:  # pyspark is optional: imported where the Spark engine runs
    from pyspark.sql import DataFrame

__all__ = ["NgramEngine", "LocalNgramEngine", "SparkNgramEngine"]


class NgramEngine(ABC):
    """What the DPNE driver needs from a backend."""

    tokens_total: int = 0

    @abstractmethod
    def unigram_histogram(self, *, max_keys: int, secret: bytes) -> Histogram:
        """Bounded histogram of each user's distinct tokens (keys: token strings, sorted)."""

    @abstractmethod
    def set_unigrams(self, tokens: np.ndarray) -> None:
        """Register S_1 (sorted token strings)."""

    @abstractmethod
    def kgram_histogram(self, k: int, *, pruning: str, max_keys: int, secret: bytes) -> Histogram:
        """Bounded histogram of each user's distinct k-grams in V_k (keys ``pre*n1+last``)."""

    @abstractmethod
    def set_level(self, level: Level) -> None:
        """Register S_k (k >= 2) after its release."""

    @abstractmethod
    def raw_histogram(self, lengths: tuple[int, ...], *, max_keys: int, secret: bytes) -> Histogram:
        """Bounded histogram of every n-gram of the given lengths, unpruned (the DPSU
        baselines). Keys identify n-grams exactly (never a hash that two n-grams could
        share); :meth:`labels` turns them into strings."""

    @abstractmethod
    def labels(self, keys: np.ndarray) -> list[str]:
        """The n-gram strings of raw-histogram keys (from the last raw_histogram call)."""

    def close(self) -> None:
        """Free cached data."""


class LocalNgramEngine(NgramEngine):
    """Vectorised numpy engine on a :class:`~privreg.plugins.ngrams.partitions.PartitionedCorpus`
    (a :class:`TokenCorpus` is wrapped as one in-memory partition).

    Each pass works on one partition at a time (``workers`` > 1: that many processes, for
    partitions on disk) and merges the per-partition tables by exact integer sums; every
    user lies in exactly one partition, so bounding per partition is bounding per user.
    For length k >= 2 only the positions whose (k-1)-gram was released are extended: the
    survivors of the previous length, looked up in S_{k-1}, with the last token in S_1 and
    (both-side pruning) the suffix (k-1)-gram a survivor too."""

    def __init__(
        self, corpus: TokenCorpus | PartitionedCorpus, backend: LocalBackend | None = None, *, workers: int = 1
    ) -> None:
        if isinstance(corpus, TokenCorpus):
            corpus = PartitionedCorpus.from_corpus(corpus)
        if not isinstance(corpus, PartitionedCorpus):
            raise PrivregTypeError(f"corpus must be a TokenCorpus or PartitionedCorpus; got {type(corpus).__name__}")
        self.corpus = corpus
        self.backend = backend or LocalBackend()
        self.workers = v.check_count("workers", workers)
        self.tokens_total = corpus.tokens_total
        self._s1_of_vocab: np.ndarray | None = None  # S_1 index of each token id (-1: not released), -1 appended
        self._n1 = 0
        self._k = 1  # length of the last kgram_histogram (its candidates are in each partition's state)
        self._prev_keys: np.ndarray | None = None  # keys of S_{k-1} once set_level registered them
        self._raw: RawNgrams | None = None
        self._pool: Any = None

    def _map(self, fn: Any, *args: Any) -> list[Any]:
        """``fn(partition, *args)`` for every partition, in partition order (in worker
        processes when ``workers`` > 1 and the partitions are on disk)."""
        parts = self.corpus.partitions
        if self.workers == 1 or len(parts) < 2 or not self.corpus.on_disk:
            return [fn(p, *args) for p in parts]
        if self._pool is None:  # one pool for all passes: warm worker heaps, no fork per pass
            import multiprocessing as mp
            import weakref

            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            init, initargs = lifetime.initializer()  # workers die with this process, even on SIGKILL
            self._pool = ctx.Pool(min(self.workers, len(parts)), initializer=init, initargs=initargs)
            weakref.finalize(self, self._pool.terminate)
        return self._pool.starmap(fn, [(p, *args) for p in parts], chunksize=1)

    def unigram_histogram(self, *, max_keys: int, secret: bytes) -> Histogram:
        tables = self._map(_unigram_part, self.backend, self.corpus.vocab, max_keys, secret)
        keys, counts = merge_tables(tables)
        words = self.corpus.vocab[keys]
        order = np.argsort(words.astype(str), kind="stable")
        return Histogram(keys=words[order], counts=counts[order], scale=DEFAULT_SCALE)

    def set_unigrams(self, tokens: np.ndarray) -> None:
        import pandas as pd

        ids = pd.Index(self.corpus.vocab.astype(str)).get_indexer(np.asarray(tokens).astype(str))
        if ids.size and ids.min() < 0:
            raise PrivregValueError("S_1 holds tokens that are not in the corpus vocabulary")
        s1 = np.full(self.corpus.vocab.size + 1, -1, dtype=np.int32)  # the last slot maps SEPARATOR
        s1[ids] = np.arange(ids.size, dtype=np.int32)
        self._s1_of_vocab = s1
        self._n1 = int(ids.size)
        self._k, self._prev_keys = 1, None

    def kgram_histogram(self, k: int, *, pruning: str, max_keys: int, secret: bytes) -> Histogram:
        check_pruning(pruning)
        if self._s1_of_vocab is None:
            raise PrivregValueError("set_unigrams must be called before kgram_histogram")
        if k != self._k + 1 or (k > 2 and self._prev_keys is None):
            raise PrivregValueError(f"kgram_histogram({k}) needs S_{k - 1} registered (set_level) first")
        tables = self._map(
            _kgram_part, self.backend, k, self._s1_of_vocab, self._prev_keys, self._n1, pruning, max_keys, secret
        )
        self._k, self._prev_keys = k, None
        keys, counts = merge_tables(tables)
        return Histogram(keys=keys, counts=counts, scale=DEFAULT_SCALE)

    def set_level(self, level: Level) -> None:
        if level.k != self._k or self._k < 2:
            raise PrivregValueError("kgram_histogram must be called before set_level")
        self._prev_keys = np.asarray(level.keys, dtype=np.int64)

    def raw_histogram(self, lengths: tuple[int, ...], *, max_keys: int, secret: bytes) -> Histogram:
        if self._raw is None:
            self._raw = RawNgrams(self.corpus)
        self._raw.build(max(lengths))
        tables = [
            self._raw.partition_histogram(p, lengths, self.backend, max_keys=max_keys, secret=secret)
            for p in self.corpus.partitions
        ]
        keys, counts = merge_tables(tables)
        return Histogram(keys=keys, counts=counts, scale=DEFAULT_SCALE)

    def labels(self, keys: np.ndarray) -> list[str]:
        if self._raw is None:
            raise PrivregValueError("raw_histogram must be called before labels")
        return self._raw.labels(keys)

    def close(self) -> None:
        self._raw = None
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None


def merge_tables(tables: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-partition (keys, counts) tables summed per key (exact int64), keys sorted."""
    tables = [t for t in tables if t[0].size]
    if not tables:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = np.concatenate([t[0] for t in tables])
    counts = np.concatenate([t[1] for t in tables])
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[first], np.add.reduceat(counts, first)


def _unigram_part(
    part: Partition, backend: LocalBackend, vocab: np.ndarray, max_keys: int, secret: bytes
) -> tuple[np.ndarray, np.ndarray]:
    """Bounded histogram of each user's distinct tokens in one partition (keys: token ids;
    the keyed choice reads the tokens' strings, intrinsic to each token)."""
    a = part.load()
    m = a.tokens != SEPARATOR
    pairs = LocalPairs(
        user=a.user[m], key=a.tokens[m], users=a.users, key_fields=functools.partial(token_fields, vocab)
    )
    h = backend.bounded_histogram(pairs, max_keys=max_keys, secret=secret, scale=DEFAULT_SCALE)
    return h.keys, h.counts


def _kgram_part(
    part: Partition,
    backend: LocalBackend,
    k: int,
    s1_of_vocab: np.ndarray,
    prev_keys: np.ndarray | None,
    n1: int,
    pruning: str,
    max_keys: int,
    secret: bytes,
) -> tuple[np.ndarray, np.ndarray]:
    """One partition's bounded histogram of k-grams in V_k (keys ``pre * n1 + last``).
    Saves the candidates (start slot, key) as the partition's state ``cand``: the next
    length looks them up in S_k to find its survivors."""
    a = part.load()
    if k == 2:
        s1 = s1_of_vocab[a.tokens]  # SEPARATOR (-1) indexes the appended -1
        pos = np.flatnonzero(s1 >= 0)
        gid = s1[pos]
    else:
        import pandas as pd

        if prev_keys is None:
            raise PrivregValueError(f"kgram_histogram({k}) needs S_{k - 1} registered (set_level) first")
        cpos, ckey = part.load_state("cand", "pos", "key")
        j = pd.Index(prev_keys).get_indexer(ckey)  # hash lookup in S_{k-1}: -1 if not released
        hit = j >= 0
        pos, gid = cpos[hit], j[hit]
    # a survivor's (k-1)-gram ends before the record's separator, so pos + k - 1 is in range
    z = s1_of_vocab[a.tokens[pos + (k - 1)]]
    ok = z >= 0
    if pruning == "both" and k > 2:  # the suffix (k-1)-gram, starting at pos + 1, must be in S_{k-1}
        alive = np.zeros(a.tokens.size + 1, dtype=bool)
        alive[pos] = True
        ok &= alive[pos + 1]
    pos = pos[ok]
    key = gid[ok].astype(np.int64) * n1 + z[ok]
    part.save_state("cand", pos=pos.astype(np.int32 if a.tokens.size < 1 << 31 else np.int64), key=key)
    # keys index released sets (public), so they are intrinsic given the earlier releases
    pairs = LocalPairs(user=a.user[pos], key=key, users=a.users)
    h = backend.bounded_histogram(pairs, max_keys=max_keys, secret=secret, scale=DEFAULT_SCALE)
    return h.keys, h.counts


class SparkNgramEngine(NgramEngine):
    """Spark engine on a DataFrame of (user, tokens: array<string>) records."""

    def __init__(self, backend: Any, records: Any) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        self.backend = backend
        self.spark = backend.spark
        self.tokens = records.select("user", "tokens").persist(StorageLevel.MEMORY_AND_DISK)
        self.tokens_total = int(self.tokens.agg(F.coalesce(F.sum(F.size("tokens")), F.lit(0))).first()[0])
        self._s1: DataFrame | None = None  # (tok, idx)
        self._prev: DataFrame | None = None  # (gram array<string>, gid) of S_{k-1}
        self._cand: DataFrame | None = None
        self._n1 = 0
        self._raw: bool | None = None  # True once raw_histogram ran

    def _grams(self, k: int) -> Any:
        from pyspark.sql import functions as F

        t = self.tokens.where(F.size("tokens") >= k)
        windows = F.transform(F.sequence(F.lit(0), F.size("tokens") - k), lambda i: F.slice("tokens", i + 1, k))
        return t.select("user", F.explode(windows).alias("g"))

    def unigram_histogram(self, *, max_keys: int, secret: bytes) -> Histogram:
        from pyspark.sql import functions as F

        pairs = self.tokens.select("user", F.explode("tokens").alias("key"))
        return self.backend.bounded_histogram(pairs, max_keys=max_keys, secret=secret, scale=DEFAULT_SCALE)

    def set_unigrams(self, tokens: np.ndarray) -> None:
        import pandas as pd
        from pyspark.sql import functions as F

        self._n1 = int(tokens.size)
        pdf = pd.DataFrame({"tok": tokens.astype(str).tolist(), "idx": np.arange(tokens.size, dtype=np.int64)})
        s1 = (
            self.spark.createDataFrame(pdf, "tok string, idx long")
            if tokens.size
            else self.spark.createDataFrame([], "tok string, idx long")
        )
        self._s1 = s1.cache()
        self._prev = self._s1.select(F.array("tok").alias("gram"), F.col("idx").alias("gid")).cache()

    def _registered(self) -> tuple[DataFrame, DataFrame]:
        """(S_1, S_{k-1}) as set_unigrams and set_level registered them."""
        if self._s1 is None or self._prev is None:
            raise PrivregValueError("set_unigrams must be called before kgram_histogram and set_level")
        return self._s1, self._prev

    def kgram_histogram(self, k: int, *, pruning: str, max_keys: int, secret: bytes) -> Histogram:
        from pyspark.sql import functions as F

        check_pruning(pruning)
        s1, prev_level = self._registered()
        prev = F.broadcast(prev_level)
        g = self._grams(k).select(
            "user",
            "g",
            F.slice("g", 1, k - 1).alias("prefix"),
            F.slice("g", 2, k - 1).alias("suffix"),
            F.element_at("g", k).alias("last"),
        )
        g = g.join(prev.withColumnRenamed("gram", "prefix"), "prefix")
        g = g.join(F.broadcast(s1).withColumnRenamed("tok", "last"), "last")
        if pruning == "both":
            g = g.join(prev.select(F.col("gram").alias("suffix")), "suffix", "left_semi")
        cand = g.select("user", "g", (F.col("gid") * F.lit(self._n1) + F.col("idx")).alias("key"))
        self._cand = cand
        return self.backend.bounded_histogram(
            cand.select("user", "key"), max_keys=max_keys, secret=secret, scale=DEFAULT_SCALE
        )

    def set_level(self, level: Level) -> None:
        import pandas as pd
        from pyspark.sql import functions as F

        s1, old = self._registered()
        pdf = pd.DataFrame({"key": level.keys.astype(np.int64), "gid": np.arange(level.size, dtype=np.int64)})
        released = (
            self.spark.createDataFrame(pdf, "key long, gid long")
            if level.size
            else self.spark.createDataFrame([], "key long, gid long")
        )
        n1 = F.lit(self._n1)
        parts = released.withColumn("pre", F.expr(f"key div {self._n1}")).withColumn(  # exact long division
            "li", F.pmod(F.col("key"), n1)
        )
        prev = old.select(F.col("gram").alias("prefix"), F.col("gid").alias("pre"))
        nxt = (
            parts.join(F.broadcast(prev), "pre")
            .join(F.broadcast(s1).select(F.col("idx").alias("li"), "tok"), "li")
            .select(F.concat("prefix", F.array("tok")).alias("gram"), "gid")
        )
        self._prev = nxt.cache()
        self._prev.count()
        old.unpersist()
        self._cand = None

    def raw_histogram(self, lengths: tuple[int, ...], *, max_keys: int, secret: bytes) -> Histogram:
        from pyspark.sql import functions as F

        frames = [self._grams(k).select("user", "g") for k in lengths]
        allg = frames[0]
        for f in frames[1:]:
            allg = allg.unionByName(f)
        # the key is the n-gram itself, as a JSON array of its tokens: exact (a 64-bit hash
        # such as xxhash64 could merge two distinct n-grams)
        self._raw = True
        from privreg.analysis.spark_selection import list_field

        pairs = allg.select("user", F.to_json("g").alias("key"), list_field(F.col("g")).alias("content"))
        return self.backend.bounded_histogram(pairs, max_keys=max_keys, secret=secret, scale=DEFAULT_SCALE)

    def labels(self, keys: np.ndarray) -> list[str]:
        import json

        if self._raw is None:
            raise PrivregValueError("raw_histogram must be called before labels")
        return [" ".join(json.loads(str(k))) for k in keys.tolist()]

    def close(self) -> None:
        self.tokens.unpersist()
