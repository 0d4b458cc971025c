"""The discrete Gaussian mechanism for integer queries (CKS 2020)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privreg.accountant import make_accountant
from privreg.core import EventLog
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import DiscreteGaussian
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism


def test_charges_the_discrete_gaussian_it_samples() -> None:
    mech = DiscreteGaussianMechanism(sigma=3.5, sensitivity=2, dimension=3)
    log = EventLog()
    out = mech.release(np.array([1, 2, 3]), charger=log, rng=InsecureReproducibleRandom(seed=1))
    assert log.events == (DiscreteGaussian(sigma=3.5, sensitivity=2, dimension=3),)
    assert out.output.dtype == np.int64 and out.output.shape == (3,)
    # about rho = sensitivity^2 / (2 sigma^2)-zCDP (plus CKS Theorem 14's tiny d-dimensional
    # term): between rho and the basic zCDP conversion rho + 2 sqrt(rho ln(1/delta))
    rho = 4 / (2 * 3.5**2)
    eps = make_accountant("zcdp").compose(log.events[0]).epsilon(1e-6)
    assert rho < eps <= (rho + 1e-6) + 2 * math.sqrt((rho + 1e-6) * math.log(1e6))


@pytest.mark.parametrize(
    "kw, error, match",
    [
        ({"sigma": float("nan")}, PrivregValueError, "sigma"),
        ({"sigma": float("inf")}, PrivregValueError, "sigma"),
        ({"sigma": 0.0}, PrivregValueError, "sigma"),
        ({"sigma": 2.0**41}, PrivregValueError, "sigma"),
        ({"sigma": 1.0, "sensitivity": 0}, PrivregValueError, "sensitivity"),
        ({"sigma": 1.0, "path": "quick"}, PrivregValueError, "path"),
    ],
)
def test_bad_parameters_name_the_argument(kw: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        DiscreteGaussianMechanism(**kw)


def test_real_values_are_refused_before_charging() -> None:
    log = EventLog()
    with pytest.raises(PrivregTypeError, match="integers"):
        DiscreteGaussianMechanism(sigma=1.0).release(2.5, charger=log)
    assert log.events == ()


@pytest.mark.parametrize("path", ["fast", "exact"])
def test_noise_has_variance_about_sigma_squared(path: str) -> None:
    """Sample variance within a chi-square interval of false-alarm rate 1e-6 (fixed seed);
    for sigma = 4 the discrete Gaussian's variance equals sigma^2 to within 1e-60."""
    n = 20_000 if path == "fast" else 3_000
    mech = DiscreteGaussianMechanism(sigma=4.0, path=path)
    out = mech.release_many(10, n, charger=EventLog(), rng=InsecureReproducibleRandom(seed=7)).output - 10
    lo, hi = stats.chi2.ppf([0.5e-6, 1 - 0.5e-6], n - 1) / (n - 1)
    assert lo * 16 <= np.var(out, ddof=1) <= hi * 16
