"""PLD at realistic size (issue #28, item 6): Gaussians merged and discretised once, the
composed grid bounded by Chernoff before anything is built, a batch composed in one FFT
pass -- and every answer still an upper bound, close to the exact curve and to
dp-accounting's own result."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event as dpe
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as dpl

from privreg.accountant import pld
from privreg.accountant.curves import gaussian_delta, gaussian_epsilon
from privreg.accountant.pld import MAX_PLD_POINTS, TAIL_MASS, PLDAccountant
from privreg.core.errors import UnsupportedEventError
from privreg.core.events import Composed, Gaussian, Laplace, PoissonSampled, PrivacyEvent, SelfComposed

VDI = 1e-4


def mixed_kinds() -> list[tuple[PrivacyEvent, int]]:
    """The issue's 1000-release mix: 30 distinct kinds, 400 Gaussians with sigma in
    [1, 5], 300 Laplace, 300 Poisson-subsampled Gaussians."""
    kinds: list[tuple[PrivacyEvent, int]] = [(Gaussian(sigma=float(s)), 40) for s in np.linspace(1, 5, 10)]
    kinds += [(Laplace(scale=float(b)), 30) for b in np.linspace(2, 20, 10)]
    kinds += [
        (PoissonSampled(sampling_probability=float(q), event=Gaussian(sigma=float(s))), 30)
        for q, s in zip(np.linspace(0.01, 0.1, 10), np.linspace(0.8, 2.0, 10))
    ]
    return kinds


def mixed_events(seed: int = 0) -> list[PrivacyEvent]:
    events = [e for e, n in mixed_kinds() for _ in range(n)]
    np.random.default_rng(seed).shuffle(events)  # type: ignore[arg-type]
    return events


def to_dp_accounting(event: PrivacyEvent) -> dpe.DpEvent:
    if isinstance(event, Gaussian):
        return dpe.GaussianDpEvent(event.noise_multiplier)
    if isinstance(event, Laplace):
        return dpe.LaplaceDpEvent(event.noise_multiplier)
    assert isinstance(event, PoissonSampled)
    return dpe.PoissonSampledDpEvent(event.sampling_probability, to_dp_accounting(event.event))


def dp_accounting_grouped(kinds: list[tuple[PrivacyEvent, int]], vdi: float) -> pld_privacy_accountant.PLDAccountant:
    """dp-accounting used the best way: each distinct event composed once with its count
    (a self-composition; for Gaussians one Gaussian of sigma / sqrt(count))."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    for event, n in kinds:
        acc.compose(to_dp_accounting(event), n)
    return acc


# --- the discretisations are dp-accounting's, vectorised ------------------------------------


@pytest.mark.parametrize("sigma, q", [(0.8, 0.01), (1.5, 0.05), (2.0, 0.5), (0.3, 0.2), (5.0, 0.999)])
def test_subsampled_gaussian_pmf_is_dp_accountings(sigma, q):
    ours = pld._gaussian(PLDAccountant(), Gaussian(sigma=sigma), q)
    ref = dpl.from_gaussian_mechanism(standard_deviation=sigma, value_discretization_interval=VDI, sampling_prob=q)
    for mine, reference in ((ours._pmf_remove, ref._pmf_remove), (ours._pmf_add, ref._pmf_add)):
        theirs = reference.to_dense_pmf()
        assert mine._lower_loss == theirs._lower_loss and mine.size == theirs.size
        # the same formulas: rounding of second differences of deltas (~1e-16 / 1e-4) apart
        np.testing.assert_allclose(mine._probs, theirs._probs, rtol=0, atol=1e-10)
        assert mine._infinity_mass == pytest.approx(theirs._infinity_mass, rel=1e-6, abs=1e-30)
        for eps in (0.0, 0.01, 0.1, 1.0):
            assert mine.get_delta_for_epsilon(eps) == pytest.approx(theirs.get_delta_for_epsilon(eps), rel=1e-8)


@pytest.mark.parametrize("scale, q", [(0.05, 1.0), (1.0, 1.0), (5.0, 1.0), (0.1, 0.3), (2.0, 0.05), (1.0, 0.999)])
def test_laplace_pmf_is_dp_accountings(scale, q):
    ours = pld._laplace(PLDAccountant(), Laplace(scale=scale), q)
    ref = dpl.from_laplace_mechanism(parameter=scale, value_discretization_interval=VDI, sampling_prob=q)
    assert ours._symmetric == ref._symmetric
    for mine, reference in ((ours._pmf_remove, ref._pmf_remove), (ours._pmf_add, ref._pmf_add)):
        theirs = reference.to_dense_pmf()
        assert mine._lower_loss == theirs._lower_loss and mine.size == theirs.size
        np.testing.assert_allclose(mine._probs, theirs._probs, rtol=0, atol=1e-10)
        assert mine._infinity_mass == pytest.approx(theirs._infinity_mass, rel=1e-9, abs=1e-15)
        for eps in (0.0, 0.01, 0.1, 1.0):
            assert mine.get_delta_for_epsilon(eps) == pytest.approx(theirs.get_delta_for_epsilon(eps), rel=1e-8)


def test_merged_gaussian_pmf_mgf_is_within_its_bound():
    # the Chernoff window of a sum relies on this bound for the (not yet built) Gaussian
    for mu2 in (0.01, 1.0, 95.6):
        merged = pld._MergedGaussian.of(mu2, VDI)
        grid = merged.build(VDI)
        sd = math.sqrt(mu2) / VDI
        orders = np.concatenate([-np.geomspace(0.05, 20, 9), np.geomspace(0.05, 20, 9)]) / sd
        actual = pld._log_mgf(grid.lower, grid.probs, orders)
        assert np.all(actual <= merged.log_mgf(orders, VDI) + 1e-12)
        # and it is not vacuous: where the grid's truncation (at 7.9 sd) does not matter yet,
        # within two grid steps' worth
        moderate = np.abs(orders) * sd <= 4
        assert np.all((merged.log_mgf(orders, VDI) - actual)[moderate] <= 2 * np.abs(orders[moderate]) + 1e-9)


@pytest.mark.parametrize("mu2", [0.01, 1.0, 29.4, 95.6])
def test_gaussian_masses_at_small_losses_are_not_rounding_noise(mu2):
    # from differences of delta alone (close to 1 at small losses) each mass there is
    # ~1e-16 / vdi of noise: 5e-8 of spurious mass in all at mu^2 = 29.4
    grid = pld._MergedGaussian.of(mu2, VDI).build(VDI)
    assert abs(grid.probs.sum() + grid.inf - 1) <= 1e-11
    mu, steps = math.sqrt(mu2), grid.lower + np.arange(grid.probs.size)
    low = steps * VDI < mu2 / 2 - 6 * mu  # P(loss < mean - 6 sd) = 1e-9
    assert 0 < grid.probs[low].sum() <= 2e-9


# --- every answer is an upper bound, and tight --------------------------------------------

A = [(1.0, 3), (2.5, 10), (4.0, 20)]
B = [(0.7, 2), (3.0, 15)]
MU = math.sqrt(sum(n / s**2 for s, n in A + B))


def gaussians(parts):
    return Composed(events=[SelfComposed(event=Gaussian(sigma=s), count=n) for s, n in parts])


# (delta, how far above the exact epsilon PLD may sit): the grid (1e-4) and, at small
# deltas, FFT_ERROR a release (50 x 2**-52 = 1.1e-14 of delta)
TOLERANCE = [(1e-2, 1e-6), (1e-4, 1e-6), (1e-6, 1e-6), (1e-9, 1e-4), (1e-12, 2e-2)]


@pytest.mark.parametrize("calls", [1, 2], ids=["merged", "state-then-more"])
def test_composed_gaussians_bound_the_exact_curve_tightly(calls):
    # 50 Gaussians of 5 sigmas compose to one Gaussian of mu = sqrt(sum mu_i^2) (exact);
    # in two calls the second one convolves the state with the new Gaussian by FFT
    acc = PLDAccountant(value_discretization_interval=VDI)
    if calls == 1:
        acc.compose(gaussians(A + B))
    else:
        acc.compose(gaussians(A)).compose(gaussians(B))
    for delta, tol in TOLERANCE:
        exact = gaussian_epsilon(delta, MU)
        assert exact <= acc.epsilon(delta) <= exact + tol, delta
    for eps in (0.0, 1.0, 5.0, 13.0, 21.0, 25.0, 29.0):
        exact_delta = gaussian_delta(eps, MU)
        assert exact_delta <= acc.delta(eps) <= exact_delta * (1 + 1e-3) + 1e-13, eps


def test_fft_engine_bounds_the_exact_curve():
    # the leaves' level (FFT powers of distinct PMFs, a cut Chernoff window) on Gaussian
    # PMFs, which must compose to the exact Gaussian curve
    pmfs = []
    for s, n in A + B:
        grid = pld._MergedGaussian.of(1 / s**2, VDI).build(VDI)
        pmfs.append((pld.pld_pmf.DensePLDPmf(VDI, grid.lower, grid.probs, grid.inf, True), n))
    side = pld._plan_side(dpl.identity(VDI)._pmf_remove, pmfs, None, VDI, {})
    assert side.leaves_window is not None and side.leaves_window.cut
    composed = pld._compose_side(side, VDI, None)
    slack = sum(n for _, n in A + B) * pld.FFT_ERROR
    for eps in (0.5, 5.0, 13.0, 21.0, 25.0, 29.0, 33.0):
        ours = float(composed.get_delta_for_epsilon(eps)) + slack
        exact = gaussian_delta(eps, MU)
        assert exact <= ours <= exact * (1 + 1e-3) + 1e-13, eps


def test_window_holds_all_but_tail_mass():
    # the exact convolution (no truncation, direct) of a small asymmetric batch has at
    # most TAIL_MASS outside the window planned for it, and the window is cut
    vdi = 1e-2
    acc = PLDAccountant(value_discretization_interval=vdi)
    leaves = [
        (PoissonSampled(sampling_probability=0.2, event=Gaussian(sigma=1.0)), 7),
        (Laplace(scale=2.0), 5),
        (PoissonSampled(sampling_probability=0.3, event=Laplace(scale=1.0)), 4),
    ]
    plan = [(acc.cost(e)[0], n) for e, n in leaves]
    batch = pld._plan_batch(acc._pld, plan, vdi)
    assert batch.add is not None
    for side, which in ((batch.remove, "_pmf_remove"), (batch.add, "_pmf_add")):
        exact, lower = np.array([1.0]), 0
        for cost, n in plan:
            grid = pld._Grid.of(getattr(cost, which))
            for _ in range(n):
                exact, lower = np.convolve(exact, grid.probs), lower + grid.lower
        window = side.leaves_window
        assert window is not None and window.cut and window.points < exact.size
        outside = exact[: window.lower - lower].sum() + exact[window.upper - lower + 1 :].sum()
        assert 0 < outside <= TAIL_MASS


# --- the grid is estimated before anything is built -------------------------------------


def test_planned_grid_is_the_built_grid():
    acc = PLDAccountant()
    plan, bad, _ = acc._plan(Composed(events=mixed_events()[:200]), 1)
    assert bad is None
    ((batch, _),) = plan
    acc._add(batch, 1)
    for side, pmf in ((batch.remove, acc._pld._pmf_remove), (batch.add, acc._pld._pmf_add)):
        assert side is not None and pmf.size == side.window.points <= MAX_PLD_POINTS


def test_too_large_a_grid_is_refused_before_building(monkeypatch):
    built = []
    monkeypatch.setattr(pld._MergedGaussian, "build", lambda self, vdi: built.append(self))
    monkeypatch.setattr(pld, "_convolve", lambda *a: built.append(a))
    acc = PLDAccountant()
    with pytest.raises(UnsupportedEventError, match=str(MAX_PLD_POINTS)):
        acc.compose(Gaussian(sigma=0.1), count=200)  # mu = 141: ~2.3e7 points a side
    assert not built and not acc._released


# --- the 1000-release mix ---------------------------------------------------------


def check_against_dp_accounting(vdi: float) -> None:
    ours = PLDAccountant(value_discretization_interval=vdi).compose(Composed(events=mixed_events()))
    theirs = dp_accounting_grouped(mixed_kinds(), vdi)
    # both pessimistic: they differ by discretisation (ours merges the Gaussians: one
    # grid instead of ten) and by FFT_ERROR a release (1000 x 2**-52 = 2.2e-13 of delta,
    # ~4e-4 of epsilon at delta 1e-9)
    for delta, rel in ((1e-3, 1e-6), (1e-6, 1e-6), (1e-9, 2e-5)):
        assert ours.epsilon(delta) == pytest.approx(theirs.get_epsilon(delta), rel=rel)
    for eps in (90.0, 101.0, 110.0):
        assert ours.delta(eps) == pytest.approx(theirs.get_delta(eps), rel=1e-3)


def test_thousand_release_mix_agrees_with_dp_accounting_coarse_grid():
    check_against_dp_accounting(1e-3)


@pytest.mark.slow  # dp-accounting takes ~25 CPU-s on it at the default grid
def test_thousand_release_mix_computes_at_the_default_grid_and_agrees_with_dp_accounting():
    check_against_dp_accounting(VDI)


def test_thousand_release_mix_is_planned_within_the_limit_at_the_default_grid():
    acc = PLDAccountant()
    plan, bad, why = acc._plan(Composed(events=mixed_events()), 1)
    assert bad is None, why
    ((batch, _),) = plan
    assert batch.points <= MAX_PLD_POINTS


def test_composing_in_several_calls_matches_one_call():
    events = mixed_events()[:300]
    one = PLDAccountant().compose(Composed(events=events))
    several = PLDAccountant()
    for i in range(0, 300, 100):
        several.compose(Composed(events=events[i : i + 100]))
    for delta in (1e-3, 1e-6, 1e-9):
        assert several.epsilon(delta) == pytest.approx(one.epsilon(delta), rel=1e-5)
