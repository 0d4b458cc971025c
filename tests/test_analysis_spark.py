"""privreg.analysis on a Spark DataFrame (local mode, one session for the module): the
same releases, intervals and ledger entries as on the pandas copy under the same seeded
randomness, for every statistic (bounding that drops rows, bounding that drops nothing,
and ONE_ROW_PER_USER); the same refusals; contribution bounding that keeps k rows per
person, chosen uniformly, the same rows as pandas."""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="Spark frames need pyspark (pip install 'privreg[spark]')")

from scipy import stats

from privreg.analysis import ONE_ROW_PER_USER, Query
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.datasets import ADULT_EDUCATION, load_adult

# a JVM and a local Spark session: seconds to a minute before the first test
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # the executors' Python (quantiles run numpy there) is this interpreter
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("privreg-analysis-test")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    """300 rows of the bundled Adult slice; ``uid``: two rows per person; ``x``: a
    fractional column (exact sums matter) with missing values."""
    df = pd.DataFrame(load_adult()).iloc[:300].reset_index(drop=True)
    df["uid"] = np.arange(len(df)) // 2
    x = df["age"] / 7.0 + df["fnlwgt"] * 1e-7
    df["x"] = x.where(np.arange(len(df)) % 11 != 3)
    return df


def statistics(q: Query) -> dict:
    """Every kind of planned statistic, rules and key modes included."""
    return {
        "count": q.count(epsilon=1.0),
        "sum": q.sum("age", bounds=(17, 90), epsilon=1.0),
        "mean clipped": q.mean("age", bounds=(20, 60), epsilon=1.0),
        "mean drop": q.mean("x", bounds=(3, 11), epsilon=1.0, rule="drop"),
        "mean clip, missing left out": q.mean("x", bounds=(3, 11), epsilon=1.0),
        "sum impute": q.sum("x", bounds=(3, 11), epsilon=1.0, rule="impute", impute=7.0),
        "quantile impute": q.quantile("x", 0.5, bounds=(3, 11), epsilon=1.0, rule="impute", impute=7.0),
        "variance": q.variance("hours-per-week", bounds=(0, 80), epsilon=1.0),
        "variance drop": q.variance("x", bounds=(3, 11), epsilon=1.0, rule="drop"),
        "median": q.median("age", bounds=(17, 90), grid=74, epsilon=1.0),
        "quantile": q.quantile("x", 0.9, bounds=(2, 13), epsilon=1.0, rule="drop"),
        "histogram": q.histogram("education", categories=ADULT_EDUCATION, epsilon=1.0),
        "count by public keys": q.groupby("race", keys=["White", "Black", "Other"]).count(epsilon=1.0),
        "count by selected keys": q.groupby("sex").count(epsilon=1.0, delta=1e-6),
        "sum by selected keys": q.groupby("race").sum("hours-per-week", bounds=(0, 99), epsilon=1.0, delta=1e-6),
        "mean by public keys": q.groupby("sex", keys=["Male", "Female"]).mean(
            "x", bounds=(3, 11), epsilon=1.0, rule="drop"
        ),
        "sum by selected keys, missing imputed": q.groupby("sex").sum(
            "x", bounds=(3, 11), epsilon=1.0, delta=1e-6, impute=7.0
        ),
    }


@pytest.mark.parametrize("unit", ["uid", ONE_ROW_PER_USER], ids=["two-rows-per-person", "one-row-per-user"])
def test_every_statistic_releases_exactly_what_pandas_releases(spark, adult, unit):
    k = 2 if unit == "uid" else 1  # nobody has more than 2 rows: bounding keeps every row
    out = {}
    for kind, frame in (("pandas", adult), ("spark", spark.createDataFrame(adult))):
        log = EventLog()
        q = Query(frame, privacy_unit=unit, max_rows_per_user=k, session=log, rng=InsecureReproducibleRandom(seed=9))
        out[kind] = ({name: p.release() for name, p in statistics(q).items()}, log)
    (pandas, pandas_log), (spark_out, spark_log) = out["pandas"], out["spark"]
    for name, r in pandas.items():
        s = spark_out[name]
        assert s == r, name  # value, interval, accuracy
        if isinstance(r.value, dict):  # keyed results in the same (canonical) order
            assert list(s.value) == list(r.value) == sorted(r.value) and list(s.interval) == list(r.interval)
    assert pandas["count by selected keys"].value.keys() == {"Female", "Male"}
    charged = [[(c.mechanism, c.parameters, c.event) for c in log.charges] for log in (pandas_log, spark_log)]
    assert charged[0] == charged[1] and len(charged[0]) > len(pandas)


def test_bounding_that_drops_rows_keeps_the_rows_pandas_keeps_and_releases_the_same(spark, adult):
    """Persons of 1 to 9 rows, some rows duplicated within a person, k = 3: Spark keeps
    exactly the rows pandas keeps (the selection rule is one function of each row's
    content and its position among identical rows), from a shuffled, repartitioned copy,
    so every release and ledger charge is the same under the same seed."""
    df = adult.copy()
    df["uid"] = np.repeat(np.arange(70), np.arange(70) % 9 + 1)[: len(df)]
    df = pd.concat([df, df.iloc[::4]], ignore_index=True)  # identical rows of one person
    sizes = df.groupby("uid").size()
    assert (sizes > 3).sum() > 20 and df.duplicated().sum() == 75
    shuffled = df.sample(frac=1.0, random_state=2).reset_index(drop=True)
    out = {}
    for kind, frame in (("pandas", df), ("spark", spark.createDataFrame(shuffled).repartition(3))):
        log = EventLog()
        q = Query(frame, privacy_unit="uid", max_rows_per_user=3, session=log, rng=InsecureReproducibleRandom(seed=4))
        releases = {name: p.release() for name, p in statistics(q).items()}
        bounded = q.bounded if kind == "pandas" else q.bounded.toPandas()
        rows = bounded.sort_values(list(df.columns)).reset_index(drop=True)
        out[kind] = (releases, [(c.mechanism, c.parameters, c.event) for c in log.charges], rows)
    (pandas, pandas_log, pandas_rows), (spark_out, spark_log, spark_rows) = out["pandas"], out["spark"]
    assert pandas_rows.groupby("uid").size().equals(np.minimum(sizes, 3))
    pd.testing.assert_frame_equal(spark_rows, pandas_rows, check_dtype=False)
    assert pandas_rows.duplicated().any()  # some duplicates were kept twice
    for name, r in pandas.items():
        assert spark_out[name] == r, name
    assert spark_log == pandas_log


def test_spark_builds_the_same_fields_and_tags_as_python(spark):
    """The selection rule's Spark twin (privreg.analysis.spark_selection) gives the very
    fields and HMAC-SHA256 tags of privreg.analysis.selection: floats of every magnitude
    (subnormal to max, random bit patterns, signed zero, infinities, NaN as missing),
    integers at the int64 edges, strings, dates, booleans, token lists."""
    import datetime
    import hashlib
    import hmac

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from privreg.analysis import selection, spark_selection

    gen = np.random.default_rng(7)
    floats = [0.0, -0.0, 0.1, -2.5, 1e16, 2.0**53 + 2, 2.0**63, -(2.0**63), 1.7976931348623157e308, 5e-324]
    floats += [1e-310, 2.0**-1022, float("inf"), float("-inf"), float("nan"), 1 / 3, 4503599627370497.0]
    floats += [x for x in np.frombuffer(gen.bytes(8 * 300), dtype=np.float64).tolist() if not math.isnan(x)]
    ints = [0, -1, 2**63 - 1, -(2**63), 123456789]
    strings = ["", "a", "\u00e9\u4e2d", "x:y", "N"]
    dates = [datetime.date(2024, 2, 29), datetime.date(99, 12, 31)]
    lists = [["a", "bb"], [], ["\u00e9"]]
    cases = [(T.DoubleType(), floats, "double"), (T.LongType(), ints, "long"), (T.StringType(), strings, "string"),
             (T.DateType(), dates, "date"), (T.BooleanType(), [True, False], "boolean")]  # fmt: skip
    key = bytes(range(32))
    for dtype, values, name in cases:
        frame = spark.createDataFrame(list(enumerate(values)), f"i long, x {name}")
        encoded = spark_selection.field(F.col("x"), dtype)
        tags = spark_selection.tag(key, spark_selection.message([encoded], F.lit(1)))
        got = {r["i"]: (r["f"], r["t"]) for r in frame.select("i", encoded.alias("f"), tags.alias("t")).collect()}
        for i, value in enumerate(values):
            want = selection.field(value)
            assert got[i] == (want, selection.tag(key, selection.row_message([want], 1)).hex()), (name, value)
    frame = spark.createDataFrame(list(enumerate(lists)), "i long, x array<string>")
    got = {r["i"]: r["f"] for r in frame.select("i", spark_selection.list_field(F.col("x")).alias("f")).collect()}
    assert got == {i: selection.list_field(v) for i, v in enumerate(lists)}
    msg = selection.row_message(["s1:a"], 0)
    assert selection.tag(key, msg) == hmac.new(key, msg, hashlib.sha256).digest()


def test_only_the_curator_rule_refuses_before_any_charge_and_never_quotes_data(spark, adult):
    frame = spark.createDataFrame(adult)
    log = EventLog()
    q = Query(frame, privacy_unit="uid", max_rows_per_user=2, session=log, curator=True)
    refused = [
        (q.sum("age", bounds=(18, 50), epsilon=1.0, rule="error"), "outside the declared bounds and rule='error'"),
        (q.median("age", bounds=(18, 50), epsilon=1.0, rule="error"), "outside the declared bounds and rule='error'"),
        (q.mean("x", bounds=(3, 11), epsilon=1.0, rule="error"), "missing values and rule='error'"),
        (q.quantile("x", 0.5, bounds=(3, 11), epsilon=1.0, rule="error"), "missing values and rule='error'"),
        # missing values under a key not asked for refuse too, as on pandas
        (q.groupby("sex", keys=["Nobody"]).sum("x", bounds=(3, 11), epsilon=1.0, rule="error"), "missing values"),
        (q.groupby("sex").mean("x", bounds=(3, 11), epsilon=1.0, delta=1e-6, rule="error"), "missing values"),
    ]
    for planned, match in refused:
        with pytest.raises(PrivregValueError, match=match) as err:
            planned.release()
        assert not any(ch.isdigit() for ch in str(err.value))  # no value, no count, no position
    assert log.charges == ()


def test_schema_errors_name_the_columns(spark, adult):
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(adult)
    q = Query(frame, privacy_unit=ONE_ROW_PER_USER, session=EventLog())
    with pytest.raises(PrivregValueError, match=r"column 'agee' is not in the frame; its columns are \['age'"):
        q.mean("agee", bounds=(17, 90), epsilon=1.0)
    with pytest.raises(PrivregValueError, match=r"privacy_unit='user' is not a column.*'uid'"):
        Query(frame, privacy_unit="user", session=EventLog())
    with pytest.raises(PrivregTypeError, match="column 'education' must be numeric"):
        q.sum("education", bounds=(0, 1), epsilon=1.0)
    with pytest.raises(PrivregTypeError, match="cannot use as keys on Spark"):
        Query(frame.withColumn("tags", F.array("sex", "race")), privacy_unit=ONE_ROW_PER_USER, session=EventLog()) \
            .groupby("tags", keys=[("Male",)])  # fmt: skip
    # rows without a person are left out, as on pandas: the same release under one seed
    rows = [(1, 20.0), (None, 30.0), (2, 40.0), (None, 50.0)]
    released = []
    for frame_ in (spark.createDataFrame(rows, "uid long, age double"), pd.DataFrame(rows, columns=["uid", "age"])):
        q = Query(
            frame_, privacy_unit="uid", max_rows_per_user=1, session=EventLog(), rng=InsecureReproducibleRandom(seed=3)
        )
        kept = q.bounded
        assert (len(kept) if isinstance(kept, pd.DataFrame) else kept.count()) == 2
        released.append(q.sum("age", bounds=(0, 100), epsilon=1.0).release().value)
    assert released[0] == released[1]


def test_bounding_keeps_k_rows_per_person_chosen_uniformly(spark):
    """3000 persons with rows (p, 0), (p, 1), (p, 2) and 3000 with (p, a), (p, a), (p, b)
    (two identical rows), k = 1: the kept position is uniform (1/3 each) and the kept
    label is 'a' with probability 2/3. Chi-square tests, each at false-alarm rate 1e-4
    (total 2e-4); seeded, so deterministic. The bounded rows do not change between reads."""
    n = 3000
    persons = np.repeat(np.arange(2 * n), 3)
    labels = np.r_[np.tile(["0", "1", "2"], n), np.tile(["a", "a", "b"], n)]
    frame = spark.createDataFrame(pd.DataFrame({"p": persons, "label": labels, "v": 1.0}))
    q = Query(frame, privacy_unit="p", max_rows_per_user=1, session=EventLog(), rng=InsecureReproducibleRandom(seed=3))
    kept = q.bounded.groupBy("label").count().toPandas().set_index("label")["count"]
    assert kept.sum() == 2 * n and q.bounded.groupBy("p").count().where("count > 1").count() == 0
    positions = kept.reindex(["0", "1", "2"]).to_numpy()
    assert stats.chisquare(positions, [n / 3] * 3).pvalue > 1e-4
    ab = kept.reindex(["a", "b"]).to_numpy()
    assert stats.chisquare(ab, [2 * n / 3, n / 3]).pvalue > 1e-4
    assert q.bounded.groupBy("label").count().toPandas().set_index("label")["count"].equals(kept)
    # the count release reads the same bounded rows: n persons, one row each
    r = q.count(epsilon=5.0).release()
    assert r.interval[0] <= 2 * n <= r.interval[1]


def test_sums_are_exact_whatever_the_partitioning(spark):
    """Spark's own sum of doubles rounds at every step in partition order; the frame's
    sums are the exact sums rounded once, bit for bit math.fsum (the pandas path), with
    magnitudes from subnormal to 1e150 and cancellation (naive sums get 0 here)."""
    from privreg.analysis.frames import PandasFrame, Values
    from privreg.analysis.spark_frame import SparkFrame

    x = [1e16, 1.0, 1.0, -1e16, 0.1, 0.2, 0.3, 5e-324, 1e-310, -0.0, 1e150, 1.0, -1e150, 2.5e-8] * 7
    assert math.fsum(x) != sum(x)  # the naive sum loses the 1.0s
    df = pd.DataFrame({"x": x})
    frame = spark.createDataFrame(df).repartition(3)
    for bounds, rule, centre in (((-1e151, 1e151), "clip", 0.0), ((-1e16, 1e16), "clip", 0.7), ((0, 1), "drop", 0.5)):
        values = Values(column="x", bounds=bounds, rule=rule)
        want = PandasFrame(df, ONE_ROW_PER_USER).moments(values, centre=centre, squares=True)
        got = SparkFrame(frame, ONE_ROW_PER_USER).moments(values, centre=centre, squares=True)
        assert got == want, (bounds, rule)
    assert want.total != 0.0
