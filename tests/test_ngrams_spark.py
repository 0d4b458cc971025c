"""Plugin ``ngrams`` on the Spark backend (local mode, one session for the module):
the Spark and local backends agree (identical histograms when no user exceeds Delta,
identical histograms and releases under the same seeded randomness whether or not users
exceed Delta: both choose a heavy user's kept keys by the one selection rule)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pyspark", reason="the Spark backend needs pyspark (pip install 'privreg[spark]')")

from unicode_texts import UNICODE_TEXTS

from privreg.analysis.selection import KEY_BYTES
from privreg.core import EventLog, InsecureReproducibleRandom, WorkflowContext
from privreg.core.registry import load_registry
from privreg.plugins.ngrams import hooks
from privreg.plugins.ngrams.backends import LocalBackend, Tokenizer, contribution_weights
from privreg.plugins.ngrams.backends.spark import SparkBackend
from privreg.plugins.ngrams.dpne import extract_ngrams
from privreg.plugins.ngrams.engines import LocalNgramEngine, SparkNgramEngine
from privreg.plugins.ngrams.synthetic import synthetic_corpus, write_records

# a JVM and a local Spark session: about a minute before the first test
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark_backend():
    be = SparkBackend(master="local[2]", shuffle_partitions=1)
    yield be
    be.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    corpus = synthetic_corpus(users=150, vocab_size=120, min_tokens=10, max_tokens=200, seed=6)
    path = write_records(corpus, tmp_path_factory.mktemp("spark") / "records.jsonl")
    return path


@pytest.fixture(scope="module")
def engines(spark_backend, data):
    local = LocalBackend()
    le = LocalNgramEngine(local.tokenize(local.read_records(data), Tokenizer()), local)
    se = SparkNgramEngine(spark_backend, spark_backend.tokenize(spark_backend.read_records(data), Tokenizer()))
    yield le, se
    se.close()


def _same(a, b) -> None:
    assert [str(x) for x in a.keys.tolist()] == [str(x) for x in b.keys.tolist()]
    assert a.counts.tolist() == b.counts.tolist()


def test_histograms_are_identical_without_bounding(engines):
    le, se = engines
    assert le.tokens_total == se.tokens_total
    secret = bytes([3]) * KEY_BYTES
    h_local, h_spark = (
        le.unigram_histogram(max_keys=10_000, secret=secret),
        se.unigram_histogram(max_keys=10_000, secret=secret),
    )
    _same(h_local, h_spark)
    s1 = h_local.keys[h_local.counts >= 8 * (1 << 20) // 10]  # any public choice of S_1 will do
    le.set_unigrams(s1)
    se.set_unigrams(s1)
    a = le.kgram_histogram(2, pruning="both", max_keys=10_000, secret=bytes([3]) * 32)
    b = se.kgram_histogram(2, pruning="both", max_keys=10_000, secret=bytes([3]) * 32)
    _same(a, b)
    assert a.keys.size > 10


def test_bounded_histograms_are_identical_when_users_exceed_delta(engines):
    """Delta = 5, below most users' key counts: both backends keep the same keys of every
    heavy user (HMAC-SHA256 tags of (user id, key content) under one secret), so the
    unigram, bigram and raw histograms are identical key by key; another secret keeps
    other keys (the choice is keyed)."""
    le, se = engines
    secret = bytes(range(KEY_BYTES))
    a, b = le.unigram_histogram(max_keys=5, secret=secret), se.unigram_histogram(max_keys=5, secret=secret)
    _same(a, b)
    full = le.unigram_histogram(max_keys=10_000, secret=secret)
    assert a.total() < full.total() and a.counts.max() <= 150 * int(contribution_weights(5)[1])
    other = le.unigram_histogram(max_keys=5, secret=bytes([9]) * KEY_BYTES)
    assert other.keys.tolist() != a.keys.tolist() or other.counts.tolist() != a.counts.tolist()
    s1 = full.keys[full.counts >= 8 * (1 << 20) // 10]
    le.set_unigrams(s1)
    se.set_unigrams(s1)
    _same(
        le.kgram_histogram(2, pruning="both", max_keys=5, secret=secret),
        se.kgram_histogram(2, pruning="both", max_keys=5, secret=secret),
    )
    a, b = le.raw_histogram((1, 2), max_keys=5, secret=secret), se.raw_histogram((1, 2), max_keys=5, secret=secret)
    assert dict(zip(le.labels(a.keys), a.counts.tolist())) == dict(zip(se.labels(b.keys), b.counts.tolist()))
    assert a.total() < le.raw_histogram((1, 2), max_keys=100_000, secret=secret).total()


def test_dpsu_raw_histograms_are_exact_and_agree(engines):
    """The DPSU baselines' unpruned histograms (lengths 1-3 pooled, Delta above every
    user's count) are identical n-gram by n-gram: the local engine keys n-grams by exact
    ids, Spark by the JSON array of their tokens -- neither by a hash two n-grams could share."""
    le, se = engines
    a = le.raw_histogram((1, 2, 3), max_keys=100_000, secret=bytes([4]) * 32)
    b = se.raw_histogram((1, 2, 3), max_keys=100_000, secret=bytes([4]) * 32)
    got_local = dict(zip(le.labels(a.keys), a.counts.tolist()))
    got_spark = dict(zip(se.labels(b.keys), b.counts.tolist()))
    assert got_local == got_spark and len(got_local) == a.keys.size == b.keys.size > 100
    assert {len(g.split(" ")) for g in got_local} == {1, 2, 3}


def test_unicode_tokens_are_identical_on_both_backends(spark_backend, tmp_path):
    """Superscripts, fractions, combining marks, CJK, emoji, RTL, ZWJ, NBSP, full-width
    digits, final sigma: each record has the same tokens on Spark as locally (Java's
    regex and lower-casing would split several of them differently)."""
    path = tmp_path / "unicode.jsonl"
    rows = [{"user_id": f"u{i:02d}", "text": t} for i, t in enumerate(UNICODE_TEXTS)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    local = LocalBackend()
    corpus = local.tokenize(local.read_records(path), Tokenizer())
    expected = {u: corpus.vocab[corpus.tokens[corpus.user == i]].tolist() for i, u in enumerate(corpus.users)}
    got = spark_backend.tokenize(spark_backend.read_records(path), Tokenizer()).collect()
    assert {r["user"]: list(r["tokens"]) for r in got} == expected
    assert expected["u00"][:4] == ["e", "mc\u00b2", "and", "x\u00b9\u00b2\u00b3"]


@pytest.mark.parametrize("max_keys", [5000, 4], ids=["nobody-bounded", "users-above-delta"])
def test_same_release_on_both_backends(spark_backend, data, max_keys):
    """The whole DPNE run, same seeded randomness, Delta above every user's count or
    below most: same n-grams and ledger charges on both backends (the release code runs
    on the driver for both, and the kept keys are the same)."""
    out = {}
    for name in ("local", "spark"):
        if name == "local":
            be = LocalBackend()
            engine = LocalNgramEngine(be.tokenize(be.read_records(data), Tokenizer()), be)
        else:
            engine = SparkNgramEngine(
                spark_backend, spark_backend.tokenize(spark_backend.read_records(data), Tokenizer())
            )
        log = EventLog()
        res = extract_ngrams(
            engine,
            charger=log,
            epsilon=8.0,
            delta=1e-6,
            max_n=3,
            max_keys=max_keys,
            eta=0.2,
            rng=InsecureReproducibleRandom(seed=12),
        )
        out[name] = (res.ngrams, [(c.mechanism, c.parameters, c.event) for c in log.charges])
        engine.close()
    assert out["local"] == out["spark"] and len(out["local"][0][2]) > 0 and out["local"][1]


def test_workflow_on_spark_and_a_baseline(spark_backend, data, tmp_path):
    reg = load_registry(plugins={"ngrams": hooks}, autoload=False)
    item = reg.get("ngrams")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=3), output_dir=tmp_path)
    res = item.run(
        ctx,
        {
            "input": data,
            "max_n": 2,
            "max_keys": 20,
            "backend": "spark",
            "method": "dpsu-all",
            "epsilon": 8.0,
            "delta": 1e-6,
        },
    )
    assert "DPSU-all" in res.summary and len(ctx.charger.charges) == 1
    assert np.all([len(g.split()) == 2 for g in (tmp_path / "ngrams-2.txt").read_text().split("\n") if g])
