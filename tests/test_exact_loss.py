"""The exact privacy loss between declared laws (privreg.audit.exact) against closed forms,
and the laws the built-in items declare (issue #30). No sampling: every assertion is exact
up to the stated floating-point tolerance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import privreg
from privreg import ItemKind
from privreg.audit.exact import exact_loss
from privreg.core.laws import DensityLaw, DiscreteLaw, ProductLaw
from privreg.mechanisms.laws import (
    categorical_law,
    discrete_gaussian_law,
    permute_and_flip_pmf,
    two_sided_geometric_law,
)
from privreg.testing.exact import is_declared, law_on


def _rr(p: float, k: int, x: int) -> DiscreteLaw:
    probs = np.full(k, (1 - p) / (k - 1))
    probs[x] = p
    return categorical_law(probs)


def test_randomized_response_against_its_closed_form():
    """H_{e^e}(P||Q) = max(0, p - e^e q) + max(0, q - e^e p) for k-RR on inputs 0 and 1."""
    k, eps = 4, 1.0
    p = math.exp(eps) / (math.exp(eps) + k - 1)
    q = (1 - p) / (k - 1)
    a, b = _rr(p, k, 0), _rr(p, k, 1)
    for at in (0.2, 0.5, 0.9):
        want = max(0.0, p - math.exp(at) * q) + max(0.0, q - math.exp(at) * p)
        got = exact_loss(a, b, epsilon=at)
        assert got.delta_low == pytest.approx(want, rel=1e-12) and got.delta_high == pytest.approx(want, rel=1e-12)
    exact = exact_loss(a, b, epsilon=eps)
    assert exact.delta_low == 0.0 and exact.loss_low == pytest.approx(eps, abs=1e-12)


def test_discrete_laplace_against_its_closed_form():
    """Two-sided geometric noise, centres 0 and 1, scale s: the largest loss is 1/s, and at
    epsilon 0 the divergence is the total variation P(Z >= 0) - P(Z >= 1) = (1 - a) / (1 + a)."""
    from fractions import Fraction

    s = Fraction(3, 2)
    a_ = math.exp(-1 / float(s))
    p, q = two_sided_geometric_law(s, 0), two_sided_geometric_law(s, 1)
    assert p is not None and q is not None
    assert exact_loss(p, q, epsilon=1 / float(s)).delta_low == 0.0
    assert exact_loss(p, q, epsilon=1 / float(s)).loss_low == pytest.approx(1 / float(s), abs=1e-12)
    tv = exact_loss(p, q, epsilon=0.0)
    assert tv.delta_low == pytest.approx((1 - a_) / (1 + a_), rel=1e-9)
    far = two_sided_geometric_law(s, 2**70)  # windows that cannot overlap: told apart surely
    assert far is not None and exact_loss(p, far, epsilon=5.0).delta_low == pytest.approx(1.0, abs=1e-12)


def test_discrete_gaussian_is_close_to_the_continuous_formula():
    """For sigma = 40 the discrete Gaussian's divergence is within 1e-4 of Balle-Wang 2018's
    exact Gaussian formula Phi(D/2s - e s/D) - e^e Phi(-D/2s - e s/D) (Canonne-Kamath-Steinke
    2020 show the two agree closely at large sigma)."""
    from fractions import Fraction

    sigma, shift = 40.0, 40
    p, q = discrete_gaussian_law(Fraction(sigma) ** 2, 0), discrete_gaussian_law(Fraction(sigma) ** 2, shift)
    assert p is not None and q is not None
    for eps in (0.5, 1.0, 2.0):
        r = shift / sigma
        want = stats.norm.cdf(r / 2 - eps / r) - math.exp(eps) * stats.norm.cdf(-r / 2 - eps / r)
        assert exact_loss(p, q, epsilon=eps).delta_low == pytest.approx(want, abs=1e-4)


def test_a_product_law_equals_its_enumerated_joint_law():
    """Unary-encoding bits as a product of Bernoullis, and the same law enumerated over all
    2^3 reports: identical divergences (the privacy-loss distribution convolves)."""
    q, k = 0.25, 3

    def product(x: int) -> ProductLaw:
        own = DiscreteLaw(support=np.array([0, 1]), log_pmf=np.log([0.5, 0.5]))
        other = DiscreteLaw(support=np.array([0, 1]), log_pmf=np.log([1 - q, q]))
        return ProductLaw(factors=[own if i == x else other for i in range(k)])

    def joint(x: int) -> DiscreteLaw:
        probs = []
        for code in range(2**k):
            bits = [(code >> i) & 1 for i in range(k)]
            probs.append(math.prod((0.5 if i == x else (q if b else 1 - q)) for i, b in enumerate(bits)))
        return categorical_law(probs)

    for eps in (0.0, 0.5, 1.0, 1.2):
        a, b = exact_loss(product(0), product(1), epsilon=eps), exact_loss(joint(0), joint(1), epsilon=eps)
        assert a.delta_low == pytest.approx(b.delta_low, abs=1e-12) and a.loss_low == pytest.approx(b.loss_low)


def test_a_density_law_against_the_continuous_laplace_closed_form():
    """Laplace(0, b) against Laplace(1, b): the largest loss is 1/b; at epsilon 0 the
    divergence is the total variation 1 - e^(-1/(2b))."""
    b = 1.25
    p, q = DensityLaw(distribution=stats.laplace(0, b)), DensityLaw(distribution=stats.laplace(1, b))
    tv = exact_loss(p, q, epsilon=0.0)
    assert tv.delta_low == pytest.approx(1 - math.exp(-1 / (2 * b)), abs=1e-8)
    assert exact_loss(p, q, epsilon=1 / b).delta_low == 0.0
    assert exact_loss(p, q, epsilon=1 / b).loss_low == pytest.approx(1 / b, abs=1e-6)


def test_permute_and_flip_pmf_against_enumeration():
    """P(i) from the integral formula equals the average over all k! visiting orders."""
    import itertools

    gammas = [0.0, 0.3, 1.1, 2.0]
    q = [math.exp(-g) for g in gammas]
    want = np.zeros(4)
    orders = list(itertools.permutations(range(4)))
    for order in orders:
        survive = 1.0
        for step, i in enumerate(order):
            want[i] += survive * q[i] / len(orders)
            survive *= 1 - q[i]
            if step == len(order) - 1:
                break
    assert np.allclose(permute_and_flip_pmf(gammas), want, atol=1e-14)
    assert permute_and_flip_pmf(gammas).sum() == pytest.approx(1.0, abs=1e-14)


#: Built-in items whose output law is declared, and those without one (and why).
WITHOUT_LAW = {
    "laplace-thresholding": "a product over keys of released/not-released and noisy totals: not declared yet",
    "gaussian-thresholding": "a product over keys of released/not-released and noisy totals: not declared yet",
    "smooth-gaussian": "noise scaled by a data-dependent smooth bound",
    "smooth-outlier-count": "noise scaled by a data-dependent smooth bound",
}


def test_every_built_in_item_declares_its_law_where_one_exists():
    registry = privreg.load_registry()
    for item in registry.items():
        if item.kind not in (ItemKind.MECHANISM, ItemKind.RANDOMIZER) or item.plugin == "template":
            continue
        obj = item.create(item.example.params)
        x, y = item.example.neighbours
        if item.name in WITHOUT_LAW:
            assert not is_declared(obj), item.name
            continue
        assert is_declared(obj), f"{item.name} declares no output law"
        assert law_on(obj, x) is not None and law_on(obj, y) is not None, item.name
