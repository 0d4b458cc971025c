"""Plugin ``pprl`` on Spark (local mode, one session for the module): SparkBlocking gives
the same band tokens and candidate pairs as the local functions of ``bands`` (same arrays,
same order, same skipped blocks), spark_clks the same CLKs as encode_clks, and
run_chunks through a SparkChunkExecutor the same lists as in-process. The chunk-executor
hook of ``privreg.crypto.parallel`` and LocalBlocking are tested without Spark."""

from __future__ import annotations

import os
import pickle
import shutil
import sys

import numpy as np
import pytest
from crypto_keys import cached_keypair

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import decrypt_ints, encrypt, parallel
from privreg.crypto.modarith import powmod_chunk
from privreg.plugins.pprl.bands import band_tokens, candidate_pairs, recommended_bands
from privreg.plugins.pprl.clk import encode_clks
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.schema import FEBRL_SCHEMA
from privreg.plugins.pprl.spark import (
    BlockingBackend,
    LocalBlocking,
    SparkBlocking,
    SparkChunkExecutor,
    spark_clks,
    spark_encode_records,
)

SECRET = bytes(range(7, 39))
CONFIG = recommended_bands(filter_length=1024, popcount=566)
# a JVM and a local Spark session: about a minute before the first Spark test
spark_test = pytest.mark.slow


def toy_chunk(offset: int, xs: list[int]) -> list[int]:
    """A module-level chunk function (shipped to Spark by value: tests/ is not on the workers' path)."""
    return [offset + x * x for x in xs]


class ListExecutor(parallel.ChunkExecutor):
    """In-process executor that records the chunk counts it was given."""

    def __init__(self, parallelism: int = 3) -> None:
        self._k = parallelism
        self.calls: list[int] = []

    @property
    def parallelism(self) -> int:
        return self._k

    def map_chunks(self, fn, chunks):
        self.calls.append(len(chunks))
        return [fn(*c) for c in chunks]


class DroppingExecutor(ListExecutor):
    def map_chunks(self, fn, chunks):
        return [fn(*c) for c in chunks[1:]]


def _round_trip(obj):
    """``obj`` through pickle (our own bytes, just made)."""
    return pickle.loads(pickle.dumps(obj))  # noqa: S301


TOY_CHUNKS = [(i, list(range(i, i + 5))) for i in range(7)]
TOY_EXPECTED = [i + x * x for i in range(7) for x in range(i, i + 5)]


@pytest.fixture(scope="module")
def records():
    pop = synthetic_population(300, rng=InsecureReproducibleRandom(seed=11))
    data = make_parties(
        pop,
        parties=3,
        corruption=0.3,
        overlap=1.0,
        rng=InsecureReproducibleRandom(seed=12),
        fields=list(FEBRL_SCHEMA.columns),
    )
    return data, [encode_clks(data.frames[p], secret=SECRET, party=p, entity_column=ENTITY) for p in data.parties]


@pytest.fixture(scope="module")
def local_tokens(records):
    return [band_tokens(r.match_filters, config=CONFIG, secret=SECRET)[0] for r in records[1]]


# ---------------------------------------------------------------- without Spark


def test_use_executor_routes_chunks_and_restores():
    ex = ListExecutor()
    assert parallel.current_executor() is None
    with parallel.use_executor(ex) as got:
        assert got is ex and parallel.current_executor() is ex
        assert parallel.run_chunks(toy_chunk, TOY_CHUNKS, 7) == TOY_EXPECTED
        assert parallel.run_chunks(toy_chunk, TOY_CHUNKS, 1) == TOY_EXPECTED  # workers=1: in-process
    assert ex.calls == [7]
    assert parallel.current_executor() is None
    token = parallel.set_executor(ex)
    parallel.reset_executor(token)
    assert parallel.current_executor() is None


def test_executor_parallelism_sets_the_chunk_count():
    big = parallel.PARALLEL_MIN_BATCH * 40
    with parallel.use_executor(ListExecutor(parallelism=17)):
        assert parallel.resolve_workers(big, None) == 17
        assert parallel.resolve_workers(10, None) == 1
        assert parallel.resolve_workers(big, 1) == 1
        assert parallel.resolve_workers(big, 4) == 4


def test_executor_errors_name_the_argument():
    with pytest.raises(PrivregTypeError, match=r"executor must be a privreg\.crypto\.parallel\.ChunkExecutor"):
        parallel.set_executor(object())  # type: ignore[arg-type]
    with parallel.use_executor(DroppingExecutor()), pytest.raises(PrivregValueError, match="6 results for 7 chunks"):
        parallel.run_chunks(toy_chunk, TOY_CHUNKS, 7)
    with parallel.use_executor(ListExecutor(parallelism=0)), pytest.raises(PrivregValueError, match="parallelism"):
        parallel.resolve_workers(parallel.PARALLEL_MIN_BATCH * 40, None)


def _paillier_round_trip(executor: parallel.ChunkExecutor | None):
    kp = cached_keypair(512)
    values = list(range(-300, 300))
    with parallel.use_executor(executor):
        vec = encrypt(kp.public_key, values, bound=1000, rng=InsecureReproducibleRandom(seed=5), workers=None)
        return vec.ciphertexts, decrypt_ints(kp.private_key, vec, workers=None)


def test_paillier_batches_through_an_executor_match_in_process():
    ex = ListExecutor(parallelism=4)
    cts, plain = _paillier_round_trip(ex)
    assert (cts, plain) == _paillier_round_trip(None)
    assert plain == list(range(-300, 300))
    assert ex.calls and all(k == 4 for k in ex.calls)


def test_local_blocking_is_the_bands_functions(records, local_tokens):
    backend = LocalBlocking()
    assert isinstance(backend, BlockingBackend)
    tokens = backend.band_tokens(records[1][0].match_filters, config=CONFIG, secret=SECRET)
    np.testing.assert_array_equal(tokens, local_tokens[0])
    got = backend.candidate_pairs(local_tokens[0], local_tokens[1], max_block_pairs=10_000, min_shared=2)
    want = candidate_pairs(local_tokens[0], local_tokens[1], max_block_pairs=10_000, min_shared=2)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]
    copy = _round_trip(backend)
    assert copy.band_tokens(records[1][0].match_filters[:5], config=CONFIG, secret=SECRET).shape == (5, CONFIG.bands)


def test_local_blocking_bad_arguments(local_tokens):
    backend = LocalBlocking()
    with pytest.raises(PrivregValueError, match="min_shared"):
        backend.candidate_pairs(local_tokens[0], local_tokens[1], max_block_pairs=10, min_shared=0)
    with pytest.raises(PrivregValueError, match="equal bands"):
        backend.candidate_pairs(local_tokens[0], local_tokens[1][:, :5], max_block_pairs=10, min_shared=1)
    with pytest.raises(PrivregTypeError, match="filters must be a 2-d boolean array"):
        backend.band_tokens(np.zeros((3, 1024), dtype=np.int8), config=CONFIG, secret=SECRET)


# ---------------------------------------------------------------- on Spark


@pytest.fixture(scope="module")
def blocking():
    pytest.importorskip("pyspark", reason="the Spark backend needs pyspark (pip install 'privreg[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("the Spark backend needs Java 17 (java on PATH or JAVA_HOME)")
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # toy_chunk on the Python workers
    be = SparkBlocking(master="local[2]", shuffle_partitions=2, rows_per_task=97)
    yield be
    be.close()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@spark_test
def test_spark_tokens_equal_local_tokens(blocking, records, local_tokens):
    for rec, want in zip(records[1], local_tokens):
        got = blocking.band_tokens(rec.match_filters, config=CONFIG, secret=SECRET)
        assert got.dtype == np.uint64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    empty = blocking.band_tokens(np.zeros((0, 1024), dtype=bool), config=CONFIG, secret=SECRET)
    assert empty.shape == (0, CONFIG.bands) and empty.dtype == np.uint64


@spark_test
@pytest.mark.parametrize(("max_block_pairs", "min_shared"), [(10_000, 2), (10_000, 1), (1, 1), (2, 2)])
def test_spark_candidate_pairs_equal_local(blocking, local_tokens, max_block_pairs, min_shared):
    a, b = local_tokens[0], local_tokens[2]
    want, want_skipped = candidate_pairs(a, b, max_block_pairs=max_block_pairs, min_shared=min_shared)
    got, skipped = blocking.candidate_pairs(a, b, max_block_pairs=max_block_pairs, min_shared=min_shared)
    assert got.dtype == np.int64 and got.shape == want.shape and want.shape[0] > 0
    np.testing.assert_array_equal(got, want)
    assert skipped == want_skipped
    if max_block_pairs < 10:
        assert skipped > 0  # the cap bites: some blocks are skipped, the same ones


@spark_test
def test_spark_candidate_pairs_edge_cases(blocking, local_tokens):
    a = local_tokens[0]
    pairs, skipped = blocking.candidate_pairs(a[:0], a, max_block_pairs=10, min_shared=1)
    assert pairs.shape == (0, 2) and skipped == 0
    pairs, _ = blocking.candidate_pairs(a[:40], a[:40], max_block_pairs=10_000, min_shared=CONFIG.bands)
    np.testing.assert_array_equal(pairs, np.stack([np.arange(40), np.arange(40)], axis=1))
    with pytest.raises(PrivregValueError, match="max_block_pairs"):
        blocking.candidate_pairs(a, a, max_block_pairs=0, min_shared=1)
    with pytest.raises(PrivregTypeError, match="config must be a BandConfig"):
        blocking.band_tokens(np.zeros((2, 1024), dtype=bool), config={"bands": 3}, secret=SECRET)


@spark_test
def test_spark_clks_equal_encode_clks(blocking, records):
    data, encoded = records
    frame = data.frames["P2"].reset_index()
    sdf = blocking.spark.createDataFrame(frame)
    np.testing.assert_array_equal(spark_clks(sdf, secret=SECRET, party="P2"), encoded[1].match_filters)
    # a shuffled DataFrame: ids and entities come back aligned with their filters
    rec = spark_encode_records(sdf.repartition(3), secret=SECRET, party="P2", id_column="rec_id", entity_column=ENTITY)
    assert sorted(rec.ids) == sorted(encoded[1].ids)
    where = {rid: i for i, rid in enumerate(encoded[1].ids)}
    rows = np.array([where[rid] for rid in rec.ids])
    np.testing.assert_array_equal(rec.match_filters, encoded[1].match_filters[rows])
    assert list(rec.entities) == [encoded[1].entities[i] for i in rows]
    with pytest.raises(PrivregValueError, match="sdf lacks column"):
        spark_clks(sdf.drop("surname"), secret=SECRET, party="P2")
    with pytest.raises(PrivregTypeError, match=r"sdf must be a pyspark\.sql\.DataFrame"):
        spark_clks(frame, secret=SECRET, party="P2")


@spark_test
def test_spark_objects_leave_their_session_behind_when_pickled(blocking):
    copy = _round_trip(blocking)
    with pytest.raises(PrivregValueError, match="no Spark session"):
        copy.band_tokens(np.zeros((1, 1024), dtype=bool), config=CONFIG, secret=SECRET)
    executor = SparkChunkExecutor(blocking.spark)
    with pytest.raises(PrivregValueError, match="no Spark session"):
        _round_trip(executor).parallelism  # noqa: B018
    assert blocking.spark is not None  # the original still runs
    shared = SparkBlocking()  # spark=None with a session active: shared, and never stopped here
    assert shared.spark is blocking.spark
    shared.close()
    assert blocking.spark.range(3).count() == 3
    with pytest.raises(PrivregTypeError, match=r"spark must be a pyspark\.sql\.SparkSession"):
        SparkBlocking(spark="local[2]")


@spark_test
def test_run_chunks_on_spark_equals_in_process(blocking):
    executor = SparkChunkExecutor(blocking.spark, parallelism=3)
    assert executor.parallelism == 3
    with parallel.use_executor(executor):
        assert parallel.run_chunks(toy_chunk, TOY_CHUNKS, 7) == TOY_EXPECTED
        n2 = 1009 * 1009
        chunks = [(n2, list(range(2 + i, 40 + i)), list(range(-3, 35))) for i in range(4)]
        assert parallel.run_chunks(powmod_chunk, chunks, 4) == [x for c in chunks for x in powmod_chunk(*c)]
    assert _paillier_round_trip(SparkChunkExecutor(blocking.spark)) == _paillier_round_trip(None)
