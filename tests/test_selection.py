"""The one selection rule of contribution bounding (privreg.analysis.selection): its
encoding, its tag (HMAC-SHA256 as the standard library computes it), and pandas
bounding built on it: min(k, n) rows per person, the same rows whatever the input's
order, a uniformly random subset (identical rows counted apart)."""

from __future__ import annotations

import datetime
import hashlib
import hmac
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privreg.analysis import Query
from privreg.analysis.bounding import bound_contributions, user_ids
from privreg.analysis.selection import Tagger, column_fields, field, keep_first, list_field, number, row_message, tag
from privreg.core.charging import EventLog
from privreg.core.randomness import InsecureReproducibleRandom


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "N"),
        (float("nan"), "N"),
        (pd.NaT, "N"),
        (True, "b1:1"),
        (np.bool_(False), "b1:0"),
        (7, "n1:7"),
        (np.int64(-12), "n3:-12"),
        (7.0, "n1:7"),  # by value: an integral float reads as its integer
        (-0.0, "n1:0"),
        (0.375, "n4:3p-3"),
        (-0.1, "n21:-3602879701896397p-55"),
        (2.0**70, "n4:1p70"),
        (-(2.0**63), "n20:-9223372036854775808"),
        (5e-324, "n7:1p-1074"),
        (float("inf"), "n3:inf"),
        (float("-inf"), "n4:-inf"),
        ("é:", "s3:é:"),
        ("", "s0:"),
        (datetime.date(2024, 2, 29), "d10:2024-02-29"),
        (pd.Timestamp("1970-01-01 00:00:01.5"), "t7:1500000"),
        (pd.Timestamp("1970-01-01 01:00:01.5", tz="Europe/Paris"), "t7:1500000"),
        ((1, 2), "x6:(1, 2)"),
    ],
)
def test_fields_encode_values_exactly_and_self_delimiting(value, expected):
    assert field(value) == expected


def test_numbers_are_exact_values():
    gen = np.random.default_rng(0)
    for x in np.frombuffer(gen.bytes(8 * 3000), dtype=np.float64).tolist():
        if np.isfinite(x):
            text = number(x)
            if "p" in text:
                m, e = text.split("p")
                assert int(m) % 2 == 1 and Fraction(int(m)) * Fraction(2) ** int(e) == Fraction(x)
            else:
                assert int(text) == x
    assert list_field(["ab", "c"]) == "l2:s2:abs1:c"


def test_column_fields_are_the_fields_of_the_values_whatever_the_dtype():
    columns = {
        "int": pd.Series([1, -5, 2**62], dtype=np.int64),
        "uint": pd.Series([1, 2**64 - 1, 0], dtype=np.uint64),
        "float": pd.Series([0.5, np.nan, -0.0]),
        "float32": pd.Series([0.1, 2.0, np.inf], dtype=np.float32),
        "bool": pd.Series([True, False, True]),
        "nullable int": pd.Series([1, None, 3], dtype="Int64"),
        "nullable float": pd.Series([1.5, None, 3.0], dtype="Float64"),
        "nullable bool": pd.Series([True, None, False], dtype="boolean"),
        "string": pd.Series(["a", None, "\u00e9"], dtype="string"),
        "object": pd.Series(["a", 1, None], dtype=object),
        "category": pd.Series(["x", "y", "x"], dtype="category"),
        "datetime": pd.Series(
            pd.to_datetime(["2020-01-01 00:00:00", None, "1969-12-31 23:59:59.999999"], format="ISO8601")
        ),
    }
    for name, series in columns.items():
        assert column_fields(series) == [field(v) for v in series.astype(object).tolist()], name
    assert column_fields(columns["nullable int"])[1] == "N"
    assert column_fields(columns["uint"])[1] == "n22:18446744073709551615p0"


def test_tag_is_hmac_sha256_and_messages_separate_positions():
    key = bytes(range(32))
    msg = row_message(["s1:a", "n1:1"], 0)
    assert msg == b"s20:privreg.analysis.rows1:an1:1n1:0"
    assert tag(key, msg) == hmac.new(key, msg, hashlib.sha256).digest()
    assert Tagger(b"k" * 100)(msg) == hmac.new(b"k" * 100, msg, hashlib.sha256).digest()
    assert tag(key, row_message(["s1:a"], 1)) != tag(key, row_message(["s1:a"], 0))
    assert keep_first(np.array([1, 0, 1, 1]), [b"\x03", b"\x09", b"\x01", b"\x02"], 2).tolist() == [1, 2, 3]


def _frame(n: int) -> pd.DataFrame:
    gen = np.random.default_rng(4)
    return pd.DataFrame(
        {
            "uid": np.repeat(np.arange(n), 5)[: 5 * n - 3],
            "x": gen.normal(size=5 * n - 3).round(1),  # rounded: duplicates within a person
            "s": gen.choice(["a", "b"], size=5 * n - 3),
        }
    )


def test_bounding_keeps_min_k_n_rows_the_same_whatever_the_order():
    df = _frame(400)
    df = pd.concat([df, df.iloc[::7]], ignore_index=True)  # exact duplicate rows
    key = b"\x01" * 32
    keep = bound_contributions(df, user_ids(df, "uid"), 3, key)
    kept = df.iloc[keep]
    sizes = df.groupby("uid").size()
    assert kept.groupby("uid").size().equals(np.minimum(sizes, 3))
    shuffled = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    again = shuffled.iloc[bound_contributions(shuffled, user_ids(shuffled, "uid"), 3, key)]
    ordered = ["uid", "x", "s"]
    assert again.sort_values(ordered).reset_index(drop=True).equals(kept.sort_values(ordered).reset_index(drop=True))
    other = df.iloc[bound_contributions(df, user_ids(df, "uid"), 3, b"\x02" * 32)]
    assert (
        not other.sort_values(ordered).reset_index(drop=True).equals(kept.sort_values(ordered).reset_index(drop=True))
    )


def test_identical_rows_are_counted_apart_and_the_choice_is_uniform():
    """3000 persons with rows a, a, b and k = 1: 'a' is kept with probability 2/3;
    3000 with rows of values 1, 2, 1000 and k = 2: each pair equally likely (values'
    magnitudes play no part). Chi-square tests at false-alarm rate 1e-4 each; seeded."""
    n = 3000
    df = pd.DataFrame({"p": np.repeat(np.arange(n), 3), "label": np.tile(["a", "a", "b"], n)})
    q = Query(df, privacy_unit="p", max_rows_per_user=1, session=EventLog(), rng=InsecureReproducibleRandom(seed=8))
    counts = q.bounded["label"].value_counts().reindex(["a", "b"]).to_numpy()
    assert counts.sum() == n and stats.chisquare(counts, [2 * n / 3, n / 3]).pvalue > 1e-4
    df = pd.DataFrame({"p": np.repeat(np.arange(n), 3), "v": np.tile([1.0, 2.0, 1000.0], n)})
    q = Query(df, privacy_unit="p", max_rows_per_user=2, session=EventLog(), rng=InsecureReproducibleRandom(seed=8))
    dropped = df.groupby("p")["v"].sum() - q.bounded.groupby("p")["v"].sum()
    counts = dropped.value_counts().reindex([1.0, 2.0, 1000.0]).to_numpy()
    assert counts.sum() == n and stats.chisquare(counts, [n / 3] * 3).pvalue > 1e-4
