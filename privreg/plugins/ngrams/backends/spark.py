"""The Apache Spark backend (PySpark DataFrame API).

Tokenizing runs privreg's own Python tokenizer (:meth:`Tokenizer.token_lists`, the
local backend's too) on the executors over Arrow batches (``mapInPandas``), so both
backends split every text identically; the rest uses Spark's built-in functions -- the
selection rule of :mod:`privreg.analysis.selection` built from ``sha2``
(:mod:`privreg.analysis.spark_selection`: the local backend's tags, so both keep the same
keys of a user above ``max_keys``), window ``row_number``/``count`` to bound each user's
contribution, ``groupBy().agg(sum)`` to aggregate. Only the aggregated
histogram (one row per distinct key) is collected to the driver, where noise is added
with privreg's secure samplers; ``F.rand``/``F.randn`` are never used for privacy (they
are not cryptographically secure).

PySpark is optional (``pip install privreg[spark]``); Java 17 must be on the machine, and
privreg installed where the executors' Python runs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.ngrams.backends.base import (
    DEFAULT_SCALE,
    Backend,
    Histogram,
    Tokenizer,
    check_columns,
    check_path,
    contribution_weights,
    detect_format,
)

__all__ = ["SparkBackend", "require_pyspark"]


def _tokenize_batches(batches: Iterator[Any], *, tokenizer: Tokenizer) -> Iterator[Any]:
    """(user, tokens) of each Arrow batch of (user, text) rows, on an executor."""
    import pandas as pd

    for batch in batches:
        tokens = tokenizer.token_lists(batch["text"].tolist())
        yield pd.DataFrame({"user": batch["user"], "tokens": pd.Series(tokens, index=batch.index, dtype=object)})


def require_pyspark() -> Any:
    """The ``pyspark`` module, or a PrivregValueError saying how to install it."""
    try:
        import pyspark
    except ImportError:
        raise PrivregValueError("backend='spark' needs PySpark: pip install 'privreg[spark]' (and Java 17)") from None
    return pyspark


def console_progress() -> str:
    """``spark.ui.showConsoleProgress``: Spark's redrawn stage bars follow privreg's own
    progress setting, shown only where privreg would draw bars (``PRIVREG_PROGRESS``
    unset or ``auto``, stderr a terminal); ``off`` and ``plain`` silence them."""
    mode = os.environ.get("PRIVREG_PROGRESS") or "auto"
    return "true" if mode == "auto" and sys.stderr.isatty() else "false"


class SparkBackend(Backend):
    """Runs aggregation on Spark. ``spark`` is an existing SparkSession to use (never
    stopped here); otherwise a local session ``master`` (default ``local[2]``) is started
    and stopped by :meth:`close`. ``shuffle_partitions`` sizes shuffles (small for local
    runs)."""

    name: ClassVar[str] = "spark"

    def __init__(
        self, *, spark: Any = None, master: str = "local[2]", shuffle_partitions: int = 4, app_name: str = "privreg"
    ) -> None:
        require_pyspark()
        from pyspark.sql import SparkSession

        self._owned = spark is None
        if spark is None:
            if isinstance(master, str) and master.startswith("local"):
                # the Python workers that tokenize run this interpreter (with privreg),
                # unless PYSPARK_PYTHON says otherwise; read when the SparkContext starts
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            spark = (
                SparkSession.builder.master(master)
                .appName(app_name)
                .config("spark.sql.shuffle.partitions", str(v.check_count("shuffle_partitions", shuffle_partitions)))
                .config("spark.default.parallelism", str(shuffle_partitions))
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", console_progress())
                .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                .config("spark.driver.memory", "2g")
                .getOrCreate()
            )
        elif not isinstance(spark, SparkSession):
            raise PrivregTypeError(f"spark must be a pyspark.sql.SparkSession; got {spark!r}")
        self.spark = spark

    def close(self) -> None:
        if self._owned and self.spark is not None:
            self.spark.stop()
            self.spark = None

    def read_records(
        self, path: str | Path, *, user_column: str = "user_id", text_column: str = "text", format: str | None = None
    ) -> Any:
        from pyspark.sql import functions as F

        p = check_path(path)
        fmt = detect_format(p, format)
        if fmt == "mail":
            raise PrivregValueError(
                f"the spark backend reads CSV, JSONL or Parquet; {str(p)!r} is a mail archive: use --backend local"
            )
        reader = self.spark.read
        if fmt == "csv":
            df = reader.option("header", "true").option("multiLine", "true").option("escape", '"').csv(str(p))
        elif fmt == "jsonl":
            df = reader.json(str(p))
        else:
            df = reader.parquet(str(p))
        check_columns(df.columns, user_column, text_column, p)
        return df.select(
            F.col(user_column).cast("string").alias("user"), F.col(text_column).cast("string").alias("text")
        ).dropna()

    def tokenize(self, records: Any, tokenizer: Tokenizer = Tokenizer()) -> Any:
        """(user, tokens: array<string>) per record: :meth:`Tokenizer.token_lists` run on
        the executors, the very function the local backend runs (not Spark's
        ``regexp_extract_all``/``lower``: Java's regex classes and lower-casing differ
        from Python's on Unicode text)."""
        if not isinstance(tokenizer, Tokenizer):
            raise PrivregTypeError(f"tokenizer must be a privreg.plugins.ngrams.backends.Tokenizer; got {tokenizer!r}")
        task = functools.partial(_tokenize_batches, tokenizer=tokenizer)
        return records.select("user", "text").mapInPandas(task, "user string, tokens array<string>")

    def weight_table(self, max_keys: int, *, weighting: str, scale: int) -> Any:
        """A small DataFrame (t, w) with the exact integer weights W_t (computed on the
        driver, so Spark never evaluates a floating-point square root)."""
        w = contribution_weights(max_keys, weighting=weighting, scale=scale)
        return self.spark.createDataFrame([(t, int(w[t])) for t in range(1, max_keys + 1)], "t long, w long")

    def bounded_histogram(
        self, pairs: Any, *, max_keys: int, weighting: str = "sqrt", secret: bytes, scale: int = DEFAULT_SCALE
    ) -> Histogram:
        """``pairs``: a DataFrame with columns ``user`` (a string) and ``key`` (a long or a
        string), and optionally ``content``, the field of the key's content
        (:func:`privreg.analysis.spark_selection.list_field` of an n-gram's tokens) when the
        key is not its content. Returns the histogram collected to the driver (keys sorted).
        The secret is written into the Spark plan (its UI and logs): privacy does not rest
        on it -- a user's own keys decide only which of theirs are kept -- only the
        uniformity of the choice does, for data fixed before it was drawn."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from privreg.analysis import spark_selection as selection
        from privreg.plugins.ngrams.backends.bounding import CONTEXT

        max_keys = v.check_count("max_keys", max_keys)
        if not {"user", "key"} <= set(pairs.columns):
            raise PrivregValueError(f"pairs must have columns user and key; got {pairs.columns}")
        types = {f.name: f.dataType for f in pairs.schema.fields}
        content = (F.col("content") if "content" in types else selection.field(F.col("key"), types["key"])).alias(
            "content"
        )
        distinct = pairs.select("user", "key", content).distinct()
        user_field = selection.field(F.col("user").cast("string"), T.StringType())
        by_tag = selection.tag(secret, selection.message([user_field, F.col("content")], F.lit(0), CONTEXT))
        by_user = Window.partitionBy("user")
        ranked = (
            distinct.withColumn("pos", F.row_number().over(by_user.orderBy(by_tag)))
            .withColumn("t", F.least(F.count(F.lit(1)).over(by_user), F.lit(max_keys)))
            .where(F.col("pos") <= max_keys)
        )
        weights = F.broadcast(self.weight_table(max_keys, weighting=weighting, scale=scale))
        rows = ranked.join(weights, "t").groupBy("key").agg(F.sum("w").alias("count")).toPandas()
        keys = rows["key"].to_numpy(
            dtype=object
            if rows["key"].dtype == object or str(rows["key"].dtype).startswith(("str", "string"))
            else np.int64
        )
        counts = rows["count"].to_numpy(dtype=np.int64)
        order = np.argsort(keys.astype(str) if keys.dtype == object else keys, kind="stable")
        return Histogram(keys=keys[order], counts=counts[order], scale=scale)
