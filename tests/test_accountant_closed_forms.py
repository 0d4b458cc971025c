"""Accountants against closed forms computed here, and against dp-accounting itself.

Closed forms are written out independently of privreg's code (scipy.stats.norm for
Phi, math.comb for binomials); every comparison is deterministic.
"""

import math

import dp_accounting
import pytest
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from privreg.accountant import make_accountant
from privreg.accountant.rdp import ORDERS
from privreg.core.events import (
    ApproxDP,
    Composed,
    Exponential,
    Gaussian,
    Laplace,
    LocalDP,
    PoissonSampled,
    PureDP,
    SelfComposed,
)


def rel_close(a, b, rel):
    return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


# --- GDP: k Gaussians (Dong-Roth-Su 2022, Cor. 3.3; Balle-Wang 2018, Thm 8) ------------


def gdp_delta(eps, mu):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("s, d, k", [(1.0, 1.0, 1), (2.0, 1.0, 10), (3.0, 1.5, 7), (10.0, 0.5, 100), (0.8, 1.0, 3)])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0])
def test_gdp_k_gaussians_closed_form(s, d, k, eps):
    acc = make_accountant("gdp").compose(Gaussian(sigma=s, sensitivity=d), count=k)
    mu = d * math.sqrt(k) / s
    want = gdp_delta(eps, mu)
    got = acc.delta(eps)
    assert rel_close(got, want, 1e-9), (got, want)
    if 1e-300 < want < 1:
        back = acc.epsilon(got)  # epsilon(delta) round-trips
        assert rel_close(back, eps, 1e-9), (back, eps)
        assert gdp_delta(back, mu) <= got * (1 + 1e-9)


def test_gdp_composes_heterogeneous_gaussians_in_quadrature():
    acc = make_accountant("gdp")
    parts = [(2.0, 1.0, 3), (5.0, 2.0, 4), (1.5, 0.3, 1)]
    for s, d, k in parts:
        acc.compose(Gaussian(sigma=s, sensitivity=d), count=k)
    mu = math.sqrt(sum(k * (d / s) ** 2 for s, d, k in parts))
    assert rel_close(acc.delta(1.0), gdp_delta(1.0, mu), 1e-9)


# --- basic: sums ------------------------------------------------------------------------


def test_basic_pure_dp_sums_exactly():
    acc = make_accountant("basic", neighbouring="replace_one")  # local reports hold for replace-one
    rel = "replace_one"
    acc.compose(PureDP(epsilon=0.25, neighbouring=rel), count=3)
    acc.compose(Laplace(scale=4.0, sensitivity=2.0, neighbouring=rel))  # eps = 0.5
    acc.compose(Exponential(epsilon=0.125, neighbouring=rel), count=2)
    acc.compose(LocalDP(epsilon0=1.0))
    assert acc.epsilon(0.0) == 0.75 + 0.5 + 0.25 + 1.0  # dyadic: exact in binary
    assert acc.delta(2.5) == 0.0
    assert acc.delta(2.4999) == 1.0
    acc.compose(PureDP(epsilon=0.25))  # stated for add/remove: group privacy doubles it
    assert acc.epsilon(0.0) == 3.0


def test_basic_general_sums():
    acc = make_accountant("basic")
    eps_parts = [(0.1, 3), (0.37, 2), (1 / 3, 5)]
    for e, k in eps_parts:
        acc.compose(PureDP(epsilon=e), count=k)
    acc.compose(ApproxDP(epsilon=0.2, delta=1e-7), count=4)
    acc.compose(ApproxDP(epsilon=0.05, delta=3e-6))
    eps = math.fsum([e * k for e, k in eps_parts] + [0.8, 0.05])
    delta = 4e-7 + 3e-6
    assert rel_close(acc.total[0], eps, 1e-12)
    assert rel_close(acc.total[1], delta, 1e-12)
    assert acc.epsilon(delta * (1 + 1e-9)) == acc.total[0]
    assert acc.epsilon(delta * (1 - 1e-9)) == math.inf


# --- advanced composition (Dwork-Rothblum-Vadhan 2010, Thm III.3) ------------------------


@pytest.mark.parametrize("eps, k, delta_prime", [(0.05, 100, 1e-6), (0.01, 1000, 1e-5), (0.1, 500, 1e-9)])
def test_drv_formula(eps, k, delta_prime):
    acc = make_accountant("advanced").compose(PureDP(epsilon=eps), count=k)
    want = math.sqrt(2 * k * math.log(1 / delta_prime)) * eps + k * eps * (math.exp(eps) - 1)
    assert want < k * eps  # the chosen parameters are where DRV beats basic composition
    assert rel_close(acc.epsilon(delta_prime), want, 1e-9)
    # delta(eps') inverts it: delta' = exp(-(eps' - k eps (e^eps - 1))^2 / (2 k eps^2))
    assert rel_close(acc.delta(want), delta_prime, 1e-9)


def test_drv_with_approx_dp_pays_the_deltas_on_top():
    eps, d0, k, dp = 0.05, 1e-8, 100, 1e-6
    acc = make_accountant("advanced").compose(ApproxDP(epsilon=eps, delta=d0), count=k)
    want = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * (math.exp(eps) - 1)
    assert rel_close(acc.epsilon(dp + k * d0), want, 1e-9)


# --- optimal composition (Kairouz-Oh-Viswanath 2015, Thm 3.3) ----------------------------


def kov_delta_i(eps, k, i):
    total = sum(math.comb(k, j) * (math.exp((k - j) * eps) - math.exp((k - 2 * i + j) * eps)) for j in range(i))
    return total / (1 + math.exp(eps)) ** k


def kov_true_delta(eps, k, eps_g):
    """Exact profile of k-fold eps-randomized response at any eps_g, summed term by term
    (no cancellation): sum_j C(k,j) e^{(k-j)eps} (1 - e^{eps_g - (k-2j)eps})_+ / (1+e^eps)^k."""
    terms = [
        math.comb(k, j) * math.exp((k - j) * eps) * -math.expm1(eps_g - (k - 2 * j) * eps)
        for j in range(k + 1)
        if (k - 2 * j) * eps > eps_g
    ]
    return math.fsum(terms) / (1 + math.exp(eps)) ** k


KOV_PURE = [(0.1, 10), (0.5, 20), (1.0, 7), (0.05, 60)]


@pytest.mark.parametrize("eps, k", KOV_PURE)
def test_kov_pure_dp_matches_theorem_3_3(eps, k):
    acc = make_accountant("optimal").compose(PureDP(epsilon=eps), count=k)
    checked = 0
    for i in range(1, k // 2 + 1):
        want = kov_delta_i(eps, k, i)
        if want < 1e-6:
            continue  # see test_kov_tiny_delta_keeps_relative_precision below
        got = acc.delta((k - 2 * i) * eps)
        assert rel_close(got, want, 1e-9), (i, got, want)
        checked += 1
    assert checked >= 3
    assert acc.delta(k * eps) == 0.0  # i = 0: delta_0 = 0


def test_kov_tiny_delta_keeps_relative_precision():
    eps, k = 0.05, 60
    acc = make_accountant("optimal").compose(PureDP(epsilon=eps), count=k)
    for i in (1, 2, 3, 5):
        assert rel_close(acc.delta((k - 2 * i) * eps), kov_delta_i(eps, k, i), 1e-9), i


@pytest.mark.parametrize("target", [1e-18, 1e-14])
def test_kov_epsilon_is_safe_for_small_delta(target):
    eps, k = 0.05, 60
    e = make_accountant("optimal").compose(PureDP(epsilon=eps), count=k).epsilon(target)
    assert kov_true_delta(eps, k, e) <= target


@pytest.mark.parametrize("eps, k", KOV_PURE)
@pytest.mark.parametrize("target", [1e-3, 1e-6])
def test_kov_epsilon_is_safe_and_tight(eps, k, target):
    e = make_accountant("optimal").compose(PureDP(epsilon=eps), count=k).epsilon(target)
    assert kov_true_delta(eps, k, e) <= target
    assert e == 0.0 or kov_true_delta(eps, k, e * (1 - 1e-9)) > target


@pytest.mark.parametrize("eps, d0, k", [(0.2, 1e-6, 10), (0.5, 1e-4, 12)])
def test_kov_approx_dp_matches_theorem_3_3(eps, d0, k):
    acc = make_accountant("optimal").compose(ApproxDP(epsilon=eps, delta=d0), count=k)
    log_survive = k * math.log1p(-d0)  # (1 - d0)^k, in log space
    for i in range(k // 2 + 1):
        # 1 - (1-d0)^k (1 - delta_i) = (1 - (1-d0)^k) + (1-d0)^k delta_i, without cancellation
        want = -math.expm1(log_survive) + math.exp(log_survive) * kov_delta_i(eps, k, i)
        assert rel_close(acc.delta((k - 2 * i) * eps), want, 1e-9), i


def test_kov_epsilon_inverts_delta():
    acc = make_accountant("optimal").compose(PureDP(epsilon=0.3), count=15)
    target = kov_delta_i(0.3, 15, 4)  # exactly the profile at (15 - 8) * 0.3
    e = acc.epsilon(target)
    assert acc.delta(e) <= target
    assert rel_close(e, 7 * 0.3, 1e-9)


# --- zCDP (Bun-Steinke 2016, Prop. 1.6 and Lemma 2.3) ----------------------------------


@pytest.mark.parametrize("s, d, k", [(2.0, 1.0, 5), (4.0, 2.0, 3), (1.0, 1.0, 1)])
def test_zcdp_gaussians_dyadic_exact(s, d, k):
    acc = make_accountant("zcdp").compose(Gaussian(sigma=s, sensitivity=d), count=k)
    assert acc.rho == k * d**2 / (2 * s**2)  # exact: dyadic inputs


@pytest.mark.parametrize("s, d, k", [(3.0, 1.7, 11), (0.3, 0.1, 40), (7.7, 2.2, 2)])
def test_zcdp_gaussians(s, d, k):
    acc = make_accountant("zcdp").compose(Gaussian(sigma=s, sensitivity=d), count=k)
    assert rel_close(acc.rho, k * d**2 / (2 * s**2), 1e-12)


# --- RDP agrees with dp-accounting's RdpAccountant ----------------------------------------

RDP_CASES = [
    (Gaussian(sigma=2.0), dp_accounting.GaussianDpEvent(2.0), 10),
    (Gaussian(sigma=3.0, sensitivity=1.5), dp_accounting.GaussianDpEvent(2.0), 25),
    (Laplace(scale=5.0), dp_accounting.LaplaceDpEvent(5.0), 10),
    (Laplace(scale=1.2, sensitivity=0.4), dp_accounting.LaplaceDpEvent(3.0), 4),
    (
        PoissonSampled(sampling_probability=0.1, event=Gaussian(sigma=1.5)),
        dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.5)),
        50,
    ),
    (
        PoissonSampled(sampling_probability=0.02, event=Gaussian(sigma=4.0, sensitivity=2.0)),
        dp_accounting.PoissonSampledDpEvent(0.02, dp_accounting.GaussianDpEvent(2.0)),
        300,
    ),
]


@pytest.mark.parametrize("ours, theirs, k", RDP_CASES, ids=lambda x: getattr(x, "kind", str(x)))
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_rdp_agrees_with_dp_accounting(ours, theirs, k, delta):
    google = RdpAccountant(orders=list(ORDERS))
    google.compose(theirs, k)
    acc = make_accountant("rdp").compose(ours, count=k)
    assert rel_close(acc.epsilon(delta), google.get_epsilon(delta), 1e-9)
    eps = google.get_epsilon(delta)
    assert rel_close(acc.delta(eps), google.get_delta(eps), 1e-9)


def test_rdp_composed_mix_agrees_with_dp_accounting():
    google = RdpAccountant(orders=list(ORDERS))
    google.compose(
        dp_accounting.ComposedDpEvent(
            [
                dp_accounting.GaussianDpEvent(2.0),
                dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(4.0), 3),
                dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.5)),
            ]
        ),
        5,
    )
    acc = make_accountant("rdp").compose(
        Composed(
            events=[
                Gaussian(sigma=2.0),
                SelfComposed(event=Laplace(scale=4.0), count=3),
                PoissonSampled(sampling_probability=0.1, event=Gaussian(sigma=1.5)),
            ]
        ),
        count=5,
    )
    assert rel_close(acc.epsilon(1e-6), google.get_epsilon(1e-6), 1e-9)


# --- PLD agrees with dp-accounting's PLDAccountant -----------------------------------------

PLD_CASES = [
    (Gaussian(sigma=2.0), dp_accounting.GaussianDpEvent(2.0), 1),
    (Gaussian(sigma=2.0), dp_accounting.GaussianDpEvent(2.0), 10),
    (Gaussian(sigma=4.0, sensitivity=2.0), dp_accounting.GaussianDpEvent(2.0), 10),
    (Laplace(scale=5.0), dp_accounting.LaplaceDpEvent(5.0), 10),
    (Laplace(scale=1.0, sensitivity=0.5), dp_accounting.LaplaceDpEvent(2.0), 3),
    (
        PoissonSampled(sampling_probability=0.05, event=Gaussian(sigma=1.5)),
        dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1.5)),
        40,
    ),
]


def google_pld():
    return dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)


@pytest.mark.parametrize("ours, theirs, k", PLD_CASES, ids=lambda x: getattr(x, "kind", str(x)))
def test_pld_agrees_with_dp_accounting(ours, theirs, k):
    google = google_pld()
    google.compose(theirs, k)
    acc = make_accountant("pld", value_discretization_interval=1e-4).compose(ours, count=k)
    for delta in (1e-5, 1e-8):
        assert rel_close(acc.epsilon(delta), google.get_epsilon(delta), 1e-6)
    for eps in (0.5, 1.0):
        assert rel_close(acc.delta(eps), google.get_delta(eps), 1e-6)


def test_pld_composed_gaussians_agree_with_dp_accounting():
    google = google_pld()
    google.compose(
        dp_accounting.ComposedDpEvent(
            [dp_accounting.GaussianDpEvent(2.0), dp_accounting.GaussianDpEvent(3.0), dp_accounting.LaplaceDpEvent(6.0)]
        )
    )
    acc = make_accountant("pld").compose(
        Composed(events=[Gaussian(sigma=2.0), Gaussian(sigma=3.0), Laplace(scale=6.0)])
    )
    assert rel_close(acc.epsilon(1e-6), google.get_epsilon(1e-6), 1e-6)


def test_pld_gaussian_close_to_exact_gdp():
    # PLD is pessimistic and tight: within a few discretisation steps of the exact curve
    k, s = 10, 2.0
    pld = make_accountant("pld").compose(Gaussian(sigma=s), count=k).epsilon(1e-6)
    exact = make_accountant("gdp").compose(Gaussian(sigma=s), count=k).epsilon(1e-6)
    assert exact <= pld <= exact + 1e-3


_LEAF = st.one_of(
    st.builds(lambda s: Gaussian(sigma=s), st.floats(0.7, 5.0)),
    st.builds(lambda b: Laplace(scale=b), st.floats(0.7, 5.0)),
)


@pytest.mark.slow
@settings(max_examples=10)  # PLD compositions by FFT: seconds an example
@given(st.lists(st.tuples(_LEAF, st.integers(1, 3)), min_size=1, max_size=3))
def test_pld_never_looser_than_rdp(parts):
    pld = make_accountant("pld")
    rdp = make_accountant("rdp")
    for event, count in parts:
        pld.compose(event, count=count)
        rdp.compose(event, count=count)
    # PLD rounds each composed loss up to its grid (1e-4): near the pure-DP limit it may sit
    # above RDP by at most one interval per release (Laplace(1.5) x 3: 1e-5 above)
    slack = 1e-4 * sum(count for _, count in parts)
    for delta in (1e-5, 1e-8):
        assert pld.epsilon(delta) <= rdp.epsilon(delta) + slack
