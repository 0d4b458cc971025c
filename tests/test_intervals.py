"""Intervals from exact noise laws and the reporting of noisy numbers
(``privreg.analysis.accuracy``, ``privreg.analysis.report``).

Deterministic: coverages are computed from the laws' probability mass functions, not
sampled.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privreg.analysis.accuracy import (
    discrete_gaussian_half_width,
    exponential_loss_bound,
    ratio_range,
    smooth_gaussian_accuracy,
)
from privreg.analysis.report import NoisyValue, clamped_release, count_release, needed, smallest_passing
from privreg.core.errors import PrivregValueError
from privreg.mechanisms.median import MedianQuery, MedianSmoothSensitivity
from privreg.mechanisms.smooth_gaussian import SmoothGaussianMechanism, certifies, grid_sigma


def _discrete_gaussian_coverage(sigma: float, t: int) -> float:
    """``P(|Z| <= t)`` for ``N_Z(0, sigma^2)``, summed over its support (to 40 sigma)."""
    y = np.arange(-math.ceil(40 * sigma) - 1, math.ceil(40 * sigma) + 2)
    w = np.exp(-(y.astype(np.float64) ** 2) / (2 * sigma**2))
    return float(w[np.abs(y) <= t].sum() / w.sum())


@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.5, 17.0, 300.0])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999])
def test_discrete_gaussian_half_width_covers_and_is_nearly_tight(sigma, level):
    t = discrete_gaussian_half_width(sigma, level)
    assert _discrete_gaussian_coverage(sigma, t) >= level
    if t >= 2:  # within about one unit of the smallest: two units fewer do not cover
        assert _discrete_gaussian_coverage(sigma, t - 2) < level


def test_discrete_gaussian_half_width_refuses_a_bad_level():
    with pytest.raises(PrivregValueError, match="level"):
        discrete_gaussian_half_width(1.0, 1.0)


def test_smooth_gaussian_interval_is_taken_at_the_public_bound():
    mech = SmoothGaussianMechanism(
        epsilon=1.0,
        delta=1e-6,
        query=MedianQuery(lower=0.0, upper=10.0),
        sensitivity=MedianSmoothSensitivity(lower=0.0, upper=10.0, beta=0.01),
        step=2.0**-10,
    )
    half, acc = smooth_gaussian_accuracy(mech, 0.95, 10.0, "units")
    sigma = grid_sigma(10.0, alpha=mech.alpha, step=mech.step)
    assert acc.noise_scale == pytest.approx(float(sigma) * 2.0**-10, rel=1e-12)
    assert acc.noise_scale == pytest.approx(10.0 / mech.alpha, rel=1e-3)  # (S + g) / alpha
    t = discrete_gaussian_half_width(sigma, 0.95)
    assert half == pytest.approx((t + 0.5) * 2.0**-10, rel=1e-12)
    assert half == pytest.approx(1.96 * acc.noise_scale, rel=1e-3)
    # a smaller smooth bound never gives a larger scale: the bound's interval is conservative
    assert grid_sigma(3.0, alpha=mech.alpha, step=mech.step) <= sigma
    assert certifies(epsilon=1.0, delta=1e-6) and not certifies(epsilon=50.0, delta=1e-6)


def test_count_release_is_a_non_negative_integer_with_a_clamped_interval():
    assert count_release(-402.3, 400.0) == (0, 0, 400, 400)
    assert count_release(3.4, 10.2) == (3, 0, 13, 10)
    assert count_release(428.0, 10.0, upper=351) == (351, 341, 351, 10)
    c, lo, hi, h = count_release(float("-inf"), 5.0)
    assert (c, lo, hi, h) == (0, 0, 5, 5) and isinstance(c, int)
    # the interval holds the true count whenever the raw release is within half_width of it
    for true in range(6):
        for raw in np.linspace(true - 2.5, true + 2.5, 41):
            c, lo, hi, _ = count_release(float(raw), 2.5, upper=5)
            assert lo <= true <= hi and 0 <= c <= 5


def test_clamped_release_clamps_value_and_interval_and_never_gives_nan():
    assert clamped_release(-3.0, 5.0, lower=0.0) == (0.0, 0.0, 2.0)
    assert clamped_release(7.0, 1.0) == (7.0, 6.0, 8.0)
    v, lo, hi = clamped_release(math.inf, math.inf)
    assert v == math.inf and lo == -math.inf and hi == math.inf


def test_smallest_passing_finds_the_threshold():
    assert smallest_passing(lambda x: x >= 37, 1, limit=1e6, integer=True) == 37
    got = smallest_passing(lambda x: 10 / x <= 3, 1.0, limit=1e6)
    assert got == 3.34  # 10 / 3 rounded up to 3 significant digits: 3.33 does not pass
    assert smallest_passing(lambda x: False, 1.0, limit=100.0) is None
    assert needed(lambda e: 10 / e, 0.0, 1.0, limit=1e6) is None  # a value of 0: no fix
    # a parameter the mechanism refuses is not a fix, and nothing raises
    assert needed(lambda e: 1 / 0, 1.0, 1.0, limit=10.0) is None


def test_noisy_value_warns_exactly_when_the_half_width_exceeds_the_value():
    base = dict(name="x", low=0, high=10, level=0.95, noise_scale=2.0, noise="Laplace")
    quiet = NoisyValue(value=5, half_width=5, **base)
    loud = NoisyValue(value=5, half_width=6, needed_epsilon=1.2, needed_rows=40, **base)
    assert not quiet.wide and quiet.warning() == "" and quiet.metrics()["needed_epsilon"] is None
    assert loud.wide and "half-width 6 exceeds the value 5" in loud.warning()
    assert "epsilon >= 1.2 or at least 40 rows" in loud.warning()
    assert NoisyValue(value=-3.0, half_width=2.9, **base).wide is False  # |value| counts
    assert quiet.line() == "5  [0, 10] 95%, noise scale 2"
    bound = NoisyValue(value=5, half_width=math.inf, scale_is_bound=True, **base)
    assert "noise scale <= 2" in bound.line() and bound.metrics()["half_width"] is None


def test_exponential_loss_bound_and_ratio_range():
    assert exponential_loss_bound(epsilon=2.0, sensitivity=1.0, candidates=10, beta=0.05) == pytest.approx(
        math.log(200)
    )
    assert ratio_range((10.0, 20.0), (2.0, 5.0)) == (2.0, 10.0)
    assert ratio_range((10.0, 20.0), (0.0, 5.0)) is None
    assert Fraction(grid_sigma(0, alpha=0.5, step=1.0)) == 2


def test_discrete_gaussian_half_width_for_scales_beyond_float_unit_resolution():
    t = discrete_gaussian_half_width(3e17, 0.95)  # returns (no unit-step loop) and covers
    assert 1.959963984540054 * 3e17 <= t <= 1.96 * 3e17
