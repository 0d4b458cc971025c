"""Cost estimates and run limits (privreg.core.cost, issue #19).

The stated factor: on small runs, a workflow's memory estimate lies within [1, 4] x the
peak that tracemalloc measures (it errs high, never low). Every workflow records its
estimate before its first charge.
"""

import gzip
import io
import tracemalloc

import numpy as np
import pytest

import privreg
from privreg.core.charging import EventLog
from privreg.core.cost import GIB, Cost, Limits, ResourceLimitError, capped_reader, use_limits
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.workflow import WorkflowContext

FACTOR = 4.0


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _context():
    return WorkflowContext(rng=InsecureReproducibleRandom(seed=3))


@pytest.mark.parametrize("row, factor", [("{a}\n", FACTOR), ("{a},40,somewhere\n", 4 * FACTOR)])
def test_bounded_mean_estimate_is_within_the_stated_factor_of_its_peak(tmp_path, row, factor):
    """The estimate reads only the input's size (public), so it assumes the shortest rows
    (two bytes): within the stated factor for short rows, higher for wide ones."""
    from privreg.plugins.standard.workflows import bounded_mean

    path = tmp_path / "big.csv"
    ages = np.random.default_rng(0).integers(17, 90, 100_000)
    path.write_text("age,hours,city\n" + "".join(row.format(a=a) for a in ages))
    ctx = _context()
    peak = _peak(lambda: bounded_mean(context=ctx, input=path, lower=17, upper=90))
    assert ctx.estimate is not None
    assert peak <= ctx.estimate.memory_bytes <= factor * peak, (ctx.estimate, peak)


def test_oov_discovery_estimate_is_within_the_stated_factor_of_its_peak():
    from privreg.plugins.heavy_hitters.population import english_word_law
    from privreg.plugins.heavy_hitters.workflow import oov_discovery

    english_word_law(3000)  # the wordfreq list, loaded once per process: the estimate knows
    ctx = _context()
    params = {"users_per_layer": 2000, "depth": 3, "passes": 1, "days": 200, "vocabulary": 3000, "known_words": 100}
    peak = _peak(lambda: oov_discovery(context=ctx, **params))
    assert ctx.estimate is not None
    assert peak <= ctx.estimate.memory_bytes <= FACTOR * peak, (ctx.estimate, peak)


def test_limits_refuse_with_the_estimate_and_the_flag():
    limits = Limits(max_memory_gib=1, max_seconds=10)
    limits.check("w", Cost(memory_bytes=GIB, seconds=10, basis="b"))  # at the limit: fits
    with pytest.raises(ResourceLimitError, match=r"w: estimated peak memory 3 GiB \(b\).*--max-memory-gib 3 "):
        limits.check("w", Cost(memory_bytes=3 * GIB, seconds=1, basis="b"))
    with pytest.raises(ResourceLimitError, match=r"--max-seconds 11 to allow"):
        limits.check("w", Cost(memory_bytes=1, seconds=10.5, basis="b"))
    with pytest.raises(ResourceLimitError, match="--max-seconds"):
        limits.check("w", Cost(memory_bytes=1, seconds=float("inf"), basis="b"))


def test_workers_default_to_the_cpu_count():
    import os

    assert Limits().max_workers == (os.cpu_count() or 1)
    assert Limits(max_workers=3).check_workers("workers", 3) == 3
    with pytest.raises(ResourceLimitError, match="--max-workers 4 to force it"):
        Limits(max_workers=3).check_workers("workers", 4)


def test_capped_reader_stops_at_the_cap():
    data = gzip.compress(b"\0" * (3 << 20))
    with capped_reader(gzip.GzipFile(fileobj=io.BytesIO(data)), "'x.gz'", cap_gib=4 / 1024) as fh:
        assert len(fh.read()) == 3 << 20
    with (
        pytest.raises(ResourceLimitError, match=r"'x.gz' expands to more than 2 MiB.*--max-input-gib 0.00195"),
        capped_reader(gzip.GzipFile(fileobj=io.BytesIO(data)), "'x.gz'", cap_gib=2 / 1024) as fh,
    ):
        fh.read()


def test_use_limits_sets_the_default_cap():
    data = gzip.compress(b"\0" * (2 << 20))
    with use_limits(Limits(max_input_gib=1 / 1024)), pytest.raises(ResourceLimitError):
        capped_reader(gzip.GzipFile(fileobj=io.BytesIO(data)), "'y'").read()


class _MustEstimateFirst(EventLog):
    def __init__(self, context):
        super().__init__()
        self.context = context

    def charge(self, *args, **kwargs):
        assert self.context.estimate is not None, "charged before the cost estimate"
        return super().charge(*args, **kwargs)


FAST_EXAMPLES = {
    "bounded-mean": {},
    "outlier-count": {},
    "outlier-subspaces": {},
    "ngrams": {"max_n": 3},
    "oov-discovery": {"users_per_layer": 500, "depth": 3, "passes": 1, "vocabulary": 3000, "known_words": 100},
}


@pytest.mark.parametrize("name", sorted(FAST_EXAMPLES))
def test_workflows_estimate_before_they_charge(name):
    item = privreg.load_registry().get(name)
    ctx = _context()
    ctx.charger = _MustEstimateFirst(ctx)
    item.run(ctx, {**item.example.params, **FAST_EXAMPLES[name]})
    assert ctx.estimate is not None and ctx.estimate.memory_bytes > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pprl", "spam-filter"])
def test_protocol_workflows_estimate_before_they_run(name):
    item = privreg.load_registry().get(name)
    ctx = _context()
    ctx.charger = _MustEstimateFirst(ctx)
    item.run(ctx, item.example.params)
    assert ctx.estimate is not None
