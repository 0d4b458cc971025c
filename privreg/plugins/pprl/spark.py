"""Blocking, candidate generation and Paillier chunks of the recommended profile on Apache Spark.

Two interchangeable blocking backends with the methods ``band_tokens`` and
``candidate_pairs`` (:class:`BlockingBackend`), so that the protocol can take
``blocking_backend=`` either:

* :class:`LocalBlocking` (the default): :func:`bands.band_tokens` and
  :func:`bands.candidate_pairs` in this process;
* :class:`SparkBlocking`: the same computations on a Spark session, with **identical**
  results (the same arrays, in the same order). Band tokens: the bit matrix is cut into
  contiguous row ranges, shipped packed (``np.packbits``: ``L / 8`` bytes per record) to
  one Spark task each, and every task calls :func:`bands.band_tokens` on its rows (the
  keyed band positions do not depend on the rows, so every range uses the same ones).
  Candidate pairs: the two token matrices become ``(record, band, token)`` tables on the
  executors, joined on ``(band, token)`` after dropping the blocks whose product of sizes
  exceeds ``max_block_pairs`` (counted: the ``skipped`` result); the pairs sharing at
  least ``min_shared`` bands are collected and sorted at the driver.

:func:`spark_clks` encodes a party's records held in a Spark DataFrame (millions of rows)
with :func:`clk.encode_clks`, one pandas batch at a time on the executors, and collects
the filters packed; :func:`spark_encode_records` also collects the record ids.

:class:`SparkChunkExecutor` runs the Paillier chunks of
:func:`privreg.crypto.parallel.run_chunks` as Spark tasks (``with
parallel.use_executor(SparkChunkExecutor(spark)): ...``).

**Where the secret goes.** Keyed band tokens and CLKs need the data parties' shared
``secret`` inside every executor (it travels in the serialised task): run
:meth:`SparkBlocking.band_tokens` and :func:`spark_clks` only on a data party's **own**
cluster. The linkage unit's :meth:`SparkBlocking.candidate_pairs` needs no secret: it
sees the tokens only. The key holder's Paillier chunks carry its **private key**
(:mod:`privreg.crypto.parallel`): a :class:`SparkChunkExecutor` running them must be the
key holder's own cluster.

Driver memory: the token matrices and the collected pairs live at the driver: ``8 J`` bytes
per record for the tokens (about 1 KB with ``J = 121``: 1 GB per million records, so
raise ``spark.driver.memory`` and ``spark.driver.maxResultSize`` accordingly on a session
you pass in), 16 bytes per candidate pair, and for :func:`spark_clks` ``L / 8`` bytes per
record on the wire (128 bytes at ``L = 1024``) and ``L`` bytes per record once unpacked
to booleans at the driver (1 KB; 1 GB per million records).

PySpark is optional (``pip install privreg[spark]``); Java 17 must be on the machine.
Sessions and executors are never pickled: a pickled :class:`SparkBlocking` or
:class:`SparkChunkExecutor` leaves its session behind, and the copy refuses to run.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.crypto import parallel
from privreg.plugins.pprl import bands
from privreg.plugins.pprl.bands import BandConfig
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, ClkSchema, encode_clks
from privreg.plugins.pprl.kdf import check_secret
from privreg.plugins.pprl.records import EncodedRecords

__all__ = [
    "BlockingBackend",
    "LocalBlocking",
    "SparkBlocking",
    "SparkChunkExecutor",
    "require_pyspark",
    "spark_clks",
    "spark_encode_records",
]

#: Records per Spark task for band tokens (a task gets ``L / 8`` bytes in and ``8 J`` out per record).
ROWS_PER_TASK = 25_000
#: Token matrix rows per row of the intermediate table that ships tokens to the executors.
_ROWS_PER_SHIPMENT = 4_096


def require_pyspark() -> Any:
    """The ``pyspark`` module, or a PrivregValueError saying how to install it."""
    try:
        import pyspark
    except ImportError:
        raise PrivregValueError(
            "the Spark blocking backend needs PySpark: pip install 'privreg[spark]' (and Java 17), "
            "or use blocking_backend=LocalBlocking()"
        ) from None
    return pyspark


@runtime_checkable
class BlockingBackend(Protocol):
    """What the protocol needs of a blocking backend (:class:`LocalBlocking`,
    :class:`SparkBlocking`): the results of :func:`bands.band_tokens` (tokens only) and
    :func:`bands.candidate_pairs`."""

    def band_tokens(self, filters: np.ndarray, *, config: BandConfig, secret: bytes) -> np.ndarray: ...

    def candidate_pairs(
        self, a: np.ndarray, b: np.ndarray, *, max_block_pairs: int, min_shared: int
    ) -> tuple[np.ndarray, int]: ...


def _check_limits(max_block_pairs: int, min_shared: int) -> tuple[int, int]:
    return (
        v.check_int("max_block_pairs", max_block_pairs, minimum=1),
        v.check_int("min_shared", min_shared, minimum=1),
    )


def _check_tokens(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise PrivregValueError(
            f"token matrices a and b must be (records, bands) with equal bands; got {a.shape}, {b.shape}: "
            "pass the first result of band_tokens for both parties, made with the same BandConfig"
        )
    return a, b


def _check_filters(filters: Any) -> np.ndarray:
    f = np.asarray(filters)
    if f.ndim != 2 or f.dtype != bool:
        raise PrivregTypeError(
            f"filters must be a 2-d boolean array (records, L); got {f.dtype} {f.shape}: pass the CLKs "
            "(EncodedRecords.match_filters)"
        )
    return f


class LocalBlocking:
    """Blocking in this process: :func:`bands.band_tokens` and :func:`bands.candidate_pairs`."""

    name = "local"

    def band_tokens(self, filters: np.ndarray, *, config: BandConfig, secret: bytes) -> np.ndarray:
        """(m, J) uint64 keyed band tokens of the CLKs ``filters`` (m, L)."""
        tokens, _ = bands.band_tokens(_check_filters(filters), config=config, secret=secret)
        return tokens

    def candidate_pairs(
        self, a: np.ndarray, b: np.ndarray, *, max_block_pairs: int, min_shared: int
    ) -> tuple[np.ndarray, int]:
        """``(pairs, skipped)`` of :func:`bands.candidate_pairs`."""
        max_block_pairs, min_shared = _check_limits(max_block_pairs, min_shared)
        a, b = _check_tokens(a, b)
        return bands.candidate_pairs(a, b, max_block_pairs=max_block_pairs, min_shared=min_shared)

    def close(self) -> None:
        """Nothing to release (the same call as :meth:`SparkBlocking.close`)."""

    def __enter__(self) -> LocalBlocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "LocalBlocking()"


class _SparkHolder:
    """A Spark session used from the driver only: never pickled (module docstring)."""

    def __init__(
        self,
        *,
        spark: Any,
        master: str,
        shuffle_partitions: int,
        app_name: str,
        driver_memory: str,
    ) -> None:
        require_pyspark()
        from pyspark.sql import SparkSession

        if spark is None:
            # a session already active in this process is shared, never stopped here
            spark = SparkSession.getActiveSession()
        self._owned = spark is None
        if spark is None:
            if not isinstance(master, str) or not master:
                raise PrivregValueError(f"master must name a Spark master such as 'local[2]' or 'yarn'; got {master!r}")
            partitions = v.check_int("shuffle_partitions", shuffle_partitions, minimum=1)
            if master.startswith("local"):
                # the Python workers run on this machine: this interpreter (with privreg and
                # its dependencies), unless PYSPARK_PYTHON says otherwise; read when the
                # SparkContext starts
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            spark = (
                SparkSession.builder.master(master)
                .appName(app_name)
                .config("spark.sql.shuffle.partitions", str(partitions))
                .config("spark.default.parallelism", str(partitions))
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                .config("spark.driver.memory", driver_memory)
                # the token matrices are collected whole (8 J bytes per record): no cap but memory
                .config("spark.driver.maxResultSize", "0")
                .getOrCreate()
            )
        elif not isinstance(spark, SparkSession):
            raise PrivregTypeError(
                f"spark must be a pyspark.sql.SparkSession; got {type(spark).__name__}: pass an active session "
                "or leave spark=None to start a local one (master=)"
            )
        self._spark: Any = spark

    @property
    def spark(self) -> Any:
        """The SparkSession (a PrivregValueError after :meth:`close` or unpickling)."""
        if self._spark is None:
            raise PrivregValueError(
                f"this {type(self).__name__} has no Spark session: it was closed, or unpickled away from the "
                f"driver that made it (sessions are never pickled); make a new {type(self).__name__}(spark=...) "
                "on the driver"
            )
        return self._spark

    def close(self) -> None:
        """Stop the session if this object started it (a session passed in is left running)."""
        if self._owned and self._spark is not None:
            self._spark.stop()
        self._spark = None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_spark"] = None
        state["_owned"] = False
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class SparkBlocking(_SparkHolder):
    """:class:`LocalBlocking`'s results computed on Spark (module docstring).

    ``spark``: an existing SparkSession (never stopped here; with ``spark=None`` the
    session already active in this process, if any); otherwise a session on ``master``
    (default ``local[2]``) is started, with ``shuffle_partitions`` shuffle
    partitions (small for local runs, a few per executor core on a cluster) and
    ``driver_memory`` (local mode: the driver holds the token matrices), and stopped by
    :meth:`close`. ``rows_per_task``: records per Spark task when computing tokens.

    :meth:`band_tokens` ships the data parties' **secret** to the executors inside every
    task: run it on a data party's own cluster only. :meth:`candidate_pairs` needs no
    secret (the linkage unit's cluster)."""

    name = "spark"

    def __init__(
        self,
        *,
        spark: Any = None,
        master: str = "local[2]",
        shuffle_partitions: int = 4,
        rows_per_task: int = ROWS_PER_TASK,
        app_name: str = "privreg-pprl",
        driver_memory: str = "4g",
    ) -> None:
        self.rows_per_task = v.check_int("rows_per_task", rows_per_task, minimum=1)
        super().__init__(
            spark=spark,
            master=master,
            shuffle_partitions=shuffle_partitions,
            app_name=app_name,
            driver_memory=driver_memory,
        )

    def __repr__(self) -> str:
        state = "closed" if self._spark is None else self._spark.sparkContext.master
        return f"SparkBlocking({state})"

    def _tasks(self, m: int) -> int:
        return max(1, min(m, max(self.spark.sparkContext.defaultParallelism, math.ceil(m / self.rows_per_task))))

    def band_tokens(self, filters: np.ndarray, *, config: BandConfig, secret: bytes) -> np.ndarray:
        """(m, J) uint64 keyed band tokens of the CLKs ``filters`` (m, L), equal to
        ``bands.band_tokens(filters, config=config, secret=secret)[0]``.

        Each Spark task gets a contiguous range of rows, packed, and the **secret** (the
        tokens are keyed): run this on a data party's own cluster only."""
        f = _check_filters(filters)
        if not isinstance(config, BandConfig):
            raise PrivregTypeError(f"config must be a BandConfig; got {type(config).__name__}: see recommended_bands")
        key = check_secret(secret)
        m, L = f.shape
        # the positions are computed here too, so bad arguments fail on the driver
        bands.band_positions(config, filter_length=L, secret=key)
        if m == 0:
            return np.zeros((0, config.bands), dtype=np.uint64)
        packed = np.packbits(f, axis=1)
        bounds = _row_ranges(m, self._tasks(m))
        slices = [(start, end - start, packed[start:end].tobytes()) for start, end in bounds]
        task = functools.partial(_tokens_of_slice, filter_length=L, config=config, secret=key)
        sc = self.spark.sparkContext
        results = sc.parallelize(slices, len(slices)).map(task).collect()
        results.sort(key=lambda r: r[0])
        tokens = np.concatenate(
            [np.frombuffer(data, dtype="<u8").reshape(rows, config.bands) for _, rows, data in results]
        )
        if tokens.shape[0] != m:
            raise PrivregValueError(f"Spark returned tokens for {tokens.shape[0]} of {m} records; rerun the job")
        return tokens.astype(np.uint64)

    def _token_frame(self, tokens: np.ndarray, side: str) -> Any:
        """A DataFrame ``(record_<side>, band, token)`` of an (m, J) token matrix, one row
        per record and band (tokens as signed 64-bit: Spark has no unsigned longs, and
        equality is all the join needs), built on the executors."""
        m, J = tokens.shape
        signed = np.ascontiguousarray(tokens).view(np.int64)
        shipments = [
            (start, end - start, signed[start:end].tobytes())
            for start, end in _row_ranges(m, math.ceil(m / _ROWS_PER_SHIPMENT))
        ]
        rdd = self.spark.sparkContext.parallelize(shipments, self._tasks(m) if len(shipments) > 1 else 1)
        raw = self.spark.createDataFrame(rdd, "start long, rows long, data binary")
        schema = f"record_{side} long, band int, token long"
        return raw.mapInPandas(functools.partial(_explode_tokens, width=J, side=side), schema)

    def candidate_pairs(
        self, a: np.ndarray, b: np.ndarray, *, max_block_pairs: int, min_shared: int
    ) -> tuple[np.ndarray, int]:
        """``(pairs, skipped)`` equal to ``bands.candidate_pairs(a, b, ...)``: a Spark
        join of the two parties' ``(band, token)`` tables, without the blocks of more
        than ``max_block_pairs`` pairs (their number is ``skipped``), keeping the pairs
        that share at least ``min_shared`` bands; collected and sorted at the driver."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        max_block_pairs, min_shared = _check_limits(max_block_pairs, min_shared)
        a, b = _check_tokens(a, b)
        if a.shape[0] == 0 or b.shape[0] == 0:
            return np.zeros((0, 2), dtype=np.int64), 0
        fa = self._token_frame(a, "a").persist(StorageLevel.MEMORY_AND_DISK)
        fb = self._token_frame(b, "b").persist(StorageLevel.MEMORY_AND_DISK)
        try:
            keys = ["band", "token"]
            na = fa.groupBy(*keys).agg(F.count(F.lit(1)).alias("na"))
            nb = fb.groupBy(*keys).agg(F.count(F.lit(1)).alias("nb"))
            big_rows = (
                na.join(nb, keys).where(F.col("na") * F.col("nb") > F.lit(max_block_pairs)).select(*keys).collect()
            )
            skipped = len(big_rows)
            if skipped:
                big = F.broadcast(self.spark.createDataFrame(big_rows, "band int, token long"))
                fa_kept = fa.join(big, keys, "left_anti")
                fb_kept = fb.join(big, keys, "left_anti")
            else:
                fa_kept, fb_kept = fa, fb
            shared = fa_kept.join(fb_kept, keys).groupBy("record_a", "record_b").agg(F.count(F.lit(1)).alias("shared"))
            rows = shared.where(F.col("shared") >= F.lit(min_shared)).select("record_a", "record_b").toPandas()
        finally:
            fa.unpersist()
            fb.unpersist()
        ra = rows["record_a"].to_numpy(np.int64)
        rb = rows["record_b"].to_numpy(np.int64)
        order = np.lexsort((rb, ra))
        return np.stack([ra[order], rb[order]], axis=1).reshape(-1, 2), skipped


class SparkChunkExecutor(_SparkHolder, parallel.ChunkExecutor):
    """Runs :func:`privreg.crypto.parallel.run_chunks` on Spark: one task per chunk,
    results in chunk order (``sc.parallelize(chunks, len(chunks)).map(fn(*chunk))``).

    ``parallelism``: chunks per large batch (default: the session's
    ``defaultParallelism``, its executor cores; a small multiple of it evens out slow
    tasks). The executors must import privreg (and gmpy2): on a cluster, ship it with
    ``--py-files``/``--archives`` or install it on every node.

    What the chunks carry (:mod:`privreg.crypto.parallel`): a data party's chunks hold
    ciphertexts, public keys and the party's own values and random exponents; the **key
    holder's** hold its **PRIVATE key factors** p and q. **Only the key holder's own
    cluster may run the key holder's chunks** -- never a shared cluster or another
    party's: every executor, its serialised tasks and spill files see the private key."""

    def __init__(
        self,
        spark: Any = None,
        *,
        parallelism: int | None = None,
        master: str = "local[2]",
        app_name: str = "privreg-chunks",
        driver_memory: str = "4g",
    ) -> None:
        self._parallelism = None if parallelism is None else v.check_int("parallelism", parallelism, minimum=1)
        super().__init__(
            spark=spark, master=master, shuffle_partitions=4, app_name=app_name, driver_memory=driver_memory
        )

    @property
    def parallelism(self) -> int:
        if self._parallelism is not None:
            return self._parallelism
        return max(1, int(self.spark.sparkContext.defaultParallelism))

    def map_chunks(self, fn: Callable[..., list[Any]], chunks: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
        if not callable(fn):
            raise PrivregTypeError(f"fn must be a module-level function; got {type(fn).__name__}")
        items = [tuple(c) for c in chunks]
        if not items:
            return []
        return list(self.spark.sparkContext.parallelize(items, len(items)).map(functools.partial(_apply, fn)).collect())

    def __repr__(self) -> str:
        state = "closed" if self._spark is None else self._spark.sparkContext.master
        return f"SparkChunkExecutor({state})"


def _apply(fn: Callable[..., list[Any]], chunk: tuple[Any, ...]) -> list[Any]:
    return list(fn(*chunk))


def _row_ranges(m: int, k: int) -> list[tuple[int, int]]:
    """``k`` contiguous near-equal ``(start, end)`` ranges of ``range(m)`` (none empty)."""
    k = max(1, min(k, m))
    q, r = divmod(m, k)
    out, start = [], 0
    for i in range(k):
        end = start + q + (1 if i < r else 0)
        out.append((start, end))
        start = end
    return out


def _tokens_of_slice(
    item: tuple[int, int, bytes], *, filter_length: int, config: BandConfig, secret: bytes
) -> tuple[int, int, bytes]:
    """Executor side of :meth:`SparkBlocking.band_tokens`: one row range's tokens."""
    start, rows, data = item
    packed = np.frombuffer(data, dtype=np.uint8).reshape(rows, -1)
    filters = np.unpackbits(packed, axis=1, count=filter_length).astype(bool)
    tokens, _ = bands.band_tokens(filters, config=config, secret=secret)
    return start, rows, np.ascontiguousarray(tokens, dtype="<u8").tobytes()


def _explode_tokens(batches: Iterator[pd.DataFrame], *, width: int, side: str) -> Iterator[pd.DataFrame]:
    """Executor side of the token tables: ``(record, band, token)`` rows of each shipment."""
    for batch in batches:
        for start, rows, data in zip(batch["start"], batch["rows"], batch["data"]):
            tokens = np.frombuffer(data, dtype=np.int64).reshape(int(rows), width)
            yield pd.DataFrame(
                {
                    f"record_{side}": np.repeat(np.arange(int(start), int(start) + int(rows), dtype=np.int64), width),
                    "band": np.tile(np.arange(width, dtype=np.int32), int(rows)),
                    "token": tokens.reshape(-1),
                }
            )


def _encode_batches(
    batches: Iterator[pd.DataFrame], *, schema: ClkSchema, secret: bytes, party: str, extra: Sequence[str]
) -> Iterator[pd.DataFrame]:
    """Executor side of :func:`spark_clks`: each pandas batch's CLKs, packed, tagged with
    the partition and the batch's place in it (the driver restores the row order)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    for seq, batch in enumerate(batches):
        frame = batch.reset_index(drop=True)
        rec = encode_clks(frame[list(schema.columns)], schema=schema, secret=secret, party=party)
        packed = np.packbits(rec.match_filters, axis=1)
        out = {
            "part": [part],
            "seq": [seq],
            "rows": [len(frame)],
            "data": [packed.tobytes()],
        }
        for i, column in enumerate(extra):
            out[f"extra{i}"] = [[None if pd.isna(x) else str(x) for x in frame[column].tolist()]]
        yield pd.DataFrame(out)


def _collect_clks(
    sdf: Any, *, schema: ClkSchema, secret: bytes, party: str, extra: Sequence[str]
) -> tuple[np.ndarray, list[list[str | None]]]:
    require_pyspark()
    from pyspark.sql import DataFrame

    if not isinstance(sdf, DataFrame):
        raise PrivregTypeError(
            f"sdf must be a pyspark.sql.DataFrame; got {type(sdf).__name__}: for a pandas frame use encode_clks"
        )
    if not isinstance(schema, ClkSchema):
        raise PrivregTypeError(f"schema must be a ClkSchema; got {type(schema).__name__}")
    party = v.check_name("party", party)
    key = check_secret(secret)
    needed = list(dict.fromkeys([*schema.columns, *extra]))
    missing = [c for c in needed if c not in sdf.columns]
    if missing:
        raise PrivregValueError(
            f"sdf lacks column(s) {missing}; its columns are {sorted(sdf.columns)}: rename them or pass a schema "
            "(and id/entity columns) that match"
        )
    extra_fields = "".join(f", extra{i} array<string>" for i in range(len(extra)))
    task = functools.partial(_encode_batches, schema=schema, secret=key, party=party, extra=tuple(extra))
    rows = sdf.select(*needed).mapInPandas(task, f"part int, seq long, rows long, data binary{extra_fields}").collect()
    rows.sort(key=lambda r: (r["part"], r["seq"]))
    L = schema.filter_length
    width = (L + 7) // 8
    n = sum(int(r["rows"]) for r in rows)
    packed = np.frombuffer(b"".join(bytes(r["data"]) for r in rows), dtype=np.uint8).reshape(n, width)
    bits = np.unpackbits(packed, axis=1, count=L).astype(bool)
    columns = [[x for r in rows for x in r[f"extra{i}"]] for i in range(len(extra))]
    return bits, columns


def spark_clks(sdf: Any, *, schema: ClkSchema = FEBRL_CLK_SCHEMA, secret: bytes, party: str) -> np.ndarray:
    """(n, L) boolean CLKs of a party's records held in the Spark DataFrame ``sdf`` (the
    schema's columns), equal to ``encode_clks(sdf.toPandas(), ...).match_filters``.

    Row ``i`` is the ``i``-th row of ``sdf`` in partition order (the order of
    ``sdf.collect()``): deterministic for a DataFrame read from files without a shuffle;
    ``sdf.cache()`` it, or use :func:`spark_encode_records` (ids collected in the same
    pass), when it is not. The executors encode one pandas batch at a time and need the
    **secret** (run this on the data party's own cluster); each record crosses to the
    driver packed, ``L / 8`` bytes (128 at ``L = 1024``), and takes ``L`` bytes there once
    unpacked (1 GB per million records at ``L = 1024``)."""
    bits, _ = _collect_clks(sdf, schema=schema, secret=secret, party=party, extra=())
    return bits


def spark_encode_records(
    sdf: Any,
    *,
    schema: ClkSchema = FEBRL_CLK_SCHEMA,
    secret: bytes,
    party: str,
    id_column: str,
    entity_column: str | None = None,
) -> EncodedRecords:
    """:func:`spark_clks` with the record ids (``id_column``, unique) and optionally the
    ground-truth entities (``entity_column``, evaluation only) collected in the same
    pass, so they stay aligned with the filters whatever the DataFrame's order."""
    if not isinstance(id_column, str) or not id_column:
        raise PrivregTypeError(f"id_column must name the column of record ids; got {id_column!r}")
    if entity_column is not None and (not isinstance(entity_column, str) or not entity_column):
        raise PrivregTypeError(f"entity_column must name a column or be None; got {entity_column!r}")
    extra = [id_column] if entity_column is None else [id_column, entity_column]
    bits, columns = _collect_clks(sdf, schema=schema, secret=secret, party=party, extra=extra)
    ids = tuple("" if x is None else x for x in columns[0])
    if len(set(ids)) != len(ids):
        raise PrivregValueError(
            f"record ids in column {id_column!r} must be unique within a party; "
            f"{len(ids) - len(set(ids))} repeat: pass a column of unique ids"
        )
    entities = None if entity_column is None else tuple("" if x is None else x for x in columns[1])
    return EncodedRecords(party=party, ids=ids, block_filters=bits, match_filters=bits, entities=entities)
