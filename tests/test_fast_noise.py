"""The vectorised samplers of privreg.noise.fast: the scale is never lowered, and draws
follow the discrete Laplace law of the scale actually used."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privreg.core import InsecureReproducibleRandom, PrivregValueError
from privreg.noise.fast import CHUNK, MAX_PART, discrete_laplace_many, fast_scale

scales = st.one_of(
    st.fractions(min_value=Fraction(1, 10**6), max_value=Fraction(10**9)),
    st.floats(min_value=1e-6, max_value=1e9).map(Fraction),  # floats: huge denominators
    st.integers(1, 2**36).map(lambda m: Fraction(m) / Fraction(0.1)),
)


@settings(max_examples=300)  # cheap exact arithmetic over many scales
@given(scale=scales)
def test_fast_scale_never_lowers_the_scale_and_fits_int64(scale):
    out = fast_scale(scale)
    assert out >= scale, "a smaller scale would mean more privacy loss than charged"
    assert out.numerator <= MAX_PART and out.denominator <= MAX_PART
    assert out - scale < max(Fraction(1, 2**40), scale / 2**39), "the documented rounding bound"
    if scale >= 1:
        assert out <= scale * (1 + Fraction(1, 2**39)), "negligible for the mechanisms' scales"
    if scale.numerator <= MAX_PART and scale.denominator <= MAX_PART:
        assert out == scale


def test_scales_beyond_the_int64_range_are_refused_with_the_fix():
    with pytest.raises(PrivregValueError, match="path='exact'"):
        fast_scale(Fraction(2**41) + Fraction(1, 3))


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(-1, 3)])
def test_fast_scale_refuses_non_positive(bad):
    with pytest.raises(PrivregValueError, match="scale"):
        fast_scale(bad)


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(7, 2), Fraction(1) / Fraction(0.7)])
def test_draws_follow_the_exact_pmf_of_the_scale_used(scale):
    """Chi-square over 100,000 draws against P(z) = tanh(a/2) e^(-a|z|), a = 1/scale',
    tails pooled; rejected at p < 1e-4 (seeded, deterministic). The same data must reject
    a 10% larger scale, so the test can fail."""
    used = fast_scale(scale)
    z = discrete_laplace_many(scale, 100_000, InsecureReproducibleRandom(seed=17))
    assert z.dtype == np.int64

    def pvalue(s):
        a = 1 / float(s)
        cut = int(np.ceil(8 * float(s))) + 2
        support = np.arange(-cut, cut + 1)
        pmf = np.tanh(a / 2) * np.exp(-a * np.abs(support))
        observed = np.array([np.sum(z == k) for k in support] + [np.sum(np.abs(z) > cut)])
        expected = z.size * np.append(pmf, max(1 - pmf.sum(), 1e-12))
        keep = expected >= 5
        obs = np.append(observed[keep], observed[~keep].sum())
        exp = np.append(expected[keep], expected[~keep].sum())
        return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue

    assert pvalue(used) > 1e-4
    assert pvalue(used * Fraction(11, 10)) < 1e-4


def test_large_calls_are_drawn_in_chunks_with_bounded_temporaries():
    """Peak memory of one call is the output plus one chunk's temporaries (about 75 bytes
    per value of a chunk): an unchunked run of 4 * CHUNK values peaks near 9 times its
    output (full-size random bytes, uniforms, indices, masks), which this bound refuses."""
    import tracemalloc

    size = 4 * CHUNK
    tracemalloc.start()
    try:
        z = discrete_laplace_many(Fraction(2048), size, InsecureReproducibleRandom(seed=3))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert z.shape == (size,) and z.dtype == np.int64
    assert peak < 8 * size + 100 * CHUNK, f"peak {peak} bytes: temporaries grow with the call size"


def test_seeded_draws_within_one_chunk_do_not_depend_on_the_call_size():
    """The first chunk of a long call consumes the stream as a call of CHUNK values does;
    later chunks are fresh draws of the same law (the chi-square test above covers 1e5
    values across a chunk boundary when CHUNK is small)."""
    long = discrete_laplace_many(Fraction(7, 2), CHUNK + 1000, InsecureReproducibleRandom(seed=4))
    short = discrete_laplace_many(Fraction(7, 2), CHUNK, InsecureReproducibleRandom(seed=4))
    np.testing.assert_array_equal(long[:CHUNK], short)
    assert np.abs(long[CHUNK:]).max() > 0 and long[CHUNK:].std() > 1


def test_chunks_are_independent_draws_of_the_same_law(monkeypatch):
    """With tiny chunks (97 values) the 3e4 draws cross 300 chunk boundaries; their
    pmf still passes the chi-square test (p > 1e-4, seeded) against the scale used."""
    import privreg.noise.fast as fast

    monkeypatch.setattr(fast, "CHUNK", 97)
    scale = Fraction(7, 2)
    z = discrete_laplace_many(scale, 30_000, InsecureReproducibleRandom(seed=19))
    a = 1 / float(scale)
    support = np.arange(-30, 31)
    pmf = np.tanh(a / 2) * np.exp(-a * np.abs(support))
    observed = np.array([np.sum(z == k) for k in support] + [np.sum(np.abs(z) > 30)])
    expected = z.size * np.append(pmf, 1 - pmf.sum())
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-4
    # successive chunks differ (fresh randomness, not one chunk repeated)
    assert not np.array_equal(z[:97], z[97:194])
