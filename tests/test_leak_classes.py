"""The three leak classes of issue 16, closed for every built-in registered item:

1. no value-dependent failure after a charge (extreme inputs are refused before the
   charge with nothing drawn, or released correctly);
2. collections come out in a canonical order, never in the caller's order;
3. errors raised because of data never quote the data;

and the guarantees text states input ranges and data-dependent timing.
"""

from __future__ import annotations

import collections
import math
import sys
from fractions import Fraction

import numpy as np
import pytest

import privreg
from privreg import BudgetExceededError, EventLog, InsecureReproducibleRandom, ItemKind, PrivregError
from privreg.core.errors import PrivregValueError
from privreg.core.workflow import WorkflowContext
from privreg.testing import CountingRandom, SpyCharger

REGISTRY = privreg.load_registry()
MAX = sys.float_info.max
TINY = 5e-324  # the smallest subnormal
MIN_NORMAL = sys.float_info.min

#: Python integers near the int64 / float64 edges.
INTS = [2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 2**70]
#: Floats at the edges: near 2^53, 2^63, 2^64, the top of the range, signed zero, subnormals.
FLOATS = [2.0**53, 2.0**53 - 1, 2.0**63, 2.0**64, 1e308, -1e308, MAX, -MAX, -0.0, TINY, -TINY, MIN_NORMAL, 1e12, 4.5e15]
#: Vectors mixing them.
MIXED = [
    np.array([2.0**53, -0.0, TINY, 1e308, -MAX]),
    np.array([MAX, MAX, -MAX, 2.0**63, 1.0]),
    np.array([TINY, -TINY, MIN_NORMAL, 0.0, -0.0]),
]


def _items(kind):
    return [pytest.param(i, id=i.name) for i in REGISTRY.items(kind)]


def _scalar_extremes():
    return [*INTS, *FLOATS, np.uint64(2**64 - 1), np.int64(2**63 - 1), np.int64(-(2**63))]


def _extreme_inputs(item):
    """Extreme inputs shaped like the item's example neighbours."""
    x = item.example.neighbours[0]
    if isinstance(x, dict):  # thresholding: {key: total}
        out = [{"a": v, "b": 5.0} for v in _scalar_extremes()]
        out += [{i: float(v) for i, v in enumerate(m)} for m in MIXED]
        return out
    arr = np.asarray(x)
    if arr.ndim == 0:
        return _scalar_extremes()
    if arr.dtype.kind in "iu" and item.kind is ItemKind.RANDOMIZER:
        return (
            [np.array([v, 0], dtype=object) for v in INTS]
            + [np.array([v, 0.0]) for v in FLOATS]
            + [np.array([np.uint64(2**64 - 1), np.uint64(0)])]
        )
    if arr.ndim == 1:  # utilities or a 1-d dataset: every entry replaced, then mixtures
        n = arr.size
        out = [np.full(n, v, dtype=np.float64) for v in FLOATS]
        out += [np.array([v] + [0] * (n - 1), dtype=object) for v in INTS]
        out += [np.resize(m, n) for m in MIXED]
        return out
    out = [np.full(arr.shape, v) for v in FLOATS]  # records x attributes
    out += [np.resize(m, arr.shape) for m in MIXED]
    return out


def _release(obj, value, *, charger, rng):
    if item_is_randomizer(obj):
        return obj.randomize(value, charger=charger, rng=rng).reports
    return obj.release(value, charger=charger, rng=rng).output


def item_is_randomizer(obj):
    return isinstance(obj, privreg.Randomizer)


# --- 1. nothing fails after the charge ------------------------------------------------------


@pytest.mark.parametrize("item", _items(ItemKind.MECHANISM) + _items(ItemKind.RANDOMIZER))
def test_extreme_inputs_are_refused_before_the_charge_or_released(item):
    obj = item.create(item.example.params)
    released = refused = 0
    for value in _extreme_inputs(item):
        rng = CountingRandom(seed=3)
        charger = SpyCharger(rng)
        try:
            out = _release(obj, value, charger=charger, rng=rng)
        except PrivregError as exc:
            assert charger.charges == () and rng.draws == 0, (  # noqa: PT017 -- checked per input in a loop
                f"{item.name}: {value!r} was refused after the charge ({exc})"
            )
            assert str(exc), "a refusal says what to fix"  # noqa: PT017 -- checked per input in a loop
            refused += 1
            continue
        # anything else propagates and fails the test: no value-dependent failure after charging
        assert charger.draws_at_charge == [0]
        if isinstance(out, dict):
            assert all(isinstance(v, float) and not math.isnan(v) for v in out.values())
        else:
            assert not np.isnan(np.asarray(out, dtype=np.float64)).any()
        released += 1
    assert released + refused == len(_extreme_inputs(item))


def _grid_expected(mech, value, seed):
    """The correct output, recomputed here in rationals: round(x / g) + z, times g,
    rounded once to the nearest float (inf beyond the float range)."""
    z = mech._noise(mech.dimension, InsecureReproducibleRandom(seed=seed)).tolist()
    step = mech.grid.step
    out = []
    for x, zi in zip(np.atleast_1d(np.asarray(value, dtype=np.float64)).tolist(), z):
        t = (round(Fraction(x) / step) + int(zi)) * step
        try:
            out.append(float(t))
        except OverflowError:
            out.append(math.copysign(math.inf, t))
    return out


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
@pytest.mark.parametrize("epsilon,dimension", [(1.0, 1), (4.0, 1), (8.0, 1000)])
def test_grid_mechanisms_release_the_exact_value_near_the_old_overflow_thresholds(name, epsilon, dimension):
    """Issue 16: OverflowError after the charge at |x| ~ 2^53 (eps 1), 2^51 (eps 4), about
    1e12 x sensitivity at eps 8 in 1000 dimensions; now every finite value releases
    exactly (grid point of round(x/g) + z, rounded once)."""
    params = {"epsilon": epsilon, "sensitivity": 1.0, "dimension": dimension}
    if name == "gaussian":
        params["delta"] = 1e-6
    mech = REGISTRY.get(name).create(params)
    scalars = [2.0**53, 2.0**53 - 1, 2.0**51, -(2.0**51), 1e12, 3e12, 2.0**63, 2.0**64, 1e308, MAX, -MAX, -0.0, TINY]
    for x in scalars:
        value = x if dimension == 1 else np.resize(np.array([x, -x, TINY, 0.0, 1e12]), dimension)
        out = mech.release(value, charger=EventLog(), rng=InsecureReproducibleRandom(seed=7)).output
        want = _grid_expected(mech, value, seed=7)
        np.testing.assert_array_equal(np.atleast_1d(out), want)


def test_laplace_near_2_53_never_wraps_around():
    """Issue 16: at 2^53 - 1, 18% of Laplace outputs came back near -9e15 (int64 wrap)."""
    mech = REGISTRY.get("laplace").create({"epsilon": 1.0, "sensitivity": 1.0})
    for x in (2.0**53 - 1, 2.0**53, 2.0**62, -(2.0**63)):
        out = mech.release_many(x, 2000, charger=EventLog(), rng=InsecureReproducibleRandom(seed=1)).output
        assert np.all(np.abs(out - x) <= 1e3 + 1e-12 * abs(x)), x
        assert np.all(np.sign(out) == np.sign(x))


def test_release_many_agrees_with_release_on_every_path():
    """The int64 fast path and the exact Python-integer path compute the same function
    of round(x/g) + z: release_many of huge values equals the rational reference."""
    mech = REGISTRY.get("laplace").create({"epsilon": 1.0, "sensitivity": 3.0})
    for x in (0.5, 2.0**60, 1e300):
        many = mech.release_many(x, 50, charger=EventLog(), rng=InsecureReproducibleRandom(seed=2)).output
        z = mech._noise(50, InsecureReproducibleRandom(seed=2)).tolist()
        k = round(Fraction(x) / mech.grid.step)
        assert many.tolist() == [float((k + zi) * mech.grid.step) for zi in z]


@pytest.mark.parametrize("name", ["discrete-laplace", "discrete-gaussian"])
def test_integer_mechanisms_refuse_values_beyond_2_62_and_add_exactly_below(name):
    item = REGISTRY.get(name)
    mech = item.create(item.example.params)
    for bad in (2**64 - 1, np.uint64(2**64 - 1), 2**63 - 1, -(2**63), 2**62 + 1, 1e308, 2.0**63):
        rng = CountingRandom()
        log = SpyCharger(rng)
        with pytest.raises(PrivregValueError, match=r"\[-2\*\*62, 2\*\*62\]") as err:
            mech.release(bad, charger=log, rng=rng)
        assert log.charges == () and rng.draws == 0
        assert str(int(bad)) not in str(err.value)  # names the rule, not the value
    for good in (2**62, -(2**62), 2**53 + 1, 4.5e15, -0.0):
        out = mech.release(good, charger=EventLog(), rng=InsecureReproducibleRandom(seed=4)).output
        z = int(mech._noise(1, InsecureReproducibleRandom(seed=4))[0])
        assert out == int(good) + z and isinstance(out, int)
    vec = item.create({**item.example.params, "dimension": 3})
    out = vec.release(np.array([2**62, -(2**62), 0]), charger=EventLog(), rng=InsecureReproducibleRandom(seed=5)).output
    z = vec._noise(3, InsecureReproducibleRandom(seed=5)).tolist()
    assert out.dtype == np.int64 and out.tolist() == [2**62 + z[0], -(2**62) + z[1], z[2]]


def test_discrete_laplace_no_longer_turns_2_64_minus_1_into_minus_1():
    mech = REGISTRY.get("discrete-laplace").create({"epsilon": 1.0, "sensitivity": 1})
    with pytest.raises(PrivregValueError):
        mech.release(2**64 - 1, charger=EventLog())


@pytest.mark.parametrize("name", ["laplace-thresholding", "gaussian-thresholding"])
def test_thresholding_releases_huge_totals_exactly(name):
    item = REGISTRY.get(name)
    mech = item.create(item.example.params)
    counts = {"a": 2.0**53 - 1, "b": 1e308, "c": MAX, "d": 2**64 - 1, "e": 0.0, "f": TINY}
    out = mech.release(counts, charger=EventLog(), rng=InsecureReproducibleRandom(seed=6)).output
    keys = sorted(counts)
    z = mech._noise(len(keys), InsecureReproducibleRandom(seed=6)).tolist()
    step = mech._grid().step
    want = {}
    for key, zi in zip(keys, z):
        t = round(Fraction(float(counts[key])) / step) + int(zi)
        if t > mech.threshold_int:
            want[key] = float(t * step)
    assert list(out.items()) == list(want.items())
    assert {"a", "b", "c", "d"} <= set(out)


def test_smooth_gaussian_with_bounds_near_the_float_range():
    median = REGISTRY.get("smooth-gaussian")
    with pytest.raises(PrivregValueError, match="upper - lower must be finite"):
        median.create({"epsilon": 1.0, "delta": 1e-6, "lower": -1e308, "upper": 1e308})
    mech = median.create({"epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 1e308})
    for data in (np.full(5, 1e308), np.array([0.0, 0.0, 0.0, 1e308, 1e308]), np.array([TINY, MAX / 2, 1e308])):
        out = mech.release_many(data, 3, charger=EventLog(), rng=InsecureReproducibleRandom(seed=1)).output
        assert not np.isnan(out).any()  # a float, or +-inf beyond the float range; never an error


def test_bounded_mean_cannot_fail_between_its_two_charges(tmp_path):
    """Bounds near the float range: the float sum would overflow to inf after the count
    was charged; the exact sum is clamped instead and both releases go through."""
    path = tmp_path / "big.csv"
    path.write_text("x\n" + "\n".join(["1e308"] * 5 + ["-1e308"]) + "\n")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1))
    result = REGISTRY.get("bounded-mean").run(
        ctx, {"input": str(path), "column": "x", "lower": -1e308, "upper": 1e308, "epsilon": 1.0}
    )
    assert len(ctx.charger.charges) == 2 and math.isfinite(result.metrics["mean"])


def test_ngram_coins_clamp_totals_beyond_2_53():
    from privreg.noise.gaussian_tail import gaussian_tail_coins

    keep = gaussian_tail_coins(
        np.array([0, 2**53, 2**62], dtype=np.int64),
        scale=1 << 20,
        rho=10.0,
        sigma=1.0,
        rng=InsecureReproducibleRandom(seed=0),
    )
    assert keep.tolist()[1:] == [True, True]


# --- 2. canonical order -----------------------------------------------------------------------


def _dict_mechanisms():
    return [p for p in _items(ItemKind.MECHANISM) if isinstance(p.values[0].example.neighbours[0], dict)]


@pytest.mark.parametrize("item", _dict_mechanisms())
def test_released_keys_do_not_follow_the_input_order(item):
    """Counters built by counting users in different orders hold the same totals in
    different key orders; under the same seed the release (keys and their order) is
    identical, and sorted."""
    mech = item.create(item.example.params)
    users = [[f"k{j}" for j in range(i % 7, i % 7 + 3)] for i in range(400)]
    forward = collections.Counter(k for u in users for k in u)
    backward = collections.Counter(k for u in reversed(users) for k in reversed(u))
    assert forward == backward and list(forward) != list(backward)
    for seed in range(5):
        a = mech.release(forward, charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed)).output
        b = mech.release(backward, charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed)).output
        c = mech.release(
            (list(backward), list(backward.values())), charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed)
        ).output
        assert list(a.items()) == list(b.items()) == list(c.items())
        assert list(a) == sorted(a) and len(a) > 0
    many = [
        mech.release_many(d, 3, charger=EventLog(), rng=InsecureReproducibleRandom(seed=9)).output
        for d in (forward, backward)
    ]
    assert [list(o.items()) for o in many[0]] == [list(o.items()) for o in many[1]]


@pytest.mark.parametrize("item", _dict_mechanisms())
def test_keys_of_mixed_types_and_unorderable_keys(item):
    mech = item.create(item.example.params)
    mixed = {3: 1e6, "x": 1e6, (1, "y"): 1e6, 2.5: 1e6}
    a = mech.release(mixed, charger=EventLog(), rng=InsecureReproducibleRandom(seed=1)).output
    b = mech.release(dict(reversed(list(mixed.items()))), charger=EventLog(), rng=InsecureReproducibleRandom(seed=1))
    assert list(a.items()) == list(b.output.items()) and set(a) == set(mixed)
    # two NaN keys have no order at all: the keys come in an order drawn from the source
    nan1, nan2 = float("nan"), float("nan")
    orders = set()
    for seed in range(40):
        out = mech.release({nan1: 1e6, nan2: 1e6}, charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed))
        assert len(out.output) == 2
        orders.add(tuple(id(k) for k in out.output))
    assert len(orders) == 2


def _shuffled_jsonl(path, rows, seed):
    import json

    order = np.random.default_rng(seed).permutation(len(rows))
    path.write_text("".join(json.dumps(rows[i]) + "\n" for i in order), encoding="utf-8")
    return path


@pytest.mark.parametrize("method", ["dpne", "dpsu-all"])
def test_ngrams_output_does_not_depend_on_the_row_order(tmp_path, method):
    from privreg.plugins.ngrams.synthetic import synthetic_corpus

    corpus = synthetic_corpus(users=300, vocab_size=60, min_tokens=10, max_tokens=60, record_length=8, seed=4)
    starts = np.flatnonzero(np.r_[True, corpus.user[1:] != corpus.user[:-1]])
    rows = []
    for s, e in zip(starts, np.r_[starts[1:], corpus.user.size]):
        rows.append(
            {"user_id": str(corpus.users[corpus.user[s]]), "text": " ".join(corpus.vocab[corpus.tokens[s:e]].tolist())}
        )
    outs = []
    for seed in (1, 2):
        path = _shuffled_jsonl(tmp_path / f"r{seed}.jsonl", rows, seed)
        ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=11), output_dir=tmp_path / f"out{seed}")
        REGISTRY.get("ngrams").run(
            ctx, {"input": str(path), "epsilon": 4.0, "delta": 1e-6, "max_n": 3, "max_keys": 8, "method": method}
        )
        outs.append([(tmp_path / f"out{seed}" / f"ngrams-{k}.txt").read_text() for k in (1, 2, 3)])
    assert outs[0] == outs[1] and outs[0][0]
    for text in outs[0]:
        lines = text.splitlines()
        assert lines == sorted(lines)


# --- 3. errors never carry the data ------------------------------------------------------------

SENTINEL = 987654.321


def _message(call):
    with pytest.raises(PrivregError) as err:
        call()
    return str(err.value)


def test_bounded_mean_error_names_the_column_and_rule_not_the_row_or_value(tmp_path):
    path = tmp_path / "ages.csv"
    ages = [str(20 + i % 50) for i in range(3000)]
    ages[2345] = str(SENTINEL)
    path.write_text("age\n" + "\n".join(ages) + "\n")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1))
    msg = _message(
        lambda: REGISTRY.get("bounded-mean").run(
            ctx, {"input": str(path), "column": "age", "lower": 17.0, "upper": 90.0, "epsilon": 1.0, "curator": True}
        )
    )  # only the data holder's --curator run refuses by the data
    assert "'age'" in msg and "[17, 90]" in msg and "--rule" in msg
    assert "987654" not in msg and "2345" not in msg and "row" not in msg
    assert ctx.charger.charges == ()


def test_median_error_does_not_quote_a_cell():
    mech = REGISTRY.get("smooth-gaussian").create({"epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 100.0})
    data = np.full(1001, 50.0)
    data[777] = SENTINEL
    msg = _message(lambda: mech.release(data, charger=EventLog()))
    assert "outside the declared bounds [0, 100]" in msg and "987654" not in msg and "777" not in msg


def test_outlier_errors_do_not_quote_a_cell(tmp_path):
    from privreg.plugins.outliers.datasets import read_csv_points

    path = tmp_path / "p.csv"
    cells = [f"{i},{i % 7}" for i in range(500)]
    cells[321] = "secret-sentinel,3"
    path.write_text("a,b\n" + "\n".join(cells) + "\n")
    msg = _message(lambda: read_csv_points(path))
    assert "'a'" in msg and "secret-sentinel" not in msg and "321" not in msg and "323" not in msg
    item = REGISTRY.get("smooth-outlier-count")
    mech = item.create(item.example.params)
    data = np.zeros((400, 2))
    data[333, 1] = np.nan
    msg = _message(lambda: mech.release(data, charger=EventLog()))
    assert "finite" in msg and "333" not in msg
    data[333, 1] = 3.25e150
    msg = _message(lambda: mech.release(data, charger=EventLog()))
    assert "[-1e100, 1e100]" in msg and "3.25" not in msg and "333" not in msg


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_vector_errors_name_neither_value_nor_position(name):
    item = REGISTRY.get(name)
    mech = item.create({**item.example.params, "dimension": 1000})
    value = np.zeros(1000)
    value[777] = np.inf
    msg = _message(lambda: mech.release(value, charger=EventLog()))
    assert "finite" in msg and "777" not in msg and "inf (" not in msg


def test_other_mechanism_errors_do_not_quote_the_data():
    dl = REGISTRY.get("discrete-laplace").create({"epsilon": 1.0, "sensitivity": 1, "dimension": 3})
    msg = _message(lambda: dl.release(np.array([1, 2, 98765.5]), charger=EventLog()))
    assert "98765" not in msg
    msg = _message(lambda: dl.release([1, 2**70 + 12345, 3], charger=EventLog()))
    assert str(2**70 + 12345) not in msg and "2**62" in msg
    thr = REGISTRY.get("laplace-thresholding").create({"epsilon": 1.0, "delta": 1e-6, "max_partitions": 1})
    msg = _message(lambda: thr.release({"alice-secret-key": float("nan"), "b": 2.0}, charger=EventLog()))
    assert "alice-secret-key" not in msg and "finite" in msg
    msg = _message(lambda: thr.release((["alice-secret-key", "alice-secret-key"], [1.0, 2.0]), charger=EventLog()))
    assert "alice-secret-key" not in msg and "distinct" in msg
    expo = REGISTRY.get("exponential").create({"epsilon": 1.0, "sensitivity": 1.0})
    utilities = np.arange(1000, dtype=np.float64)
    utilities[613] = -np.inf
    msg = _message(lambda: expo.release(utilities, charger=EventLog()))
    assert "613" not in msg and "inf" not in msg.replace("finite", "")
    rr = REGISTRY.get("randomized-response").create({"epsilon": 1.0, "k": 4})
    msg = _message(lambda: rr.randomize(np.array([0, 1, 987654, 2]), charger=EventLog()))
    assert "987654" not in msg and "[0, 4)" in msg


def test_smooth_gaussian_errors_do_not_quote_the_statistic():
    from privreg.core.sensitivity import SmoothSensitivity
    from privreg.mechanisms.smooth_gaussian import SmoothGaussianMechanism, smooth_gaussian_parameters

    _, beta = smooth_gaussian_parameters(epsilon=1.0, delta=1e-6)
    sens = SmoothSensitivity(local_at_distance=lambda x, t: 1.0, beta=beta, max_distance=0, global_bound=1.0)
    mech = SmoothGaussianMechanism(
        epsilon=1.0, delta=1e-6, query=lambda x: float(np.sum(x)) * 1e308, sensitivity=sens, step=1.0
    )
    msg = _message(lambda: mech.release(np.array([SENTINEL, 5.0]), charger=EventLog()))
    assert "finite" in msg and "inf" not in msg.replace("finite", "") and "987654" not in msg


def test_jsonl_errors_do_not_quote_the_line(tmp_path):
    from privreg.plugins.ngrams.backends.local import LocalBackend

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "a", "text": "b"}\n' * 40 + '{"user_id": "secret-user", "text": \n')
    msg = _message(lambda: LocalBackend().read_records(bad)).replace(str(bad), "<path>")
    assert "secret-user" not in msg and "41" not in msg and "JSON object" in msg


# --- 4. guarantees text -----------------------------------------------------------------------

TIMED = [
    "smooth-gaussian",
    "smooth-outlier-count",
    "exponential",
    "report-noisy-max",
    "permute-and-flip",
    "laplace",
    "gaussian",
    "laplace-thresholding",
    "gaussian-thresholding",
]


@pytest.mark.parametrize("item", _items(ItemKind.MECHANISM))
def test_every_mechanism_states_its_input_range(item):
    assert "input range" in item.description.lower(), f"{item.name}: say what is refused and what is clamped"


@pytest.mark.parametrize("name", TIMED)
def test_data_dependent_timing_is_stated_with_a_measured_factor(name):
    text = REGISTRY.get(name).description
    assert "timing" in text.lower() and "measured" in text.lower() and "benchmarks/data_timing.py" in text
    assert any(ch.isdigit() and text[i + 1 : i + 2] == "x" for i, ch in enumerate(text)), "give the factor"


def test_refused_charge_after_validation_still_draws_nothing():
    """A valid extreme input with a refusing charger: nothing drawn (the charge comes first)."""
    mech = REGISTRY.get("laplace").create({"epsilon": 1.0, "sensitivity": 1.0})
    rng = CountingRandom()
    with pytest.raises(BudgetExceededError):
        mech.release(1e308, charger=SpyCharger(rng, refuse=True), rng=rng)
    assert rng.draws == 0


def test_subset_selection_vote_counts_refuses_too_many_reports_before_the_charge():
    from privreg.mechanisms.subset_histogram import MAX_REPORTS

    ss = REGISTRY.get("subset-selection").create({"epsilon": 1.0, "s": 8})
    log = EventLog()
    counts = np.zeros(8, dtype=np.int64)
    counts[3] = MAX_REPORTS
    counts[5] = 1
    with pytest.raises(PrivregValueError, match="batches") as err:
        ss.vote_counts_from_histogram(counts, charger=log)
    assert log.charges == () and str(MAX_REPORTS + 1) not in str(err.value)
    huge = np.full(8, 2**63 - 1, dtype=np.int64)  # an int64 sum would wrap around
    with pytest.raises(PrivregValueError):
        ss.vote_counts_from_histogram(huge, charger=log)
    assert log.charges == ()
