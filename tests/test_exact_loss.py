"""The exact privacy loss between declared laws (privreg.audit.exact) against closed forms,
and the laws the built-in items declare (issue #30). No sampling: every assertion is exact
up to the stated floating-point tolerance."""

from __future__ import annotations

import math
from fractions import Fraction

import attrs
import numpy as np
import pytest
from scipy import stats

import privreg
from privreg import ItemKind
from privreg.audit.exact import exact_loss
from privreg.core.laws import NO_VALUE, DensityLaw, DiscreteGaussianLaw, DiscreteLaw, ProductLaw, aligned_factors
from privreg.mechanisms.laws import (
    MAX_WINDOW,
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


#: Built-in items without an output law, and why (every built-in item declares one now).
WITHOUT_LAW: dict[str, str] = {}


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


def test_no_value_is_one_outcome_whatever_the_offsets():
    """A key released (noisy total) or not: "no value" is compared with "no value" even
    when the two laws' codes are far apart, and a key absent from one input (NO_VALUE
    there) costs exactly its release probability at every epsilon."""
    p_rel = 0.01
    released = DiscreteLaw(
        support=np.array([0, 1]), log_pmf=np.log([p_rel / 2, p_rel / 2]), offset=2**70, none_log_pmf=math.log1p(-p_rel)
    )
    other = attrs.evolve(released, offset=-5)
    assert exact_loss(released, other, epsilon=0.0).delta_low == pytest.approx(p_rel, rel=1e-12)
    for eps in (0.0, 1.0, 10.0):
        # H(P || NO_VALUE) = P(released); H(NO_VALUE || P) = 1 - e^eps (1 - p)^+ = 0 for eps > 0
        got = exact_loss(
            ProductLaw(factors=[released], labels=["b"]), ProductLaw(factors=[NO_VALUE], labels=["b"]), epsilon=eps
        )
        assert got.delta_low == pytest.approx(p_rel, rel=1e-12) and got.delta_high == pytest.approx(p_rel, rel=1e-12)


def test_labelled_products_align_by_label_and_absent_labels_are_no_value():
    """{a} against {a, b}: the same as the unlabelled products [a, NO_VALUE] and [a, b];
    in another order of labels, too."""
    a0 = two_sided_geometric_law(Fraction(2), 0)
    a1 = two_sided_geometric_law(Fraction(2), 1)
    assert a0 is not None and a1 is not None
    b = DiscreteLaw(support=np.array([7]), log_pmf=np.log([0.001]), none_log_pmf=math.log(0.999))
    x = ProductLaw(factors=[a0], labels=["a"])
    y = ProductLaw(factors=[b, a1], labels=["b", "a"])
    flat_x, flat_y = ProductLaw(factors=[a0, NO_VALUE]), ProductLaw(factors=[a1, b])
    assert aligned_factors(x, y) is not None and [k for k, *_ in aligned_factors(x, y)] == ["a", "b"]
    for eps in (0.2, 0.5, 0.6):
        got, want = exact_loss(x, y, epsilon=eps), exact_loss(flat_x, flat_y, epsilon=eps)
        assert got.delta_low == pytest.approx(want.delta_low, abs=1e-15) and got.delta_low > 0.001 * (1 - 1e-9)
    assert aligned_factors(ProductLaw(factors=[a0]), ProductLaw(factors=[a0, a1])) is None


def test_a_law_with_no_value_is_validated():
    with pytest.raises(privreg.PrivregValueError, match="sum to"):
        DiscreteLaw(support=np.array([0]), log_pmf=np.log([0.5]), none_log_pmf=math.log(0.2))
    with pytest.raises(privreg.PrivregValueError, match="empty"):
        DiscreteLaw(support=np.zeros(0, dtype=np.int64), log_pmf=np.zeros(0), none_log_pmf=math.log(0.5))
    with pytest.raises(privreg.PrivregValueError, match="labels"):
        ProductLaw(factors=[NO_VALUE, NO_VALUE], labels=["a", "a"])


@pytest.mark.parametrize(("s1", "s2", "shift"), [(50, 52, 30), (200, 190, -150), (300, 300, 200), (40, 45, 0)])
def test_the_analytic_discrete_gaussian_brackets_the_listed_one(monkeypatch, s1, s2, shift):
    """Large-scale discrete Gaussians are compared analytically (normal masses of the
    integer region {L > eps} within mass_error): the interval contains the divergence
    summed outcome by outcome over the listed windows, in both directions."""
    import privreg.audit.exact as ex

    p = DiscreteGaussianLaw(center=0, sigma2=Fraction(s1) ** 2)
    q = DiscreteGaussianLaw(center=shift, sigma2=Fraction(s2) ** 2)
    listed = [exact_loss(p.window(10**6), q.window(10**6), epsilon=e) for e in (0.1, 0.5, 1.0)]
    monkeypatch.setattr(ex, "_LISTED_GAUSSIAN", 1)  # force the analytic path
    for eps, want in zip((0.1, 0.5, 1.0), listed):
        got = exact_loss(p, q, epsilon=eps)
        assert got.delta_low <= want.delta_low + 1e-12 and want.delta_low <= got.delta_high + 1e-12
        worst = max(p.mass_error, q.mass_error)  # either direction may set either end
        assert got.delta_high - got.delta_low <= 2 * (1 + math.exp(eps)) * worst + 1e-8


def test_the_analytic_discrete_gaussian_matches_balle_wang_at_large_sigma():
    """sigma = 3e7 on both sides, shift sigma / 4: Balle-Wang 2018's exact Gaussian
    formula, up to the stated mass error (the laws cannot be listed at this scale)."""
    sigma, shift = 30_000_000, 7_500_000
    p = DiscreteGaussianLaw(center=2**80, sigma2=Fraction(sigma) ** 2)
    q = DiscreteGaussianLaw(center=2**80 + shift, sigma2=Fraction(sigma) ** 2)
    assert p.window(MAX_WINDOW) is None
    r = shift / sigma
    for eps in (0.05, 0.1, 0.5):
        want = stats.norm.cdf(r / 2 - eps / r) - math.exp(eps) * stats.norm.cdf(-r / 2 - eps / r)
        got = exact_loss(p, q, epsilon=eps)
        assert got.delta_low - 1e-12 <= want <= got.delta_high + 1e-12
