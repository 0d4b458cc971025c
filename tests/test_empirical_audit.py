"""The empirical privacy auditor (privreg.audit): every registered mechanism and randomizer
is audited, broken mechanisms are caught, correct ones are not flagged.

False alarms: every audit here has a false-alarm probability of at most its ``alpha``
(privreg.audit.empirical's guarantee: P(epsilon_lower_bound > true epsilon) <= alpha),
and every random draw is seeded (InsecureReproducibleRandom or numpy with a fixed seed),
so each test is deterministic; the probability that a *correct* implementation was
unlucky with the chosen seeds is stated in each statistical test.
"""

from __future__ import annotations

import argparse
import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest
from scipy import stats

import privreg
from privreg.audit import APPROX_AUDIT_DELTA, AuditResult, audit_item, audit_mechanism, audit_randomizer, audit_samples
from privreg.audit.grid import grid_features
from privreg.audit.pool import Layout
from privreg.audit.stats import clopper_pearson_lower, clopper_pearson_upper, epsilon_lower_bound
from privreg.cli.audit import EXIT_VIOLATION, add_parser, format_result
from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError, UnknownItemError
from privreg.core.events import Gaussian, Laplace, PrivacyEvent
from privreg.core.hookspecs import hookimpl
from privreg.core.items import Citation, Example, ItemKind, Param, RegistryItem
from privreg.core.mechanism import Mechanism
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource
from privreg.core.registry import load_registry
from privreg.mechanisms.randomized_response import RandomizedResponse

ALPHA = 1e-6
SAMPLES = 100_000
SEED = 20240611

# ---------------------------------------------------------------------------------------
# Small mechanisms defined for these tests: numpy noise seeded from the privreg source, so
# runs are reproducible. None of them is secure; two of them are deliberately broken.
# ---------------------------------------------------------------------------------------


def _numpy(rng: RandomSource) -> np.random.Generator:
    return np.random.default_rng(rng.randbits(128))


def _scalar(value: Any) -> float:
    x = float(value)
    if not math.isfinite(x):
        raise PrivregValueError(f"value must be finite; got {value!r}")
    return x


@attrs.frozen(kw_only=True)
class TextbookLaplace(Mechanism):
    """BROKEN: numpy's textbook ``x + Laplace(sensitivity / epsilon)`` on float64. The noise
    scale is right, but which floats ``x + noise`` can be depends on ``x`` (Mironov 2012)."""

    name: ClassVar[str] = "textbook-laplace"
    epsilon: float = 1.0
    sensitivity: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return Laplace(scale=self.sensitivity / self.epsilon, sensitivity=self.sensitivity)

    def validate_input(self, value: Any) -> float:
        return _scalar(value)

    def _sample(self, value: float, rng: RandomSource, data: Any) -> float:
        return float(value + _numpy(rng).laplace(scale=self.sensitivity / self.epsilon))

    def _sample_many(self, value: float, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        return value + _numpy(rng).laplace(scale=self.sensitivity / self.epsilon, size=count)


GRID = 1024  # grid points per unit of sensitivity


@attrs.frozen(kw_only=True)
class GridLaplace(Mechanism):
    """Two-sided geometric noise on the grid ``sensitivity / 1024`` (inputs must lie on the
    grid), of scale ``noise * 1024 / epsilon`` grid steps, claiming ``Laplace(sensitivity /
    epsilon)``, i.e. epsilon. ``x + z * step`` is exact, so the float bits leak nothing. With
    ``noise = 1`` it is exactly epsilon-DP (the tails attain the bound: a tight mechanism);
    with ``noise = 0.8`` (20% too little noise) it is only ``1.25 * epsilon``-DP: BROKEN."""

    name: ClassVar[str] = "grid-laplace"
    epsilon: float = 1.0
    sensitivity: float = 1.0
    noise: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return Laplace(scale=self.sensitivity / self.epsilon, sensitivity=self.sensitivity)

    def validate_input(self, value: Any) -> float:
        x = _scalar(value)
        if Fraction(x) / Fraction(self.sensitivity / GRID) != round(Fraction(x) / Fraction(self.sensitivity / GRID)):
            raise PrivregValueError(f"value must lie on the grid; got {value!r}")
        return x

    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        scale = self.noise * GRID / self.epsilon  # in grid steps; integer sensitivity GRID
        p = -math.expm1(-1.0 / scale)
        g = _numpy(rng)
        return g.geometric(p, count) - g.geometric(p, count)

    def _sample(self, value: float, rng: RandomSource, data: Any) -> float:
        return float(self._sample_many(value, 1, rng, data)[0])

    def _sample_many(self, value: float, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        return value + self._noise(count, rng) * (self.sensitivity / GRID)


def _rng(seed: int = SEED) -> InsecureReproducibleRandom:
    return InsecureReproducibleRandom(seed=seed)


def _grid_event(text: str) -> bool:
    return any(w in text for w in ("multiple of 2^", "trailing zero bits", "binary exponent"))


# ---------------------------------------------------------------------------------------
# CI: every registered mechanism and randomizer, present and future.
# ---------------------------------------------------------------------------------------

AUDITED_KINDS = (ItemKind.MECHANISM, ItemKind.RANDOMIZER)


def _auditable() -> list[Any]:
    registry = privreg.default_registry()  # at collection time: new plugins are picked up
    return [
        pytest.param(item, id=f"{item.kind.value}:{item.name}")
        for kind in AUDITED_KINDS
        for item in registry.items(kind)
    ]


AUDITABLE = _auditable()


def test_the_registry_audit_covers_the_builtin_items():
    names = {p.values[0].name for p in AUDITABLE}
    assert {"laplace", "randomized-response"} <= names
    registry = privreg.default_registry()
    assert names == {i.name for k in AUDITED_KINDS for i in registry.items(k)}


@pytest.mark.parametrize("item", AUDITABLE)
def test_registered_item_passes_the_empirical_audit(item):
    """1e5 outputs per neighbour of the item's example, alpha = 1e-6: a correct item fails
    this test with probability at most 1e-6 (for this fixed seed, deterministically not)."""
    assert item.example.neighbours is not None, f"{item.name} declares no example neighbours"
    result = audit_item(item, samples=SAMPLES, alpha=ALPHA, rng=_rng())
    assert math.isfinite(result.claimed_epsilon), f"{item.name}: nothing finite is claimed"
    assert result.candidates > 0 and result.event != "(no event)"
    assert result.passed, "\n" + format_result(result)


# ---------------------------------------------------------------------------------------
# Negative controls: the auditor catches broken mechanisms.
# ---------------------------------------------------------------------------------------


def test_catches_the_floating_point_leak_of_textbook_laplace():
    """Mironov 2012: the noise scale is right, the float grid leaks. A bound above the
    claim happens for a correct mechanism with probability <= 1e-6."""
    mech = TextbookLaplace(epsilon=1.0, sensitivity=1.0)
    result = audit_mechanism(mech, neighbours=(0.0, 1.0), samples=SAMPLES, alpha=ALPHA, rng=_rng())
    assert result.claimed_epsilon == 1.0
    assert result.epsilon_lower_bound > result.claimed_epsilon
    assert not result.passed
    assert _grid_event(result.event), result.event


def test_the_same_noise_snapped_to_a_grid_is_not_flagged():
    """The control for the test above: the same Laplace tails without the float leak."""
    result = audit_mechanism(GridLaplace(epsilon=1.0), neighbours=(0.0, 1.0), samples=SAMPLES, alpha=ALPHA, rng=_rng())
    assert result.passed and result.epsilon_lower_bound > 0.8  # the tails are nearly attained


def test_catches_laplace_with_20_percent_too_little_noise():
    """True epsilon 1.25 against a claim of 1. The bound exceeds the claim here; it exceeds
    the true 1.25 with probability <= 1e-6."""
    mech = GridLaplace(epsilon=1.0, noise=0.8)
    result = audit_mechanism(mech, neighbours=(0.0, 1.0), samples=SAMPLES, alpha=ALPHA, rng=_rng())
    assert result.epsilon_lower_bound > result.claimed_epsilon == 1.0
    assert result.epsilon_lower_bound <= 1.25
    assert not result.passed


def test_catches_a_randomizer_that_keeps_the_truth_too_often():
    """Randomized response built for epsilon 1.5 but claiming 1 (<= 1e-6 false alarm)."""

    @attrs.frozen(kw_only=True)
    class Overclaiming(RandomizedResponse):
        @property
        def epsilon0(self) -> float:
            return 1.0

    rr = Overclaiming(epsilon=1.5, k=4)
    result = audit_randomizer(rr, neighbours=(np.array([0]), np.array([1])), samples=SAMPLES, alpha=ALPHA, rng=_rng())
    assert result.epsilon_lower_bound > 1.0 and not result.passed
    assert result.event in ("output == 0", "output == 1")


@attrs.frozen(kw_only=True)
class SnappedGaussian(Mechanism):
    """Claims ``Gaussian(sigma)`` for L2 sensitivity 1; adds normal noise of std ``noise *
    sigma`` and rounds to the grid 1/1024 (post-processing that hides the float bits).
    ``noise < 1`` under-noises: BROKEN."""

    name: ClassVar[str] = "snapped-gaussian"
    sigma: float = 1.0
    noise: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return Gaussian(sigma=self.sigma, sensitivity=1.0)

    def validate_input(self, value: Any) -> float:
        return _scalar(value)

    def _sample(self, value: float, rng: RandomSource, data: Any) -> float:
        return float(self._sample_many(value, 1, rng, data)[0])

    def _sample_many(self, value: float, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        noisy = value + _numpy(rng).normal(scale=self.noise * self.sigma, size=count)
        return np.round(noisy * GRID) / GRID


@pytest.mark.parametrize("noise,caught", [(1.0, False), (0.7, True)])
def test_approximate_dp_claims_are_audited_at_a_fixed_delta(noise, caught):
    """A Gaussian has no pure-DP claim, so audit_item audits (epsilon(1e-2), 1e-2). The
    correct one passes (false alarm <= 1e-6); with 30% too little noise it is caught."""
    item = _item(
        "snapped-gaussian",
        lambda *, sigma: SnappedGaussian(sigma=sigma, noise=noise),
        (0.0, 1.0),
        params={"sigma": 1.0},
    )
    result = audit_item(item, samples=SAMPLES, alpha=ALPHA, rng=_rng())
    assert result.claimed_delta == APPROX_AUDIT_DELTA == 1e-2
    assert 2.0 < result.claimed_epsilon < 2.5  # epsilon(1e-2) of sigma = 1
    assert result.passed is not caught
    pure = audit_mechanism(SnappedGaussian(noise=noise), neighbours=(0.0, 1.0), samples=1000, rng=_rng())
    assert pure.claimed_epsilon == math.inf and pure.passed  # delta = 0: nothing finite to refute


def test_categorical_outputs():
    """Outputs that are not numbers (here strings) are audited by category; randomized
    response of epsilon 2 claiming 1 is caught (false alarm <= 1e-6)."""
    g = np.random.default_rng(8)
    keep = np.exp(2.0) / (np.exp(2.0) + 2)

    def draw(x: int) -> list[str]:
        other = g.integers(0, 2, 20_000)
        other = np.where(other >= x, other + 1, other)
        return [f"colour-{c}" for c in np.where(g.random(20_000) < keep, x, other)]

    result = audit_samples(draw(0), draw(1), claimed_epsilon=1.0, alpha=ALPHA)
    assert not result.passed and result.event in ("output == 'colour-0'", "output == 'colour-1'")


def test_vector_outputs_are_audited_per_coordinate():
    """A float leak in one coordinate of twenty is found (false alarm <= 1e-6)."""
    g = np.random.default_rng(9)
    first = np.round(g.laplace(size=(20_000, 20)) * GRID) / GRID
    second = np.round(g.laplace(size=(20_000, 20)) * GRID) / GRID
    second[:, 13] = 0.1 + g.laplace(size=20_000)  # 0.1 + noise: not on the grid
    result = audit_samples(first, second, claimed_epsilon=1.0, alpha=ALPHA)
    assert not result.passed and "output[13]" in result.event


def test_subset_outputs_are_audited_by_membership():
    """Sorted d-subsets of {0..7} (subset selection, Wang et al. 2016) built for epsilon 1.5
    but claiming 1: the tight event "0 in output and 1 not in output" exposes it (false
    alarm <= 1e-6)."""
    g = np.random.default_rng(12)
    s, eps, n = 8, 1.5, 20_000
    d = math.ceil(s / (math.exp(eps) + 1))
    keep_p = d * math.exp(eps) / (d * math.exp(eps) + s - d)

    def draw(z: int) -> np.ndarray:
        keys = g.random((n, s))
        keys[:, z] = np.where(g.random(n) < keep_p, -1.0, 2.0)  # first (kept) or never chosen
        return np.sort(np.argsort(keys, axis=1)[:, :d], axis=1)

    result = audit_samples(draw(0), draw(1), claimed_epsilon=1.0, alpha=ALPHA)
    assert 1.0 < result.epsilon_lower_bound <= eps
    assert " in output" in result.event and " and " in result.event, result.event


def test_a_stray_output_in_an_estimation_half_does_not_change_the_representation():
    g = np.random.default_rng(10)
    first, second = list(np.round(g.laplace(size=4000), 3)), list(np.round(1 + g.laplace(size=4000), 3))
    base = audit_samples(first, second, claimed_epsilon=1.0, alpha=1e-3)
    first[-1] = "not a number"
    odd = audit_samples(first, second, claimed_epsilon=1.0, alpha=1e-3)
    assert odd.event == base.event and odd.selection_bound == base.selection_bound


# ---------------------------------------------------------------------------------------
# Statistical validity.
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_a_correct_tight_mechanism_is_not_flagged(seed):
    """GridLaplace(noise=1) attains its claimed epsilon on every tail: the hardest case
    for false alarms. Each audit errs with probability <= 1e-6 (3e-6 for the three)."""
    result = audit_mechanism(
        GridLaplace(epsilon=0.5, sensitivity=2.0), neighbours=(4.0, 2.0), samples=SAMPLES, alpha=ALPHA, rng=_rng(seed)
    )
    assert result.claimed_epsilon == 0.5
    assert result.epsilon_lower_bound <= 0.5 and result.passed


def _false_alarms(*, audits: int, alpha: float, samples: int, seed: int) -> int:
    g = np.random.default_rng(seed)
    scale = GRID / 1.0  # epsilon 1 exactly, shift of GRID steps
    p = -math.expm1(-1.0 / scale)
    exceed = 0
    for _ in range(audits):
        first = (g.geometric(p, samples) - g.geometric(p, samples)) / GRID
        second = 1.0 + (g.geometric(p, samples) - g.geometric(p, samples)) / GRID
        result = audit_samples(first, second, claimed_epsilon=1.0, alpha=alpha)
        exceed += result.epsilon_lower_bound > 1.0
    return exceed


FREQ_AUDITS, FREQ_ALPHA = 100, 0.5
#: If each audit errs with probability <= 0.5, more errors than this among 100 independent
#: audits happen with probability <= 1e-6 (binomial upper tail).
FREQ_LIMIT = int(stats.binom.isf(1e-6, FREQ_AUDITS, FREQ_ALPHA))


def test_false_alarm_rate_is_at_most_alpha():
    """100 independent audits at alpha = 0.5 of an exactly-epsilon mechanism (tails tight,
    hundreds of candidate events, so a winner's curse would show): the number of bounds
    above the true epsilon is Binomial(100, <= 0.5); the test fails a valid auditor with
    probability <= 1e-6."""
    assert _false_alarms(audits=FREQ_AUDITS, alpha=FREQ_ALPHA, samples=2000, seed=7) <= FREQ_LIMIT


def test_the_false_alarm_check_fails_an_auditor_that_estimates_on_its_selection_half(monkeypatch):
    """The check above has power: estimating on the samples that chose the event (the
    winner's curse) exceeds the true epsilon almost always."""
    monkeypatch.setattr(Layout, "est_first", property(lambda self: self.sel_first))
    monkeypatch.setattr(Layout, "est_second", property(lambda self: self.sel_second))
    assert _false_alarms(audits=FREQ_AUDITS, alpha=FREQ_ALPHA, samples=2000, seed=7) > FREQ_LIMIT


def test_the_event_is_chosen_on_the_selection_halves_only():
    g = np.random.default_rng(3)
    first, second = g.laplace(size=4000).round(3), 1.0 + g.laplace(size=4000).round(3)
    base = audit_samples(first, second, claimed_epsilon=1.0, alpha=1e-3)
    other_first, other_second = first.copy(), second.copy()
    other_first[2000:] = g.normal(size=2000)  # replace both estimation halves
    other_second[2000:] = g.normal(size=2000)
    changed = audit_samples(other_first, other_second, claimed_epsilon=1.0, alpha=1e-3)
    assert changed.event == base.event and changed.larger_on == base.larger_on
    assert changed.selection_count_first == base.selection_count_first
    assert changed.selection_bound == base.selection_bound
    assert changed.epsilon_lower_bound < base.epsilon_lower_bound  # same event, new counts


def test_the_audit_is_deterministic_under_a_fixed_seed():
    mech = GridLaplace(epsilon=1.0)
    a = audit_mechanism(mech, neighbours=(0.0, 1.0), samples=5000, alpha=1e-3, rng=_rng(11))
    b = audit_mechanism(mech, neighbours=(0.0, 1.0), samples=5000, alpha=1e-3, rng=_rng(11))
    assert a == b


@pytest.mark.parametrize("k,n", [(0, 1), (0, 50_000), (1, 10), (7, 20), (13, 13), (49_990, 50_000), (500, 50_000)])
@pytest.mark.parametrize("level", [5e-7, 0.025, 0.3])
def test_clopper_pearson_bounds_are_exact(k, n, level):
    lower = clopper_pearson_lower(k, n, level)[()]
    upper = clopper_pearson_upper(k, n, level)[()]
    # definition: the binomial tail beyond the observed count equals ``level`` at the bound
    if k > 0:
        assert stats.binom.sf(k - 1, n, lower) == pytest.approx(level, rel=1e-7)
    else:
        assert lower == 0.0
    if k < n:
        assert stats.binom.cdf(k, n, upper) == pytest.approx(level, rel=1e-7)
        assert clopper_pearson_upper(0, n, level)[()] == pytest.approx(-math.expm1(math.log(level) / n), rel=1e-12)
    else:
        assert upper == 1.0
        assert clopper_pearson_lower(n, n, level)[()] == pytest.approx(level ** (1 / n), rel=1e-12)
    # scipy's independent (root-finding, tolerance ~1e-6) Clopper-Pearson interval
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * level, method="exact")
    assert lower == pytest.approx(ci.low, rel=1e-4, abs=1e-300)
    assert upper == pytest.approx(ci.high, rel=1e-4)


def test_epsilon_bound_formula_and_delta():
    lo = clopper_pearson_lower(3000, 10_000, 5e-3)[()]
    up = clopper_pearson_upper(1000, 10_000, 5e-3)[()]
    got = epsilon_lower_bound(3000, 10_000, 1000, 10_000, alpha=1e-2, delta=0.0)[()]
    assert got == pytest.approx(math.log(lo / up))
    with_delta = epsilon_lower_bound(3000, 10_000, 1000, 10_000, alpha=1e-2, delta=0.05)[()]
    assert with_delta == pytest.approx(math.log((lo - 0.05) / up))
    assert epsilon_lower_bound(3000, 10_000, 1000, 10_000, alpha=1e-2, delta=0.5)[()] == -math.inf


def test_float_grid_features():
    x = np.array([0.75, 1.0, -3.0, 0.0, 3 * 2.0**-1074, 0.1, math.inf, math.nan])
    sign, exponent, trailing, valuation = (f.values for f in grid_features(x, "output"))
    np.testing.assert_array_equal(sign, [1, 1, -1, 0, 1, 1, 1, np.nan])
    np.testing.assert_array_equal(exponent, [0, 1, 2, np.nan, -1072, -3, np.nan, np.nan])
    np.testing.assert_array_equal(trailing, [51, 52, 51, np.nan, 0, 1, np.nan, np.nan])
    np.testing.assert_array_equal(valuation, [-2, 0, 0, np.inf, -1074, -55, np.nan, np.nan])


def test_valuation_is_the_largest_power_of_two_dividing_the_output():
    g = np.random.default_rng(5)
    x = g.laplace(size=300) * np.exp2(g.integers(-60, 60, size=300)) + np.round(g.normal(size=300) * 8)
    valuation = grid_features(x, "output")[3].values
    for xi, k in zip(x, valuation):
        q = Fraction(float(xi)) / Fraction(2) ** int(k) if xi else None
        assert (xi == 0 and k == math.inf) or (q.denominator == 1 and q.numerator % 2 == 1)


# ---------------------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------------------

NEIGHBOURS = (0.0, 1.0)


@pytest.mark.parametrize(
    "alpha,error",
    [
        (0.0, PrivregValueError),
        (1.0, PrivregValueError),
        (-0.1, PrivregValueError),
        (math.nan, PrivregValueError),
        ("0.1", PrivregTypeError),
    ],
)
def test_bad_alpha(alpha, error):
    with pytest.raises(error, match="alpha"):
        audit_mechanism(GridLaplace(), neighbours=NEIGHBOURS, samples=1000, alpha=alpha)


@pytest.mark.parametrize(
    "samples,error",
    [(999, PrivregValueError), (0, PrivregValueError), (1e5, PrivregTypeError), (True, PrivregTypeError)],
)
def test_bad_samples(samples, error):
    with pytest.raises(error, match="samples"):
        audit_mechanism(GridLaplace(), neighbours=NEIGHBOURS, samples=samples)
    with pytest.raises(error, match="samples"):
        audit_randomizer(RandomizedResponse(epsilon=1.0, k=2), neighbours=(0, 1), samples=samples)


@pytest.mark.parametrize(
    "neighbours,error",
    [
        ((0.0,), PrivregValueError),
        ((0.0, 1.0, 2.0), PrivregValueError),
        (0.0, PrivregTypeError),
        ({0.0, 1.0}, PrivregTypeError),
    ],
)
def test_neighbours_must_be_a_pair(neighbours, error):
    with pytest.raises(error, match="neighbours"):
        audit_mechanism(GridLaplace(), neighbours=neighbours, samples=1000)
    with pytest.raises(error, match="neighbours"):
        audit_randomizer(RandomizedResponse(epsilon=1.0, k=2), neighbours=neighbours, samples=1000)


def test_wrong_objects_and_inputs():
    rr = RandomizedResponse(epsilon=1.0, k=3)
    with pytest.raises(PrivregTypeError, match="Mechanism"):
        audit_mechanism(rr, neighbours=(0, 1), samples=1000)
    with pytest.raises(PrivregTypeError, match="Randomizer"):
        audit_randomizer(GridLaplace(), neighbours=(0.0, 1.0), samples=1000)
    with pytest.raises(PrivregValueError, match="one user"):
        audit_randomizer(rr, neighbours=(np.array([0, 1]), np.array([1, 2])), samples=1000)
    with pytest.raises(PrivregValueError, match="domain"):  # the randomizer's own check
        audit_randomizer(rr, neighbours=(np.array([0]), np.array([7])), samples=1000)
    with pytest.raises(PrivregValueError, match="finite"):  # the mechanism's own check
        audit_mechanism(GridLaplace(), neighbours=(0.0, math.nan), samples=1000)
    with pytest.raises(PrivregValueError, match="claimed_delta"):
        audit_mechanism(GridLaplace(), neighbours=NEIGHBOURS, samples=1000, claimed_delta=1.0)
    with pytest.raises(PrivregTypeError, match="RandomSource"):
        audit_mechanism(GridLaplace(), neighbours=NEIGHBOURS, samples=1000, rng=np.random.default_rng(0))
    with pytest.raises(PrivregValueError, match="as many"):
        audit_samples(np.zeros(1000), np.zeros(1001), claimed_epsilon=1.0)


@pytest.mark.parametrize("kind", [ItemKind.SENSITIVITY, ItemKind.WORKFLOW])
def test_audit_item_refuses_other_kinds(kind):
    item = privreg.default_registry().items(kind)[0]
    with pytest.raises(PrivregTypeError, match="only mechanisms and randomizers"):
        audit_item(item, samples=1000)
    with pytest.raises(PrivregTypeError, match="RegistryItem"):
        audit_item("laplace", samples=1000)


def _item(name: str, factory: Any, neighbours: Any, params: dict[str, float] | None = None) -> RegistryItem:
    params = {"epsilon": 1.0} if params is None else params
    return RegistryItem(
        name=name,
        kind="mechanism",
        summary="a mechanism for the auditor's tests",
        citation=Citation(authors="Mironov", title="On significance of the least significant bits", year=2012),
        factory=factory,
        example=Example(params=params, neighbours=neighbours),
        params=tuple(Param(name=k, type=float, doc="a parameter", minimum=0, exclusive_minimum=True) for k in params),
    )


def test_audit_item_needs_example_neighbours():
    item = _item("no-neighbours", GridLaplace, (0.0, 1.0))
    object.__setattr__(item, "example", Example(params={"epsilon": 1.0}))  # bypass RegistryItem's own check
    with pytest.raises(PrivregValueError, match="declares no example neighbours"):
        audit_item(item, samples=1000)


# ---------------------------------------------------------------------------------------
# The command line.
# ---------------------------------------------------------------------------------------


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="privreg")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_audits_a_registered_mechanism(capsys):
    code = _cli("audit-mechanism", "laplace", "--samples", "20000", "--insecure-seed", "1")
    out, err = capsys.readouterr()
    assert code == 0
    for row in ("claimed epsilon", "empirical lower bound", "winning event", "verdict", "PASS"):
        assert row in out
    assert "20000 samples" in out and "reproducible" in err


class _BrokenPlugin:
    @hookimpl
    def privreg_register_mechanisms(self):  # type: ignore[no-untyped-def]
        return [_item("textbook-laplace", TextbookLaplace, (0.0, 1.0))]


def test_cli_exit_code_3_on_a_violation(capsys, monkeypatch):
    registry = load_registry(plugins={"broken": _BrokenPlugin()}, autoload=False)
    monkeypatch.setattr("privreg.core.registry.default_registry", lambda: registry)
    code = _cli("audit-mechanism", "textbook-laplace", "--samples", "20000", "--insecure-seed", "2")
    out, _ = capsys.readouterr()
    assert code == EXIT_VIOLATION == 3
    assert "FAIL" in out and "multiple of 2^" in out


@pytest.mark.parametrize(
    "argv,error",
    [
        (["no-such-mechanism"], UnknownItemError),
        (["bounded-mean"], PrivregValueError),
        (["laplace", "--samples", "10"], PrivregValueError),
        (["laplace", "--alpha", "2"], SystemExit),  # refused by the flag's parser: exit 2, one line
        (["laplace", "--insecure-seed", "-1"], SystemExit),
    ],
)
def test_cli_bad_input_raises_a_privreg_error(argv, error):
    with pytest.raises(error) as info:
        _cli("audit-mechanism", *argv)
    if error is SystemExit:
        assert info.value.code == 2
        return
    assert isinstance(info.value, PrivregError) and "\n" not in str(info.value)


def test_result_is_a_frozen_record():
    result = audit_samples(np.arange(1000.0), np.arange(1000.0), claimed_epsilon=1.0, alpha=0.1)
    assert isinstance(result, AuditResult) and result.passed and result.epsilon_lower_bound == 0.0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.epsilon_lower_bound = 5.0  # type: ignore[misc]
